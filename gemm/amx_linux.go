//go:build amd64 && !noasm && linux

package gemm

import (
	"golang.org/x/sys/cpu"
	"golang.org/x/sys/unix"
)

// Linux gives a process the AMX tile data state only on request
// (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA); without it the
// first tile instruction dies with SIGILL. The permission covers every
// thread of the process, present and future. Go's signal stacks (32 KiB
// per thread) are large enough for the signal frame with tile state, which
// the kernel checks before granting it.
const (
	archReqXcompPerm  = 0x1023
	xfeatureXTileData = 18
)

// amxUnavailable asks for the permission once and says why AMX cannot run
// ("" if it can).
func amxUnavailable() string {
	if !cpu.X86.HasAMXTile || !cpu.X86.HasAMXBF16 {
		return "the CPU lacks AMX-TILE and AMX-BF16"
	}
	if _, _, errno := unix.Syscall(unix.SYS_ARCH_PRCTL, archReqXcompPerm, xfeatureXTileData, 0); errno != 0 {
		return "Linux refused the AMX tile permission (arch_prctl ARCH_REQ_XCOMP_PERM): " + errno.Error()
	}
	return ""
}
