// exact64.glsl: float64 division and square root and the float32 ↔
// float64 conversions, each equal to Go's bit for bit (exact64ops.comp
// exposes them over arrays; exact64_test.go compares each with Go):
//
//	div64, sqrt64    float64 a/b and math.Sqrt, IEEE correctly rounded
//	                 (Vulkan's OpFDiv and Sqrt are not, at any width)
//	f32_to_f64       float64(float32) (exact; a denormal read as its value
//	                 on any device)
//	f64_to_f32       float32(float64): one rounding to nearest even,
//	                 gradual underflow, overflow to ±Inf
//
// Integer arithmetic on 64-bit integers (GL_ARB_gpu_shader_int64, the
// device's shaderInt64), on the bits: restoring long division and digit by
// digit square root with one rounding at the end and a sticky bit, as
// exact.glsl's div32 and sqrt32, denormal operands and results included.
// Float64 addition, subtraction and multiplication are correctly rounded
// in Vulkan and stay native (the generator marks them NoContraction).
// NaN results are x86's (Go's on amd64): a NaN operand quieted, a first,
// or the default NaN.
#ifndef EXACT64_GLSL
#define EXACT64_GLSL

#extension GL_ARB_gpu_shader_int64 : require

const uint64_t SIGN64 = 0x8000000000000000UL;
const uint64_t ABS64 = 0x7fffffffffffffffUL;
const uint64_t INF64 = 0x7ff0000000000000UL;
const uint64_t QUIET64 = 0x0008000000000000UL;
const uint64_t DEFAULT_NAN64 = 0xfff8000000000000UL;

// bits64 and from_bits64 reinterpret a float64.
uint64_t bits64(double x) { return doubleBitsToUint64(x); }
double from_bits64(uint64_t b) { return uint64BitsToDouble(b); }

// msb_u64 is the index of the highest set bit of x (−1 for 0).
int msb_u64(uint64_t x) {
	uint hi = uint(x >> 32);
	return hi != 0u ? 32 + findMSB(hi) : findMSB(uint(x));
}

// unpack64 splits a finite nonzero magnitude x (bits without the sign)
// into a 53-bit significand m (leading bit 52) and an exponent e with
// |x| = m·2^(e−1075): denormals are normalised.
void unpack64(uint64_t x, out uint64_t m, out int e) {
	int f = int(x >> 52);
	m = x & 0x000fffffffffffffUL;
	if (f == 0) {
		int sh = 52 - msb_u64(m);
		m <<= uint(sh);
		e = 1 - sh;
	} else {
		m |= 0x0010000000000000UL;
		e = f;
	}
}

// round_shift returns q >> s rounded to nearest even (sticky: nonzero bits
// below q), for 1 ≤ s; beyond 63 the value is far below half an ulp.
uint64_t round_shift(uint64_t q, int s, bool sticky) {
	if (s > 63) {
		return 0UL;
	}
	uint64_t m = q >> uint(s);
	uint64_t rest = q & ((1UL << uint(s)) - 1UL);
	uint64_t hf = 1UL << uint(s - 1);
	if (rest > hf || (rest == hf && (sticky || (m & 1UL) != 0UL))) {
		m += 1UL;
	}
	return m;
}

// pack_round64 returns the magnitude bits of q·2^(E−1−52−g) rounded once
// to nearest even (sticky: nonzero bits below q), where q has exactly
// 53+g significant bits (leading bit 52+g, 1 ≤ g ≤ 10) and E is the biased
// exponent the result has before rounding: ±Inf beyond the range,
// denormal or zero below it.
uint64_t pack_round64(uint64_t q, int g, int E, bool sticky) {
	if (E >= 2047) {
		return INF64;
	}
	int s = g;
	if (E < 1) {
		s = g + 1 - E;
	}
	uint64_t m = round_shift(q, s, sticky);
	if (E < 1) {
		return m; // denormal; m = 2^52 is the smallest normal
	}
	uint64_t b = (uint64_t(E - 1) << 52) + m; // a carry into 2^53 bumps the exponent
	return b < INF64 ? b : INF64;
}

// div64 is float64 a/b, correctly rounded (IEEE, nearest even, gradual
// underflow), by restoring division of the significands: 55 quotient bits
// (53, a guard bit and one more) and the remainder as sticky bit.
double div64(double a, double b) {
	uint64_t ab = bits64(a), bb = bits64(b);
	uint64_t sign = (ab ^ bb) & SIGN64;
	uint64_t ax = ab & ABS64, bx = bb & ABS64;
	if (ax > INF64) {
		return from_bits64(ab | QUIET64);
	}
	if (bx > INF64) {
		return from_bits64(bb | QUIET64);
	}
	if (ax == INF64) {
		return from_bits64(bx == INF64 ? DEFAULT_NAN64 : (sign | INF64));
	}
	if (bx == INF64) {
		return from_bits64(sign);
	}
	if (bx == 0UL) {
		return from_bits64(ax == 0UL ? DEFAULT_NAN64 : (sign | INF64));
	}
	if (ax == 0UL) {
		return from_bits64(sign);
	}
	uint64_t ma, mb;
	int ea, eb;
	unpack64(ax, ma, ea);
	unpack64(bx, mb, eb);
	int E = ea - eb + 1023; // biased exponent of the quotient when ma ≥ mb
	if (ma < mb) {
		ma <<= 1;
		E -= 1;
	}
	// ma/mb in [1, 2): q = floor(ma/mb · 2^54), 55 bits; r < 2·mb < 2^55.
	uint64_t r = ma;
	uint64_t q = 0UL;
	for (int i = 0; i < 55; i++) {
		q <<= 1;
		if (r >= mb) {
			r -= mb;
			q |= 1UL;
		}
		r <<= 1;
	}
	return from_bits64(sign | pack_round64(q, 2, E, r != 0UL));
}

