#version 450
// exactops: each function of exact.glsl (with the bfloat16 product's steps
// of gemm_exact.glsl, which it includes) over arrays, for the tests
// (exact_test.go compares every element with the Go definition).
//
//	out[i] = op(a[i], b[i], c[i])   (bits in, bits out), i < n
//
// op (push constant): see the opXxx constants in exact.go.
#extension GL_GOOGLE_include_directive : require
#include "exact.glsl"

layout(local_size_x = 64) in;
layout(std430, binding = 0) writeonly buffer Out { uint o[]; };
layout(std430, binding = 1) readonly buffer A { uint a[]; };
layout(std430, binding = 2) readonly buffer B { uint b[]; };
layout(std430, binding = 3) readonly buffer C { uint c[]; };
layout(push_constant) uniform Push { uint op; uint n; } pc;

void main() {
	uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
	if (i >= pc.n) {
		return;
	}
	float x = uintBitsToFloat(a[i]);
	float y = uintBitsToFloat(b[i]);
	float z = uintBitsToFloat(c[i]);
	uint r = 0u;
	switch (pc.op) {
	case 0u: r = floatBitsToUint(exp32(x)); break;
	case 1u: r = floatBitsToUint(exp_def(x)); break;
	case 2u: r = floatBitsToUint(div32(x, y)); break;
	case 3u: r = floatBitsToUint(sqrt32(x)); break;
	case 4u: r = round_bf16(x); break;
	case 5u: r = floatBitsToUint(bf16_to_f32(a[i])); break;
	case 6u: r = floatBitsToUint(gemm_bf16_operand(a[i] & 0xffffu)); break;
	case 7u: r = floatBitsToUint(gemm_daz(a[i])); break;
	case 8u: r = floatBitsToUint(gemm_fma_bf16(x, y, z)); break;
	case 9u: r = floatBitsToUint(gemm_add_bf16(x, y)); break;
	case 10u: r = floatBitsToUint(fma32(x, y, z)); break;
	}
	o[i] = r;
}
