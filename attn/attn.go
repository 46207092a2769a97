// Package attn computes multi-head softmax attention without materialising
// the score matrix: queries are processed in tiles of BlockT rows against
// key tiles of BlockS rows with an online (flash-attention style) softmax,
// the products running on the gemm package's packed kernels.
//
// Layouts follow the project convention for per-token tensors: q and out are
// [T][H][D], k and v are [S][H][D], row-major float32. There is no mask:
// every query attends to every key (the causal structure of the Wan model is
// expressed by what the caller puts in k and v).
//
// Precision: Attention computes the products in float32; AttentionAs with
// gemm.BF16 rounds q, k and v to bfloat16, computes QKᵀ and PV with gemm's
// bfloat16 product (float32 accumulation) and rounds the probabilities to
// bfloat16 for PV, as flash attention does on a GPU; the online softmax
// (and the row sums, from the unrounded probabilities) is float32 either
// way (flash.go).
//
// Work is split over heads and query tiles on gemm.Threads() goroutines;
// every output row is computed by one goroutine with an order of operations
// that does not depend on the thread count, so results are bit-identical for
// every setting.
//
// The online softmax (running maximum, exponentials, rescaling, row sums)
// has one numerical definition, written in pure Go in softmax.go: float32
// scores and sums, and an exponential expDef (vmath.Exp32: float32 fused
// multiply-adds, a degree-7 polynomial, within 0.9 ulp). On amd64 CPUs with
// AVX-512 the row kernels run as generated Go assembly (softmax_amd64.s,
// gen_softmax.go) that reproduces it bit for bit, chosen once at start-up;
// so, given identical products from package gemm, outputs are identical on
// every CPU and in every build.
package attn

import (
	"fmt"

	"github.com/densitykv/densitykv/gemm"
)

// Tile sizes: BlockT query rows against BlockS keys per step (BlockS is a
// multiple of gemm.NR).
const (
	BlockT = 128
	BlockS = 512
)

// Attention computes, for every head h < H and query t < T,
//
//	out[t][h] = Σ_s softmax_s(scale · q[t][h]·k[s][h]) · v[s][h]
//
// with q, out [T][H][D] and k, v [S][H][D]. The softmax is accumulated
// online in float32 (running maximum, rescaled sums), so the T×S scores are
// never stored. S must be ≥ 1 when T ≥ 1. It panics with an "attn:" message
// on bad sizes or short slices; out must not overlap the inputs.
func Attention(out, q, k, v []float32, T, S, H, D int, scale float32) {
	AttentionAs(gemm.F32, out, q, k, v, T, S, H, D, scale)
}

// AttentionAs is Attention with the products at precision prec: with
// gemm.BF16, q, k and v are rounded to bfloat16 for QKᵀ and the
// probabilities for PV, both products are gemm's bfloat16 product
// (float32 accumulation), and the softmax stays float32 (see flash.go).
// With gemm.F32 it is Attention.
func AttentionAs(prec gemm.Precision, out, q, k, v []float32, T, S, H, D int, scale float32) {
	checkShapes("Attention", out, q, k, v, T, S, H, D)
	checkPrec("Attention", prec)
	run(prec, out, q, k, v, T, S, H, D, scale, nil, nil, nil)
}

// AttentionMass is Attention that also measures where the attention goes.
// qb and kb are segment boundaries over the queries and the keys
// (0 = qb[0] ≤ qb[1] ≤ ... ≤ qb[len(qb)-1] = T, likewise kb with S); for
// query segment i and key segment j it adds
//
//	Σ_h Σ_{qb[i] ≤ t < qb[i+1]} Σ_{kb[j] ≤ s < kb[j+1]} softmax_s(scale · q[t][h]·k[s][h])
//
// to mass[i*(len(kb)-1)+j] (so mass is summed over heads and queries: a
// query segment's row sums to H times its number of queries). Clear mass
// first for a fresh measure. The output equals Attention's bit for bit.
func AttentionMass(out, q, k, v []float32, T, S, H, D int, scale float32, qb, kb []int, mass []float64) {
	AttentionMassAs(gemm.F32, out, q, k, v, T, S, H, D, scale, qb, kb, mass)
}

// AttentionMassAs is AttentionMass at precision prec (see AttentionAs);
// the mass is measured on the float32 probabilities.
func AttentionMassAs(prec gemm.Precision, out, q, k, v []float32, T, S, H, D int, scale float32, qb, kb []int, mass []float64) {
	checkShapes("AttentionMass", out, q, k, v, T, S, H, D)
	checkPrec("AttentionMass", prec)
	checkBounds("query", qb, T)
	checkBounds("key", kb, S)
	if want := (len(qb) - 1) * (len(kb) - 1); len(mass) < want {
		panic(fmt.Sprintf("attn: AttentionMass: mass has %d values, need %d", len(mass), want))
	}
	run(prec, out, q, k, v, T, S, H, D, scale, qb, kb, mass)
}

func checkPrec(op string, prec gemm.Precision) {
	if prec != gemm.F32 && prec != gemm.BF16 {
		panic(fmt.Sprintf("attn: %s: unknown precision %v", op, prec))
	}
}

func checkShapes(op string, out, q, k, v []float32, T, S, H, D int) {
	if T < 0 || S < 0 || H < 0 || D < 0 {
		panic(fmt.Sprintf("attn: %s: negative size T=%d S=%d H=%d D=%d", op, T, S, H, D))
	}
	if T > 0 && H > 0 && S == 0 {
		panic(fmt.Sprintf("attn: %s: %d queries but no keys", op, T))
	}
	for _, x := range []struct {
		name string
		s    []float32
		n    int
	}{{"out", out, T * H * D}, {"q", q, T * H * D}, {"k", k, S * H * D}, {"v", v, S * H * D}} {
		if len(x.s) < x.n {
			panic(fmt.Sprintf("attn: %s: %s has %d values, need %d (T=%d S=%d H=%d D=%d)", op, x.name, len(x.s), x.n, T, S, H, D))
		}
	}
}

func checkBounds(name string, b []int, n int) {
	if len(b) < 2 || b[0] != 0 || b[len(b)-1] != n {
		panic(fmt.Sprintf("attn: AttentionMass: %s segment boundaries %v must run from 0 to %d", name, b, n))
	}
	for i := 1; i < len(b); i++ {
		if b[i] < b[i-1] {
			panic(fmt.Sprintf("attn: AttentionMass: %s segment boundaries decrease at %d: %v", name, i, b))
		}
	}
}
