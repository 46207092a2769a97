#version 450
// Strided row copy of 32-bit words (no arithmetic: the bits move as they
// are): rows rows of cols words from src (row r at srcOff + r·srcLd) to
// dst (row r at dstOff + r·dstLd), then zeros in rows rows … zrows−1 of
// dst. Gathers a DensityKV bank's per-head keys and values, [n][D], into
// the rows of an attention context, [S][H][D] (gpu.CopyRows).

layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) readonly buffer Src { uint src[]; };
layout(set = 0, binding = 1) writeonly buffer Dst { uint dst[]; };

layout(push_constant) uniform Push {
	uint rows, zrows, cols;
	uint srcOff, srcLd;
	uint dstOff, dstLd;
} p;

void main() {
	uint e = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
	if (e >= p.zrows * p.cols) {
		return;
	}
	uint r = e / p.cols, c = e % p.cols;
	dst[p.dstOff + r * p.dstLd + c] = r < p.rows ? src[p.srcOff + r * p.srcLd + c] : 0u;
}
