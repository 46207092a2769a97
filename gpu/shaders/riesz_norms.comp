#version 450
// riesz_norms: riesz.Norms bit for bit: dst[i] = |x_i|² for the n rows of
// x ([n][D], row-major float32), each the float32 sum in order of d of the
// products x[i][d]·x[i][d] rounded to float32 (never fused), from +0. One
// invocation per row.

layout(local_size_x = 64) in;

layout(set = 0, binding = 0) writeonly buffer Dst { float dst[]; };
layout(set = 0, binding = 1) readonly buffer X { float x[]; };

layout(push_constant) uniform Push { uint n, d; } p;

void main() {
	uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
	if (i >= p.n) {
		return;
	}
	precise float s = 0.0;
	for (uint k = 0u; k < p.d; k++) {
		float v = x[i * p.d + k];
		precise float vv = v * v;
		s = s + vv;
	}
	dst[i] = s;
}
