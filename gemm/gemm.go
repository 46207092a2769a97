// Package gemm provides the dense float32 matrix products used by the Riesz
// kernels, the attention and the Wan backbone: C = A·Bᵀ (NT) and C = A·B
// (NN), row-major, with leading dimensions, plus a fused tile API (NTFunc)
// that hands C to a caller's epilogue tile by tile without materialising it.
//
// The reference loops in the doc comments define the results. The fast path
// packs A and B into panels and runs a 4×32 register-blocked micro-kernel:
// with GOEXPERIMENT=simd on an AVX-512 amd64 CPU it uses simd/archsimd
// Float32x16 fused multiply-adds; otherwise a pure-Go micro-kernel. MulPacked
// on operands that hold only exact bfloat16 values (the bank's keys) runs an
// AVX512_BF16 kernel instead where the CPU has one: twice the multiply-adds
// per instruction, with results equal to the float32 kernel's bit for bit
// (bf16.go explains why). The naive reference loops (gemm_generic.go) are
// always built and are the oracle the fast path is tested against; the path
// is chosen once at start-up.
//
// Every output element is computed by exactly one goroutine with a summation
// order that depends only on k (chunks of KC, sequential inside a chunk), so
// results are bit-identical for every thread count (see SetThreads).
//
// Memory: packing buffers come from a sync.Pool, so calls on one goroutine
// do not allocate in steady state; a call that fans out to several
// goroutines allocates a few small closures (about six) for them.
//
// Aliasing: C must not overlap A or B.
package gemm

import (
	"fmt"
	"runtime"
	"sync/atomic"
)

// Blocking parameters of the fast path. Tiles handed to NTFunc callbacks are
// at most TileM×TileN.
const (
	// MR×NR is the register block of the micro-kernel.
	MR = 4
	NR = 32
	// KC is the depth of one packed chunk: the k dimension is summed in
	// chunks of KC, in order.
	KC = 128
	// TileM and TileN bound the rows and columns of one tile (macro block).
	TileM = 128
	TileN = 512
)

var threads atomic.Int64

func init() { threads.Store(int64(runtime.GOMAXPROCS(0))) }

// SetThreads sets the number of goroutines NT, NN and NTFuncParallel may use
// and returns the previous setting. n < 1 means runtime.GOMAXPROCS(0). The
// results do not depend on the setting. The default is GOMAXPROCS at start-up.
func SetThreads(n int) (prev int) {
	if n < 1 {
		n = runtime.GOMAXPROCS(0)
	}
	return int(threads.Swap(int64(n)))
}

// Threads returns the current thread setting (see SetThreads).
func Threads() int { return int(threads.Load()) }

// useFast selects the packed, blocked path (SIMD micro-kernel when available)
// over the naive reference loops. It is set once at start-up; tests flip it
// through forceGeneric.
var useFast = true

// SIMD reports whether the AVX-512 micro-kernel is in use (GOEXPERIMENT=simd
// build on a CPU with AVX-512).
func SIMD() bool { return useFast && simdKernel }

// NT computes C = A·Bᵀ, overwriting C:
//
//	for i < m, j < n: c[i*ldc+j] = Σ_{p<k} a[i*lda+p] * b[j*ldb+p]
//
// A is m×k, B is n×k, C is m×n, all row-major. It panics with a "gemm.NT"
// message on negative sizes, short slices or leading dimensions smaller
// than the row length.
func NT(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	check("NT", m, n, k, a, lda, k, b, ldb, k, c, ldc)
	if m == 0 || n == 0 {
		return
	}
	if !useFast {
		parallelRows(m, func(i0, i1 int) {
			ntGeneric(i1-i0, n, k, a[i0*lda:], lda, b, ldb, c[i0*ldc:], ldc)
		})
		return
	}
	ws := getWorkspace()
	pb := packB(&ws.pb, false, n, k, b, ldb)
	pb.product(m, a, lda, c, ldc)
	putWorkspace(ws)
}

// NN computes C = A·B, overwriting C:
//
//	for i < m, j < n: c[i*ldc+j] = Σ_{p<k} a[i*lda+p] * b[p*ldb+j]
//
// A is m×k, B is k×n, C is m×n, all row-major. It panics like NT.
func NN(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	check("NN", m, n, k, a, lda, k, b, ldb, n, c, ldc)
	if m == 0 || n == 0 {
		return
	}
	if !useFast {
		parallelRows(m, func(i0, i1 int) {
			nnGeneric(i1-i0, n, k, a[i0*lda:], lda, b, ldb, c[i0*ldc:], ldc)
		})
		return
	}
	ws := getWorkspace()
	pb := packB(&ws.pb, true, n, k, b, ldb)
	pb.product(m, a, lda, c, ldc)
	putWorkspace(ws)
}

