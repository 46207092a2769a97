package bank_test

import (
	"bytes"
	"runtime"
	"testing"

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/bench"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/internal/cputime"
)

// benchUpdate times steady-state updates of a full bank of H heads,
// capacity M, dimension d, with N candidates per update, on the bench
// package's video-like stream (the blocks of `densitykv bench bank`).
func benchUpdate(b *testing.B, H, N, M, d int) {
	cfg := bank.DefaultConfig()
	cfg.Heads, cfg.Capacity, cfg.KeyDim, cfg.ValueDim = H, M, d, d
	bk, err := bank.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := bk.Update(bench.NewVideoStream(H, M, d, 1).Next()); err != nil {
		b.Fatal(err)
	}
	vs := bench.NewVideoStream(H, N, d, 2)
	blocks := make([]bank.Block, 4)
	for i := range blocks {
		blocks[i] = vs.Next()
	}
	b.ResetTimer()
	c0 := cputime.Process()
	for i := 0; i < b.N; i++ {
		if _, err := bk.Update(blocks[i%len(blocks)]); err != nil {
			b.Fatal(err)
		}
	}
	// CPU seconds per update (all threads): robust to other load on the
	// machine; divide by the worker count for the uncontended wall time.
	b.ReportMetric((cputime.Process()-c0).Seconds()/float64(b.N), "cpu-s/op")
	b.ReportMetric(2*float64(N)*float64(M)*float64(d)*float64(H)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s-equiv")
}

// BenchmarkUpdatePaper is the paper-scale full-layer update: H = 12,
// N = 4680, M = 9360 (full bank), d = 128. Target ≤ 1.5 s on 2 cores.
func BenchmarkUpdatePaper(b *testing.B) { benchUpdate(b, 12, 4680, 9360, 128) }

// BenchmarkUpdatePaperFloat32Kernel is BenchmarkUpdatePaper with the
// bfloat16 dot-product kernel off (same results; see gemm.SetBF16).
func BenchmarkUpdatePaperFloat32Kernel(b *testing.B) {
	defer gemm.SetBF16(gemm.SetBF16(false))
	benchUpdate(b, 12, 4680, 9360, 128)
}

// BenchmarkUpdateSmall is a quick shape (H = 2, N = 1024, M = 2048).
func BenchmarkUpdateSmall(b *testing.B) { benchUpdate(b, 2, 1024, 2048, 128) }

// BenchmarkSnapshotLoad reads a full paper-scale bank (H = 12, M = 9,360,
// d = 128, the default bfloat16 payload) back from its snapshot: the time,
// and the bytes allocated per load next to the snapshot's size (the bank
// itself is about that size; anything more is the reader's own buffering).
func BenchmarkSnapshotLoad(b *testing.B) {
	cfg := bank.DefaultConfig()
	cfg.Heads, cfg.Capacity, cfg.KeyDim, cfg.ValueDim = 12, 9360, 128, 128
	bk, err := bank.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := bk.Update(bench.NewVideoStream(12, 9360, 128, 1).Next()); err != nil {
		b.Fatal(err)
	}
	var snap bytes.Buffer
	if _, err := bk.WriteTo(&snap); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(snap.Len()))
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for b.Loop() {
		if _, err := bank.Load(bytes.NewReader(snap.Bytes())); err != nil {
			b.Fatal(err)
		}
	}
	runtime.ReadMemStats(&m1)
	b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/float64(b.N)/float64(snap.Len()), "alloc/snapshot")
}
