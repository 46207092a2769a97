package gemm

import (
	"fmt"
	"math"

	"github.com/densitykv/densitykv/internal/parallel"
)

// Blocking parameters of the fast path. Tiles handed to NTFunc callbacks are
// at most TileM×TileN.
const (
	// MR×NR is the register block of the micro-kernels and the panel
	// geometry of packed float32 operands.
	MR = 4
	NR = 32
	// KC is the depth of one chunk of the float32 kernels: C is stored
	// and reloaded between chunks (which does not change any result).
	KC = 128
	// TileM and TileN bound the rows and columns of one tile (macro block).
	TileM = 128
	TileN = 512
)

// SetThreads sets the number of goroutines NT, NN and NTFuncParallel may use
// and returns the previous setting. n < 1 means runtime.GOMAXPROCS(0). The
// results do not depend on the setting. The default is GOMAXPROCS at start-up.
func SetThreads(n int) (prev int) { return parallel.SetThreads(n) }

// Threads returns the current thread setting (see SetThreads).
func Threads() int { return parallel.Threads() }

// NT computes C = A·Bᵀ in float32, overwriting C:
//
//	for i < m, j < n: c[i*ldc+j] = Σ_{p<k} a[i*lda+p] * b[j*ldb+p]
//
// (the sum is the float32 product of the package documentation). A is m×k,
// B is n×k, C is m×n, all row-major. It panics with a "gemm.NT" message on
// negative sizes, short slices or leading dimensions smaller than the row
// length.
func NT(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	NTAs(F32, m, n, k, a, lda, b, ldb, c, ldc)
}

// NTAs is NT at precision prec: with BF16 both operands are rounded to
// bfloat16 (nearest even) and C is their bfloat16 product.
func NTAs(prec Precision, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	checkPrec("NT", prec)
	check("NT", m, n, k, a, lda, k, b, ldb, k, c, ldc)
	if m == 0 || n == 0 {
		return
	}
	ws := getWorkspace()
	ws.pb.o.pack(false, prec, packLayout(prec), n, k, source{f: b, ld: ldb})
	ws.pb.product(m, a, lda, c, ldc)
	putWorkspace(ws)
}

// NN computes C = A·B in float32, overwriting C:
//
//	for i < m, j < n: c[i*ldc+j] = Σ_{p<k} a[i*lda+p] * b[p*ldb+j]
//
// A is m×k, B is k×n, C is m×n, all row-major. It panics like NT.
func NN(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	NNAs(F32, m, n, k, a, lda, b, ldb, c, ldc)
}

// NNAs is NN at precision prec (see NTAs).
func NNAs(prec Precision, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	checkPrec("NN", prec)
	check("NN", m, n, k, a, lda, k, b, ldb, n, c, ldc)
	if m == 0 || n == 0 {
		return
	}
	ws := getWorkspace()
	ws.pb.o.pack(false, prec, packLayout(prec), n, k, source{f: b, ld: ldb, kMajor: true})
	ws.pb.product(m, a, lda, c, ldc)
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
	NTFuncAs(F32, m, n, k, a, lda, b, ldb, fn)
}

// NTFuncAs is NTFunc at precision prec (see NTAs).
func NTFuncAs(prec Precision, m, n, k int, a []float32, lda int, b []float32, ldb int, fn TileFunc) {
	checkPrec("NTFunc", prec)
	check("NTFunc", m, n, k, a, lda, k, b, ldb, k, nil, 0)
	if m == 0 || n == 0 {
		return
	}
	ws := getWorkspace()
	ws.pb.o.pack(false, prec, packLayout(prec), n, k, source{f: b, ld: ldb})
	ws.pb.tiles(m, a, lda, 1, fn, nil)
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
	NTFuncParallelAs(F32, m, n, k, a, lda, b, ldb, fn)
}

// NTFuncParallelAs is NTFuncParallel at precision prec (see NTAs).
func NTFuncParallelAs(prec Precision, m, n, k int, a []float32, lda int, b []float32, ldb int, fn ParallelTileFunc) {
	checkPrec("NTFuncParallel", prec)
	check("NTFuncParallel", m, n, k, a, lda, k, b, ldb, k, nil, 0)
	if m == 0 || n == 0 {
		return
	}
	ws := getWorkspace()
	ws.pb.o.pack(false, prec, packLayout(prec), n, k, source{f: b, ld: ldb})
	ws.pb.tiles(m, a, lda, Threads(), nil, fn)
	putWorkspace(ws)
}

