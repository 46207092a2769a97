package vmath

import "math"

// The three exponentials below are the ones the models' pinned bits were
// made with. Each is a different numerical definition from Exp and Exp32
// (another algorithm, or the same one without fused steps), so replacing
// one by Exp or Exp32 changes the outputs that use it in their last bits.
// All three are pure Go with every product rounded before it is added
// (explicit conversions: no fused multiply-add at any GOAMD64 level), so
// they give the same bits on every CPU; none calls math.Exp, whose amd64
// assembly mixes VEX and legacy SSE instructions (about 300× slower in
// binaries whose AVX upper state is dirty).

// ExpFdlibm returns e^x in float64 by math.Exp's portable algorithm
// (FreeBSD's e_exp.c, as Go's math.exp writes it): within 1 ulp of
// math.Exp, NaN kept, +Inf above 709.78, 0 below −745.13. It is the
// exponential of nn.SiLU (wan's time embedding).
func ExpFdlibm(x float64) float64 {
	const (
		ln2Hi     = 6.93147180369123816490e-01
		ln2Lo     = 1.90821492927058770002e-10
		log2e     = 1.44269504088896338700e+00
		overflow  = 7.09782712893383973096e+02
		underflow = -7.45133219101941108420e+02
		nearZero  = 1.0 / (1 << 28)
		p1        = 1.66666666666666657415e-01
		p2        = -2.77777777770155933842e-03
		p3        = 6.61375632143793436117e-05
		p4        = -1.65339022054652515390e-06
		p5        = 4.13813679705723846039e-08
	)
	switch {
	case x != x || x > overflow:
		if x != x {
			return x
		}
		return math.Inf(1)
	case x < underflow:
		return 0
	case -nearZero < x && x < nearZero:
		return 1 + x
	}
	var k int
	if x < 0 {
		k = int(float64(log2e*x) - 0.5)
	} else {
		k = int(float64(log2e*x) + 0.5)
	}
	hi := x - float64(float64(k)*ln2Hi)
	lo := float64(k) * ln2Lo
	r := hi - lo
	t := r * r
	c := r - float64(t*(p1+float64(t*(p2+float64(t*(p3+float64(t*(p4+float64(t*p5)))))))))
	y := 1 - ((lo - (r*c)/(2-c)) - hi)
	if k >= -1021 && k <= 1023 {
		// y·2^k is a normal number: scaling by the power of two is exact,
		// the same value as math.Ldexp's, without its call.
		return y * math.Float64frombits(uint64(k+1023)<<52)
	}
	return math.Ldexp(y, k)
}

// Exp32Cephes returns e^x in float32 by Cephes' expf: the reduction x =
// k·ln2 + r (k = x·Log2e32 rounded half away from zero, Ln2Hi32 and
// Ln2Lo32 as in Exp32), r² and Cephes' degree-5 polynomial p(r), then
// (p·r² + r + 1)·2^k in two exact scalings. Within 2 ulp for normal
// results; +Inf above 88.7228, 0 below −87.3365 (no denormal results),
// NaN kept. It is the exponential of umT5 (package t5's softmax and
// nn.GELUTanh32).
func Exp32Cephes(x float32) float32 {
	const (
		maxArg = 88.72283935546875 // largest x with e^x finite in float32
		minArg = -87.33654475      // e^x below the smallest normal
	)
	switch {
	case x != x:
		return x
	case x > maxArg:
		return float32(math.Inf(1))
	case x < minArg:
		return 0
	}
	var ki int32 // x·log2(e) rounded half away from zero
	if t := float32(x * Log2e32); t < 0 {
		ki = int32(t - 0.5)
	} else {
		ki = int32(t + 0.5)
	}
	k := float32(ki)
	r := x - float32(k*Ln2Hi32)
	r -= float32(k * Ln2Lo32)
	r2 := r * r
	p := float32(1.9875691500e-4)
	p = float32(p*r) + 1.3981999507e-3
	p = float32(p*r) + 8.3334519073e-3
	p = float32(p*r) + 4.1665795894e-2
	p = float32(p*r) + 1.6666665459e-1
	p = float32(p*r) + 5.0000001201e-1
	y := float32(p*r2) + r + 1
	// Scale by 2^k in two steps so that k = 128 (x just below maxArg) and
	// k = −126 stay representable.
	h := ki / 2
	return y * math.Float32frombits(uint32(h+127)<<23) * math.Float32frombits(uint32(ki-h+127)<<23)
}

// Exp32NoFMA returns e^x in float32 by Exp32's reduction and polynomial
// (Log2e32, Ln2Hi32, Ln2Lo32, the degree-7 Taylor coefficients
// ExpTaylor32) with every multiplication and addition rounded on its own
// instead of fused, and n = x·Log2e32 rounded half away from zero (t + 0.5
// truncated, or t − 0.5 below −0.5):
//
//	u = (x − n·Ln2Hi32) − n·Ln2Lo32
//	q = (…((c7·u + c6)·u + c5)…)·u + c0
//	e = q·2^n (for n = 128 as q·2^127·2)
//
// Within 2 ulp (relative error below 2.5e-7) for |x| ≤ 87; +Inf above
// 88.7, 0 below −87.3, NaN kept. It is the exponential of nn.SiLU32 (the
// VAE's), which package nn's assembly norm kernel computes with the same
// float32 steps (VSCALEFPS for the scaling by 2^n).
func Exp32NoFMA(x float32) float32 {
	switch {
	case x > 88.7:
		return float32(math.Inf(1))
	case x < -87.3:
		return 0
	case x != x:
		return x
	}
	t := x * Log2e32
	n := int32(t + 0.5)
	if t < -0.5 {
		n = int32(t - 0.5)
	}
	fn := float32(n)
	u := float32(x-float32(fn*Ln2Hi32)) - float32(fn*Ln2Lo32)
	q := ExpTaylor32[7]
	for k := 6; k >= 0; k-- {
		q = float32(q*u) + ExpTaylor32[k]
	}
	if n > 127 { // 2^128 is no float32: scale in two steps
		return q * math.Float32frombits(uint32(n+126)<<23) * 2
	}
	return q * math.Float32frombits(uint32(n+127)<<23)
}
