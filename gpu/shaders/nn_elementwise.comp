#version 450
// nn_elementwise: the float32 element-wise steps of a DiT block, one
// invocation per element i < n of out (row i/d, column j = i%d, frame
// f = (i/d)/rpf), each the CPU's operations in its order, every product
// rounded before it meets an addition:
//
//	op 0  out = a + b                             wan's addInto (out = a = x)
//	op 1  out = a + b[bOff + j]                   nn.Linear's addBias; wan's
//	                                              mods = modulation + e0
//	op 2  out = float32(a·(1 + sc)) + sh,         wan's modulate
//	      sh = b[bOff + f·bStride + j], sc = c[cOff + f·cStride + j]
//	op 3  out = a + float32(b·g),                 wan's gatedAdd (out = a = x,
//	      g = c[cOff + f·cStride + j]             b = o)
//
// Each invocation reads its element before it writes it: out may be a.
layout(local_size_x = 64) in;

layout(std430, binding = 0) buffer Out { float o[]; };
layout(std430, binding = 1) buffer A { float a[]; };
layout(std430, binding = 2) readonly buffer B { float b[]; };
layout(std430, binding = 3) readonly buffer C { float c[]; };

layout(push_constant) uniform Push {
	uint op, n, d, rpf;
	uint bOff, bStride, cOff, cStride;
} p;

void main() {
	uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
	if (i >= p.n) {
		return;
	}
	uint j = i % p.d;
	uint f = (i / p.d) / p.rpf;
	precise float r;
	switch (p.op) {
	case 0u:
		r = a[i] + b[i];
		break;
	case 1u:
		r = a[i] + b[p.bOff + j];
		break;
	case 2u: {
		precise float t = 1.0 + c[p.cOff + f * p.cStride + j];
		precise float m = a[i] * t;
		r = m + b[p.bOff + f * p.bStride + j];
		break;
	}
	default: {
		precise float m = b[i] * c[p.cOff + f * p.cStride + j];
		r = a[i] + m;
		break;
	}
	}
	o[i] = r;
}
