#version 450
// riesz_scan: riesz.ScanRows bit for bit (and so Kernel.PrefixScan, which
// equals it over the same candidates in order): over a cached interaction
// matrix W (rows of m values, as RieszRowStatsCached writes it), for
// every column j (one invocation each), in order of r < n:
//
//	acc += float64(W[rows[r]][j])
//	where acc ≥ rem (rem the column's private headroom, from the input;
//	an ordered comparison): cross[j] = r + 1 and rem = +Inf
//	every r + 1 a multiple of every (> 0): ckpt[((r+1)/every − 1)·m + j] = acc
//
// starting from acc = +0, cross[j] = 0 and rem = +Inf where the input
// headroom is ≤ 0, else cross[j] = Never; with final, the sums after the
// last row also go to ckpt[(n/every)·m + j] (n not a multiple of every).

layout(local_size_x = 64) in;

layout(set = 0, binding = 0) readonly buffer W { float w[]; };
layout(set = 0, binding = 1) readonly buffer Rows { int rowsv[]; };
layout(set = 0, binding = 2) readonly buffer Rem { double rem[]; };
layout(set = 0, binding = 3) writeonly buffer Cross { int cross[]; };
layout(set = 0, binding = 4) writeonly buffer Ckpt { double ckpt[]; };

layout(push_constant) uniform Push {
	uint n, m;
	uint wrows; // rows of W: a larger index in rows gives cross = −1
	uint every; // 0: no checkpoints
	uint final; // 1: the final sums to the extra checkpoint slot
} p;

const int NEVER = 2147483647; // riesz.Never
const double MAX_FINITE = 1.7976931348623157e+308LF;

void main() {
	uint j = gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
	if (j >= p.m) {
		return;
	}
	precise double acc = 0.0LF;
	double rm = rem[j];
	// crossed: rem is +Inf, and acc ≥ +Inf only for acc = +Inf (a NaN
	// headroom never crosses).
	bool crossed = rm <= 0.0LF;
	int cr = crossed ? 0 : NEVER;
	for (uint r = 0u; r < p.n; r++) {
		uint x = uint(rowsv[r]);
		if (x >= p.wrows) {
			cross[j] = -1;
			return;
		}
		acc = acc + double(w[x * p.m + j]);
		if (crossed ? acc > MAX_FINITE : acc >= rm) {
			cr = int(r + 1u);
			crossed = true;
		}
		if (p.every > 0u && (r + 1u) % p.every == 0u) {
			ckpt[((r + 1u) / p.every - 1u) * p.m + j] = acc;
		}
	}
	if (p.final != 0u) {
		ckpt[(p.n / p.every) * p.m + j] = acc;
	}
	cross[j] = cr;
}