// Product computes C = A·op(B) for the packed operand (op(B) = Bᵀ after
// PackNT, B after PackNN), overwriting C (m×N(), leading dimension ldc).
// A is m×K() float32 with leading dimension lda, packed at B's precision
// (rounded to bfloat16 when B is BF16). Results equal NT / NN (NTAs / NNAs)
// bit for bit.
func (p *PackedB) Product(m int, a []float32, lda int, c []float32, ldc int) {
	check("PackedB.Product", m, p.o.rows, p.o.k, a, lda, p.o.k, nil, 0, 0, c, ldc)
	if m == 0 || p.o.rows == 0 {
		return
	}
	p.checkLayout("PackedB.Product")
	p.product(m, a, lda, c, ldc)
}

// TileFunc is NTFunc for the packed operand (sequential, same tile order;
// A is packed at B's precision).
func (p *PackedB) TileFunc(m int, a []float32, lda int, fn TileFunc) {
	check("PackedB.TileFunc", m, p.o.rows, p.o.k, a, lda, p.o.k, nil, 0, 0, nil, 0)
	if m == 0 || p.o.rows == 0 {
		return
	}
	p.checkLayout("PackedB.TileFunc")
	p.tiles(m, a, lda, 1, fn, nil)
}

// TileFuncParallel is NTFuncParallel for the packed operand (same worker
// split and ordering guarantees; A is packed at B's precision).
func (p *PackedB) TileFuncParallel(m int, a []float32, lda int, fn ParallelTileFunc) {
	check("PackedB.TileFuncParallel", m, p.o.rows, p.o.k, a, lda, p.o.k, nil, 0, 0, nil, 0)
	if m == 0 || p.o.rows == 0 {
		return
	}
	p.checkLayout("PackedB.TileFuncParallel")
	p.tiles(m, a, lda, Threads(), nil, fn)
}

// ProductSub computes a sub-product on the calling goroutine:
//
//	for i < m, j < j1-j0: c[i*ldc+j] = product of A[i][0:k1-k0] and op(B)[k0:k1][j0+j],
//	                                   continuing from c[i*ldc+j] (acc) or +0
//
// where op(B) is K()×N() (Bᵀ after PackNT, B after PackNN) and A (m×(k1-k0)
// float32, leading dimension lda) is packed at B's precision. j0 must be a
// multiple of NR (the panel width) and, for a BF16 operand, k0 a multiple
// of BF16Block; 0 ≤ j0 ≤ j1 ≤ N(), 0 ≤ k0 ≤ k1 ≤ K(). With acc the products
// continue from C's values, which lets a caller accumulate over
// inner-dimension blocks, as the tiled attention does. It does not allocate
// in steady state.
func (p *PackedB) ProductSub(m int, a []float32, lda int, j0, j1, k0, k1 int, c []float32, ldc int, acc bool) {
	if j0%NR != 0 || j0 < 0 || j1 < j0 || j1 > p.o.rows || k0 < 0 || k1 < k0 || k1 > p.o.k || (p.o.prec == BF16 && k0%BF16Block != 0) {
		panic(fmt.Sprintf("gemm.PackedB.ProductSub: bad ranges j [%d, %d) k [%d, %d) for N=%d K=%d (j0 must be a multiple of %d, k0 of a %v operand of %d)",
			j0, j1, k0, k1, p.o.rows, p.o.k, NR, p.o.prec, blockOf(p.o.prec)))
	}
	check("PackedB.ProductSub", m, j1-j0, k1-k0, a, lda, k1-k0, nil, 0, 0, c, ldc)
	if m == 0 || j1 == j0 {
		return
	}
	p.checkLayout("PackedB.ProductSub")
	p.sub(m, a, lda, j0, j1, k0, k1, c, ldc, acc)
}

// blockOf is the depth alignment sub-ranges of an operand need.
func blockOf(p Precision) int {
	if p == BF16 {
		return BF16Block
	}
	return 1
}

// checkLayout panics if a bfloat16 operand was packed for a kernel layout
// other than the selected one (Force changed it).
func (o *packedOp) checkLayout(op, name string) {
	if k := selectedKernel(o.prec); o.lay != k.lay {
		panic(fmt.Sprintf("gemm.%s: %s was packed in %v, but the %v kernel %s needs %v: re-pack it after gemm.Force", op, name, o.lay, o.prec, k.name, k.lay))
	}
}

func (p *PackedB) checkLayout(op string) { p.o.checkLayout(op, "B") }

