//go:build !amd64 || noasm

package riesz

// archInit keeps the pure-Go epilogues: this build has no assembly.
func archInit() {}

// asmCPU reports whether the assembly epilogues could run: never here.
func asmCPU() bool { return false }

// reciprocals lists the assembly reciprocals: none here.
var reciprocals []struct{ name string }

// reciprocalInfo reports the reciprocal in use: the pure-Go division.
func reciprocalInfo() (name, why string) {
	return "go", "no assembly epilogues in this build or on this CPU"
}

// forceReciprocal has nothing to switch here.
func forceReciprocal(int) (restore func()) { return func() {} }
