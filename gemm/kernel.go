package gemm

// kernel computes one MR×NR block over a chunk of depth kc:
//
//	for r < MR, s < NR: c[r*ldc+s] = (acc ? c[r*ldc+s] : 0) + Σ_{q<kc} a[q*MR+r] * b[q*NR+s]
//
// with the sum taken in order of q. a holds kc·MR packed values of A, b
// kc·NR packed values of B. It is chosen once at start-up: the AVX-512
// kernel when the build and the CPU have it, else kernelGo.
var kernel = kernelGo

// simdKernel reports whether kernel is the AVX-512 micro-kernel.
var simdKernel = false

func init() {
	archInit()
	archInitBF16()
}

// kernelGo is the portable micro-kernel: 4×4 register blocks of scalar
// accumulators over the NR columns.
func kernelGo(kc int, a, b []float32, c []float32, ldc int, acc bool) {
	a = a[:kc*MR]
	b = b[:kc*NR]
	_ = c[(MR-1)*ldc+NR-1]
	for s := 0; s < NR; s += 4 {
		var c00, c01, c02, c03, c10, c11, c12, c13 float32
		var c20, c21, c22, c23, c30, c31, c32, c33 float32
		if acc {
			r0, r1, r2, r3 := c[s:s+4], c[ldc+s:ldc+s+4], c[2*ldc+s:2*ldc+s+4], c[3*ldc+s:3*ldc+s+4]
			c00, c01, c02, c03 = r0[0], r0[1], r0[2], r0[3]
			c10, c11, c12, c13 = r1[0], r1[1], r1[2], r1[3]
			c20, c21, c22, c23 = r2[0], r2[1], r2[2], r2[3]
			c30, c31, c32, c33 = r3[0], r3[1], r3[2], r3[3]
		}
		for q := 0; q < kc; q++ {
			av := a[q*MR : q*MR+4 : q*MR+4]
			bv := b[q*NR+s : q*NR+s+4 : q*NR+s+4]
			a0, a1, a2, a3 := av[0], av[1], av[2], av[3]
			b0, b1, b2, b3 := bv[0], bv[1], bv[2], bv[3]
			c00 += a0 * b0
			c01 += a0 * b1
			c02 += a0 * b2
			c03 += a0 * b3
			c10 += a1 * b0
			c11 += a1 * b1
			c12 += a1 * b2
			c13 += a1 * b3
			c20 += a2 * b0
			c21 += a2 * b1
			c22 += a2 * b2
			c23 += a2 * b3
			c30 += a3 * b0
			c31 += a3 * b1
			c32 += a3 * b2
			c33 += a3 * b3
		}
		r0, r1, r2, r3 := c[s:s+4], c[ldc+s:ldc+s+4], c[2*ldc+s:2*ldc+s+4], c[3*ldc+s:3*ldc+s+4]
		r0[0], r0[1], r0[2], r0[3] = c00, c01, c02, c03
		r1[0], r1[1], r1[2], r1[3] = c10, c11, c12, c13
		r2[0], r2[1], r2[2], r2[3] = c20, c21, c22, c23
		r3[0], r3[1], r3[2], r3[3] = c30, c31, c32, c33
	}
}
