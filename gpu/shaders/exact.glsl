// exact.glsl: the exact math library of every exact-mode kernel. Each
// function equals its Go definition bit for bit (exactops.comp exposes them
// over arrays; exact_test.go compares each with Go):
//
//	exp32, exp_def   vmath.Exp32 and attn's expDef (its NaN rule and clamps)
//	div32, sqrt32    float32 a/b and float32(math.Sqrt(float64(x))), IEEE
//	                 correctly rounded (Vulkan's OpFDiv and Sqrt are not)
//	round_bf16       gemm.RoundBF16; bf16_to_f32 gemm.BF16ToFloat32;
//	to_bf16_operand  a float32 rounded to a bfloat16 product's operand
//	fma32            vmath.FMA32, IEEE fusedMultiplyAdd (integer arithmetic)
//
// The bfloat16 product's steps (gemm's bf16Operand, dazC, fmaBF16 and
// addBF16, with its flush of tiny results) are gemm_exact.glsl's
// gemm_bf16_operand, gemm_daz, gemm_fma_bf16 and gemm_add_bf16, included
// here: one definition for every kernel.
//
// Rules: every float operation is an IEEE binary32 operation rounded to
// nearest even with gradual underflow (the generator marks every add, sub
// and mul NoContraction and sets the float-controls execution modes; the
// variables here are `precise` as well); a fused multiply-add is
// EXACT_FMA32 (fma32, or fma() in a module for a device whose fma() the
// probe found exact) where the Go definition fuses and nowhere else. NaN
// and infinity tests read the bits, so no compiler may fold them away.
// Division and square root are integer algorithms (restoring long
// division, digit by digit square root, one rounding at the end with a
// sticky bit), exact by construction, denormal operands and results
// included.
#ifndef EXACT_GLSL
#define EXACT_GLSL

#include "gemm_exact.glsl"

const uint SIGN32 = 0x80000000u;
const uint ABS32 = 0x7fffffffu;
const uint INF32 = 0x7f800000u;
// The NaN x86 returns for an invalid operation (0/0, ∞/∞, sqrt(−1)): what
// Go's float32 division and math.Sqrt give on amd64.
const uint DEFAULT_NAN32 = 0xffc00000u;

bool is_nan(float x) { return (floatBitsToUint(x) & ABS32) > INF32; }

// ---- exponential (internal/vmath/float32.go) ----

// vmath's constants (Log2e32, Ln2Hi32, Ln2Lo32, ExpTaylor32): each literal
// is the exact decimal value of the float32 (its bits in the comment), so
// parsing it rounds nothing; TestExactExp checks the results.
const float LOG2E32 = 1.4426950216293335; // 0x3fb8aa3b
const float LN2HI32 = 0.693359375; // 0x3f318000
const float LN2LO32 = -0.00021219444170128554; // 0xb95e8083
const float EXPC0 = 1.0; // 0x3f800000
const float EXPC1 = 1.0; // 0x3f800000
const float EXPC2 = 0.5; // 0x3f000000
const float EXPC3 = 0.1666666716337204; // 0x3e2aaaab
const float EXPC4 = 0.0416666679084301; // 0x3d2aaaab
const float EXPC5 = 0.008333333767950535; // 0x3c088889
const float EXPC6 = 0.0013888889225199819; // 0x3ab60b61
const float EXPC7 = 0.00019841270113829523; // 0x39500d01

// fma32 (below) is vmath.FMA32, the fused multiply-add.
float fma32(float a, float b, float c);

// EXACT_FMA32 is the fused multiply-add of the float32 chains (exp32, the
// float32 product): by default fma32; a module for a device whose fma()
// the exactness probe found one rounding defines it as fma() before
// including this file.
#ifndef EXACT_FMA32
#define EXACT_FMA32(a, b, c) fma32(a, b, c)
#endif

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
	precise float u = EXACT_FMA32(n, -LN2HI32, x);
	u = EXACT_FMA32(n, -LN2LO32, u);
	precise float q = EXPC7;
	q = EXACT_FMA32(q, u, EXPC6);
	q = EXACT_FMA32(q, u, EXPC5);
	q = EXACT_FMA32(q, u, EXPC4);
	q = EXACT_FMA32(q, u, EXPC3);
	q = EXACT_FMA32(q, u, EXPC2);
	q = EXACT_FMA32(q, u, EXPC1);
	q = EXACT_FMA32(q, u, EXPC0);
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
	// Comparisons, not min and max (whose signed zeros Vulkan leaves open).
	float x = y < -104.0 ? -104.0 : y;
	return exp32(x > 89.0 ? 89.0 : x);
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

// to_bf16_operand is roundOperand(BF16, v): v rounded to bfloat16 and read
// as a product operand.
float to_bf16_operand(float v) { return gemm_bf16_operand(round_bf16(v)); }

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

// pack_round32 returns the magnitude bits of the float32 nearest (ties to
// even) to the exact value q·2^(E−127−23−g) + (sticky: something below q's
// last bit), where q has its leading bit at 23+g (g ≥ 2 guard bits) and E
// is the biased exponent of the exact value: E ≥ 255 gives +Inf, E < 1 a
// denormal (gradual underflow) or zero.
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
		rest = 1u; // below half the smallest denormal: rounds to 0
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

// ---- fused multiply-add ----
//
// GLSL's fma() is not one rounding on every Vulkan device (SPIR-V lets a
// driver compute it as a multiply and an add, and lavapipe does), and
// exact mode has no float64, so the fused multiply-add is integer
// arithmetic: the 48-bit product of the significands (umulExtended), the
// addend aligned to it in 64 bits with the bits shifted out kept as a
// sticky bit, one rounding at the end. Exact for every input, denormals
// included, whether or not the device flushes them.

