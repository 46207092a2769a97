// gemm_exact.glsl: the scalar steps of gemm's bfloat16 product (gemm's
// define.go: bf16Operand, dazC, fmaBF16, addBF16), exact on any device
// whose float add and multiply round to nearest even: they use no fma and
// need no denormal support (a denormal never enters a float operation,
// and a tiny result is recognised from its bits or by comparison, so a
// driver that flushes denormals gives the same bits).
#ifndef GEMM_EXACT_GLSL
#define GEMM_EXACT_GLSL

const uint GEMM_SIGN = 0x80000000u;
const uint GEMM_ABS = 0x7fffffffu;
const uint GEMM_INF = 0x7f800000u;
const uint GEMM_MIN_NORMAL = 0x00800000u; // 2^-126

// Powers of two, as bits so that parsing rounds nothing.
#define GEMM_P64 uintBitsToFloat(0x5f800000u)  // 2^64
#define GEMM_M64 uintBitsToFloat(0x1f800000u)  // 2^-64

// gemm_bf16_operand is the value a bfloat16 operand h contributes: h
// widened to float32, a denormal read as the zero of its sign.
float gemm_bf16_operand(uint h) {
	if ((h & 0x7f80u) == 0u) {
		h &= 0x8000u;
	}
	return uintBitsToFloat(h << 16);
}

// gemm_daz is an accumulated C as a bfloat16 product reads it: a denormal
// as the zero of its sign.
float gemm_daz(uint c) {
	return uintBitsToFloat((c & GEMM_INF) == 0u ? c & GEMM_SIGN : c);
}

// gemm_tiny_sum is ftz(x + y) where r is x + y rounded and r is zero or
// denormal (or flushed by the device): x and y are zero or normal, so the
// exact sum is tiny and representable and flushes to the zero of its sign;
// an exact zero keeps the sign that IEEE addition gives it (r).
float gemm_tiny_sum(float x, float y, float r) {
	precise float ny = -y;
	if (x == ny) {
		return r;
	}
	return x > ny ? 0.0 : uintBitsToFloat(GEMM_SIGN);
}

// gemm_add_bf16 is gemm's addBF16: ftz(x + y), one rounding; x and y are
// zero or normal (chain values or a C read through gemm_daz) or Inf/NaN.
float gemm_add_bf16(float x, float y) {
	precise float r = x + y;
	if ((floatBitsToUint(r) & GEMM_ABS) < GEMM_MIN_NORMAL) {
		return gemm_tiny_sum(x, y, r);
	}
	return r;
}

// gemm_fma_bf16 is gemm's fmaBF16: ftz(a·b + x) with the exact product and
// one rounding; a and b are bfloat16 operand values (zero, normal, Inf,
// NaN), x is zero or normal (or Inf/NaN). a·b has at most 16 significant
// bits, so the float32 product is exact unless it underflows or
// overflows: then a scaled copy of the step is computed exactly.
float gemm_fma_bf16(float a, float b, float x) {
	precise float p = a * b;
	uint pb = floatBitsToUint(p) & GEMM_ABS;
	uint ab = floatBitsToUint(a) & GEMM_ABS, bb = floatBitsToUint(b) & GEMM_ABS;
	uint xb = floatBitsToUint(x) & GEMM_ABS;
	if (pb < GEMM_MIN_NORMAL && ab != 0u && bb != 0u) {
		// |a·b| < 2^-126, a and b normal: both below 1. Against
		// |x| ≥ 2^-100 it is below half an ulp of x (2^-124 or, at a
		// power of two, 2^-125): the sum rounds to x.
		if (xb >= 0x0d800000u) {
			return x;
		}
		// Scaled by 2^128: the product exact and normal, x·2^128 exact
		// (|x| < 2^-100), one rounding to 24 bits at an exponent where
		// nothing underflows; tiny unscaled iff below 4 scaled.
		precise float ps = (a * GEMM_P64) * (b * GEMM_P64);
		precise float xs = (x * GEMM_P64) * GEMM_P64;
		precise float rs = ps + xs;
		if ((floatBitsToUint(rs) & GEMM_ABS) < 0x40800000u) {
			return uintBitsToFloat(floatBitsToUint(rs) & GEMM_SIGN);
		}
		return (rs * GEMM_M64) * GEMM_M64;
	}
	if (pb == GEMM_INF && ab < GEMM_INF && bb < GEMM_INF) {
		// |a·b| ≥ 2^128 from finite a and b (both above 1/2): a·b is a
		// multiple of 2^112, so against |x| < 4 the sum overflows.
		if (xb < 0x40800000u) {
			return p;
		}
		// Scaled by 2^-128: both exact and normal, one rounding; the
		// scaling back overflows exactly when the rounded sum does.
		precise float ps = (a * GEMM_M64) * (b * GEMM_M64);
		precise float xs = (x * GEMM_M64) * GEMM_M64;
		precise float rs = ps + xs;
		return (rs * GEMM_P64) * GEMM_P64;
	}
	precise float r = p + x;
	if ((floatBitsToUint(r) & GEMM_ABS) < GEMM_MIN_NORMAL) {
		return gemm_tiny_sum(p, x, r);
	}
	return r;
}

#endif
