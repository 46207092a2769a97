// vae_norm.glsl: nn.RMSNormChannels (nn/ops.go's normBlockGo), one
// invocation per pixel i < P of src [ch][P]:
//
//	s = Σ_c float32(src[c][i]²)   (float32 adds, channels in order, from +0)
//	s = max(sqrt32(s), 1e-12)     (Go's max: a NaN stays)
//	dst[c][i] = act(src[c][i] / s · scale · gamma[c]),  scale = float32(√ch)
//
// every step a float32 operation rounded to nearest even (div32, sqrt32);
// act is nn.SiLU32 (nn_act.glsl's silu32) when act is 1. Each invocation
// reads src[c][i] before it writes dst[c][i]: dst may be src.
layout(local_size_x = 64) in;

layout(std430, binding = 0) buffer Dst { float o[]; };
layout(std430, binding = 1) buffer Src { float x[]; };
layout(std430, binding = 2) readonly buffer Gamma { float gamma[]; };

layout(push_constant) uniform Push { uint ch, P, dstOff, srcOff, gammaOff, act, scale; } p;

// float32(1e-12), as bits.
const uint NORM_EPS = 0x2b8cbcccu;

// silu32 is nn.SiLU32, as nn_act.glsl computes it.
float silu32(float v) {
	precise float d = 1.0 + exp_def(-v);
	return div32(v, d);
}

void main() {
	uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
	if (i >= p.P) {
		return;
	}
	precise float s = 0.0;
	for (uint c = 0u; c < p.ch; c++) {
		float v = x[p.srcOff + c * p.P + i];
		precise float sq = v * v;
		s = s + sq;
	}
	s = sqrt32(s);
	if (!is_nan(s) && s < uintBitsToFloat(NORM_EPS)) {
		s = uintBitsToFloat(NORM_EPS);
	}
	float scale = uintBitsToFloat(p.scale);
	for (uint c = 0u; c < p.ch; c++) {
		precise float y = div32(x[p.srcOff + c * p.P + i], s) * scale;
		y = y * gamma[p.gammaOff + c];
		if (p.act != 0u) {
			y = silu32(y);
		}
		o[p.dstOff + c * p.P + i] = y;
	}
}