// TileFunc receives one finished tile of C = A·Bᵀ: the values
// C[i0+r][j0+s] for r < rows, s < cols are tile[r*ldt+s]. The tile is only
// valid during the call; fn may modify it (it is scratch).
type TileFunc func(i0, j0, rows, cols int, tile []float32, ldt int)

// NTFunc computes C = A·Bᵀ (as NT) tile by tile and hands every finished
// tile to fn instead of storing C, so an epilogue or a reduction can consume
// C without materialising it. Tiles are at most TileM×TileN, visited with
// row blocks outer and column blocks inner (i0 = 0, TileM, 2·TileM, ...; for
// each, j0 = 0, TileN, ...). fn is called sequentially from the calling
// goroutine. Each tile value equals the corresponding NT result bit for bit.
func NTFunc(m, n, k int, a []float32, lda int, b []float32, ldb int, fn TileFunc) {
	check("NTFunc", m, n, k, a, lda, k, b, ldb, k, nil, 0)
	if m == 0 || n == 0 {
		return
	}
	ws := getWorkspace()
	pb := packB(&ws.pb, false, n, k, b, ldb)
	pb.tiles(m, a, lda, 1, fn, nil)
	putWorkspace(ws)
}

// ParallelTileFunc is a TileFunc that also receives the index of the worker
// (0 ≤ worker < the number of workers) that produced the tile.
type ParallelTileFunc func(worker, i0, j0, rows, cols int, tile []float32, ldt int)

// NTFuncParallel is NTFunc on up to Threads() workers. Row blocks of TileM
// rows are split into contiguous ranges, one range per worker, so every row
// of C is seen by exactly one worker, which visits its row blocks in order
// and each row block's column blocks in order. fn runs concurrently for
// different workers but never concurrently for the same worker. Per-row
// reductions done in fn are therefore independent of the thread count;
// per-column reductions are not unless the caller combines per-worker
// partials itself.
func NTFuncParallel(m, n, k int, a []float32, lda int, b []float32, ldb int, fn ParallelTileFunc) {
	check("NTFuncParallel", m, n, k, a, lda, k, b, ldb, k, nil, 0)
	if m == 0 || n == 0 {
		return
	}
	ws := getWorkspace()
	pb := packB(&ws.pb, false, n, k, b, ldb)
	pb.tiles(m, a, lda, Threads(), nil, fn)
	putWorkspace(ws)
}

// PackedB is a right-hand operand packed once into micro-kernel panels and
// reused across products, e.g. a bank's keys used for several passes or a
// Linear layer's weights. The zero value is empty; Pack methods reuse its
// storage. A PackedB may be read by several goroutines at once but must not
// be re-packed while in use.
type PackedB struct {
	n, k int
	data []float32 // fast path: [ceil(n/NR)][k][NR] panels, zero padded
	raw  []float32 // reference path: B as n×k rows (NT) for the generic loops

	// bfloat16 pair panels [ceil(n/NR)][k/2][NR] (see bf16.go), valid
	// when pairs is set.
	bf    []uint32
	pairs bool
}

// N returns the number of columns of C (rows of Bᵀ) of the packed operand.
func (p *PackedB) N() int { return p.n }

// K returns the inner dimension of the packed operand.
func (p *PackedB) K() int { return p.k }

// Bytes returns the memory held by the packed operand.
func (p *PackedB) Bytes() int64 { return int64(cap(p.data)+cap(p.raw)+cap(p.bf)) * 4 }

// PackNT packs B (n×k, row-major, leading dimension ldb) for products
// C = A·Bᵀ, reusing p's storage, and returns p. A nil p allocates one.
func PackNT(p *PackedB, n, k int, b []float32, ldb int) *PackedB {
	check("PackNT", 0, n, k, nil, 0, 0, b, ldb, k, nil, 0)
	if p == nil {
		p = new(PackedB)
	}
	return packB(p, false, n, k, b, ldb)
}

// PackNN packs B (k×n, row-major, leading dimension ldb) for products
// C = A·B, reusing p's storage, and returns p. A nil p allocates one.
func PackNN(p *PackedB, n, k int, b []float32, ldb int) *PackedB {
	check("PackNN", 0, n, k, nil, 0, 0, b, ldb, n, nil, 0)
	if p == nil {
		p = new(PackedB)
	}
	return packB(p, true, n, k, b, ldb)
}

