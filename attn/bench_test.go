package attn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/internal/cputime"
)

// BenchmarkAttention runs the Wan2.1-1.3B self-attention of one 3-frame
// block (4680 queries against 18720 cached keys, 12 heads of 128) and the
// golden tiny model's (36 against 180, 2 heads of 32), plus one head of the
// former and the Wan cross-attention (512 text tokens), at each precision.
// GFLOP/s counts the two products, 4·T·S·H·D.
func BenchmarkAttention(b *testing.B) {
	for _, s := range []shape{{4680, 18720, 12, 128}, {4680, 18720, 1, 128}, {4680, 512, 12, 128}, {36, 180, 2, 32}} {
		for _, prec := range []gemm.Precision{gemm.F32, gemm.BF16} {
			b.Run(fmt.Sprintf("T%d_S%d_H%d_D%d/%v", s.T, s.S, s.H, s.D, prec), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(1, 2))
				q := randVec(rng, s.T*s.H*s.D, 1)
				k := randVec(rng, s.S*s.H*s.D, 1)
				v := randVec(rng, s.S*s.H*s.D, 1)
				out := make([]float32, s.T*s.H*s.D)
				scale := float32(1 / math.Sqrt(float64(s.D)))
				start := cputime.Process()
				for b.Loop() {
					AttentionAs(prec, out, q, k, v, s.T, s.S, s.H, s.D, scale)
				}
				flops := 4 * float64(s.T) * float64(s.S) * float64(s.H) * float64(s.D)
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				if cpu := cputime.Process() - start; cpu > 0 {
					b.ReportMetric(flops*float64(b.N)/cpu.Seconds()/1e9, "cpuGFLOP/s")
				}
			})
		}
	}
}

// BenchmarkAttentionMass is BenchmarkAttention's Wan-scale case for one head
// with the attention-mass trace on (sink / memory / window key segments,
// three query segments), to compare with Attention alone.
func BenchmarkAttentionMass(b *testing.B) {
	for _, s := range []shape{{4680, 18720, 1, 128}, {36, 180, 2, 32}} {
		b.Run(fmt.Sprintf("T%d_S%d_H%d_D%d", s.T, s.S, s.H, s.D), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			q := randVec(rng, s.T*s.H*s.D, 1)
			k := randVec(rng, s.S*s.H*s.D, 1)
			v := randVec(rng, s.S*s.H*s.D, 1)
			out := make([]float32, s.T*s.H*s.D)
			scale := float32(1 / math.Sqrt(float64(s.D)))
			qb := []int{0, s.T / 3, 2 * s.T / 3, s.T}
			kb := []int{0, s.S / 6, 5 * s.S / 6, s.S}
			mass := make([]float64, 9)
			start := cputime.Process()
			for b.Loop() {
				AttentionMass(out, q, k, v, s.T, s.S, s.H, s.D, scale, qb, kb, mass)
			}
			flops := 4 * float64(s.T) * float64(s.S) * float64(s.H) * float64(s.D)
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			if cpu := cputime.Process() - start; cpu > 0 {
				b.ReportMetric(flops*float64(b.N)/cpu.Seconds()/1e9, "cpuGFLOP/s")
			}
		})
	}
}

// BenchmarkSoftmaxPanel times one online-softmax step on a panel of
// BlockS keys × 32 query lanes (scores of unit-variance q·k at D = 128,
// scaled by 1/√D), not the first step (alpha and l rescaled); the scores are
// restored before each call (a copy, included in the time).
func BenchmarkSoftmaxPanel(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 3))
	src := randVec(rng, BlockS*lanes, 11)
	p := make([]float32, len(src))
	var st panelState
	for i := range st.m {
		st.m[i], st.l[i] = 30, 100
	}
	start := cputime.Process()
	for b.Loop() {
		copy(p, src)
		s := st
		softmaxPanel(p, BlockS, 1/float32(math.Sqrt(128)), &s, false)
	}
	n := float64(BlockS*lanes) * float64(b.N)
	b.ReportMetric(n/b.Elapsed().Seconds()/1e9, "Gscores/s")
	if cpu := cputime.Process() - start; cpu > 0 {
		b.ReportMetric(n/cpu.Seconds()/1e9, "cpuGscores/s")
	}
}

// BenchmarkRescale times scaleCols on a D×BlockT output tile (D = 128) and
// addRows over a panel (the other per-step row kernels).
func BenchmarkRescale(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	o := randVec(rng, 128*BlockT, 1)
	p := randVec(rng, BlockS*lanes, 1)
	var alpha, acc [lanes]float32
	for i := range alpha {
		alpha[i] = 1
	}
	start := cputime.Process()
	for b.Loop() {
		for j0 := 0; j0 < BlockT; j0 += lanes {
			scaleCols(o, 128, BlockT, j0, &alpha)
		}
		addRows(p, 0, BlockS, &acc)
	}
	n := float64(128*BlockT+BlockS*lanes) * float64(b.N)
	b.ReportMetric(n/b.Elapsed().Seconds()/1e9, "Gelem/s")
	if cpu := cputime.Process() - start; cpu > 0 {
		b.ReportMetric(n/cpu.Seconds()/1e9, "cpuGelem/s")
	}
}
