// exact.glsl: the exact math library of every exact-mode kernel. Each
// function equals its Go definition bit for bit (exactops.comp exposes them
// over arrays; exact_test.go compares each with Go):
//
//	exp32, exp_def   vmath.Exp32 and attn's expDef (its NaN rule and clamps)
//	div32, sqrt32    float32 a/b and float32(math.Sqrt(float64(x))), IEEE
//	                 correctly rounded (Vulkan's OpFDiv and Sqrt are not)
//	round_bf16       gemm.RoundBF16; bf16_to_f32 gemm.BF16ToFloat32;
//	bf16_operand     what a bfloat16 product reads (a denormal as zero)
//	daz              gemm's dazC: a denormal accumulator read as zero
//	fma32            vmath.FMA32, IEEE fusedMultiplyAdd (through float64)
//	fma_ftz, add_ftz gemm's fmaBF16 and addBF16: ftz(a·b + c), ftz(x + y)
//
// Rules: every float operation is an IEEE binary32 operation rounded to
// nearest even with gradual underflow (the generator marks every add, sub
// and mul NoContraction and sets the float-controls execution modes; the
// variables here are `precise` as well); a fused multiply-add is fma32
// where the Go definition fuses and nowhere else (GLSL's fma() may be two
// roundings: see round32). NaN and infinity
// tests read the bits, so no compiler may fold them away. Division and
// square root are integer algorithms (restoring long division, digit by
// digit square root, one rounding at the end with a sticky bit), which
// are exact by construction, including denormal operands and results.
#ifndef EXACT_GLSL
#define EXACT_GLSL

const uint SIGN32 = 0x80000000u;
const uint ABS32 = 0x7fffffffu;
const uint INF32 = 0x7f800000u;
// The NaN x86 returns for an invalid operation (0/0, ∞/∞, sqrt(−1)): what
// Go's float32 division and math.Sqrt give on amd64.
const uint DEFAULT_NAN32 = 0xffc00000u;

bool is_nan(float x) { return (floatBitsToUint(x) & ABS32) > INF32; }

// ---- fused multiply-add ----
//
// GLSL's fma() is not a fused operation on every Vulkan device: SPIR-V
// lets a driver compute it as a product and a sum (lavapipe does), so
// exact code never calls it. round32 is vmath.Round32 in float64 (the
// device feature shaderFloat64): p + c rounded once to float32, p the
// exact float64 product of two float32 values (48 bits), c a float32. The
// float64 sum is one rounding already; where it could make a second
// rounding to float32 wrong (a float64 sum exactly halfway between two
// float32 values, or a float32 denormal), the exact error of the sum
// (TwoSum) turns it into the sum rounded to odd first, from which the
// rounding to float32 is exact. With ftz, a result tiny after rounding
// with an unbounded exponent becomes the zero of the exact sum's sign.

// pow2d returns 2^k as a double (−1022 ≤ k ≤ 1023).
double pow2d(int k) { return packDouble2x32(uvec2(0u, uint(k + 1023) << 20)); }

float round32(double p, double c, bool ftz) {
	precise double s = p + c;
	uvec2 w = unpackDouble2x32(s);
	uint e = (w.y >> 20) & 0x7ffu;
	if (e == 0x7ffu || (e > 1023u - 126u && (w.x & 0x1fffffffu) != 0x10000000u)) {
		return float(s); // also ±Inf and NaN
	}
	precise double z = s - p;
	precise double lo = (p - (s - z)) + (c - z);
	if (lo != 0.0LF && (w.x & 1u) == 0u) {
		// Round to odd: the neighbour of s toward p + c.
		if ((lo > 0.0LF) == (s > 0.0LF)) {
			w.x += 1u;
			if (w.x == 0u) {
				w.y += 1u;
			}
		} else {
			if (w.x == 0u) {
				w.y -= 1u;
			}
			w.x -= 1u;
		}
		s = packDouble2x32(w);
	}
	uint sign = w.y & SIGN32;
	if (ftz && s != 0.0LF && abs(s) < pow2d(-126)) {
		// Tiny after rounding? Scale into float32's normal range (exact)
		// and round to 24 bits there.
		precise float r = float(s * pow2d(64));
		if (abs(double(r)) < pow2d(-62)) {
			return uintBitsToFloat(sign);
		}
		return uintBitsToFloat(sign | 0x00800000u);
	}
	return float(s);
}

// fma32 is vmath.FMA32: a·b + c rounded once (IEEE fusedMultiplyAdd in
// binary32, nearest even, gradual underflow).
float fma32(float a, float b, float c) {
	precise double p = double(a) * double(b);
	return round32(p, double(c), false);
}

// ---- exponential (internal/vmath/float32.go) ----

// vmath's constants: each literal is the exact decimal value of the float32
// (its bits in the comment), so parsing it rounds nothing.
const float LOG2E32 = 1.4426950216293335;
const float LN2HI32 = 0.693359375;
const float LN2LO32 = -0.00021219444170128554;
const float EXPC0 = 1.0;
const float EXPC1 = 1.0;
const float EXPC2 = 0.5;
const float EXPC3 = 0.1666666716337204;
const float EXPC4 = 0.0416666679084301;
const float EXPC5 = 0.008333333767950535;
const float EXPC6 = 0.0013888889225199819;
const float EXPC7 = 0.00019841270113829523;

