// Package gemm provides the dense float32 matrix products used by the Riesz
// kernels and the Wan backbone: C = A·Bᵀ (NT) and C = A·B (NN), row-major,
// with leading dimensions.
//
// The reference loops in the doc comments define the results. Fast paths
// (GOEXPERIMENT=simd on amd64) must agree with them to float32 rounding.
package gemm

import "fmt"

// NT computes C = A·Bᵀ, overwriting C:
//
//	for i < m, j < n: c[i*ldc+j] = Σ_{p<k} a[i*lda+p] * b[j*ldb+p]
//
// A is m×k, B is n×k, C is m×n, all row-major.
func NT(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	check("NT", m, n, k, a, lda, k, b, ldb, k, c, ldc)
	ntGeneric(m, n, k, a, lda, b, ldb, c, ldc)
}

// NN computes C = A·B, overwriting C:
//
//	for i < m, j < n: c[i*ldc+j] = Σ_{p<k} a[i*lda+p] * b[p*ldb+j]
//
// A is m×k, B is k×n, C is m×n, all row-major.
func NN(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	check("NN", m, n, k, a, lda, k, b, ldb, n, c, ldc)
	nnGeneric(m, n, k, a, lda, b, ldb, c, ldc)
}

func check(op string, m, n, k int, a []float32, lda, acols int, b []float32, ldb, bcols int, c []float32, ldc int) {
	if m < 0 || n < 0 || k < 0 {
		panic(fmt.Sprintf("gemm.%s: negative size m=%d n=%d k=%d", op, m, n, k))
	}
	if m == 0 || n == 0 {
		return
	}
	brows := n
	if op == "NN" {
		brows = k
	}
	need := func(name string, s []float32, rows, cols, ld int) {
		if ld < cols {
			panic(fmt.Sprintf("gemm.%s: %s leading dimension %d < %d columns", op, name, ld, cols))
		}
		if rows > 0 && cols > 0 && len(s) < (rows-1)*ld+cols {
			panic(fmt.Sprintf("gemm.%s: %s has %d values, need %d", op, name, len(s), (rows-1)*ld+cols))
		}
	}
	need("A", a, m, acols, lda)
	need("B", b, brows, bcols, ldb)
	need("C", c, m, n, ldc)
}

func ntGeneric(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	for i := 0; i < m; i++ {
		ar := a[i*lda : i*lda+k]
		cr := c[i*ldc : i*ldc+n]
		for j := range cr {
			br := b[j*ldb : j*ldb+k]
			var s float32
			for p, v := range ar {
				s += v * br[p]
			}
			cr[j] = s
		}
	}
}

func nnGeneric(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	for i := 0; i < m; i++ {
		cr := c[i*ldc : i*ldc+n]
		clear(cr)
		for p := 0; p < k; p++ {
			av := a[i*lda+p]
			br := b[p*ldb : p*ldb+n]
			for j, v := range br {
				cr[j] += av * v
			}
		}
	}
}
