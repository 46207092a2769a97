#version 450
// vae_bias: a convolution's bias and residual (nn.AddBias per output
// channel), one invocation per element i < n of the product C [cout][P]:
//
//	out[outOff + i] = c[i] + bias[i / P]                     (hasRes 0)
//	out[outOff + i] = (c[i] + bias[i / P]) + res[resOff + i]  (hasRes 1)
//
// Each invocation reads its residual before it writes: res may be out.
layout(local_size_x = 64) in;

layout(std430, binding = 0) buffer Out { float o[]; };
layout(std430, binding = 1) readonly buffer C { float c[]; };
layout(std430, binding = 2) readonly buffer Bias { float b[]; };
layout(std430, binding = 3) buffer Res { float r[]; };

layout(push_constant) uniform Push { uint n, P, outOff, resOff, hasRes; } p;

void main() {
	uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
	if (i >= p.n) {
		return;
	}
	precise float v = c[i] + b[i / p.P];
	if (p.hasRes != 0u) {
		v = v + r[p.resOff + i];
	}
	o[p.outOff + i] = v;
}
