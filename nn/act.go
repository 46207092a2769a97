package nn

import "github.com/densitykv/densitykv/internal/vmath"

// The activations of every model, each one definition in float32 steps on
// the one exponential vmath.Exp32 (through vmath.Exp32Clamped): the GELU
// (tanh form) of the DiT's FFN and umT5's gated FFN, and the SiLU of the
// DiT's time embedding, the VAE's norms and LongLive-RAG's GroupNorm. Every
// step is one IEEE float32 operation, rounded to nearest even: products
// rounded by explicit conversions before they are added (Go fuses a·b + c
// otherwise at some GOAMD64 levels and on other architectures), the one
// fused step written as vmath.FMA32, and one correctly rounded float32
// division each. The generated AVX-512 kernels (gelu_amd64.s, ops_amd64.s)
// compute the same steps in the same order.
//
// Until 2026-11-29 the GELU of the DiT was evaluated in float64 with a
// float64 exponential, umT5's in float32 with Cephes' expf, and the three
// SiLUs had three exponentials; issue #24 made them one definition each.

// The constants of GELUTanh32; gen_gelu.go uses the same Go constant
// expressions.
const (
	geluCubic float32 = 0.044715
	geluK     float32 = -2 * 0.7978845608028654 // −2·√(2/π), rounded once to float32
)

// GELUTanh32 returns GELU with the tanh approximation of v,
//
//	0.5·v·(1 + tanh(√(2/π)·(v + 0.044715·v³))) = v / (1 + e^(−2·√(2/π)·(v + 0.044715·v³)))
//
// in float32 steps:
//
//	w = (0.044715·v)·v                   (two products, each rounded)
//	s = FMA32(w, v, v)                   (v + 0.044715·v³, one rounding)
//	z = geluK·s                          (geluK = −2·√(2/π) in float32)
//	d = 1 + vmath.Exp32Clamped(z)
//	g = v / d
//
// Within a few float32 ulp of the exact value where |g| is not far below
// |v| (TestGELUAccuracy), and within a few ulp of |v|·2^-24 absolute
// everywhere. +Inf gives +Inf, −Inf gives NaN (as the tanh form does in
// PyTorch: −Inf·0), NaN stays NaN. GELUTanh applies it to a slice.
func GELUTanh32(v float32) float32 {
	w := float32(float32(geluCubic*v) * v)
	s := vmath.FMA32(w, v, v)
	z := float32(geluK * s)
	d := 1 + vmath.Exp32Clamped(z)
	return v / d
}

// SiLU32 returns v·sigmoid(v) = v / (1 + e^−v) in float32 steps:
//
//	d = 1 + vmath.Exp32Clamped(−v)
//	y = v / d
//
// within a few float32 ulp of the exact value (for v below about −88.7,
// e^−v overflows and the result is −0; −Inf gives NaN, as in PyTorch; NaN
// stays NaN). The SiLU of every model: the DiT's time embedding (SiLU),
// the VAE's (RMSNormChannels), LongLive-RAG's autoencoder (GroupNorm).
func SiLU32(v float32) float32 {
	d := 1 + vmath.Exp32Clamped(-v)
	return v / d
}

// SiLU writes SiLU32 of every x into y (which may be x): the DiT's time
// embedding (package wan).
func SiLU(y, x []float32) {
	for i, v := range x {
		y[i] = SiLU32(v)
	}
}
