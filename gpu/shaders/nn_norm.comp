#version 450
// nn_norm: nn.LayerNorm and nn.RMSNorm (nn/norm.go) of the rows of x
// [rows][d] into y (which may be x), one row per workgroup.
//
// Invocation 0 computes the row's statistics in float64 in the CPU's
// order, one element after another (each square rounded before the sum):
//
//	LayerNorm  mean = (Σ x)/d;  q = Σ (x − mean)²;  inv = 1/√(q/d + eps)
//	RMSNorm    q = Σ x²;  inv = 1/√(q/d + eps)
//
// (exact64.glsl's division and square root, the native float64 add and
// multiply); then every invocation writes its columns:
//
//	LayerNorm  y = float32((x − mean)·inv), with affine weights
//	           float32(y·w) + b
//	RMSNorm    y = float32(x·inv)·w
//
// Each invocation reads x[j] before it writes y[j], and invocation 0 reads
// the whole row before the barrier: in place is safe.
#extension GL_GOOGLE_include_directive : require
#extension GL_ARB_gpu_shader_int64 : require
#include "exact64.glsl"

layout(local_size_x = 64) in;

layout(std430, binding = 0) buffer Y { uint y[]; }; // float32 bits
layout(std430, binding = 1) buffer X { uint x[]; };
layout(std430, binding = 2) readonly buffer W { float w[]; };
layout(std430, binding = 3) readonly buffer B { float b[]; };

layout(push_constant) uniform Push {
	uint rows, d;
	uint mode; // 0 LayerNorm, 1 LayerNorm with w and b, 2 RMSNorm with w
	uint pad;
	double eps; // offset 16
} p;

shared double smean, sinv;

void main() {
	uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
	if (row >= p.rows) {
		return; // the whole workgroup
	}
	uint base = row * p.d;
	bool rms = p.mode == 2u;
	if (gl_LocalInvocationID.x == 0u) {
		precise double mean = 0.0;
		if (!rms) {
			precise double s = 0.0;
			for (uint j = 0u; j < p.d; j++) {
				s = s + f32_to_f64(x[base + j]);
			}
			mean = div64(s, double(p.d));
		}
		precise double q = 0.0;
		for (uint j = 0u; j < p.d; j++) {
			precise double t = f32_to_f64(x[base + j]) - mean;
			precise double t2 = t * t;
			q = q + t2;
		}
		precise double v = div64(q, double(p.d)) + p.eps;
		smean = mean;
		sinv = div64(1.0, sqrt64(v));
	}
	barrier();
	precise double mean = smean;
	precise double inv = sinv;
	for (uint j = gl_LocalInvocationID.x; j < p.d; j += gl_WorkGroupSize.x) {
		precise double v = f32_to_f64(x[base + j]);
		precise float r;
		if (rms) {
			precise double n = v * inv;
			r = uintBitsToFloat(f64_to_f32(n));
			r = r * w[j];
		} else {
			precise double c = v - mean;
			precise double n = c * inv;
			r = uintBitsToFloat(f64_to_f32(n));
			if (p.mode == 1u) {
				precise float rw = r * w[j];
				r = rw + b[j];
			}
		}
		y[base + j] = floatBitsToUint(r);
	}
}
