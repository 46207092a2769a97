#version 450
// The exactness probe (CheckExact): for each case (a, b, c) as float32
// bits, the results of fma(a, b, c), a·b, a + b and a·b + c (a separate
// multiply and add: NoContraction forbids fusing them), as float32 bits.
// The inputs come from a buffer, so the driver cannot fold them.

layout(local_size_x = 64) in;

layout(set = 0, binding = 0) readonly buffer In { uint abc[]; };  // 3 per case
layout(set = 0, binding = 1) writeonly buffer Out { uint res[]; }; // 4 per case

layout(push_constant) uniform Push { uint n; } p;

void main() {
	uint i = gl_GlobalInvocationID.x;
	if (i >= p.n) {
		return;
	}
	float a = uintBitsToFloat(abc[3u * i]);
	float b = uintBitsToFloat(abc[3u * i + 1u]);
	float c = uintBitsToFloat(abc[3u * i + 2u]);
	float m = a * b;
	res[4u * i] = floatBitsToUint(fma(a, b, c));
	res[4u * i + 1u] = floatBitsToUint(m);
	res[4u * i + 2u] = floatBitsToUint(a + b);
	res[4u * i + 3u] = floatBitsToUint(m + c);
}
