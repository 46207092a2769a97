package gemm

import "testing"

// BenchmarkMicroKernel measures the micro-kernel on L1-resident panels
// (the ceiling of the blocked driver).
func BenchmarkMicroKernel(b *testing.B) {
	kc := KC
	a, bb, c := benchData(kc*MR), benchData(kc*NR), make([]float32, MR*NR)
	start := cpuTime()
	for b.Loop() {
		kernel(kc, a, bb, c, NR, true)
	}
	reportFlops(b, 2*float64(kc*MR*NR), start)
}
