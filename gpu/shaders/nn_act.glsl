// nn_act.glsl: the activations of nn/act.go on exact.glsl, one invocation
// per element i < n: out[i] = act(in[i]) (out may be in).
//
//	op 0  nn.GELUTanh32:  w = (0.044715·v)·v; s = FMA32(w, v, v);
//	                      z = geluK·s; d = 1 + Exp32Clamped(z); v/d
//	op 1  nn.SiLU32:      d = 1 + Exp32Clamped(−v); v/d
//
// Exp32Clamped is exact.glsl's exp_def (NaN kept, clamped to [−104, 89]),
// the division div32, the fused multiply-add EXACT_FMA32.
layout(local_size_x = 64) in;

layout(std430, binding = 0) buffer Out { float o[]; };
layout(std430, binding = 1) buffer In { float x[]; };

layout(push_constant) uniform Push { uint op, n; } p;

// nn/act.go's constants, as bits: float32(0.044715) and
// float32(−2·0.7978845608028654).
const uint GELU_CUBIC = 0x3d372713u;
const uint GELU_K = 0xbfcc422au;

float gelu_tanh32(float v) {
	precise float w0 = uintBitsToFloat(GELU_CUBIC) * v;
	precise float w = w0 * v;
	precise float s = EXACT_FMA32(w, v, v);
	precise float z = uintBitsToFloat(GELU_K) * s;
	precise float d = 1.0 + exp_def(z);
	return div32(v, d);
}

float silu32(float v) {
	precise float d = 1.0 + exp_def(-v);
	return div32(v, d);
}

void main() {
	uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
	if (i >= p.n) {
		return;
	}
	float v = x[i];
	o[i] = p.op == 0u ? gelu_tanh32(v) : silu32(v);
}
