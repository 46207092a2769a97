package rollout

import (
	"testing"

	"github.com/densitykv/densitykv/wan"
)

func TestBenchTinyAndExtrapolation(t *testing.T) {
	r, err := Bench(BenchOptions{Name: "tiny", Model: wan.TinyConfig(), Height: 6, Width: 8, Blocks: 6})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.BlockSeconds) != 2 || r.Keys != 12*12 || r.PerBlock <= 0 || r.Extrapolated || r.PeakHeapBytes == 0 {
		t.Fatalf("tiny rollout bench: %+v", r)
	}
	cfg := wan.TinyConfig()
	cfg.Layers = 4
	e, err := Bench(BenchOptions{Name: "tiny-4", Model: cfg, LayersRun: 1, Height: 6, Width: 8, Calls: 2})
	if err != nil {
		t.Fatal(err)
	}
	full, _ := wan.Random(cfg, 0)
	if !e.Extrapolated || e.Params != full.NumParams() || e.Keys != 144 || len(e.CallSeconds) != 2 ||
		e.PerBlock != e.MedianBlock*4 || e.PeakHeapFull <= e.PeakHeapBytes {
		t.Fatalf("extrapolated bench: %+v (want params %d)", e, full.NumParams())
	}
	t.Log(r)
	t.Log(e)
}

// BenchmarkTinyBlock reports the median per-block time (5 forward calls)
// of the tiny golden configuration in a real 8-block Native rollout, over
// the blocks after the 12-frame cache is full.
func BenchmarkTinyBlock(b *testing.B) {
	var blocks []float64
	var peak uint64
	for b.Loop() {
		r, err := Bench(StandardBenches(1)[0])
		if err != nil {
			b.Fatal(err)
		}
		blocks = append(blocks, r.BlockSeconds...)
		peak = max(peak, r.PeakHeapBytes)
	}
	b.ReportMetric(median(blocks)*1e3, "ms/block")
	b.ReportMetric(float64(peak)/(1<<20), "MiB-peak")
}
