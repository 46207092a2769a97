#version 450
// exact64ops: each function of exact64.glsl over arrays, for the tests
// (exact64_test.go compares every element with Go):
//
//	out[i] = op(a[i], b[i], c[i])   (float64 bits in, bits out), i < n
//
// op (push constant): 0 div64(a, b), 1 sqrt64(a), 2 f64_to_f32(a) (in the
// low word), 3 f32_to_f64(low word of a), 4 a·b + c (the native float64
// multiply and add, unfused), 5 a − b (native).
#extension GL_GOOGLE_include_directive : require
#extension GL_ARB_gpu_shader_int64 : require
#include "exact64.glsl"

layout(local_size_x = 64) in;
layout(std430, binding = 0) writeonly buffer Out { uint64_t o[]; };
layout(std430, binding = 1) readonly buffer A { uint64_t a[]; };
layout(std430, binding = 2) readonly buffer B { uint64_t b[]; };
layout(std430, binding = 3) readonly buffer C { uint64_t c[]; };
layout(push_constant) uniform Push { uint op; uint n; } pc;

void main() {
	uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
	if (i >= pc.n) {
		return;
	}
	precise double x = from_bits64(a[i]);
	precise double y = from_bits64(b[i]);
	precise double z = from_bits64(c[i]);
	uint64_t r = 0UL;
	switch (pc.op) {
	case 0u: r = bits64(div64(x, y)); break;
	case 1u: r = bits64(sqrt64(x)); break;
	case 2u: r = uint64_t(f64_to_f32(x)); break;
	case 3u: r = bits64(f32_to_f64(uint(a[i]))); break;
	case 4u: {
		precise double p = x * y;
		precise double s = p + z;
		r = bits64(s);
		break;
	}
	case 5u: {
		precise double d = x - y;
		r = bits64(d);
		break;
	}
	}
	o[i] = r;
}
