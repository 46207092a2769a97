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

func BenchmarkTinyBlock(b *testing.B) {
	for b.Loop() {
		if _, err := Bench(BenchOptions{Name: "tiny", Model: wan.TinyConfig(), Height: 6, Width: 8, Blocks: 5}); err != nil {
			b.Fatal(err)
		}
	}
}
