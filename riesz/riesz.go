// Package riesz implements the Soft-Riesz interaction kernel of DensityKV
// (paper, "Soft-Riesz Density", Eq. riesz):
//
//	w(a, b) = (eps + |a − b|²/σ²)^(−p)
//
// and fused, tiled interaction passes over a candidate×bank product that never
// materialise the full N×M interaction matrix: per-row statistics (external
// density, mean- and max-normalised scores), row/column sums, self densities
// (the Soft-Riesz density Φ of every member of a set) and the per-state
// prefix scan used by the bank's shared-prefix search.
//
// Squared distances are computed as |a|² + |b|² − 2a·b clamped at 0, with the
// dot products from package gemm (this is also what the Wan golden rollout's
// reference does). Interactions are float32; sums are float64 (row sums by
// the lane definition of the epilogues, column sums and the prefix scan one
// float64 addition per element). The per-element work after the products
// has one numerical definition, in pure Go, which the AVX-512 assembly
// chosen at start-up reproduces bit for bit (epilogue.go): results are
// identical on every CPU, in every build and for every thread count, given
// identical dot products.
//
// Exponents p = 1, 2 and 4 are special-cased (no math.Pow per element).
//
// One deliberate deviation from the exact kernel: the float32 interaction is
// 1/min(t^p, MaxDenominator), so no interaction is below 1e-36 (float32's
// normal range ends at 1.2e-38; smaller values would be denormal and slow).
// Such a pair is at distance ≳ σ·10^(36/(2p)) (10^9·σ for p = 2): it cannot
// change a decision, because a density below the baseline floor δ already
// makes the state's baseline δ ≫ 1e-36.
package riesz

import (
	"fmt"
	"math"
)

// Kernel is a validated Soft-Riesz kernel. The zero value is not usable;
// construct it with New. A Kernel is immutable and safe for concurrent use.
type Kernel struct {
	sigma, p, eps float64
	invS2         float32 // 1/σ²
	eps32         float32
	negP32        float32
	pow           int // 1, 2, 4, or 0 for a general exponent
}

// New validates the parameters (σ > 0, p > 0, eps > 0, all finite, and
// eps^(−p) finite) and returns the kernel.
func New(sigma, p, eps float64) (Kernel, error) {
	bad := func(name string, v float64) error {
		return fmt.Errorf("riesz: %s = %v must be finite and > 0", name, v)
	}
	if !(sigma > 0) || math.IsInf(sigma, 0) {
		return Kernel{}, bad("sigma", sigma)
	}
	if !(p > 0) || math.IsInf(p, 0) {
		return Kernel{}, bad("p", p)
	}
	if !(eps > 0) || math.IsInf(eps, 0) {
		return Kernel{}, bad("eps", eps)
	}
	if w0 := math.Pow(eps, -p); math.IsInf(w0, 0) || w0 > math.MaxFloat32 {
		return Kernel{}, fmt.Errorf("riesz: eps^(−p) = %v^(−%v) overflows float32", eps, p)
	}
	if s2 := sigma * sigma; s2 < 1e-30 || s2 > 1e30 {
		return Kernel{}, fmt.Errorf("riesz: sigma = %v out of range [1e-15, 1e15]", sigma)
	}
	k := Kernel{sigma: sigma, p: p, eps: eps,
		invS2: float32(1 / (sigma * sigma)), eps32: float32(eps), negP32: float32(-p)}
	switch p {
	case 1:
		k.pow = 1
	case 2:
		k.pow = 2
	case 4:
		k.pow = 4
	}
	return k, nil
}

// MustNew is New that panics on invalid parameters (for constants in tests
// and examples).
func MustNew(sigma, p, eps float64) Kernel {
	k, err := New(sigma, p, eps)
	if err != nil {
		panic(err)
	}
	return k
}

// Sigma returns σ.
func (k Kernel) Sigma() float64 { return k.sigma }

// P returns the exponent p.
func (k Kernel) P() float64 { return k.p }

// Eps returns eps.
func (k Kernel) Eps() float64 { return k.eps }

// Eval returns w for a squared distance d2 in float64 (the reference
// definition: (eps + d2/σ²)^(−p)).
func (k Kernel) Eval(d2 float64) float64 {
	t := k.eps + d2/(k.sigma*k.sigma)
	switch k.pow {
	case 1:
		return 1 / t
	case 2:
		return 1 / (t * t)
	case 4:
		t2 := t * t
		return 1 / (t2 * t2)
	}
	return math.Pow(t, -k.p)
}

// Eval32 returns w for a squared distance d2 in float32, as the tiled passes
// compute it.
func (k Kernel) Eval32(d2 float32) float32 {
	t := k.eps32 + float32(d2*k.invS2) // no fused multiply-add, as the passes
	x := t
	switch k.pow {
	case 1:
	case 2:
		x = t * t
	case 4:
		x = t * t
		x *= x
	default:
		return float32(math.Pow(float64(t), float64(k.negP32)))
	}
	return 1 / min(x, MaxDenominator)
}

// fromDots turns a row of dot products into interactions in place:
//
//	row[j] = w(max(0, na + nb[j] − 2·row[j]))
func (k Kernel) fromDots(row []float32, na float32, nb []float32) {
	nb = nb[:len(row)]
	if k.pow != 0 {
		epiFromDots(row, na, nb, k.eps32, k.invS2, k.pow)
		return
	}
	e, s := k.eps32, k.invS2
	np := float64(k.negP32)
	for j, v := range row {
		d2 := float32(float64(na+nb[j]) - 2*float64(v)) // as interaction
		if d2 < 0 {
			d2 = 0
		}
		row[j] = float32(math.Pow(float64(e+float32(d2*s)), np))
	}
}

// SqDist returns |a − b|² computed as the passes do: |a|² + |b|² − 2a·b in
// float32, clamped at 0. It is the scalar reference of the tiled passes.
func SqDist(a, b []float32) float32 {
	if len(a) != len(b) {
		panic(fmt.Sprintf("riesz: SqDist lengths %d and %d differ", len(a), len(b)))
	}
	var na, nb, dot float32
	for i, v := range a {
		na += float32(v * v) // float32(…): never a fused multiply-add
		nb += float32(b[i] * b[i])
		dot += float32(v * b[i])
	}
	d2 := na + nb - 2*dot
	if d2 < 0 {
		d2 = 0
	}
	return d2
}

// Norms writes dst[i] = |x_i|² for the n rows of x ([n][d], row-major).
func Norms(dst, x []float32, n, d int) {
	if len(dst) < n || len(x) < n*d {
		panic(fmt.Sprintf("riesz: Norms needs %d outputs and %d inputs, got %d and %d", n, n*d, len(dst), len(x)))
	}
	for i := 0; i < n; i++ {
		var s float32
		for _, v := range x[i*d : i*d+d] {
			s += float32(v * v) // never fused: the same bits in every build
		}
		dst[i] = s
	}
}
