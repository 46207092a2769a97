package bench

import (
	"strings"
	"testing"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/wan"
)

func TestBenchTinyAndExtrapolation(t *testing.T) {
	r, err := RunWan(WanOptions{Name: "tiny", Model: wan.TinyConfig(), Height: 6, Width: 8, Blocks: 6})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.BlockSeconds) != 2 || r.Keys != 12*12 || r.PerBlock <= 0 || r.Extrapolated || r.PeakHeapBytes == 0 {
		t.Fatalf("tiny rollout bench: %+v", r)
	}
	cfg := wan.TinyConfig()
	cfg.Layers = 4
	e, err := RunWan(WanOptions{Name: "tiny-4", Model: cfg, LayersRun: 1, Height: 6, Width: 8, Calls: 2})
	if err != nil {
		t.Fatal(err)
	}
	full, _ := wan.Random(cfg, 0, gemm.F32)
	if !e.Extrapolated || e.Params != full.NumParams() || e.Keys != 144 || len(e.CallSeconds) != 2 ||
		e.PerBlock != e.MedianBlock*4 || e.PeakHeapFull <= e.PeakHeapBytes {
		t.Fatalf("extrapolated bench: %+v (want params %d)", e, full.NumParams())
	}
	t.Log(r)
	t.Log(e)
}

// TestBenchMemoryExtrapolation checks the full-model peak-heap estimate of
// a 1-of-4-layer run against a real 4-layer run: each extrapolated per-layer
// component (parameters, the fixed context's K/V cache, the text K/V)
// times 4 must equal what the 4-layer run actually holds, the cache must be
// the Native-sized ContextFrames frames of float32 K and V per layer, and
// the estimate must add exactly the missing layers' components to the
// measured peak.
func TestBenchMemoryExtrapolation(t *testing.T) {
	cfg := wan.TinyConfig()
	cfg.Layers = 4
	run := func(layers int) WanResult {
		t.Helper()
		r, err := RunWan(WanOptions{Name: "tiny-4", Model: cfg, LayersRun: layers, Height: 6, Width: 8, Calls: 1})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	one, all := run(1), run(4)
	lay := cfg.Layout(6, 8, 3)
	cache := int64(2 * 12 * lay.TokensPerFrame() * lay.Heads * lay.HeadDim * 4) // K and V, 12 frames, float32
	for _, c := range []struct {
		name               string
		perLayer, run, all int64
	}{
		{"parameters", one.ParamBytesPerLayer, one.ParamBytesRun, all.ParamBytesRun},
		{"KV cache", one.PolicyBytesPerLayer, one.PolicyBytesRun, all.PolicyBytesRun},
		{"text K/V", one.TextBytesPerLayer, one.TextBytesRun, all.TextBytesRun},
	} {
		if c.perLayer <= 0 || c.run+3*c.perLayer != c.all {
			t.Errorf("%s: 1-layer run holds %d + 3 layers × %d extrapolated ≠ %d held by the 4-layer run", c.name, c.run, c.perLayer, c.all)
		}
	}
	if one.PolicyBytesPerLayer != cache || all.PolicyBytesRun != 4*cache {
		t.Errorf("KV cache per layer %d (4 layers: %d), want %d: 12 frames of float32 K and V", one.PolicyBytesPerLayer, all.PolicyBytesRun, cache)
	}
	if one.ParamBytes != all.ParamBytesRun {
		t.Errorf("full-model parameter bytes %d, the 4-layer model holds %d", one.ParamBytes, all.ParamBytesRun)
	}
	add := uint64(3 * (one.ParamBytesPerLayer + one.PolicyBytesPerLayer + one.TextBytesPerLayer))
	if !one.Extrapolated || one.PeakHeapFull != one.PeakHeapBytes+add {
		t.Errorf("extrapolated peak %d, want measured %d + %d", one.PeakHeapFull, one.PeakHeapBytes, add)
	}
	if all.Extrapolated || all.PeakHeapFull != all.PeakHeapBytes {
		t.Errorf("all-layer run: peak %d, full %d, extrapolated %v", all.PeakHeapBytes, all.PeakHeapFull, all.Extrapolated)
	}
	for _, want := range []string{"measured with 1 of 4 layers", "extrapolated = measured + 3 layers", "KV cache"} {
		if !strings.Contains(one.String(), want) {
			t.Errorf("%q does not say %q", one.String(), want)
		}
	}
	if s := all.String(); !strings.Contains(s, "measured with all 4 layers") || strings.Contains(s, "extrapolated") {
		t.Errorf("all-layer summary %q", s)
	}
	// A real rollout cannot extrapolate its policy's state.
	if _, err := RunWan(WanOptions{Model: cfg, LayersRun: 1, Height: 6, Width: 8, Blocks: 1}); err == nil || !strings.Contains(err.Error(), "every layer") {
		t.Errorf("real rollout on 1 of 4 layers: %v", err)
	}
}

// BenchmarkTinyBlock reports the median per-block time (5 forward calls)
// of the tiny golden configuration in a real 8-block Native rollout, over
// the blocks after the 12-frame cache is full.
func BenchmarkTinyBlock(b *testing.B) {
	var blocks []float64
	var peak uint64
	for b.Loop() {
		r, err := RunWan(StandardWan(1)[0])
		if err != nil {
			b.Fatal(err)
		}
		blocks = append(blocks, r.BlockSeconds...)
		peak = max(peak, r.PeakHeapBytes)
	}
	b.ReportMetric(Median(blocks)*1e3, "ms/block")
	b.ReportMetric(float64(peak)/(1<<20), "MiB-peak")
}
