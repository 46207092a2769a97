// riesz_rowstats.glsl: the body of riesz_rowstats.comp and
// riesz_rowstats_softfma.comp (they define EXACT_FMA32, the float32
// product's step, and include exact.glsl):
// riesz's fused row pass (Kernel.RowStats, with has_cache
// Kernel.RowStatsCached; with has_inv 0, Kernel.Sums with row sums only)
// bit for bit, for pow = 1, 2, 4 and
// float32 or bfloat16 sets (package riesz: tiles.go, passes.go,
// epilogue.go, epilogue_generic.go). For every row x of a against the
// rows of b, in column tiles of TILE_COLS from 0:
//
//	dot     = gemm's float32 product a_x·b_j (EXACT_FMA32 chain from +0) or
//	          its bfloat16 product (operands rounded to bfloat16; blocks of
//	          32: gemm_exact.glsl)
//	w       = interaction(dot, na[x], nb[j]):
//	          d2 = EXACT_FMA32(−2, dot, na + nb), 0 if d2 < 0; t = eps + d2·s;
//	          x = t, t·t or (t·t)·(t·t); x = 1e36 if x > 1e36; w = div32(1, x)
//	s, sn   = Σ w and Σ float32(w·inv[j]) over the tile by the sumLanes
//	          definition (blocks of 64, partial j mod 16 in float32, each
//	          partial added to float64 lane j mod 16, the lanes by the fixed
//	          tree), m = the largest w·inv[j] from +0 (NaN never wins)
//	sum[x] += s; mean += sn; max = float64(m) if greater   (tile by tile)
//
// and at the end mean[x] = mean·inm (inm = 1/float64(|b|), from the host).
// sum is read and added to; mean and max are written (with has_inv); with
// has_cache, W[x][j] is written to cache[x·M + j].
// A workgroup holds ROWS rows; an invocation computes the interactions of
// its columns of a tile for all rows (b_j read once), the 16 lanes of a
// row are computed in parallel, the rest by one invocation per row in the
// CPU's order.

// Specialization constants: ROWS rows of a per workgroup (the host picks
// the most its shared memory holds) and the dimension D.
layout(constant_id = 0) const uint ROWS = 4;
layout(constant_id = 1) const uint D = 128;
const uint TILE_COLS = 512u; // riesz.TileCols
const uint BF16_BLOCK = 32u;
const uint LANES = 16u;
const uint BLOCK = 64u; // sumLanes' block

layout(local_size_x = 128) in;

layout(set = 0, binding = 0) readonly buffer A { float av[]; };
layout(set = 0, binding = 1) readonly buffer NA { float na[]; };
layout(set = 0, binding = 2) readonly buffer B { float bv[]; };
layout(set = 0, binding = 3) readonly buffer NB { float nb[]; };
layout(set = 0, binding = 4) readonly buffer Inv { float inv[]; };
layout(set = 0, binding = 5) buffer Sum { double sumv[]; };
layout(set = 0, binding = 6) writeonly buffer Mean { double meanv[]; };
layout(set = 0, binding = 7) writeonly buffer Max { double maxv[]; };
layout(set = 0, binding = 8) writeonly buffer Cache { float cache[]; };

layout(push_constant) uniform Push {
	uint N, M;
	uint pw;      // 1, 2 or 4
	uint bf16;    // 1: both sets bfloat16
	uint has_inv; // 1: RowStats (sum, mean, max); 0: row sums only
	float eps, s;   // the kernel's eps32 and invS2
	uint has_cache; // 1: W written to cache
	double inm;     // 1/float64(M) (offset 32)
} p;

shared float as[ROWS][D]; // the rows of a (operand values)
shared float wt[ROWS][TILE_COLS];
shared double ls[ROWS][LANES], lq[ROWS][LANES];
shared float lm[ROWS][LANES];

const float MAX_DENOMINATOR = 9.999999616903162e+35; // float32(1e36)

float interaction(float dot, float a2, float b2) {
	precise float c = a2 + b2;
	precise float d2 = EXACT_FMA32(-2.0, dot, c);
	if (d2 < 0.0) {
		d2 = 0.0;
	}
	precise float ds = d2 * p.s;
	precise float t = p.eps + ds;
	precise float x = t;
	if (p.pw == 2u) {
		x = t * t;
	} else if (p.pw == 4u) {
		x = t * t;
		x = x * x;
	}
	if (x > MAX_DENOMINATOR) {
		x = MAX_DENOMINATOR;
	}
	return div32(1.0, x);
}

