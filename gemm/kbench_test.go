package gemm

import (
	"fmt"
	"testing"
)

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

// BenchmarkPackNT packs a full bank's keys (9360×128), as the Riesz passes
// do once per pass and head.
// The 512-row case is the riesz tile size (fits in L2).
func BenchmarkPackNT(b *testing.B) {
	defer SetThreads(SetThreads(1))
	for _, n := range []int{512, 9360} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			k := 128
			bb := benchData(n * k)
			var p PackedB
			start := cpuTime()
			for b.Loop() {
				PackNT(&p, n, k, bb, k)
			}
			b.ReportMetric(float64(n*k)*float64(b.N)/(cpuTime()-start).Seconds()/1e9, "cpuGfloats/s")
		})
	}
}