// MulPacked multiplies sub-blocks of packed operands on the calling
// goroutine:
//
//	for i < m, j < n: c[i*ldc+j] = product of A[ai0+i][ak0:ak0+k] and op(B)[bk0:bk0+k][bj0+j],
//	                               continuing from c[i*ldc+j] (acc) or +0
//
// A and B must have the same precision, and the product is that
// precision's (see the package documentation; a bfloat16 product's depth
// blocks start at ak0 and bk0, which must be multiples of BF16Block). ai0
// must be a multiple of MR and bj0 of NR; the blocks must lie inside the
// operands. It does not allocate in steady state. The tiled attention uses
// it to keep its operands packed across many small products.
func MulPacked(m, n, k int, pa *PackedA, ai0, ak0 int, pb *PackedB, bj0, bk0 int, c []float32, ldc int, acc bool) {
	a, b := &pa.o, &pb.o
	if m < 0 || n < 0 || k < 0 || ai0 < 0 || ai0%MR != 0 || ai0+m > a.rows || ak0 < 0 || ak0+k > a.k ||
		bj0 < 0 || bj0%NR != 0 || bj0+n > b.rows || bk0 < 0 || bk0+k > b.k {
		panic(fmt.Sprintf("gemm.MulPacked: %d×%d×%d product at A[%d:][%d:] (A is %d×%d) and B[%d:][%d:] (op(B) is %d×%d); A rows must start at a multiple of %d, B columns of %d",
			m, n, k, ai0, ak0, a.rows, a.k, bk0, bj0, b.k, b.rows, MR, NR))
	}
	if a.prec != b.prec {
		panic(fmt.Sprintf("gemm.MulPacked: A is %v and B is %v: pack both at one precision", a.prec, b.prec))
	}
	if a.prec == BF16 && (ak0%BF16Block != 0 || bk0%BF16Block != 0) {
		panic(fmt.Sprintf("gemm.MulPacked: bf16 depth offsets ak0=%d bk0=%d must be multiples of %d", ak0, bk0, BF16Block))
	}
	if m == 0 || n == 0 {
		return
	}
	if ldc < n || len(c) < (m-1)*ldc+n {
		panic(fmt.Sprintf("gemm.MulPacked: C has %d values with leading dimension %d, need %d×%d", len(c), ldc, m, n))
	}
	a.checkLayout("MulPacked", "A")
	b.checkLayout("MulPacked", "B")
	kern := selectedKernel(a.prec)
	if kern.hw {
		bf16Calls.Add(1)
	}
	ws := getWorkspace()
	for jb := 0; jb < n; jb += TileN {
		macro(kern, a, ai0, ak0, m, b, bj0+jb, bk0, min(TileN, n-jb), k, c[jb:], ldc, acc, ws)
	}
	putWorkspace(ws)
}

// product computes C = A·op(B) into c (m×n, leading dimension ldc) on up to
// Threads() goroutines, splitting the TileM×TileN blocks of C into
// contiguous ranges (row blocks outer).
func (p *PackedB) product(m int, a []float32, lda int, c []float32, ldc int) {
	n, k := p.o.rows, p.o.k
	kern := selectedKernel(p.o.prec)
	if kern.hw {
		bf16Calls.Add(1)
	}
	rb := (m + TileM - 1) / TileM
	cb := (n + TileN - 1) / TileN
	workers := Threads()
	if flops := 2 * m * n * k; flops < 1<<21 {
		workers = 1
	}
	if workers <= 1 {
		p.productRange(kern, 0, rb*cb, m, a, lda, c, ldc)
		return
	}
	parallelFor(workers, rb*cb, func(_, lo, hi int) { p.productRange(kern, lo, hi, m, a, lda, c, ldc) })
}

// productRange computes the blocks [lo, hi) of C, numbered row-major, so
// that a packed block of A rows serves a whole row of blocks (packing A
// costs about as much as a few percent of its products, more when it
// rounds to bfloat16; B streams from the last-level cache).
func (p *PackedB) productRange(kern *kernel, lo, hi, m int, a []float32, lda int, c []float32, ldc int) {
	n, k := p.o.rows, p.o.k
	cb := (n + TileN - 1) / TileN
	ws := getWorkspace()
	last := -1
	for it := lo; it < hi; it++ {
		ic, jc := it/cb, it%cb
		i0, j0 := ic*TileM, jc*TileN
		rows, cols := min(TileM, m-i0), min(TileN, n-j0)
		if ic != last {
			ws.pa.o.pack(true, p.o.prec, p.o.lay, rows, k, source{f: a[i0*lda:], ld: lda})
			last = ic
		}
		macro(kern, &ws.pa.o, 0, 0, rows, &p.o, j0, 0, cols, k, c[i0*ldc+j0:], ldc, false, ws)
	}
	putWorkspace(ws)
}

