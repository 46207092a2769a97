//go:build !amd64 || noasm

package nn

// geluAsm reports whether the assembly GELU kernel runs: never in this build.
func geluAsm() bool { return false }
