//go:build !(goexperiment.simd && amd64)

package gemm

// archInit keeps the portable micro-kernel: this build has no SIMD kernel.
func archInit() {}
