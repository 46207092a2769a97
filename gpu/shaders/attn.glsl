// attn.glsl: the body of attn_exact.comp and attn_exact_softfma.comp (they
// define EXACT_FMA32, the float32 product's step, and include exact.glsl):
// attn.Attention and attn.AttentionAs(gemm.BF16, …) bit for bit
// (package attn: attn.go, flash.go, softmax.go).
//
//	out[t][h] = Σ_s softmax_s(scale · q[t][h]·k[s][h]) · v[s][h]
//
// q, out [T][H][D], k, v [S][H][D], float32. A workgroup computes ROWS
// query rows of one head (gl_WorkGroupID.x: the row block, .y: the head);
// every output row gets exactly the CPU's operations in the CPU's order:
// per key tile of BLOCK_S keys from s = 0,
//
//	raw[s]  = K·Qᵀ: gemm's float32 product (EXACT_FMA32 chain over d from +0)
//	          or its bfloat16 product (q, k rounded to bfloat16 operands;
//	          blocks of 32 depths, even and odd chains: gemm_exact.glsl)
//	mx      = the largest raw[s]·scale (from −MaxFloat32; NaN never wins)
//	m'      = mx if first or mx > m, else m; alpha = exp_def(m − m')
//	p[s]    = exp_def(raw[s]·scale − m'); l = Σ_s p[s] in order of s,
//	          then l = sum (first) or float32(l·alpha) + sum
//	o[d]    = o[d]·alpha (not first), then the product Vᵀ·Pᵀ continued
//	          from o[d] (from +0 on the first tile): float32 (EXACT_FMA32
//	          chain over the tile's keys) or bfloat16 (p and v rounded to
//	          bfloat16 operands, o read through gemm_daz, blocks of 32 keys
//	          from the tile's start)
//
// and finally out[t][h][d] = o[d] · div32(1, l). The parallel work is over
// heads, row blocks, keys (an invocation computes its keys' scores for all
// the block's rows, each score its own chain, k read once) and output
// columns (an invocation its columns for all rows, v read once); every sum
// over keys is one invocation's loop in key order.

// Specialization constants: ROWS query rows per workgroup (the host
// picks the most its shared memory holds) and the head dimension D.
layout(constant_id = 0) const uint ROWS = 4;
layout(constant_id = 1) const uint D = 128;
const uint BLOCK_S = 512u;  // attn.BlockS
const uint THREADS = 128u;
const uint SLOTS = (D + THREADS - 1u) / THREADS; // output columns per invocation
const uint BF16_BLOCK = 32u; // gemm.BF16Block

layout(local_size_x = 128) in; // THREADS

layout(set = 0, binding = 0) writeonly buffer Out { float outv[]; };
layout(set = 0, binding = 1) readonly buffer Q { float qv[]; };
layout(set = 0, binding = 2) readonly buffer K { float kv[]; };
layout(set = 0, binding = 3) readonly buffer V { float vv[]; };

layout(push_constant) uniform Push {
	uint T, S, H;
	float scale;
	uint bf16; // 1: attn.AttentionAs(gemm.BF16, …)
} p;

shared float qs[ROWS][D]; // the rows' queries (operand values)
shared float ps[ROWS][BLOCK_S]; // scores, then probabilities
shared float m_row[ROWS], l_row[ROWS], alpha_row[ROWS];

const float MIN_MAX = -3.4028234663852886e+38; // −MaxFloat32, attn's minMax

// operand is v as the products read it.
float operand(float v) { return p.bf16 != 0u ? to_bf16_operand(v) : v; }

// scores writes ps[r][s − s0] = the element of K·Qᵀ of key s and row r
// (gemm's product) for every row r < rows: each score is its own chain
// over d; k[s] is read once for all rows.
void scores(uint s, uint s0, uint rows, uint h) {
	uint kb = (s * p.H + h) * D;
	float c[ROWS];
	for (uint r = 0u; r < ROWS; r++) {
		c[r] = 0.0;
	}
	if (p.bf16 == 0u) {
		for (uint d = 0u; d < D; d++) {
			float x = kv[kb + d];
			for (uint r = 0u; r < rows; r++) {
				c[r] = EXACT_FMA32(x, qs[r][d], c[r]);
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
				float x = 0.0; // padding: +0 · +0
				if (d0 + i < D) {
					x = to_bf16_operand(kv[kb + d0 + i]);
				}
				for (uint r = 0u; r < rows; r++) {
					float y = d0 + i < D ? qs[r][d0 + i] : 0.0;
					ch[r][i & 1u] = gemm_fma_bf16(x, y, ch[r][i & 1u]);
				}
			}
			for (uint r = 0u; r < rows; r++) {
				c[r] = gemm_add_bf16(c[r], gemm_add_bf16(ch[r][0], ch[r][1]));
			}
		}
	}
	for (uint r = 0u; r < rows; r++) {
		ps[r][s - s0] = c[r];
	}
}