// interactions writes wt[r][j − j0] = w(a_r, b_j) for every row r < rows:
// each dot product its own chain over d (gemm's product), b_j read once.
void interactions(uint j, uint j0, uint x0, uint rows) {
	uint bb = j * D;
	float c[ROWS];
	for (uint r = 0u; r < ROWS; r++) {
		c[r] = 0.0;
	}
	if (p.bf16 == 0u) {
		for (uint d = 0u; d < D; d++) {
			float y = bv[bb + d];
			for (uint r = 0u; r < rows; r++) {
				c[r] = EXACT_FMA32(as[r][d], y, c[r]);
			}
		}
	} else {
		for (uint d0 = 0u; d0 < D; d0 += BF16_BLOCK) {
			float ch[ROWS][2];
			for (uint r = 0u; r < ROWS; r++) {
				ch[r][0] = 0.0;
				ch[r][1] = 0.0;
			}
			for (uint i = 0u; i < BF16_BLOCK; i++) {
				float y = 0.0; // padding: +0 · +0
				if (d0 + i < D) {
					y = to_bf16_operand(bv[bb + d0 + i]);
				}
				for (uint r = 0u; r < rows; r++) {
					float x = d0 + i < D ? as[r][d0 + i] : 0.0;
					ch[r][i & 1u] = gemm_fma_bf16(x, y, ch[r][i & 1u]);
				}
			}
			for (uint r = 0u; r < rows; r++) {
				c[r] = gemm_add_bf16(c[r], gemm_add_bf16(ch[r][0], ch[r][1]));
			}
		}
	}
	for (uint r = 0u; r < rows; r++) {
		wt[r][j - j0] = interaction(c[r], na[x0 + r], nb[j]);
	}
}

// lanes16 is sumLanes' fixed tree over a row's 16 lanes.
double lanes16_s(uint r) {
	precise double a0 = ls[r][0] + ls[r][8], a1 = ls[r][1] + ls[r][9];
	precise double a2 = ls[r][2] + ls[r][10], a3 = ls[r][3] + ls[r][11];
	precise double a4 = ls[r][4] + ls[r][12], a5 = ls[r][5] + ls[r][13];
	precise double a6 = ls[r][6] + ls[r][14], a7 = ls[r][7] + ls[r][15];
	precise double b0 = a0 + a4, b1 = a1 + a5, b2 = a2 + a6, b3 = a3 + a7;
	precise double x = b0 + b2, y = b1 + b3;
	precise double z = x + y;
	return z;
}

double lanes16_q(uint r) {
	precise double a0 = lq[r][0] + lq[r][8], a1 = lq[r][1] + lq[r][9];
	precise double a2 = lq[r][2] + lq[r][10], a3 = lq[r][3] + lq[r][11];
	precise double a4 = lq[r][4] + lq[r][12], a5 = lq[r][5] + lq[r][13];
	precise double a6 = lq[r][6] + lq[r][14], a7 = lq[r][7] + lq[r][15];
	precise double b0 = a0 + a4, b1 = a1 + a5, b2 = a2 + a6, b3 = a3 + a7;
	precise double x = b0 + b2, y = b1 + b3;
	precise double z = x + y;
	return z;
}

void main() {
	uint tid = gl_LocalInvocationID.x;
	uint x0 = gl_WorkGroupID.x * ROWS;
	uint rows = min(ROWS, p.N - x0);
	for (uint i = tid; i < rows * D; i += 128u) {
		uint r = i / D, d = i % D;
		float v = av[(x0 + r) * D + d];
		as[r][d] = p.bf16 != 0u ? to_bf16_operand(v) : v;
	}
	// Per row (invocation r < rows): the pass's accumulators.
	precise double acc_s = 0.0LF, acc_q = 0.0LF, acc_m = 0.0LF;
	if (tid < rows) {
		acc_s = sumv[x0 + tid];
	}
	barrier();
	for (uint j0 = 0u; j0 < p.M; j0 += TILE_COLS) {
		uint cols = min(TILE_COLS, p.M - j0);
		for (uint j = tid; j < cols; j += 128u) {
			interactions(j0 + j, j0, x0, rows);
		}
		barrier();
		if (p.has_cache != 0u) {
			for (uint i = tid; i < rows * cols; i += 128u) {
				uint r = i / cols, j = i % cols;
				cache[(x0 + r) * p.M + j0 + j] = wt[r][j];
			}
		}
		for (uint i = tid; i < rows * LANES; i += 128u) {
			uint r = i / LANES, lane = i % LANES;
			precise double s = 0.0LF, q = 0.0LF;
			float m = 0.0;
			for (uint b0 = 0u; b0 < cols; b0 += BLOCK) {
				uint e = min(b0 + BLOCK, cols);
				precise float ps = 0.0, pq = 0.0;
				for (uint j = b0 + lane; j < e; j += LANES) {
					ps = ps + wt[r][j];
					if (p.has_inv != 0u) {
						precise float wq = wt[r][j] * inv[j0 + j];
						pq = pq + wq;
						if (wq > m) {
							m = wq;
						}
					}
				}
				s = s + double(ps);
				q = q + double(pq);
			}
			ls[r][lane] = s;
			lq[r][lane] = q;
			lm[r][lane] = m;
		}
		barrier();
		if (tid < rows) {
			uint r = tid;
			acc_s = acc_s + lanes16_s(r);
			if (p.has_inv != 0u) {
				acc_q = acc_q + lanes16_q(r);
				float m = 0.0;
				for (uint l = 0u; l < LANES; l++) {
					if (lm[r][l] > m) {
						m = lm[r][l];
					}
				}
				if (double(m) > acc_m) {
					acc_m = double(m);
				}
			}
		}
		barrier();
	}
	if (tid < rows) {
		sumv[x0 + tid] = acc_s;
		if (p.has_inv != 0u) {
			precise double mean = acc_q * p.inm;
			meanv[x0 + tid] = mean;
			maxv[x0 + tid] = acc_m;
		}
	}
}
