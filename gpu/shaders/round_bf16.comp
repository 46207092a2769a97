#version 450
// float32 → bfloat16 rounding of a matrix (gemm.RoundBF16; with operand
// set, gemm.BF16OperandBits: a denormal result flushed to the zero of its
// sign). Integer arithmetic only. One invocation per 32-bit word of the
// destination (two bfloat16 values, the lower half first), so that no two
// invocations write one word; halves outside the matrix keep their bits.

layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) readonly buffer Src { uint src[]; }; // float32 bits
layout(set = 0, binding = 1) buffer Dst { uint dst[]; };          // bfloat16 pairs

layout(push_constant) uniform Push {
	uint rows, cols;
	uint srcOff, srcLd; // in float32 elements
	uint dstOff, dstLd; // in bfloat16 elements
	uint operand;       // 1: flush denormal results
} p;

uint roundBF16(uint b) {
	if ((b & 0x7fffffffu) > 0x7f800000u) { // NaN: keep the sign, force quiet
		return (b >> 16) | 0x40u;
	}
	return (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
}

void main() {
	uint w = (p.dstOff >> 1) + gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
	uint end = p.dstOff + (p.rows - 1u) * p.dstLd + p.cols; // one past the last element
	if (p.rows == 0u || p.cols == 0u || 2u * w >= end) {
		return;
	}
	uint v = dst[w];
	for (uint h = 0u; h < 2u; h++) {
		uint e = 2u * w + h;
		if (e < p.dstOff || e >= end) {
			continue;
		}
		uint r = (e - p.dstOff) / p.dstLd, c = (e - p.dstOff) % p.dstLd;
		if (c >= p.cols) {
			continue;
		}
		uint b = roundBF16(src[p.srcOff + r * p.srcLd + c]);
		if (p.operand != 0u && (b & 0x7f80u) == 0u) {
			b &= 0x8000u;
		}
		v = (v & ~(0xffffu << (16u * h))) | (b << (16u * h));
	}
	dst[w] = v;
}
