//go:build !(goexperiment.simd && amd64)

package gemm

// archInit keeps the portable micro-kernel: this build has no SIMD kernel.
func archInit() {}

// archInitBF16 keeps the bfloat16 kernel off: this build has none.
func archInitBF16() {}
