package nn

import (
	"math"

	"github.com/densitykv/densitykv/internal/vmath"
)

// SiLU writes x·sigmoid(x) = x / (1 + e^−x) of every x into y (which may
// be x), evaluated in float64 with vmath.ExpFdlibm and rounded once to
// float32. The DiT's time embedding (package wan).
func SiLU(y, x []float32) {
	for i, v := range x {
		f := float64(v)
		y[i] = float32(f / (1 + vmath.ExpFdlibm(-f)))
	}
}

// SiLU64 returns y·sigmoid(y) = y / (1 + e^−y) in float64 with vmath.Exp
// (e^−y clamped: −0 where it would overflow, y where it underflows).
// GroupNorm's activation (LongLive-RAG's autoencoder).
func SiLU64(y float64) float64 {
	switch z := -y; {
	case z > 709:
		return y / math.Inf(1) // e^z overflows: −0
	case z < -708:
		return y // e^z underflows
	default:
		return y / (1 + vmath.Exp(z))
	}
}

// GELUTanh32 is GELU with the tanh approximation in float32 steps (umT5's
// gated FFN, package t5):
//
//	0.5·u·(1 + tanh(√(2/π)·(u + 0.044715·u³))) = u / (1 + e^(−2z)), z = √(2/π)·(u + 0.044715·u³)
//
// with the exponential vmath.Exp32Cephes. −Inf gives NaN, as the tanh form
// does in PyTorch.
func GELUTanh32(u float32) float32 {
	const c = 0.7978845608028654 // √(2/π)
	z := c * (u + float32(0.044715*u*u*u))
	return u / (1 + vmath.Exp32Cephes(-2*z))
}
