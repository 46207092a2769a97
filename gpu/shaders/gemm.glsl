// gemm.glsl: the body of gemm.comp and gemm_softfma.comp (they define
// GEMM_FMA, the float32 product's step, and include gemm_exact.glsl).
//
// C = A·Bᵀ (NT) or C = A·B (NN), optionally accumulating into C, in
// gemm's float32 or bfloat16 definition (gemm/doc.go), bit for bit.
//
//	A: M×K row-major (lda), B: N×K (NT) or K×N (NN) (ldb), C: M×N (ldc);
//	offsets and leading dimensions in elements; float32 operands as
//	their bits, bfloat16 operands two to a word, the lower half first.
//	With WIDEN_B (the float32 product only), B holds bfloat16 values,
//	widened exactly to float32 as they are read (umT5's weights at fp32).
//
// A workgroup of WX×WY invocations computes a BM×BN tile of C (BM = WY·TM,
// BN = WX·TN; invocation (x, y) the rows y + WY·r and columns x + WX·s).
// Depth goes in tiles of 32 staged in shared memory: for bfloat16 exactly
// the definition's blocks, from the call's first depth, the last padded
// with +0. Each element keeps the definition's order of operations:
//
//	float32:  c = fma(a[q], b[q], c) for q = 0, 1, …, K-1
//	bfloat16: per block, even and odd chains x = ftz(a·b + x) from +0,
//	          then c = ftz(c + ftz(even + odd)) (gemm_exact.glsl)

layout(constant_id = 0) const uint WX = 16;
layout(constant_id = 1) const uint WY = 16;
layout(constant_id = 2) const uint TM = 4;
layout(constant_id = 3) const uint TN = 4;
layout(constant_id = 4) const uint BF16 = 0; // 1: the bfloat16 product
layout(constant_id = 5) const uint NN = 0;   // 1: B is K×N
layout(constant_id = 6) const uint WIDEN_B = 0; // 1: B is bfloat16 of a float32 product
layout(local_size_x_id = 0, local_size_y_id = 1) in;

const uint BM = WY * TM;
const uint BN = WX * TN;
// Rows of the shared tiles, one longer than a tile: the loads write 32
// depths of one row or column from consecutive invocations, which then
// fall into distinct banks.
const uint LA = BM + 1;
const uint LB = BN + 1;
const uint TK = 32;

layout(set = 0, binding = 0) readonly buffer A { uint a[]; };
layout(set = 0, binding = 1) readonly buffer B { uint b[]; };
layout(set = 0, binding = 2) buffer C { uint c[]; };

layout(push_constant) uniform Push {
	uint m, n, k;
	uint lda, ldb, ldc;
	uint offA, offB, offC;
	uint acc; // 1: C = C + A·op(B)
} p;

shared float As[TK * LA]; // [q][i]
shared float Bs[TK * LB]; // [q][j]

// operand returns the value of element e of an operand buffer.
float operandA(uint e) {
	if (BF16 == 0u) {
		return uintBitsToFloat(a[e]);
	}
	uint w = a[e >> 1];
	return gemm_bf16_operand((e & 1u) == 0u ? w & 0xffffu : w >> 16);
}

float operandB(uint e) {
	if (BF16 == 0u && WIDEN_B == 0u) {
		return uintBitsToFloat(b[e]);
	}
	uint w = b[e >> 1];
	uint h = (e & 1u) == 0u ? w & 0xffffu : w >> 16;
	if (WIDEN_B != 0u) {
		return uintBitsToFloat(h << 16); // gemm.BF16ToFloat32: exact
	}
	return gemm_bf16_operand(h);
}

// load stages depths k0 … k0+31 of the tile's rows of A and columns of
// op(B); outside the matrices, +0.
void load(uint row0, uint col0, uint k0) {
	uint t = gl_LocalInvocationID.y * WX + gl_LocalInvocationID.x;
	for (uint e = t; e < TK * BM; e += WX * WY) {
		uint i = e / TK, q = e % TK;
		uint row = row0 + i, d = k0 + q;
		As[q * LA + i] = row < p.m && d < p.k ? operandA(p.offA + row * p.lda + d) : 0.0;
	}
	for (uint e = t; e < TK * BN; e += WX * WY) {
		uint j, q;
		if (NN == 0u) {
			j = e / TK;
			q = e % TK;
		} else {
			q = e / BN;
			j = e % BN;
		}
		uint col = col0 + j, d = k0 + q;
		float v = 0.0;
		if (col < p.n && d < p.k) {
			v = operandB(NN == 0u ? p.offB + col * p.ldb + d : p.offB + d * p.ldb + col);
		}
		Bs[q * LB + j] = v;
	}
}

void main() {
	uint row0 = gl_WorkGroupID.y * BM, col0 = gl_WorkGroupID.x * BN;
	uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
	float acc[TM * TN];
	float even[TM * TN];
	float odd[TM * TN];
	float ar[TM];
	float br[TN];
	for (uint r = 0u; r < TM; r++) {
		for (uint s = 0u; s < TN; s++) {
			uint row = row0 + ty + WY * r, col = col0 + tx + WX * s;
			float x = 0.0;
			if (p.acc != 0u && row < p.m && col < p.n) {
				uint cb = c[p.offC + row * p.ldc + col];
				x = BF16 != 0u && p.k > 0u ? gemm_daz(cb) : uintBitsToFloat(cb);
			}
			acc[r * TN + s] = x;
		}
	}
	for (uint k0 = 0u; k0 < p.k; k0 += TK) {
		load(row0, col0, k0);
		barrier();
		for (uint e = 0u; e < TM * TN; e++) {
			even[e] = 0.0;
			odd[e] = 0.0;
		}
		for (uint q = 0u; q < TK; q++) {
			for (uint r = 0u; r < TM; r++) {
				ar[r] = As[q * LA + ty + WY * r];
			}
			for (uint s = 0u; s < TN; s++) {
				br[s] = Bs[q * LB + tx + WX * s];
			}
			for (uint r = 0u; r < TM; r++) {
				for (uint s = 0u; s < TN; s++) {
					uint e = r * TN + s;
					if (BF16 == 0u) {
						if (k0 + q < p.k) {
							acc[e] = GEMM_FMA(ar[r], br[s], acc[e]);
						}
					} else if ((q & 1u) == 0u) {
						even[e] = gemm_fma_bf16(ar[r], br[s], even[e]);
					} else {
						odd[e] = gemm_fma_bf16(ar[r], br[s], odd[e]);
					}
				}
			}
		}
		if (BF16 != 0u) {
			for (uint e = 0u; e < TM * TN; e++) {
				acc[e] = gemm_add_bf16(acc[e], gemm_add_bf16(even[e], odd[e]));
			}
		}
		barrier();
	}
	for (uint r = 0u; r < TM; r++) {
		for (uint s = 0u; s < TN; s++) {
			uint row = row0 + ty + WY * r, col = col0 + tx + WX * s;
			if (row < p.m && col < p.n) {
				c[p.offC + row * p.ldc + col] = floatBitsToUint(acc[r * TN + s]);
			}
		}
	}
}