// sqrt64 is math.Sqrt, the correctly rounded float64 square root, digit
// by digit: 55 root bits and the remainder as sticky bit. sqrt(−0) = −0;
// a NaN is quieted; a negative x gives the default NaN.
double sqrt64(double x) {
	uint64_t xb = bits64(x);
	uint64_t ax = xb & ABS64;
	if (ax > INF64) {
		return from_bits64(xb | QUIET64);
	}
	if (ax == 0UL) {
		return x;
	}
	if ((xb & SIGN64) != 0UL) {
		return from_bits64(DEFAULT_NAN64);
	}
	if (ax == INF64) {
		return x;
	}
	uint64_t m;
	int e;
	unpack64(ax, m, e);
	// x = m·2^k with m in [2^52, 2^53); make k even, m in [2^52, 2^54).
	int k = e - 1075;
	if ((k & 1) != 0) {
		m <<= 1;
		k -= 1;
	}
	// root = floor(sqrt(m·2^56)) in [2^54, 2^55): the radicand's 110 bits
	// are m's 54 (two per step, the first 27 steps) then 56 zeros.
	uint64_t rem = 0UL;
	uint64_t root = 0UL;
	for (int i = 0; i < 55; i++) {
		uint64_t two = i < 27 ? (m >> uint(52 - 2 * i)) & 3UL : 0UL;
		rem = (rem << 2) | two;
		uint64_t trial = (root << 2) | 1UL;
		if (rem >= trial) {
			rem -= trial;
			root = (root << 1) | 1UL;
		} else {
			root <<= 1;
		}
	}
	// sqrt(x) = root·2^(k/2 − 28) = (root·2^−54)·2^(k/2 + 26).
	int E = (k >> 1) + 26 + 1023;
	return from_bits64(pack_round64(root, 2, E, rem != 0UL));
}

// f32_to_f64 is float64 of the float32 bits b, exact (a NaN keeps its sign
// and payload, quieted, as x86's conversion).
double f32_to_f64(uint b) {
	uint64_t sign = uint64_t(b & 0x80000000u) << 32;
	uint a = b & 0x7fffffffu;
	if (a >= 0x7f800000u) { // Inf and NaN
		uint64_t nan = a > 0x7f800000u ? QUIET64 : 0UL;
		return from_bits64(sign | INF64 | nan | (uint64_t(a & 0x7fffffu) << 29));
	}
	if (a == 0u) {
		return from_bits64(sign);
	}
	int f = int(a >> 23);
	uint m = a & 0x7fffffu;
	if (f == 0) { // denormal: normalise
		int sh = 23 - findMSB(m);
		m = (m << uint(sh)) & 0x7fffffu;
		f = 1 - sh;
	}
	return from_bits64(sign | (uint64_t(f - 127 + 1023) << 52) | (uint64_t(m) << 29));
}

// f64_to_f32 is the float32 bits of float32(x): nearest even, gradual
// underflow, ±Inf beyond the largest float32 (a NaN keeps its sign and
// high payload, quieted, as x86's conversion).
uint f64_to_f32(double x) {
	uint64_t xb = bits64(x);
	uint sign = uint(xb >> 32) & 0x80000000u;
	uint64_t ax = xb & ABS64;
	if (ax > INF64) {
		return sign | 0x7fc00000u | (uint(ax >> 29) & 0x3fffffu);
	}
	if (ax == INF64) {
		return sign | 0x7f800000u;
	}
	if (ax == 0UL) {
		return sign;
	}
	uint64_t m;
	int e;
	unpack64(ax, m, e);
	// |x| = (m·2^−52)·2^(e−1023): the float32's biased exponent before
	// rounding is e − 1023 + 127; m has 53 bits = 24 + 29 guard bits.
	int E = e - 896;
	if (E >= 255) {
		return sign | 0x7f800000u;
	}
	int s = 29;
	if (E < 1) {
		s = 30 - E;
	}
	uint r = uint(round_shift(m, s, false));
	if (E < 1) {
		return sign | r; // denormal; 2^23 is the smallest normal
	}
	uint b = (uint(E - 1) << 23) + r;
	return sign | (b < 0x7f800000u ? b : 0x7f800000u);
}

#endif
