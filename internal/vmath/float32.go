package vmath

import "math"

// The float32 functions: one rounding per step, every step an IEEE float32
// operation; the assembly versions (package attn's softmax, package nn's
// GELU and SiLU kernels) compute the same bits.

const (
	minNormal32 = 0x1p-126 // smallest normal float32
)

// Round32 returns p + c rounded once to float32, round to nearest even,
// where p and c are float64 values whose exact sum is what is rounded
// (p is an exact product of two float32 values, or a float32 value; c a
// float32 value). With ftz, a result that is tiny after rounding (its
// magnitude, rounded to 24 bits with an unbounded exponent, is below
// 2^-126) becomes a zero with the sign of the exact sum: x86 flush-to-zero,
// which also AVX512_BF16 and AMX apply. Without ftz, IEEE gradual
// underflow.
//
// The float64 sum s = p + c is rounded once already; rounding it again to
// float32 is correct unless s lies exactly halfway between two float32
// values (a double rounding) or in float32's subnormal range, where
// the slow path rounds the exact sum to odd first (53 ≥ 24+2 bits make
// rounding to odd, then to nearest, exact).
func Round32(p, c float64, ftz bool) float32 {
	s := p + c
	b := math.Float64bits(s)
	if e := b >> 52 & 0x7ff; e > 1023-126 && b&(1<<29-1) != 1<<28 {
		return float32(s) // also ±Inf and NaN
	}
	if s-s != 0 { // NaN
		return float32(s)
	}
	// Exact error of the float64 sum (TwoSum): p + c = s + lo.
	z := s - p
	lo := (p - (s - z)) + (c - z)
	if lo != 0 && b&1 == 0 {
		// Round to odd: the neighbour of s toward p + c.
		if (lo > 0) == (s > 0) {
			b++
		} else {
			b--
		}
		s = math.Float64frombits(b)
	}
	if ftz && s != 0 && math.Abs(s) < minNormal32 {
		// Tiny after rounding? Scale into float32's normal range (exact)
		// and round to 24 bits there.
		if r := float32(s * 0x1p64); math.Abs(float64(r)) < 0x1p-62 {
			return float32(math.Copysign(0, s))
		}
		return float32(math.Copysign(minNormal32, s))
	}
	return float32(s)
}

// FMA32 returns a·b + c with one rounding: IEEE fusedMultiplyAdd in
// float32, round to nearest even, gradual underflow (what VFMADD*PS
// computes with the default MXCSR).
func FMA32(a, b, c float32) float32 {
	return Round32(float64(a)*float64(b), float64(c), false)
}

// Constants of Exp32; the generators of the assembly versions use the same
// Go constant expressions.
const (
	// Log2e32 is log2(e) rounded to float32.
	Log2e32 float32 = Log2e
	// Ln2Hi32 + Ln2Lo32 is ln 2 to about 2^-35: Ln2Hi32 has 9 significant
	// bits, so n·Ln2Hi32 is exact for |n| < 2^15 (Cody and Waite's split,
	// as in Cephes' expf).
	Ln2Hi32 float32 = 0.693359375
	Ln2Lo32 float32 = Ln2 - 0.693359375
)

// ExpTaylor32 are Exp32's polynomial coefficients 1/k!, k = 0…7, rounded
// to float32.
var ExpTaylor32 = [8]float32{1, 1, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040}

// Exp32 returns e^x in float32 for x in [−104, 89] (callers clamp first;
// NaN and values outside give undefined bits), computed as
//
//	n = RoundToEven(x·Log2e32)           (float32 product, rounded)
//	u = FMA32(n, −Ln2Hi32, x)            (exact)
//	u = FMA32(n, −Ln2Lo32, u)            (|u| ≤ 0.3467 + rounding)
//	q = Horner of Σ_{k≤7} u^k/k! by FMA32: q = FMA32(…FMA32(c7, u, c6)…, u, c0)
//	e = q · 2^n                          (one rounding: only where e is
//	                                      denormal or overflows)
//
// The truncation error of the polynomial is below 8e-9 relative
// (|u|^8/8! · e^|u|, about 0.06 ulp); with the roundings of the Horner
// steps the result is within about 1 ulp of e^x (TestExp32 measures it).
// The assembly versions are VMULPS, VRNDSCALEPS $0, VFMADD231PS (twice),
// VFMADD213PS and VSCALEFPS, in that order.
func Exp32(x float32) float32 {
	n := float32(math.RoundToEven(float64(x * Log2e32)))
	u := FMA32(n, -Ln2Hi32, x)
	u = FMA32(n, -Ln2Lo32, u)
	q := ExpTaylor32[7]
	for k := 6; k >= 0; k-- {
		q = FMA32(q, u, ExpTaylor32[k])
	}
	return float32(float64(q) * math.Float64frombits(uint64(int64(n)+1023)<<52))
}

// The clamps of Exp32Clamped.
const (
	Exp32Lo float32 = -104 // below: e^x < 2^−150, which rounds to 0 in float32
	Exp32Hi float32 = 89   // above: e^x > 2^128, which rounds to +Inf in float32
)

// Exp32Clamped returns e^x in float32 for every float32 x: NaN for NaN (x
// itself), otherwise Exp32(min(max(x, Exp32Lo), Exp32Hi)), which is 0
// below about −103.97 (gradual underflow before), +Inf above about 88.72,
// and 1 at ±0. It is the exponential every model computes (the softmaxes
// of attn and umT5, nn's GELU and SiLU). The assembly versions clamp with
// VMAXPS and VMINPS (a NaN argument stays NaN through the steps) and then
// compute Exp32's steps.
func Exp32Clamped(x float32) float32 {
	if x != x {
		return x
	}
	return Exp32(min(max(x, Exp32Lo), Exp32Hi))
}
