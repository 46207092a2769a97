//go:build !(goexperiment.simd && amd64)

package attn

// archInit keeps the portable row kernels: this build has no SIMD.
func archInit() {}
