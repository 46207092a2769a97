package t5

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/internal/cputime"
)

// Benchmarks (timing targets live here, not in the tests):
//
//	GOEXPERIMENT=simd go test -run X -bench . -benchtime 3x ./t5
//
// BenchmarkLayerUMT5XXL times one real-size umT5-XXL layer (random bf16
// weights, 386 MB) on 512 tokens, Wan's text_len; a whole prompt of 512
// tokens costs 24 such layers (plus the embedding gather and the final
// norm, negligible).

var (
	layerOnce  sync.Once
	layerModel *Model
)

// realLayer is umT5-XXL's configuration with one layer and a small
// vocabulary (the embedding only gathers rows).
func realLayer(b *testing.B) *Model {
	layerOnce.Do(func() {
		cfg := UMT5XXL()
		cfg.Layers, cfg.Vocab = 1, 1024
		m, err := NewRandom(cfg, 1)
		if err != nil {
			b.Fatal(err)
		}
		layerModel = m
	})
	return layerModel
}

func benchIDs(n, vocab int) (ids, mask []int32) {
	r := rand.New(rand.NewPCG(1, 2))
	ids, mask = make([]int32, n), make([]int32, n)
	for i := range ids {
		ids[i], mask[i] = int32(2+r.IntN(vocab-2)), 1
	}
	ids[n-1] = 1
	return ids, mask
}

func benchEncode(b *testing.B, m *Model, n int) {
	ids, mask := benchIDs(n, m.Config.Vocab)
	if _, err := m.Encode(ids, mask); err != nil { // allocate the workspace
		b.Fatal(err)
	}
	runtime.GC()
	b.ResetTimer()
	c0 := cputime.Process().Seconds()
	for b.Loop() {
		if _, err := m.Encode(ids, mask); err != nil {
			b.Fatal(err)
		}
	}
	reportFLOPs(b, m.Config.FLOPs(n), c0)
	b.ReportMetric(float64(m.WeightBytes())/(1<<20), "weight-MiB")
	b.ReportMetric(float64(m.WorkspaceBytes())/(1<<20), "workspace-MiB")
}

func BenchmarkLayerUMT5XXL512(b *testing.B) {
	for _, prec := range []gemm.Precision{gemm.F32, gemm.BF16} {
		b.Run(prec.String(), func(b *testing.B) {
			m := realLayer(b)
			m.Precision = prec
			defer func() { m.Precision = gemm.F32 }()
			benchEncode(b, m, 512)
			sec := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(sec*float64(UMT5XXL().Layers), "s/prompt-24-layers")
		})
	}
}

func BenchmarkLayerUMT5XXL64(b *testing.B) {
	m := realLayer(b)
	benchEncode(b, m, 64)
	sec := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(sec*float64(UMT5XXL().Layers), "s/prompt-24-layers")
}

// tinyConfig is the golden tiny encoder's shape.
var tinyConfig = Config{Vocab: 4000, Dim: 32, DimAttn: 32, DimFFN: 64, Heads: 4, Layers: 2, Buckets: 32, MaxDist: 128, Eps: 1e-6}

func BenchmarkTiny31(b *testing.B) {
	m, _ := NewRandom(tinyConfig, 1)
	benchEncode(b, m, 31)
}

func BenchmarkTiny512(b *testing.B) {
	m, _ := NewRandom(tinyConfig, 1)
	benchEncode(b, m, 512)
}

// reportFLOPs reports flops per operation as GFLOP/s of wall time and,
// steadier on a loaded machine, GFLOP per CPU-second (since c0, the CPU
// time at the start of the loop; ≈ per-core speed).
func reportFLOPs(b *testing.B, flops float64, c0 float64) {
	n := float64(b.N)
	b.ReportMetric(flops/(b.Elapsed().Seconds()/n)/1e9, "GFLOP/s")
	if cpu := cputime.Process().Seconds() - c0; cpu > 0 {
		b.ReportMetric(flops/(cpu/n)/1e9, "GFLOP/cpu-s")
	}
}
