package wan

import "math"

// expGo is math.Exp's portable algorithm (FreeBSD e_exp.c, as in Go's
// math.exp), used instead of math.Exp in hot loops: on amd64 math.Exp's
// assembly mixes VEX and legacy SSE instructions, which costs ~300× in
// GOEXPERIMENT=simd binaries whose AVX upper state is dirty. Results agree
// with math.Exp to within 1 ulp.
func expGo(x float64) float64 {
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
	// Every product is rounded before it is added (explicit conversions:
	// no fused multiply-add at any GOAMD64 level).
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
