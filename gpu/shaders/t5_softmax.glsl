// t5_softmax.glsl: nn.SoftmaxBiasRow (nn/biasattn.go), umT5's softmax with
// the relative-position bias and the key mask, on the score rows of
// s [heads][n][n] in place, one invocation per row (head h = row / n,
// query i = row % n), each step the CPU's in its order:
//
//	z_j = s_j + bias[h][n−1−i+j] where keep[j] ≠ 0, −MaxFloat32 elsewhere
//	m = max_j z_j                 Go's max: NaN wins, +0 above −0
//	e_j = exp_def(z_j − m)        vmath.Exp32Clamped
//	Σ = Σ_j float64(e_j)          float64, in order of j (exact64.glsl's
//	                              conversions, the native float64 add)
//	p_j = e_j · div32(1, float32(Σ))
//
// Operands are at element offsets (push constants) in their buffers.
#extension GL_ARB_gpu_shader_int64 : require
#include "exact64.glsl"

layout(local_size_x = 64) in;

layout(std430, binding = 0) buffer S { float s[]; };
layout(std430, binding = 1) readonly buffer Bias { float bias[]; };
layout(std430, binding = 2) readonly buffer Keep { float keep[]; };

layout(push_constant) uniform Push {
	uint n, heads, sOff, biasOff, keepOff;
} p;

const uint MAX_FLOAT32 = 0x7f7fffffu;

// go_max is Go's max(a, b) of float32: a NaN operand is the result (the
// first), +0 is above −0.
float go_max(float a, float b) {
	if (is_nan(a)) {
		return a;
	}
	if (is_nan(b)) {
		return b;
	}
	if (a == b) {
		return (floatBitsToUint(a) & SIGN32) != 0u ? b : a;
	}
	return a > b ? a : b;
}

void main() {
	uint row = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
	if (row >= p.heads * p.n) {
		return;
	}
	uint n = p.n;
	uint h = row / n, i = row % n;
	uint base = p.sOff + row * n;
	uint bb = p.biasOff + h * (2u * n - 1u) + (n - 1u - i);
	float lowest = -uintBitsToFloat(MAX_FLOAT32);
	precise float mx = lowest;
	for (uint j = 0u; j < n; j++) {
		precise float z = s[base + j] + bias[bb + j];
		if (keep[p.keepOff + j] == 0.0) {
			z = lowest;
		}
		s[base + j] = z;
		mx = go_max(mx, z);
	}
	precise double sum = 0.0;
	for (uint j = 0u; j < n; j++) {
		precise float t = s[base + j] - mx;
		float e = exp_def(t);
		s[base + j] = e;
		sum = sum + f32_to_f64(floatBitsToUint(e));
	}
	float inv = div32(1.0, uintBitsToFloat(f64_to_f32(sum)));
	for (uint j = 0u; j < n; j++) {
		precise float r = s[base + j] * inv;
		s[base + j] = r;
	}
}
