// Package vmath holds the elementwise functions whose exact bits the
// project's packages define and reproduce in assembly, each with one
// definition, and every exponential the project computes:
//
//   - Exp (float64, degree-8 Taylor by FMA): nn.GELUTanh (the DiT's FFN)
//     and nn.SiLU64 (LongLive-RAG's autoencoder);
//   - Exp32 (float32, degree-7 Taylor by FMA): the softmax of package attn;
//   - ExpFdlibm (float64, math.Exp's portable algorithm): nn.SiLU (wan's
//     time embedding);
//   - Exp32Cephes (float32, Cephes' expf): umT5's softmax and
//     nn.GELUTanh32;
//   - Exp32NoFMA (Exp32's steps unfused): nn.SiLU32, the VAE's SiLU.
//
// The last three are kept because the models' pinned output bits were made
// with them (exps.go); and the exactly rounded float32 steps FMA32 and
// Round32 (the oracles of the kernels and of package gemm's products).
package vmath

import "math"

// Constants of Exp; the generators of the assembly versions use the same Go
// constant expressions.
const (
	Log2e = 1.4426950408889634073599246810018921374266459541529859
	Ln2   = 0.6931471805599453094172321214581765680755001343602552
)

// ExpTaylor are Exp's polynomial coefficients 1/k!, k = 0…8.
var ExpTaylor = [9]float64{1, 1, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040, 1.0 / 40320}

// Exp returns e^x for x in [−708, 709] (callers clamp first; NaN and
// values outside give undefined bits), computed as
//
//	n = RoundToEven(x·Log2e)             (float64 product, rounded)
//	u = FMA(n, −Ln2, x)                  (|u| ≤ 0.3466 + rounding)
//	q = Horner of Σ_{k≤8} u^k/k! by FMA: q = FMA(…FMA(FMA(c8, u, c7), u, c6)…, u, c0)
//	e = q · 2^n                          (exact: n ∈ [−1021, 1023] keeps it normal)
//
// every step an IEEE float64 operation (math.FMA is fused, exactly
// rounded). The polynomial's relative error is below 5e-10 (|u|^9/9! ·
// e^|u|). The assembly versions are VMULPD, VRNDSCALEPD $0, VFMADD231PD,
// VFMADD213PD and VSCALEFPD, in that order.
func Exp(x float64) float64 {
	n := math.RoundToEven(float64(x * Log2e))
	u := math.FMA(n, -Ln2, x)
	q := ExpTaylor[8]
	for k := 7; k >= 0; k-- {
		q = math.FMA(q, u, ExpTaylor[k])
	}
	return q * math.Float64frombits(uint64(int64(n)+1023)<<52)
}