// tiles runs the fused tile loop on up to workers goroutines, each owning a
// contiguous range of row blocks. Exactly one of seq (workers must be 1) and
// par is non-nil.
func (p *PackedB) tiles(m int, a []float32, lda int, workers int, seq TileFunc, par ParallelTileFunc) {
	kern := selectedKernel(p.o.prec)
	if kern.hw {
		bf16Calls.Add(1)
	}
	rb := (m + TileM - 1) / TileM
	if 2*m*p.o.rows*p.o.k < 1<<21 {
		workers = 1
	}
	if workers <= 1 || rb == 1 {
		p.tileRange(kern, 0, 0, rb, m, a, lda, seq, par)
		return
	}
	parallelFor(workers, rb, func(w, lo, hi int) { p.tileRange(kern, w, lo, hi, m, a, lda, seq, par) })
}

// tileRange runs the row blocks [lo, hi) of the fused tile loop as worker w.
func (p *PackedB) tileRange(kern *kernel, w, lo, hi, m int, a []float32, lda int, seq TileFunc, par ParallelTileFunc) {
	n, k := p.o.rows, p.o.k
	ws := getWorkspace()
	ws.tile = grow(ws.tile, TileM*TileN)
	for ic := lo; ic < hi; ic++ {
		i0 := ic * TileM
		rows := min(TileM, m-i0)
		ws.pa.o.pack(true, p.o.prec, p.o.lay, rows, k, source{f: a[i0*lda:], ld: lda})
		for j0 := 0; j0 < n; j0 += TileN {
			cols := min(TileN, n-j0)
			macro(kern, &ws.pa.o, 0, 0, rows, &p.o, j0, 0, cols, k, ws.tile, TileN, false, ws)
			if seq != nil {
				seq(i0, j0, rows, cols, ws.tile, TileN)
			} else {
				par(w, i0, j0, rows, cols, ws.tile, TileN)
			}
		}
	}
	putWorkspace(ws)
}

// sub computes C[0:m][0:j1-j0] (+)= A[0:m][0:k1-k0]·op(B)[k0:k1][j0:j1] on
// the calling goroutine (see ProductSub).
func (p *PackedB) sub(m int, a []float32, lda int, j0, j1, k0, k1 int, c []float32, ldc int, acc bool) {
	kern := selectedKernel(p.o.prec)
	if kern.hw {
		bf16Calls.Add(1)
	}
	ws := getWorkspace()
	akk := k1 - k0
	for i0 := 0; i0 < m; i0 += TileM {
		rows := min(TileM, m-i0)
		ws.pa.o.pack(true, p.o.prec, p.o.lay, rows, akk, source{f: a[i0*lda:], ld: lda})
		for jb := j0; jb < j1; jb += TileN {
			cols := min(TileN, j1-jb)
			macro(kern, &ws.pa.o, 0, 0, rows, &p.o, jb, k0, cols, akk, c[i0*ldc+jb-j0:], ldc, acc, ws)
		}
	}
	putWorkspace(ws)
}

// checkSize panics when rows·cols overflows (before anything is sized by
// it).
func checkSize(op string, rows, cols int) {
	if cols > 0 && rows > math.MaxInt/cols {
		panic(fmt.Sprintf("gemm.%s: size %d×%d overflows", op, rows, cols))
	}
}

// checkMat validates a rows×cols matrix of n values with leading dimension
// ld.
func checkMat(op, name string, rows, cols, n, ld int) {
	if rows < 0 || cols < 0 {
		panic(fmt.Sprintf("gemm.%s: negative size %d×%d", op, rows, cols))
	}
	checkSize(op, rows, cols)
	if rows == 0 || cols == 0 {
		return
	}
	if ld < cols {
		panic(fmt.Sprintf("gemm.%s: %s leading dimension %d < %d columns", op, name, ld, cols))
	}
	if ld > math.MaxInt/rows || n < (rows-1)*ld+cols {
		panic(fmt.Sprintf("gemm.%s: %s has %d values, need %d×%d with leading dimension %d", op, name, n, rows, cols, ld))
	}
}

// check validates sizes and slice lengths; a nil slice with zero rows is
// not checked (used by the packing and tile entry points).
func check(op string, m, n, k int, a []float32, lda, acols int, b []float32, ldb, bcols int, c []float32, ldc int) {
	if m < 0 || n < 0 || k < 0 {
		panic(fmt.Sprintf("gemm.%s: negative size m=%d n=%d k=%d", op, m, n, k))
	}
	checkSize(op, m, k)
	checkSize(op, n, k)
	checkSize(op, m, n)
	brows := n
	if op == "NN" {
		brows = k
	}
	need := func(name string, s []float32, rows, cols, ld int) {
		if rows == 0 || cols == 0 {
			return
		}
		if ld < cols {
			panic(fmt.Sprintf("gemm.%s: %s leading dimension %d < %d columns", op, name, ld, cols))
		}
		if ld > math.MaxInt/rows || len(s) < (rows-1)*ld+cols {
			panic(fmt.Sprintf("gemm.%s: %s has %d values, need %d", op, name, len(s), (rows-1)*ld+cols))
		}
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
