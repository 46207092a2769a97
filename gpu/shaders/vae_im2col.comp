#version 450
// vae_im2col: the right operand of one input frame of nn.Conv's product
// (nn/conv.go's fill, every tap group of the frame at once): B [rows][pc]
// float32, row r, column j (output pixel p = p0 + j of wo per row):
//
//	group = r / gdepth, q = r % gdepth (gdepth: a group's depth, padded
//	to gemm.BF16Block at bf16), tap s = group·g + q / cin, ci = q % cin;
//	B[r][j] = in[ci][sy][sx] of tap s's pixel for p, zero outside the
//	frame, for padding rows (q / cin ≥ g) and past the last tap,
//
// with (sy, sx) = (y + s/kw − kh/2, x + s%kw − kw/2) and, when up, the
// nearest 2× upsampled frame read as in[ci][sy/2][sx/2]. Copies only.
layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer In { float x[]; };
layout(std430, binding = 1) writeonly buffer Out { float o[]; };

layout(push_constant) uniform Push {
	uint cin, hs, ws, up;
	uint kh, kw, g, gdepth;
	uint rows, p0, pc, inOff;
} p;

void main() {
	uint i = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
	if (i >= p.rows * p.pc) {
		return;
	}
	uint r = i / p.pc, j = i % p.pc;
	uint grp = r / p.gdepth, q = r % p.gdepth;
	uint s = grp * p.g + q / p.cin, ci = q % p.cin;
	float v = 0.0;
	if (q / p.cin < p.g && s < p.kh * p.kw) {
		uint ho = p.up != 0u ? 2u * p.hs : p.hs;
		uint wo = p.up != 0u ? 2u * p.ws : p.ws;
		uint pix = p.p0 + j;
		int sy = int(pix / wo) + int(s / p.kw) - int(p.kh / 2u);
		int sx = int(pix % wo) + int(s % p.kw) - int(p.kw / 2u);
		if (sy >= 0 && sy < int(ho) && sx >= 0 && sx < int(wo)) {
			uint yy = uint(sy), xx = uint(sx);
			if (p.up != 0u) {
				yy >>= 1;
				xx >>= 1;
			}
			v = x[p.inOff + (ci * p.hs + yy) * p.ws + xx];
		}
	}
	o[i] = v;
}
