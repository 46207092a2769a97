package t5

import "math"

// expf returns e^x in float32 to within 2 ulp for normal results (Cody–Waite
// reduction x = k·ln2 + r, |r| ≤ ln2/2, and Cephes' expf polynomial). Results
// below the smallest normal float32 (x < −87.33) are flushed to 0, which
// the softmax and the GELU never notice. It is pure Go, hence the same bits
// on every CPU, and avoids math.Exp, whose amd64 assembly is very slow in
// GOEXPERIMENT=simd binaries (VEX/SSE transitions).
func expf(x float32) float32 {
	const (
		log2e  = 1.44269504088896341
		ln2Hi  = 0.693359375
		ln2Lo  = -2.12194440e-4
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
	if t := float32(x * log2e); t < 0 {
		ki = int32(t - 0.5)
	} else {
		ki = int32(t + 0.5)
	}
	// Every product is rounded before it is added (explicit conversions:
	// no fused multiply-add at any GOAMD64 level, the same bits as the
	// plain float32 steps).
	k := float32(ki)
	r := x - float32(k*ln2Hi)
	r -= float32(k * ln2Lo)
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

// geluTanh is GELU with the tanh approximation (Wan's t5.GELU):
// 0.5·u·(1 + tanh(√(2/π)·(u + 0.044715·u³))), evaluated as
// u / (1 + e^(−2z)), which is the same function.
func geluTanh(u float32) float32 {
	const c = 0.7978845608028654 // √(2/π)
	z := c * (u + float32(0.044715*u*u*u))
	return u / (1 + expf(-2*z))
}
