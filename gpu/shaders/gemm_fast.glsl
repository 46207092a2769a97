// gemm_fast.glsl: fast mode's matrix product (the body of
// gemm_coopmat_fast.comp and gemm_emu_fast.comp). Not exact: bfloat16
// operands carried exactly as scaled float16 (gemm_prep_fast.comp),
// products exact, float32 accumulation in an order the device chooses.
//
//	C [m][n] = A·Bᵀ, float32, ldc and offC in elements;
//	A [m][k], B [n][k] fast operands (gpu.FastOperand): row r's float16
//	values at half index r·kp + q (kp = 8·kv, zero beyond k), two to a
//	32-bit word, the lower half first, read as uvec4 (8 halves); then one
//	int32 per row, its scale exponent s (the row's values are 2^s times the
//	bfloat16 operands).
//
// A workgroup of 128 invocations computes a 64×64 tile of C; its four
// subgroups of 32 (warps) each a 32×32 quarter, as 2×2 tiles of 16×16.
// Depth goes 32 at a time: both operands' 64 rows × 32 depths are staged in
// shared memory (zero outside the matrices, so tile edges and the depth
// tail add zeros), then each warp multiplies two 16-deep steps. The
// multiply (MMA_*) is the only part that differs between the modules:
//
//	GEMM_FAST_COOPMAT: VK_NV_cooperative_matrix, 16×16×16 float16 ·
//	    float16 + float32 on the tensor cores (gl_SubgroupID: the device
//	    must have 32-wide subgroups);
//	otherwise: the same tiles as scalar float32 loops over the same
//	    shared memory, each invocation 8 elements of each 16×16 tile (the
//	    emulation lavapipe runs, test-only).
//
// The 64×64 result goes through shared memory, then each value is scaled
// by 2^-(sA + sB) (exact unless it under- or overflows) as it is written.

#extension GL_KHR_shader_subgroup_basic : require

layout(local_size_x = 128) in;

const uint BM = 64u, BN = 64u;
const uint TKV = 4u;        // depth tile in uvec4: 32 halves
const uint LS = TKV + 1u;   // shared row stride in uvec4 (one spare: fewer bank conflicts)
const uint LC = BN + 4u;    // shared stride of the result tile, floats

layout(set = 0, binding = 0) readonly buffer A { uvec4 a[]; };
layout(set = 0, binding = 1) readonly buffer B { uvec4 b[]; };
layout(set = 0, binding = 2) writeonly buffer C { float c[]; };

layout(push_constant) uniform Push {
	uint m, n, kv; // rows of A and C, rows of B (columns of C), depth in uvec4
	uint ldc, offC;
} p;

shared uvec4 As[BM * LS];
shared uvec4 Bs[BN * LS];
shared float Cs[BM * LC];

// scaleA and scaleB are the scale exponents of a row (after the values).
int scaleA(uint row) {
	uint w = p.m * p.kv * 4u + row;
	return int(a[w >> 2][w & 3u]);
}

int scaleB(uint row) {
	uint w = p.n * p.kv * 4u + row;
	return int(b[w >> 2][w & 3u]);
}

// pow2 is 2^e for -126 ≤ e ≤ 127, from its bits.
float pow2(int e) { return uintBitsToFloat(uint(e + 127) << 23); }

// stage copies depths kv0 … kv0+TKV-1 (in uvec4) of the tile's rows of A
// and B into shared memory; outside the matrices, zeros.
void stage(uint row0, uint col0, uint kv0) {
	uint t = gl_LocalInvocationIndex;
	for (uint e = t; e < BM * TKV; e += 128u) {
		uint i = e / TKV, q = e % TKV;
		uint row = row0 + i, kq = kv0 + q;
		As[i * LS + q] = row < p.m && kq < p.kv ? a[row * p.kv + kq] : uvec4(0u);
	}
	for (uint e = t; e < BN * TKV; e += 128u) {
		uint j = e / TKV, q = e % TKV;
		uint col = col0 + j, kq = kv0 + q;
		Bs[j * LS + q] = col < p.n && kq < p.kv ? b[col * p.kv + kq] : uvec4(0u);
	}
}

#ifdef GEMM_FAST_COOPMAT

fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[2][2];

uint warp() { return gl_SubgroupID; }

