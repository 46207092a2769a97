#version 450
// Fast mode's operand preparation (gpu.PrepFast): each row of a float32
// matrix rounded to bfloat16 operands (gemm.BF16OperandBits: nearest even,
// NaN quiet, a denormal result flushed to the zero of its sign), then
// scaled by a power of two 2^s chosen per row so that its largest finite
// value lies in [2^14, 2^15), and written as float16 (gpu.FastOperand's
// layout; gemm_fast.glsl reads it). Integer arithmetic only, the same bits
// as the host's conversion of the weights (fastHalf, fastScale in
// fast.go) on every device: exact for every value within 2^-31 of its
// row's largest, rounded to nearest even below (float16's subnormals).
// One workgroup per row.

layout(local_size_x = 64) in;

layout(set = 0, binding = 0) readonly buffer X { uint x[]; };  // float32 bits
layout(set = 0, binding = 1) writeonly buffer O { uint o[]; }; // the FastOperand

layout(push_constant) uniform Push {
	uint rows, k, kv; // rows, depth, depth in uvec4 (kp = 8·kv ≥ k)
	uint offX, ldx;   // the source, in float32 elements
} p;

shared uint emax;
shared uint lmax[64];

// operandBF16 is gemm.BF16OperandBits of float32 bits v.
uint operandBF16(uint v) {
	uint h;
	if ((v & 0x7fffffffu) > 0x7f800000u) {
		h = (v >> 16) | 0x40u;
	} else {
		h = (v + 0x7fffu + ((v >> 16) & 1u)) >> 16;
	}
	if ((h & 0x7f80u) == 0u) {
		h &= 0x8000u;
	}
	return h;
}

// toHalf is the float16 of bfloat16 bits h times 2^s (fast.go's fastHalf).
uint toHalf(uint h, int s) {
	uint sign = (h & 0x8000u);
	uint e = (h >> 7) & 0xffu, m = h & 0x7fu;
	if (e == 0xffu) {
		return sign | (m != 0u ? 0x7e00u : 0x7c00u);
	}
	if (e == 0u) {
		return sign; // zero (denormals were flushed)
	}
	int x = int(e) - 127 + s; // the scaled value's exponent, at most 14
	if (x >= -14) {
		return sign | (uint(x + 15) << 10) | (m << 3);
	}
	// Subnormal float16: (0x80 | m) · 2^(x - 7) in units of 2^-24.
	uint sig = 0x80u | m;
	int sh = -(x + 17); // right shift of sig
	if (sh <= 0) {
		return sign | (sig << uint(-sh));
	}
	if (sh > 9) {
		return sign;
	}
	uint q = sig >> uint(sh), rem = sig & ((1u << uint(sh)) - 1u), half_ = 1u << uint(sh - 1);
	if (rem > half_ || (rem == half_ && (q & 1u) != 0u)) {
		q++;
	}
	return sign | q;
}

void main() {
	uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
	uint t = gl_LocalInvocationIndex;
	if (row >= p.rows) {
		return; // the whole workgroup
	}
	uint src = p.offX + row * p.ldx;
	uint m = 0u;
	for (uint q = t; q < p.k; q += 64u) {
		uint e = (operandBF16(x[src + q]) >> 7) & 0xffu;
		if (e != 0xffu && e > m) {
			m = e;
		}
	}
	lmax[t] = m;
	barrier();
	if (t == 0u) {
		uint r = 0u;
		for (uint i = 0u; i < 64u; i++) {
			r = max(r, lmax[i]);
		}
		emax = r;
	}
	barrier();
	int s = emax == 0u ? 0 : min(141 - int(emax), 126);
	uint words = 4u * p.kv;
	for (uint w = t; w < words; w += 64u) {
		uint q = 2u * w, lo = 0u, hi = 0u;
		if (q < p.k) {
			lo = toHalf(operandBF16(x[src + q]), s);
		}
		if (q + 1u < p.k) {
			hi = toHalf(operandBF16(x[src + q + 1u]), s);
		}
		o[row * words + w] = lo | (hi << 16);
	}
	if (t == 0u) {
		o[p.rows * words + row] = uint(s);
	}
}
