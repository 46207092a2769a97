package nn

import (
	"fmt"
	"math"
	"sync"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/internal/vmath"
)

// BiasedAttention computes T5's encoder self-attention at precision prec
// (umT5, package t5): per head h of D values,
//
//	z[i][j] = q[i][h]·k[j][h] + bias[h][n−1−i+j]     where keep[j]
//	z[i][j] = −MaxFloat32                            where !keep[j]
//	out[i][h] = Σ_j softmax_j(z[i])·v[j][h]
//
// with q, k, v, out [n][H][D] and bias [H][2n−1] (head h's bias by
// relative position j − i, at index j − i + n − 1): no 1/√D scale, the
// mask on keys only. The products are gemm's (PackNTAs/PackNNAs at prec:
// at bf16 q, k, v and the probabilities rounded to bfloat16 as they are
// packed); each softmax row is SoftmaxBiasRow. probs, when non-nil,
// receives the probabilities [H][n][n]. The heads run on up to
// gemm.Threads() goroutines; the bits do not depend on how many. It
// panics on bad sizes; out must not overlap the inputs.
func BiasedAttention(prec gemm.Precision, out, q, k, v []float32, n, H, D int, bias []float32, keep []bool, probs []float32) {
	da := H * D
	switch {
	case n < 0 || H < 0 || D < 0:
		panic(fmt.Sprintf("nn: BiasedAttention: negative size n=%d H=%d D=%d", n, H, D))
	case len(q) < n*da || len(k) < n*da || len(v) < n*da || len(out) < n*da:
		panic(fmt.Sprintf("nn: BiasedAttention: q, k, v, out hold %d, %d, %d, %d values, want %d", len(q), len(k), len(v), len(out), n*da))
	case n > 0 && (len(bias) < H*(2*n-1) || len(keep) < n):
		panic(fmt.Sprintf("nn: BiasedAttention: bias holds %d values (want %d), keep %d (want %d)", len(bias), H*(2*n-1), len(keep), n))
	case probs != nil && len(probs) < H*n*n:
		panic(fmt.Sprintf("nn: BiasedAttention: probs holds %d values, want %d", len(probs), H*n*n))
	}
	if n == 0 || H == 0 || D == 0 {
		return
	}
	workers := min(gemm.Threads(), H)
	// Worker w takes heads w, w + workers, …: the heads are independent,
	// so the results do not depend on how they are shared out.
	run := func(w int) {
		hw := biasScratch.Get().(*biasHead)
		defer biasScratch.Put(hw)
		if len(hw.s) < n*n {
			hw.s = make([]float32, n*n)
		}
		s := hw.s[:n*n]
		for h := w; h < H; h += workers {
			bh := bias[h*(2*n-1) : (h+1)*(2*n-1)]
			// s = q_h·k_hᵀ [n][n]
			gemm.PackNTAs(&hw.pk, prec, n, D, k[h*D:], da)
			hw.pk.ProductSub(n, q[h*D:], da, 0, n, 0, D, s, n, false)
			for i := 0; i < n; i++ {
				SoftmaxBiasRow(s[i*n:(i+1)*n], bh[n-1-i:2*n-1-i], keep)
			}
			if probs != nil {
				copy(probs[h*n*n:(h+1)*n*n], s)
			}
			// out_h = p·v_h [n][D]
			gemm.PackNNAs(&hw.pv, prec, D, n, v[h*D:], da)
			hw.pv.ProductSub(n, s, n, 0, D, 0, n, out[h*D:], da, false)
		}
	}
	if workers <= 1 {
		run(0)
		return
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() { defer wg.Done(); run(w) }()
	}
	wg.Wait()
}

// biasHead is one BiasedAttention worker's scratch: the scores of a head
// and its packed operands.
type biasHead struct {
	s      []float32
	pk, pv gemm.PackedB
}

var biasScratch = sync.Pool{New: func() any { return new(biasHead) }}

// SoftmaxBiasRow turns one row of logits s (q·k) into probabilities: with
// z_j = s_j + bias_j where keep[j], −MaxFloat32 elsewhere,
// p_j = e^(z_j − max z) / Σ e^(z_k − max z): the exponential
// vmath.Exp32Clamped in float32, the sum of the float32 exponentials in
// float64 in order of j (a float32 sum raised umT5's worst golden
// prompt's relative L2 error from 2.9e-6 to 4.7e-6), rounded once to
// float32, then one float32 division 1/Σ and a float32 product per value.
// A row with no kept key is uniform, as in Wan.
func SoftmaxBiasRow(s, bias []float32, keep []bool) {
	mx := float32(-math.MaxFloat32)
	for j := range s {
		z := s[j] + bias[j]
		if !keep[j] {
			z = -math.MaxFloat32
		}
		s[j] = z
		mx = max(mx, z)
	}
	var sum float64
	for j, z := range s {
		e := vmath.Exp32Clamped(z - mx)
		s[j] = e
		sum += float64(e)
	}
	inv := 1 / float32(sum)
	for j := range s {
		s[j] *= inv
	}
}