// 64-bit helpers on uvec2(low word, high word).
uvec2 add64(uvec2 a, uvec2 b) {
	uint c;
	uint lo = uaddCarry(a.x, b.x, c);
	return uvec2(lo, a.y + b.y + c);
}

uvec2 sub64(uvec2 a, uvec2 b) {
	uint br;
	uint lo = usubBorrow(a.x, b.x, br);
	return uvec2(lo, a.y - b.y - br);
}

bool less64(uvec2 a, uvec2 b) { return a.y < b.y || (a.y == b.y && a.x < b.x); }

// msb64 is the index of the highest set bit (−1 for 0).
int msb64(uvec2 x) { return x.y != 0u ? 32 + findMSB(x.y) : findMSB(x.x); }

uvec2 shl64(uvec2 x, uint s) {
	if (s == 0u) {
		return x;
	}
	if (s >= 32u) {
		return uvec2(0u, x.x << (s - 32u));
	}
	return uvec2(x.x << s, (x.y << s) | (x.x >> (32u - s)));
}

uvec2 shr64(uvec2 x, uint s) {
	if (s == 0u) {
		return x;
	}
	if (s >= 64u) {
		return uvec2(0u);
	}
	if (s >= 32u) {
		return uvec2(x.y >> (s - 32u), 0u);
	}
	return uvec2((x.x >> s) | (x.y << (32u - s)), x.y >> s);
}

// lost64 reports whether x has a set bit below bit s.
bool lost64(uvec2 x, uint s) { return less64(shl64(shr64(x, s), s), x); }

// shr64_jam shifts right and ORs the bits shifted out into bit 0.
uvec2 shr64_jam(uvec2 x, uint s) {
	uvec2 r = shr64(x, s);
	if (lost64(x, s)) {
		r.x |= 1u;
	}
	return r;
}

// fma_parts computes a·b + c once. A special result (NaN, ±Inf, a zero, c
// itself) is returned in bits with true; otherwise the exact result is
// sign · q·2^(E−127−25) (q has 26 bits, leading bit 25; sticky: nonzero
// bits below q), E its biased exponent before rounding (unbounded).
bool fma_parts(float a, float b, float c, out uint bits, out uint sign, out uint q, out int E, out bool sticky) {
	uint ab = floatBitsToUint(a), bb = floatBitsToUint(b), cb = floatBitsToUint(c);
	uint ax = ab & ABS32, bx = bb & ABS32, cx = cb & ABS32;
	bits = 0u; sign = 0u; q = 0u; E = 0; sticky = false;
	if (ax > INF32 || bx > INF32 || cx > INF32) {
		bits = (ax > INF32 ? ab : bx > INF32 ? bb : cb) | 0x400000u;
		return true;
	}
	uint psign = (ab ^ bb) & SIGN32;
	if (ax == INF32 || bx == INF32) {
		if (ax == 0u || bx == 0u || (cx == INF32 && (cb & SIGN32) != psign)) {
			bits = DEFAULT_NAN32;
		} else {
			bits = psign | INF32;
		}
		return true;
	}
	if (cx == INF32) {
		bits = cb;
		return true;
	}
	if (ax == 0u || bx == 0u) {
		bits = cx == 0u ? (psign & cb) : cb; // ±0 + c; −0 only from −0 + −0
		return true;
	}
	uint ma, mb;
	int ea, eb;
	unpack32(ax, ma, ea);
	unpack32(bx, mb, eb);
	uvec2 X;
	umulExtended(ma, mb, X.y, X.x);
	// |a·b| = X·2^ex with X in [2^60, 2^62).
	X = shl64(X, 14u);
	int e = ea + eb - 300 - 14;
	sign = psign;
	if (cx != 0u) {
		uint mc;
		int ec;
		unpack32(cx, mc, ec);
		uvec2 Y = uvec2(0u, mc << 6); // mc·2^38 in [2^61, 2^62)
		int ey = ec - 150 - 38;
		uint csign = cb & SIGN32;
		// Align to the larger exponent; bits are lost only for shifts
		// above 14, where the result keeps its leading bit above 58 and
		// the jammed sticky bit lies far below the rounding position.
		if (e >= ey) {
			Y = shr64_jam(Y, uint(min(e - ey, 64)));
		} else {
			X = shr64_jam(X, uint(min(ey - e, 64)));
			e = ey;
		}
		if (csign == psign) {
			X = add64(X, Y);
		} else if (less64(X, Y)) {
			X = sub64(Y, X);
			sign = csign;
		} else {
			X = sub64(X, Y);
		}
		if (X.x == 0u && X.y == 0u) {
			bits = 0u; // an exact zero: +0 when rounding to nearest
			return true;
		}
	}
	int L = msb64(X);
	if (L >= 25) {
		q = shr64(X, uint(L - 25)).x;
		sticky = lost64(X, uint(L - 25));
	} else {
		q = X.x << uint(25 - L);
	}
	E = L + e + 127; // |a·b + c| ≈ (q·2^−25)·2^(L+e)
	return false;
}

// fma32 is vmath.FMA32: a·b + c rounded once (IEEE fusedMultiplyAdd in
// binary32, nearest even, gradual underflow).
float fma32(float a, float b, float c) {
	uint bits, sign, q;
	int E;
	bool sticky;
	if (fma_parts(a, b, c, bits, sign, q, E, sticky)) {
		return uintBitsToFloat(bits);
	}
	return uintBitsToFloat(sign | pack_round32(q, 2, E, sticky));
}

#endif