// Product computes C = A·op(B) for the packed operand (op(B) = Bᵀ after
// PackNT, B after PackNN), overwriting C (m×N(), leading dimension ldc).
// A is m×K() with leading dimension lda. Results equal NT / NN bit for bit.
func (p *PackedB) Product(m int, a []float32, lda int, c []float32, ldc int) {
	check("PackedB.Product", m, p.n, p.k, a, lda, p.k, nil, 0, 0, c, ldc)
	if m == 0 || p.n == 0 {
		return
	}
	p.product(m, a, lda, c, ldc)
}

// TileFunc is NTFunc for the packed operand (sequential, same tile order).
func (p *PackedB) TileFunc(m int, a []float32, lda int, fn TileFunc) {
	check("PackedB.TileFunc", m, p.n, p.k, a, lda, p.k, nil, 0, 0, nil, 0)
	if m == 0 || p.n == 0 {
		return
	}
	p.tiles(m, a, lda, 1, fn, nil)
}

// TileFuncParallel is NTFuncParallel for the packed operand (same worker
// split and ordering guarantees).
func (p *PackedB) TileFuncParallel(m int, a []float32, lda int, fn ParallelTileFunc) {
	check("PackedB.TileFuncParallel", m, p.n, p.k, a, lda, p.k, nil, 0, 0, nil, 0)
	if m == 0 || p.n == 0 {
		return
	}
	p.tiles(m, a, lda, Threads(), nil, fn)
}

// ProductSub computes a sub-product on the calling goroutine:
//
//	for i < m, j < j1-j0: c[i*ldc+j] = (acc ? c[i*ldc+j] : 0) + Σ_{q<k1-k0} a[i*lda+q] * op(B)[k0+q][j0+j]
//
// where op(B) is K()×N() (Bᵀ after PackNT, B after PackNN). j0 must be a
// multiple of NR (the panel width); 0 ≤ j0 ≤ j1 ≤ N(), 0 ≤ k0 ≤ k1 ≤ K().
// With acc the products continue from C's values (the sum runs in order of
// q after them), which lets a caller accumulate over inner-dimension
// blocks, as the tiled attention does. It does not allocate in steady state.
func (p *PackedB) ProductSub(m int, a []float32, lda int, j0, j1, k0, k1 int, c []float32, ldc int, acc bool) {
	if j0%NR != 0 || j0 < 0 || j1 < j0 || j1 > p.n || k0 < 0 || k1 < k0 || k1 > p.k {
		panic(fmt.Sprintf("gemm.PackedB.ProductSub: bad ranges j [%d, %d) k [%d, %d) for N=%d K=%d (j0 must be a multiple of %d)", j0, j1, k0, k1, p.n, p.k, NR))
	}
	check("PackedB.ProductSub", m, j1-j0, k1-k0, a, lda, k1-k0, nil, 0, 0, c, ldc)
	if m == 0 || j1 == j0 {
		return
	}
	p.sub(m, a, lda, j0, j1, k0, k1, c, ldc, acc)
}

// check validates sizes and slice lengths; a nil slice with zero rows is
// not checked (used by the packing and tile entry points).
func check(op string, m, n, k int, a []float32, lda, acols int, b []float32, ldb, bcols int, c []float32, ldc int) {
	if m < 0 || n < 0 || k < 0 {
		panic(fmt.Sprintf("gemm.%s: negative size m=%d n=%d k=%d", op, m, n, k))
	}
	brows := n
	if op == "NN" || op == "PackNN" {
		brows = k
	}
	need := func(name string, s []float32, rows, cols, ld int) {
		if rows == 0 || cols == 0 {
			return
		}
		if ld < cols {
			panic(fmt.Sprintf("gemm.%s: %s leading dimension %d < %d columns", op, name, ld, cols))
		}
		if len(s) < (rows-1)*ld+cols {
			panic(fmt.Sprintf("gemm.%s: %s has %d values, need %d", op, name, len(s), (rows-1)*ld+cols))
		}
	}
	if m == 0 && a == nil && c == nil {
		// packing entry points: only B matters
		need("B", b, brows, bcols, ldb)
		return
	}
	if m == 0 || n == 0 {
		return
	}
	need("A", a, m, acols, lda)
	if b != nil || ldb != 0 {
		need("B", b, brows, bcols, ldb)
	}
	if c != nil || ldc != 0 {
		need("C", c, m, n, ldc)
	}
}
