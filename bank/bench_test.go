package bank

import (
	"testing"

	"github.com/densitykv/densitykv/gemm"
)

func TestRunBenchSmall(t *testing.T) {
	r, err := RunBench(BenchConfig{Heads: 2, Candidates: 40, Capacity: 80, Dim: 16, Repeats: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.UpdateSeconds) != 3 || r.UpdateSecondsMedian <= 0 || r.PassGFLOPS <= 0 || r.PairsPerSecond <= 0 || r.PeakExtraBytes <= 0 {
		t.Fatalf("bad result %+v", r)
	}
	if r.BankBytes != int64(2*80)*int64(2*16*2+2*4+8+4) { // bf16 K/V, f32 ρ and b, int64 + int32
		t.Fatalf("bank bytes %d", r.BankBytes)
	}
	if _, err := RunBench(BenchConfig{Heads: -1}); err == nil {
		t.Fatal("negative heads accepted")
	}
}

func benchUpdate(b *testing.B, bc BenchConfig) {
	bc.Repeats = 1
	bc = bc.withDefaults()
	cfg := DefaultConfig()
	cfg.Heads, cfg.Capacity, cfg.KeyDim, cfg.ValueDim = bc.Heads, bc.Capacity, bc.Dim, bc.Dim
	bk, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := bk.Update(newVideoStream(bc.Heads, bc.Capacity, bc.Dim, 1).next()); err != nil {
		b.Fatal(err)
	}
	vs := newVideoStream(bc.Heads, bc.Candidates, bc.Dim, 2)
	blocks := make([]Block, 4)
	for i := range blocks {
		blocks[i] = vs.next()
	}
	b.ResetTimer()
	c0 := processCPU()
	for i := 0; i < b.N; i++ {
		if _, err := bk.Update(blocks[i%len(blocks)]); err != nil {
			b.Fatal(err)
		}
	}
	// CPU seconds per update (all threads): robust to other load on the
	// machine; divide by the worker count for the uncontended wall time.
	b.ReportMetric((processCPU()-c0).Seconds()/float64(b.N), "cpu-s/op")
	b.ReportMetric(2*float64(bc.Candidates)*float64(bc.Capacity)*float64(bc.Dim)*float64(bc.Heads)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s-equiv")
}

// BenchmarkUpdatePaper is the paper-scale full-layer update: H = 12,
// N = 4680, M = 9360 (full bank), d = 128. Target ≤ 1.5 s on 2 cores.
func BenchmarkUpdatePaper(b *testing.B) { benchUpdate(b, BenchConfig{}) }

// BenchmarkUpdatePaperFloat32Kernel is BenchmarkUpdatePaper with the
// bfloat16 dot-product kernel off (same results; see gemm.SetBF16).
func BenchmarkUpdatePaperFloat32Kernel(b *testing.B) {
	defer gemm.SetBF16(gemm.SetBF16(false))
	benchUpdate(b, BenchConfig{})
}

// BenchmarkUpdateSmall is a quick shape (H = 2, N = 1024, M = 2048).
func BenchmarkUpdateSmall(b *testing.B) {
	benchUpdate(b, BenchConfig{Heads: 2, Candidates: 1024, Capacity: 2048})
}
