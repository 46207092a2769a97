#version 450
// t5_mul: compute.Mul, umT5's gate product: x[xOff + i] *= y[yOff + i]
// for i < n, one invocation per element (a float32 product, rounded).
layout(local_size_x = 64) in;

layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Y { float y[]; };

layout(push_constant) uniform Push { uint n, xOff, yOff; } p;

void main() {
	uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
	if (i >= p.n) {
		return;
	}
	precise float r = x[p.xOff + i] * y[p.yOff + i];
	x[p.xOff + i] = r;
}