// pv continues o (this invocation's column d, every row) with the product
// Vᵀ·Pᵀ over the tile's keys [s0, s0 + cols), as gemm's product with
// accumulation (first: from +0).
void pv(inout float o[ROWS], uint d, uint s0, uint cols, uint rows, uint h, bool first) {
	if (p.bf16 == 0u) {
		for (uint s = 0u; s < cols; s++) {
			float vs = vv[((s0 + s) * p.H + h) * D + d];
			for (uint r = 0u; r < rows; r++) {
				o[r] = EXACT_FMA32(vs, ps[r][s], o[r]);
			}
		}
		return;
	}
	for (uint r = 0u; r < rows; r++) {
		o[r] = first ? 0.0 : gemm_daz(floatBitsToUint(o[r]));
	}
	for (uint b0 = 0u; b0 < cols; b0 += BF16_BLOCK) {
		float ch[ROWS][2];
		for (uint r = 0u; r < ROWS; r++) {
			ch[r][0] = 0.0;
			ch[r][1] = 0.0;
		}
		for (uint i = 0u; i < BF16_BLOCK; i++) {
			uint s = b0 + i;
			float vs = 0.0; // padding: +0 · +0
			if (s < cols) {
				vs = to_bf16_operand(vv[((s0 + s) * p.H + h) * D + d]);
			}
			for (uint r = 0u; r < rows; r++) {
				float pr = s < cols ? to_bf16_operand(ps[r][s]) : 0.0;
				ch[r][i & 1u] = gemm_fma_bf16(vs, pr, ch[r][i & 1u]);
			}
		}
		for (uint r = 0u; r < rows; r++) {
			o[r] = gemm_add_bf16(o[r], gemm_add_bf16(ch[r][0], ch[r][1]));
		}
	}
}

// softmax_max is the first half of the online-softmax step of row r: the
// tile's maximum, m' and alpha.
void softmax_max(uint r, uint cols, bool first) {
	precise float mx = MIN_MAX;
	for (uint s = 0u; s < cols; s++) {
		precise float sc = ps[r][s] * p.scale;
		if (sc > mx) {
			mx = sc;
		}
	}
	float alpha = 0.0;
	if (!first) {
		if (!(mx > m_row[r])) {
			mx = m_row[r];
		}
		precise float dm = m_row[r] - mx;
		alpha = exp_def(dm);
	}
	m_row[r] = mx;
	alpha_row[r] = alpha;
}

// softmax_sum is the row sum of row r's probabilities and the update of l.
void softmax_sum(uint r, uint cols, bool first) {
	precise float sum = 0.0;
	for (uint s = 0u; s < cols; s++) {
		sum = sum + ps[r][s];
	}
	if (first) {
		l_row[r] = sum;
	} else {
		precise float la = l_row[r] * alpha_row[r];
		l_row[r] = la + sum;
	}
}

void main() {
	uint tid = gl_LocalInvocationID.x;
	uint h = gl_WorkGroupID.y;
	uint t0 = gl_WorkGroupID.x * ROWS;
	uint rows = min(ROWS, p.T - t0);
	uint ld = p.H * D;
	for (uint i = tid; i < rows * D; i += THREADS) {
		uint r = i / D, d = i % D;
		qs[r][d] = operand(qv[(t0 + r) * ld + h * D + d]);
	}
	float o[SLOTS][ROWS];
	for (uint j = 0u; j < SLOTS; j++) {
		for (uint r = 0u; r < ROWS; r++) {
			o[j][r] = 0.0;
		}
	}
	barrier();
	for (uint s0 = 0u; s0 < p.S; s0 += BLOCK_S) {
		uint cols = min(BLOCK_S, p.S - s0);
		bool first = s0 == 0u;
		for (uint s = tid; s < cols; s += THREADS) {
			scores(s0 + s, s0, rows, h);
		}
		barrier();
		if (tid < rows) {
			softmax_max(tid, cols, first);
		}
		barrier();
		for (uint i = tid; i < rows * cols; i += THREADS) {
			uint r = i / cols, s = i % cols;
			precise float sc = ps[r][s] * p.scale;
			precise float y = sc - m_row[r];
			ps[r][s] = exp_def(y);
		}
		barrier();
		if (tid < rows) {
			softmax_sum(tid, cols, first);
		}
		// Oᵀ = Oᵀ·alpha + Vᵀ·Pᵀ for this invocation's output columns.
		for (uint j = 0u; j < SLOTS; j++) {
			uint d = tid + j * THREADS;
			if (d >= D) {
				continue;
			}
			if (!first) {
				for (uint r = 0u; r < rows; r++) {
					precise float a = o[j][r] * alpha_row[r];
					o[j][r] = a;
				}
			}
			pv(o[j], d, s0, cols, rows, h, first);
		}
		barrier();
	}
	if (tid < rows) {
		alpha_row[tid] = div32(1.0, l_row[tid]); // now 1/l
	}
	barrier();
	for (uint j = 0u; j < SLOTS; j++) {
		uint d = tid + j * THREADS;
		if (d >= D) {
			continue;
		}
		for (uint r = 0u; r < rows; r++) {
			precise float y = o[j][r] * alpha_row[r];
			outv[(t0 + r) * ld + h * D + d] = y;
		}
	}
}
