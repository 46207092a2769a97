//go:build !amd64 || noasm

package gemm

// archKernels returns no kernels: this build has no assembly.
func archKernels() []*kernel { return nil }

// roundInit keeps the pure-Go rounding loops.
func roundInit() {}
