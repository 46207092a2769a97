package gemm

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/densitykv/densitykv/internal/cputime"
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
	if cpu := cputime.Process() - start; cpu > 0 {
		b.ReportMetric(flops*float64(b.N)/cpu.Seconds()/1e9, "cpuGFLOP/s")
	}
}

// eachKernel runs f as a sub-benchmark per precision and kernel. The slow
// pure-Go kernel and the Go emulations run only where slow is set; the
// interpreted AMX kernels (sim-amx, sim-amx-i: a test device, far slower
// still) never.
func eachKernel(b *testing.B, slow bool, f func(b *testing.B, prec Precision)) {
	for _, prec := range []Precision{F32, BF16} {
		for _, name := range testKernels(b, prec) {
			if strings.HasPrefix(name, "sim-") || !slow && (name == "go" || strings.HasPrefix(name, "emu-")) {
				continue
			}
			b.Run(fmt.Sprintf("%v/%s", prec, name), func(b *testing.B) {
				withKernel(b, prec, name, func() { f(b, prec) })
			})
		}
	}
}

// BenchmarkPeak is each kernel's ceiling: 128×512 products of depth 256 on
// L2-resident operands, one goroutine (the start-up timing probe's
// problem, at more repetitions).
func BenchmarkPeak(b *testing.B) {
	m, n, k := 128, 512, 256
	a, bb, c := benchData(m*k), benchData(n*k), make([]float32, m*n)
	eachKernel(b, true, func(b *testing.B, prec Precision) {
		pa, pb := PackAAs(nil, prec, m, k, a, k), PackNTAs(nil, prec, n, k, bb, k)
		start := cputime.Process()
		for b.Loop() {
			MulPacked(m, n, k, pa, 0, 0, pb, 0, 0, c, n, false)
		}
		reportFlops(b, 2*float64(m*n*k), start)
	})
}

// BenchmarkBank is the bank's interaction pass at paper scale: 4,680
// candidates against a full bank of 9,360 keys of dimension 128, B packed
// once, A packed per 128-row block and every 128×512 tile through
// MulPacked, as riesz does; one goroutine (the bank parallelises over
// heads). GFLOP/s counts 2·m·n·k.
func BenchmarkBank(b *testing.B) {
	m, n, k := 4680, 9360, 128
	a, bb := benchData(m*k), benchData(n*k)
	tile := make([]float32, TileM*TileN)
	eachKernel(b, false, func(b *testing.B, prec Precision) {
		pb := PackNTAs(nil, prec, n, k, bb, k)
		var pa PackedA
		start := cputime.Process()
		for b.Loop() {
			for i0 := 0; i0 < m; i0 += TileM {
				rows := min(TileM, m-i0)
				PackAAs(&pa, prec, rows, k, a[i0*k:], k)
				for j0 := 0; j0 < n; j0 += TileN {
					MulPacked(rows, min(TileN, n-j0), k, &pa, 0, 0, pb, j0, 0, tile, TileN, false)
				}
			}
		}
		reportFlops(b, 2*float64(m)*float64(n)*float64(k), start)
	})
}

// BenchmarkPackBank packs the bank's keys (9,360×128) as the passes do
// once per pass and head, at each precision, one goroutine.
func BenchmarkPackBank(b *testing.B) {
	defer SetThreads(SetThreads(1))
	n, k := 9360, 128
	bb := benchData(n * k)
	eachKernel(b, false, func(b *testing.B, prec Precision) {
		var p PackedB
		start := cputime.Process()
		for b.Loop() {
			PackNTAs(&p, prec, n, k, bb, k)
		}
		b.ReportMetric(float64(n*k)*float64(b.N)/(cputime.Process()-start).Seconds()/1e9, "cpuGvalues/s")
	})
}

// BenchmarkDiT is C = X·Wᵀ for Wan2.1-1.3B Linear shapes with 4,680
// tokens (one 3-frame block): attention projection (1536×1536) and FFN up
// (8960×1536), W packed once (PackedB.Product), on Threads() goroutines.
func BenchmarkDiT(b *testing.B) {
	for _, s := range []struct{ m, n, k int }{{4680, 1536, 1536}, {4680, 8960, 1536}} {
		x, w, c := benchData(s.m*s.k), benchData(s.n*s.k), make([]float32, s.m*s.n)
		b.Run(fmt.Sprintf("%dx%dx%d", s.m, s.n, s.k), func(b *testing.B) {
			eachKernel(b, false, func(b *testing.B, prec Precision) {
				pw := PackNTAs(nil, prec, s.n, s.k, w, s.k)
				start := cputime.Process()
				for b.Loop() {
					pw.Product(s.m, x, s.k, c, s.n)
				}
				reportFlops(b, 2*float64(s.m)*float64(s.n)*float64(s.k), start)
			})
		})
	}
}