// pow2 returns 2^k for −126 ≤ k ≤ 127 (exact).
float pow2(int k) { return uintBitsToFloat(uint(k + 127) << 23); }

// exp32 is vmath.Exp32 for x in [−104, 89]:
//
//	n = RoundToEven(x·Log2e32); u = fma32(n, −Ln2Hi32, x); u = fma32(n, −Ln2Lo32, u)
//	q = Horner of Σ u^k/k! by fma32; e = q·2^n with one rounding
//
// n lies in [−150, 128]; q·2^n is one rounding of the exact product: q·2^n
// directly where 2^n is a float32, (2q)·2^127 for n = 128, and
// (q·2^(n+64))·2^−64 (the first product exact) for a denormal result.
float exp32(float x) {
	precise float n = roundEven(x * LOG2E32);
	precise float u = fma32(n, -LN2HI32, x);
	u = fma32(n, -LN2LO32, u);
	precise float q = EXPC7;
	q = fma32(q, u, EXPC6);
	q = fma32(q, u, EXPC5);
	q = fma32(q, u, EXPC4);
	q = fma32(q, u, EXPC3);
	q = fma32(q, u, EXPC2);
	q = fma32(q, u, EXPC1);
	q = fma32(q, u, EXPC0);
	int k = int(n);
	precise float e;
	if (k > 127) {
		e = (q * 2.0) * pow2(127);
	} else if (k >= -126) {
		e = q * pow2(k);
	} else {
		e = (q * pow2(k + 64)) * pow2(-64);
	}
	return e;
}

// exp_def is attn's expDef: NaN stays (the same bits), otherwise exp32 of
// y clamped to [−104, 89].
float exp_def(float y) {
	if (is_nan(y)) {
		return y;
	}
	return exp32(min(max(y, -104.0), 89.0));
}

// ---- bfloat16 (gemm/define.go) ----

