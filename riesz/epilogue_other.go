//go:build !amd64 || noasm

package riesz

// archInit keeps the pure-Go epilogues: this build has no assembly.
func archInit() {}

// asmCPU reports whether the assembly epilogues could run: never here.
func asmCPU() bool { return false }
