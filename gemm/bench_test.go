package gemm

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"
)

func benchData(n int) []float32 {
	rng := rand.New(rand.NewPCG(uint64(n), 11))
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(rng.NormFloat64())
	}
	return s
}

// reportFlops reports wall-clock GFLOP/s and, because the shared machine is
// often oversubscribed, GFLOP per CPU-second of this process (cpuGFLOP/s,
// summed over its threads) measured from getrusage since start.
func reportFlops(b *testing.B, flops float64, start time.Duration) {
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	if cpu := cpuTime() - start; cpu > 0 {
		b.ReportMetric(flops*float64(b.N)/cpu.Seconds()/1e9, "cpuGFLOP/s")
	}
}

// cpuTime returns the user+system CPU time of the process.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkFusedNT is the bank's interaction pass: 4680 candidates against
// a full bank of 9360 keys of dimension 128, B packed once; the epilogue
// only reads one value per tile row (the bank's own epilogue is measured in
// its package). Reported GFLOP/s counts 2·m·n·k.
func BenchmarkFusedNT(b *testing.B) {
	m, n, k := 4680, 9360, 128
	a, bb := benchData(m*k), benchData(n*k)
	pb := PackNT(nil, n, k, bb, k)
	sums := make([]float32, m)
	epi := func(w, i0, j0, rows, cols int, t []float32, ldt int) {
		for r := 0; r < rows; r++ {
			sums[i0+r] += t[r*ldt+cols-1]
		}
	}
	for _, mode := range []string{"parallel", "serial"} {
		b.Run(mode, func(b *testing.B) {
			start := cpuTime()
			for b.Loop() {
				if mode == "parallel" {
					pb.TileFuncParallel(m, a, k, epi)
				} else {
					pb.TileFunc(m, a, k, func(i0, j0, rows, cols int, t []float32, ldt int) { epi(0, i0, j0, rows, cols, t, ldt) })
				}
			}
			reportFlops(b, 2*float64(m)*float64(n)*float64(k), start)
		})
	}
}

// BenchmarkNTTile is the riesz package's per-tile call: NT on a 128×512×128
// tile including packing of B (single goroutine).
func BenchmarkNTTile(b *testing.B) {
	defer SetThreads(SetThreads(1))
	m, n, k := 128, 512, 128
	a, bb, c := benchData(m*k), benchData(n*k), make([]float32, m*n)
	start := cpuTime()
	for b.Loop() {
		NT(m, n, k, a, k, bb, k, c, n)
	}
	reportFlops(b, 2*float64(m)*float64(n)*float64(k), start)
}

// BenchmarkLinear is C = X·Wᵀ for the Wan2.1-1.3B Linear shapes with 4680
// tokens (one 3-frame block): attention projections, FFN up, FFN down.
func BenchmarkLinear(b *testing.B) {
	for _, s := range []struct{ m, n, k int }{{4680, 1536, 1536}, {4680, 8960, 1536}, {4680, 1536, 8960}} {
		b.Run(fmt.Sprintf("%dx%dx%d", s.m, s.n, s.k), func(b *testing.B) {
			x, w, c := benchData(s.m*s.k), benchData(s.n*s.k), make([]float32, s.m*s.n)
			start := cpuTime()
			for b.Loop() {
				NT(s.m, s.n, s.k, x, s.k, w, s.k, c, s.n)
			}
			reportFlops(b, 2*float64(s.m)*float64(s.n)*float64(s.k), start)
		})
	}
}

// BenchmarkProductSubTiles is the Riesz package's use: the bank packed once,
// then ProductSub on every 128×512 tile of the 4680×9360×128 interaction
// matrix (single goroutine; the bank parallelises over heads).
func BenchmarkProductSubTiles(b *testing.B) {
	m, n, k := 4680, 9360, 128
	a, bb := benchData(m*k), benchData(n*k)
	pb := PackNT(nil, n, k, bb, k)
	tile := make([]float32, 128*512)
	start := cpuTime()
	for b.Loop() {
		for i0 := 0; i0 < m; i0 += 128 {
			rows := min(128, m-i0)
			for j0 := 0; j0 < n; j0 += 512 {
				pb.ProductSub(rows, a[i0*k:], k, j0, min(j0+512, n), 0, k, tile, 512, false)
			}
		}
	}
	reportFlops(b, 2*float64(m)*float64(n)*float64(k), start)
}
