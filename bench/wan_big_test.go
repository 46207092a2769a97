package bench

import (
	"testing"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/wan"
)

// BenchmarkWan13BOneLayer times forward calls of one Wan2.1-1.3B layer
// (random weights, 60×104 latents = 4,680 tokens per block, 12-frame
// context = 18,720 keys) at each precision and reports the per-block time
// extrapolated to 30 layers and 5 calls per block.
func BenchmarkWan13BOneLayer(b *testing.B) {
	for _, p := range []gemm.Precision{gemm.F32, gemm.BF16} {
		b.Run(p.String(), func(b *testing.B) {
			for b.Loop() {
				r, err := RunWan(WanOptions{Name: "wan2.1-1.3b", Model: wan.DefaultConfig(), LayersRun: 1, Height: 60, Width: 104, Calls: 1, Precision: p})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(r.MedianCall, "s/call/layer")
				b.ReportMetric(r.CallCPU, "cpu-s/call/layer")
				b.ReportMetric(r.PerBlock, "s/block")
				b.ReportMetric(float64(r.PeakHeapFull)/(1<<20), "MiB-peak-full")
				b.Log(r)
			}
		})
	}
}
