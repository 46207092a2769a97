//go:build !amd64 || noasm

package attn

// archInit keeps the pure-Go row kernels: this build has no assembly.
func archInit() {}

// asmCPU reports whether the assembly could run: never here.
func asmCPU() bool { return false }