// BenchmarkFusedNT is the bank's pass through the tile API on Threads()
// goroutines with a trivial epilogue (the bank's own is measured in its
// package), on the selected kernels.
func BenchmarkFusedNT(b *testing.B) {
	m, n, k := 4680, 9360, 128
	a, bb := benchData(m*k), benchData(n*k)
	sums := make([]float32, m)
	for _, prec := range []Precision{F32, BF16} {
		b.Run(prec.String(), func(b *testing.B) {
			pb := PackNTAs(nil, prec, n, k, bb, k)
			start := cputime.Process()
			for b.Loop() {
				pb.TileFuncParallel(m, a, k, func(w, i0, j0, rows, cols int, t []float32, ldt int) {
					for r := 0; r < rows; r++ {
						sums[i0+r] += t[r*ldt+cols-1]
					}
				})
			}
			reportFlops(b, 2*float64(m)*float64(n)*float64(k), start)
		})
	}
}

// BenchmarkPackAttention packs one head of the Wan-scale attention's keys
// (K, 18,720×128 from rows of 1,536) and values (Vᵀ, 128×18,720 read
// down the columns) at each precision, one goroutine, as attn does per
// call and head.
func BenchmarkPackAttention(b *testing.B) {
	defer SetThreads(SetThreads(1))
	S, D, ld := 18720, 128, 1536
	x := benchData(S * ld)
	for _, prec := range []Precision{F32, BF16} {
		b.Run("K/"+prec.String(), func(b *testing.B) {
			var p PackedA
			start := cputime.Process()
			for b.Loop() {
				PackAAs(&p, prec, S, D, x, ld)
			}
			b.ReportMetric(float64(S*D)*float64(b.N)/(cputime.Process()-start).Seconds()/1e9, "cpuGvalues/s")
		})
		b.Run("VT/"+prec.String(), func(b *testing.B) {
			var p PackedA
			start := cputime.Process()
			for b.Loop() {
				PackATAs(&p, prec, D, S, x, ld)
			}
			b.ReportMetric(float64(S*D)*float64(b.N)/(cputime.Process()-start).Seconds()/1e9, "cpuGvalues/s")
		})
	}
}

// BenchmarkAMXLoops sweeps the AMX kernels (amx, amx-i), the driver's
// depth chunk and, where the depth is chunked, its loop order (panel or
// group outer) over the products the models run, one goroutine:
// the DiT's linears (one TileM×TileN block per MulPacked, as productRange
// does), the bank pass's 128×512 tiles of depth 128, attention's
// Sᵀ = K·Qᵀ (512 keys × 32 queries, depth 128) and Oᵀ += Vᵀ·Pᵀ (128 × 128
// queries, depth 512), and an L1-resident 32×32 product of depth 256.
func BenchmarkAMXLoops(b *testing.B) {
	defer SetThreads(SetThreads(1))
	type shape struct {
		name    string
		m, n, k int
		acc     bool
	}
	for _, s := range []shape{{"linear1536", 128, 512, 1536, false}, {"linear8960", 128, 512, 8960, false},
		{"bank", 128, 512, 128, false}, {"qk", 512, 32, 128, false}, {"pv", 128, 128, 512, true}, {"l1", 32, 32, 256, false}} {
		a, bb, c := benchData(s.m*s.k), benchData(s.n*s.k), make([]float32, s.m*s.n)
		var kernels []string // the AMX kernels this CPU runs, else the selected one
		for _, n := range testKernels(b, BF16) {
			if strings.HasPrefix(n, "amx") {
				kernels = append(kernels, n)
			}
		}
		if kernels == nil {
			kernels = []string{KernelName(BF16)}
		}
		for _, kname := range kernels {
			withKernel(b, BF16, kname, func() { amxLoops(b, s.name, s.m, s.n, s.k, s.acc, a, bb, c) })
		}
	}
}

// amxLoops runs BenchmarkAMXLoops's sweep for one shape on the kernel
// selected now.
func amxLoops(b *testing.B, name string, m, n, k int, acc bool, a, bb, c []float32) {
	pa, pb := PackAAs(nil, BF16, m, k, a, k), PackNTAs(nil, BF16, n, k, bb, k)
	amx := strings.HasPrefix(KernelName(BF16), "amx")
	for _, order := range []string{"panel", "group"} {
		for _, ch := range []int{1 << 20, 4, 8, 16} {
			if ch < 1<<20 && k/BF16Block <= ch || ch == 1<<20 && order == "group" {
				continue // no chunking: one order
			}
			if !amx && (ch < 1<<20 || order == "group") {
				continue // other kernels have neither
			}
			b.Run(fmt.Sprintf("%s/%s/%s/chunk%d", name, KernelName(BF16), order, ch), func(b *testing.B) {
				defer func(o int, g bool) { amxChunk, amxGroupOuter = o, g }(amxChunk, amxGroupOuter)
				amxChunk, amxGroupOuter = ch, order == "group"
				start := cputime.Process()
				for b.Loop() {
					MulPacked(m, n, k, pa, 0, 0, pb, 0, 0, c, n, acc)
				}
				reportFlops(b, 2*float64(m*n*k), start)
			})
		}
	}
}
