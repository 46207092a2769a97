#version 450
// vae_transpose: out[outOff + j·rows + r] = in[inOff + r·cols + j] for a
// [rows][cols] matrix, one invocation per element. Copies only.
layout(local_size_x = 64) in;

layout(std430, binding = 0) writeonly buffer Out { float o[]; };
layout(std430, binding = 1) readonly buffer In { float x[]; };

layout(push_constant) uniform Push { uint rows, cols, outOff, inOff; } p;

void main() {
	uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
	if (i >= p.rows * p.cols) {
		return;
	}
	uint r = i / p.cols, j = i % p.cols;
	o[p.outOff + j * p.rows + r] = x[p.inOff + i];
}
