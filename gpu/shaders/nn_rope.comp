#version 450
// nn_rope: rope's rotation (rope/rope.go's rotate) of tokens in place,
// one invocation per pair i < n (n = tokens·heads·npair). x holds
// [token][head][2·npair] float32 values from element x0; token k is at
// pos[3k], pos[3k+1], pos[3k+2] (t, h, w) when usePos is set, else in a
// frame grid: frame t0 + k/hw at (h, w) = ((k%hw)/width, (k%hw)%width).
// Pair j of a head turns by the angle of its axis: time for j < nt,
// height for j < nt + nh, width above, whose float64 cosine and sine the
// CPU computed (tab: (cos, sin) pairs, time [times][nt] from timeOff,
// height [height][nh] from heightOff, width [width][nw] from widthOff, in
// pairs). In float64, each product rounded before the sum:
//
//	x0' = float32(x0·c − x1·s),  x1' = float32(x0·s + x1·c)
#extension GL_GOOGLE_include_directive : require
#extension GL_ARB_gpu_shader_int64 : require
#include "exact64.glsl"

layout(local_size_x = 64) in;

layout(std430, binding = 0) buffer X { uint x[]; }; // float32 bits
layout(std430, binding = 1) readonly buffer Tab { double tab[]; };
layout(std430, binding = 2) readonly buffer Pos { uint pos[]; };

layout(push_constant) uniform Push {
	uint n, x0, heads, npair;
	uint nt, nh, width, hw;
	uint t0, timeOff, heightOff, widthOff;
	uint usePos;
} p;

void main() {
	uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
	if (i >= p.n) {
		return;
	}
	uint j = i % p.npair;
	uint ht = i / p.npair; // token·heads + head
	uint k = ht / p.heads;
	uint q = k % p.hw;
	uint t = p.t0 + k / p.hw, h = q / p.width, w = q % p.width;
	if (p.usePos != 0u) {
		t = pos[3u * k];
		h = pos[3u * k + 1u];
		w = pos[3u * k + 2u];
	}
	uint idx;
	if (j < p.nt) {
		idx = p.timeOff + t * p.nt + j;
	} else if (j < p.nt + p.nh) {
		idx = p.heightOff + h * p.nh + (j - p.nt);
	} else {
		uint nw = p.npair - p.nt - p.nh;
		idx = p.widthOff + w * nw + (j - p.nt - p.nh);
	}
	precise double c = tab[2u * idx];
	precise double s = tab[2u * idx + 1u];
	uint e = p.x0 + ht * 2u * p.npair + 2u * j;
	precise double v0 = f32_to_f64(x[e]);
	precise double v1 = f32_to_f64(x[e + 1u]);
	precise double a = v0 * c;
	precise double b = v1 * s;
	precise double r0 = a - b;
	precise double a1 = v0 * s;
	precise double b1 = v1 * c;
	precise double r1 = a1 + b1;
	x[e] = f64_to_f32(r0);
	x[e + 1u] = f64_to_f32(r1);
}