// round_bf16 is gemm.RoundBF16: nearest even, NaN kept (quiet, its sign
// and high payload), beyond the largest bfloat16 ±Inf. Bits in the low 16.
uint round_bf16(float v) {
	uint b = floatBitsToUint(v);
	if ((b & ABS32) > INF32) {
		return (b >> 16) | 0x40u;
	}
	return (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
}

// bf16_to_f32 is gemm.BF16ToFloat32 (exact).
float bf16_to_f32(uint h) { return uintBitsToFloat((h & 0xffffu) << 16); }

// bf16_operand is the value a bfloat16 product reads for bits h: a
// denormal reads as the zero of its sign.
float bf16_operand(uint h) {
	h &= 0xffffu;
	if ((h & 0x7f80u) == 0u) {
		h &= 0x8000u;
	}
	return uintBitsToFloat(h << 16);
}

// to_bf16_operand is roundOperand(BF16, v): v rounded to bfloat16 and read
// as a product operand.
float to_bf16_operand(float v) { return bf16_operand(round_bf16(v)); }

// daz is gemm's dazC: a denormal accumulator reads as the zero of its sign.
float daz(float c) {
	uint b = floatBitsToUint(c);
	if ((b & INF32) == 0u) {
		return uintBitsToFloat(b & SIGN32);
	}
	return c;
}

// flush_tiny returns r, or the zero of r's sign when r is denormal (or
// zero): the flush of a result whose rounding with an unbounded exponent
// is below 2^−126, for results that are multiples of 2^−149 (sums of
// values that are not denormal): for those, tiny after rounding means a
// gradually underflowed result below 2^−126.
float flush_tiny(float r) {
	uint b = floatBitsToUint(r);
	if ((b & INF32) == 0u) {
		return uintBitsToFloat(b & SIGN32);
	}
	return r;
}

// add_ftz is gemm's addBF16, ftz(x + y) rounded once, for x and y not
// denormal: their exact sum is a multiple of 2^−149, so it is tiny after
// rounding exactly when the gradually underflowed sum is below 2^−126.
float add_ftz(float x, float y) {
	precise float r = x + y;
	return flush_tiny(r);
}

// fma_ftz is gemm's fmaBF16, ftz(a·b + c) with one rounding (Round32 with ftz:
// a result tiny after rounding with an unbounded exponent, below 2^−126,
// becomes the zero of its sign).
float fma_ftz(float a, float b, float c) {
	precise double p = double(a) * double(b);
	return round32(p, double(c), true);
}

// ---- correctly rounded division and square root ----

// unpack32 splits a finite nonzero magnitude x (bits without the sign)
// into a 24-bit significand m (leading bit 23) and an exponent e with
// |x| = m·2^(e−150): denormals are normalised.
void unpack32(uint x, out uint m, out int e) {
	uint f = x >> 23;
	m = x & 0x7fffffu;
	if (f == 0u) {
		int sh = 23 - findMSB(m);
		m <<= uint(sh);
		e = 1 - sh;
	} else {
		m |= 0x800000u;
		e = int(f);
	}
}

// pack_round32 returns the magnitude bits of q·2^(E−1−23−g) rounded once
// to nearest even (sticky: nonzero bits below q), where q has exactly
// 24+g significant bits (leading bit 23+g) and E is the biased exponent
// the result has before rounding: ±Inf beyond the range, denormal or zero
// below it.
uint pack_round32(uint q, int g, int E, bool sticky) {
	if (E >= 255) {
		return INF32;
	}
	int s = g;
	if (E < 1) {
		s = g + 1 - E;
	}
	uint m;
	uint rest;
	uint hf;
	if (s > 31) {
		m = 0u;
		rest = 1u; // nonzero, below hf (q < 2^(24+g) ≤ 2^(s−1)... the value is far below hf)
		hf = 2u;
	} else {
		m = q >> uint(s);
		rest = q & ((1u << uint(s)) - 1u);
		hf = 1u << uint(s - 1);
	}
	if (rest > hf || (rest == hf && (sticky || (m & 1u) != 0u))) {
		m += 1u;
	}
	if (E < 1) {
		return m; // denormal; m = 2^23 is the smallest normal
	}
	uint bits = (uint(E - 1) << 23) + m; // a carry into 2^24 bumps the exponent
	return min(bits, INF32);
}

// div32 is float32 a/b, correctly rounded (IEEE, nearest even, gradual
// underflow), by restoring division of the significands: 26 quotient bits
// (24, a guard bit and one more) and the remainder as sticky bit. NaN
// results are x86's (Go's on amd64): a NaN operand quieted, a first, or
// the default NaN.
float div32(float a, float b) {
	uint ab = floatBitsToUint(a);
	uint bb = floatBitsToUint(b);
	uint sign = (ab ^ bb) & SIGN32;
	uint ax = ab & ABS32;
	uint bx = bb & ABS32;
	if (ax > INF32) {
		return uintBitsToFloat(ab | 0x400000u);
	}
	if (bx > INF32) {
		return uintBitsToFloat(bb | 0x400000u);
	}
	if (ax == INF32) {
		return uintBitsToFloat(bx == INF32 ? DEFAULT_NAN32 : (sign | INF32));
	}
	if (bx == INF32) {
		return uintBitsToFloat(sign);
	}
	if (bx == 0u) {
		return uintBitsToFloat(ax == 0u ? DEFAULT_NAN32 : (sign | INF32));
	}
	if (ax == 0u) {
		return uintBitsToFloat(sign);
	}
	uint ma, mb;
	int ea, eb;
	unpack32(ax, ma, ea);
	unpack32(bx, mb, eb);
	int E = ea - eb + 127; // biased exponent of the quotient when ma ≥ mb
	if (ma < mb) {
		ma <<= 1;
		E -= 1;
	}
	// ma/mb in [1, 2): q = floor(ma/mb · 2^25), 26 bits.
	uint r = ma;
	uint q = 0u;
	for (int i = 0; i < 26; i++) {
		q <<= 1;
		if (r >= mb) {
			r -= mb;
			q |= 1u;
		}
		r <<= 1;
	}
	return uintBitsToFloat(sign | pack_round32(q, 2, E, r != 0u));
}

// sqrt32 is float32(math.Sqrt(float64(x))), the correctly rounded float32
// square root (a double rounding through float64 is exact for square
// roots), digit by digit: 26 root bits and the remainder as sticky bit.
// sqrt(−0) = −0; a NaN is quieted; a negative x gives the default NaN.
float sqrt32(float x) {
	uint xb = floatBitsToUint(x);
	uint ax = xb & ABS32;
	if (ax > INF32) {
		return uintBitsToFloat(xb | 0x400000u);
	}
	if (ax == 0u) {
		return x;
	}
	if ((xb & SIGN32) != 0u) {
		return uintBitsToFloat(DEFAULT_NAN32);
	}
	if (ax == INF32) {
		return x;
	}
	uint m;
	int e;
	unpack32(ax, m, e);
	// x = m·2^k with m in [2^23, 2^24); make k even and m in [2^24, 2^26).
	int k = e - 150;
	if ((k & 1) != 0) {
		m <<= 1;
		k -= 1;
	} else {
		m <<= 2;
		k -= 2;
	}
	// root = floor(sqrt(m·2^26)) in [2^25, 2^26): the radicand's 52 bits
	// are m's 26 then 26 zeros, two per step.
	uint rem = 0u;
	uint root = 0u;
	for (int i = 0; i < 26; i++) {
		uint two = i < 13 ? (m >> uint(24 - 2 * i)) & 3u : 0u;
		rem = (rem << 2) | two;
		uint trial = (root << 2) | 1u;
		if (rem >= trial) {
			rem -= trial;
			root = (root << 1) | 1u;
		} else {
			root <<= 1;
		}
	}
	// sqrt(x) = root·2^(k/2 − 13) = (root·2^−25)·2^(k/2 + 12).
	int E = (k >> 1) + 12 + 127;
	return uintBitsToFloat(pack_round32(root, 2, E, rem != 0u));
}

#endif