void mma_zero() {
	for (uint i = 0u; i < 2u; i++) {
		for (uint j = 0u; j < 2u; j++) {
			acc[i][j] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);
		}
	}
}

// mma_step multiplies the warp's rows and columns over the 16 depths
// from half 16·kk of the staged tile (uvec4 2·kk).
void mma_step(uint wr, uint wc, uint kk) {
	fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> ma[2];
	fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> mb[2];
	for (uint i = 0u; i < 2u; i++) {
		coopMatLoadNV(ma[i], As, (wr * 32u + i * 16u) * LS + 2u * kk, LS, false);
	}
	for (uint j = 0u; j < 2u; j++) {
		// B's rows are op(B)'s columns: column-major K×N.
		coopMatLoadNV(mb[j], Bs, (wc * 32u + j * 16u) * LS + 2u * kk, LS, true);
	}
	for (uint i = 0u; i < 2u; i++) {
		for (uint j = 0u; j < 2u; j++) {
			acc[i][j] = coopMatMulAddNV(ma[i], mb[j], acc[i][j]);
		}
	}
}

void mma_store(uint wr, uint wc) {
	for (uint i = 0u; i < 2u; i++) {
		for (uint j = 0u; j < 2u; j++) {
			coopMatStoreNV(acc[i][j], Cs, (wr * 32u + i * 16u) * LC + wc * 32u + j * 16u, LC, false);
		}
	}
}

#else

float acc[2][2][8]; // element l + 32·r of each 16×16 tile (l: the lane)

uint warp() { return gl_LocalInvocationIndex / 32u; }

uint lane() { return gl_LocalInvocationIndex % 32u; }

void mma_zero() {
	for (uint i = 0u; i < 2u; i++) {
		for (uint j = 0u; j < 2u; j++) {
			for (uint r = 0u; r < 8u; r++) {
				acc[i][j][r] = 0.0;
			}
		}
	}
}

// half_at is the float16 value at depth q (a half index) of a staged row
// (its first uvec4 at base).
float half_at(bool isA, uint base, uint q) {
	uvec4 v = isA ? As[base + q / 8u] : Bs[base + q / 8u];
	return unpackHalf2x16(v[(q % 8u) / 2u])[q % 2u];
}

void mma_step(uint wr, uint wc, uint kk) {
	for (uint i = 0u; i < 2u; i++) {
		for (uint j = 0u; j < 2u; j++) {
			for (uint r = 0u; r < 8u; r++) {
				uint e = lane() + 32u * r;
				uint ra = (wr * 32u + i * 16u + e / 16u) * LS, rb = (wc * 32u + j * 16u + e % 16u) * LS;
				float s = acc[i][j][r];
				for (uint q = 16u * kk; q < 16u * kk + 16u; q++) {
					s += half_at(true, ra, q) * half_at(false, rb, q);
				}
				acc[i][j][r] = s;
			}
		}
	}
}

void mma_store(uint wr, uint wc) {
	for (uint i = 0u; i < 2u; i++) {
		for (uint j = 0u; j < 2u; j++) {
			for (uint r = 0u; r < 8u; r++) {
				uint e = lane() + 32u * r;
				Cs[(wr * 32u + i * 16u + e / 16u) * LC + wc * 32u + j * 16u + e % 16u] = acc[i][j][r];
			}
		}
	}
}

#endif

void main() {
	uint row0 = gl_WorkGroupID.y * BM, col0 = gl_WorkGroupID.x * BN;
	uint w = warp();
	uint wr = w / 2u, wc = w % 2u;
	mma_zero();
	for (uint kv0 = 0u; kv0 < p.kv; kv0 += TKV) {
		stage(row0, col0, kv0);
		barrier();
		mma_step(wr, wc, 0u);
		mma_step(wr, wc, 1u);
		barrier();
	}
	mma_store(wr, wc);
	barrier();
	for (uint e = gl_LocalInvocationIndex; e < BM * BN; e += 128u) {
		uint i = e / BN, j = e % BN;
		uint row = row0 + i, col = col0 + j;
		if (row < p.m && col < p.n) {
			int x = -(scaleA(row) + scaleB(col));
			int x1 = clamp(x, -126, 127);
			int x2 = clamp(x - x1, -126, 127);
			c[p.offC + row * p.ldc + col] = Cs[i * LC + j] * pow2(x1) * pow2(x2);
		}
	}
}
