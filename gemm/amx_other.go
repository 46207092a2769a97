//go:build amd64 && !noasm && !linux

package gemm

import "golang.org/x/sys/cpu"

// amxUnavailable: this package asks for the AMX tile permission only on
// Linux.
func amxUnavailable() string {
	if !cpu.X86.HasAMXTile || !cpu.X86.HasAMXBF16 {
		return "the CPU lacks AMX-TILE and AMX-BF16"
	}
	return "AMX is only enabled on Linux (the tile-state permission request is Linux's)"
}
