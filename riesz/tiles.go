package riesz

import (
	"fmt"

	"github.com/densitykv/densitykv/gemm"
)

// Tile sizes of the interaction passes: a tile covers TileRows rows of the
// left set and TileCols rows of the right set (TileRows·TileCols float32 of
// workspace, 256 KiB).
const (
	TileRows = 128
	TileCols = 512
)

// Set is a row-major matrix of n vectors of dimension D with their squared
// norms. X has at least N·D values, Norms at least N. BF16 says that X
// holds bfloat16 values (a bank's BF16 keys): the dot products of two BF16
// sets are gemm's bfloat16 product, those of two float32 sets its float32
// product; a pass over one set of each kind panics. A BF16 set may hold its
// vectors as bfloat16 bits in X16 instead of X (a bank's keys as stored,
// with no float32 copy): the passes pack them straight from there
// (gemm.PackABF16, gemm.PackNTBF16), with the same results as from X.
type Set struct {
	X     []float32
	X16   []uint16
	Norms []float32
	N, D  int
	BF16  bool
}

// values returns the number of vector values the set holds.
func (s Set) values() int {
	if s.X16 != nil {
		return len(s.X16)
	}
	return len(s.X)
}

// prec is the gemm precision of a set's dot products.
func prec(s Set) gemm.Precision {
	if s.BF16 {
		return gemm.BF16
	}
	return gemm.F32
}

// NewSet wraps x ([n][d]) and computes its squared norms into norms (which
// is allocated when nil or too short).
func NewSet(x []float32, n, d int, norms []float32) Set {
	if cap(norms) < n {
		norms = make([]float32, n)
	}
	norms = norms[:n]
	Norms(norms, x, n, d)
	return Set{X: x, Norms: norms, N: n, D: d}
}

// Rows returns the sub-set of rows [i, j).
func (s Set) Rows(i, j int) Set {
	if s.X16 != nil {
		return Set{X16: s.X16[i*s.D : j*s.D], Norms: s.Norms[i:j], N: j - i, D: s.D, BF16: s.BF16}
	}
	return Set{X: s.X[i*s.D : j*s.D], Norms: s.Norms[i:j], N: j - i, D: s.D, BF16: s.BF16}
}

func (s Set) check(op, name string) {
	if s.N < 0 || s.D <= 0 || s.values() < s.N*s.D || len(s.Norms) < s.N {
		panic(fmt.Sprintf("riesz: %s: set %s has N=%d D=%d with %d values and %d norms", op, name, s.N, s.D, s.values(), len(s.Norms)))
	}
	if s.X16 != nil && !s.BF16 {
		panic(fmt.Sprintf("riesz: %s: set %s holds bfloat16 bits (X16) but is not BF16", op, name))
	}
}

// Workspace is the reusable scratch of the tiled passes. The zero value is
// ready to use; a Workspace must not be used by two passes concurrently.
type Workspace struct {
	tile []float32
	acc  []float64
	pb   gemm.PackedB // the right-hand set of the current pass, packed once

	rs, rsn []float64 // per-row statistics of a tile
	rm      []float32

	pa       gemm.PackedA // rows [paI0, paI0+paRows) of paSet, packed once per row block
	paX      *float32
	paX16    *uint16
	paI0     int
	paRows   int
	paN, paD int
	paBF16   bool
}

// product computes the dot products of rows [i0, i0+rows) of a with the
// packed right-hand set's rows [j0, j0+cols) into t (row stride ldt). The
// row block of a is packed once and reused for every column tile of the
// same block (the passes walk row blocks outer, column tiles inner); the
// products equal PackedB.ProductSub's bit for bit (same micro-kernel calls).
func (ws *Workspace) product(a Set, i0, rows, j0, cols int, t []float32, ldt int) {
	d := a.D
	if p := ws.pb.Precision(); prec(a) != p {
		panic(fmt.Sprintf("riesz: a pass over a %v set and a %v set", prec(a), p))
	}
	notBF16(a)
	var x *float32
	var x16 *uint16
	if a.X16 != nil {
		x16 = &a.X16[0]
	} else {
		x = &a.X[0]
	}
	if ws.paX != x || ws.paX16 != x16 || ws.paI0 != i0 || ws.paRows != rows || ws.paN != a.N || ws.paD != d || ws.paBF16 != a.BF16 {
		if x16 != nil {
			gemm.PackABF16(&ws.pa, gemm.BF16, rows, d, a.X16[i0*d:], d)
		} else {
			gemm.PackAAs(&ws.pa, prec(a), rows, d, a.X[i0*d:], d)
		}
		ws.paX, ws.paX16, ws.paI0, ws.paRows, ws.paN, ws.paD, ws.paBF16 = x, x16, i0, rows, a.N, d, a.BF16
	}
	gemm.MulPacked(rows, cols, d, &ws.pa, 0, 0, &ws.pb, j0, 0, t, ldt, false)
}

// notBF16 panics on a set of bfloat16 bits that is not marked BF16.
func notBF16(s Set) {
	if s.X16 != nil && !s.BF16 {
		panic("riesz: a set holds bfloat16 bits (X16) but is not BF16")
	}
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// pack packs b as the right-hand operand of the pass (A·Bᵀ).
func (ws *Workspace) pack(b Set) {
	ws.paX, ws.paX16 = nil, nil // a new pass: the packed row block is stale
	notBF16(b)
	if b.N == 0 {
		return
	}
	if b.X16 != nil {
		gemm.PackNTBF16(&ws.pb, gemm.BF16, b.N, b.D, b.X16, b.D)
		return
	}
	gemm.PackNTAs(&ws.pb, prec(b), b.N, b.D, b.X, b.D)
}

func (ws *Workspace) tileBuf() []float32 {
	if len(ws.tile) < TileRows*TileCols {
		ws.tile = make([]float32, TileRows*TileCols)
	}
	return ws.tile
}

// Bytes returns the workspace's current size in bytes.
func (ws *Workspace) Bytes() int64 {
	return int64(len(ws.tile)+cap(ws.rm))*4 + ws.pa.Bytes() + int64(len(ws.acc)+cap(ws.rs)+cap(ws.rsn))*8 + ws.pb.Bytes()
}

// tile computes w(a_i, b_j) for i in [i0, i0+rows), j in [j0, j0+cols) into
// t (rows×cols, row stride ldt). b must be packed in ws (ws.pack) and j0 a
// multiple of gemm.NR. Every element gets the same arithmetic wherever its
// tile lies, so passes with different tilings agree bit for bit.
func (k Kernel) tile(ws *Workspace, a, b Set, i0, rows, j0, cols int, t []float32, ldt int) {
	ws.product(a, i0, rows, j0, cols, t, ldt)
	nb := b.Norms[j0 : j0+cols]
	if k.pow != 0 {
		epiTileFromDots(t, ldt, rows, cols, a.Norms[i0:i0+rows], nb, k.eps32, k.invS2, k.pow)
		return
	}
	for r := 0; r < rows; r++ {
		k.fromDots(t[r*ldt:r*ldt+cols], a.Norms[i0+r], nb)
	}
}

// tileStats is tile fused with per-row statistics: for every row r it
// calls fn(r, Σ_j w, Σ_j w·inv[j], max_j w·inv[j]) (inv nil: sum only)
// over the tile's columns.
func (k Kernel) tileStats(ws *Workspace, a, b Set, i0, rows, j0, cols int, t []float32, ldt int, inv []float32, fn func(r int, s, sn float64, m float32)) {
	ws.product(a, i0, rows, j0, cols, t, ldt)
	nb := b.Norms[j0 : j0+cols]
	var iv []float32
	if inv != nil {
		iv = inv[j0 : j0+cols]
	}
	if k.pow != 0 {
		ws.rs = grow(ws.rs, rows)
		ws.rsn = grow(ws.rsn, rows)
		ws.rm = grow(ws.rm, rows)
		epiTileStats(t, ldt, rows, cols, a.Norms[i0:i0+rows], nb, iv, k.eps32, k.invS2, k.pow, ws.rs, ws.rsn, ws.rm)
		for r := 0; r < rows; r++ {
			fn(r, ws.rs[r], ws.rsn[r], ws.rm[r])
		}
		return
	}
	for r := 0; r < rows; r++ {
		row := t[r*ldt : r*ldt+cols]
		k.fromDots(row, a.Norms[i0+r], nb)
		var s, sn float64
		var m float32
		if iv == nil {
			s = epiRowSumCols(row, nil)
		} else {
			s, sn, m = epiRowStats(row, iv)
		}
		fn(r, s, sn, m)
	}
}

// Matrix writes the full interaction matrix W[i][j] = w(a_i, b_j) into dst
// (a.N×b.N, row stride b.N), tile by tile. It is the cache of the bank's
// scoring pass, used only when its size fits the caller's budget.
func (k Kernel) Matrix(a, b Set, dst []float32, ws *Workspace) {
	a.check("Matrix", "a")
	b.check("Matrix", "b")
	if len(dst) < a.N*b.N {
		panic(fmt.Sprintf("riesz: Matrix: %d values for a %d×%d matrix", len(dst), a.N, b.N))
	}
	if a.N == 0 || b.N == 0 {
		return
	}
	ws.pack(b)
	for i0 := 0; i0 < a.N; i0 += TileRows {
		rows := min(TileRows, a.N-i0)
		for j0 := 0; j0 < b.N; j0 += TileCols {
			cols := min(TileCols, b.N-j0)
			k.tile(ws, a, b, i0, rows, j0, cols, dst[i0*b.N+j0:], b.N)
		}
	}
}

// ForEachTile calls fn for every tile of the interaction matrix
// W[i][j] = w(a_i, b_j), row blocks outer, column blocks inner. w holds
// rows×cols interactions with row stride cols; it is only valid during the
// call.
func (k Kernel) ForEachTile(a, b Set, ws *Workspace, fn func(i0, j0, rows, cols int, w []float32)) {
	a.check("ForEachTile", "a")
	b.check("ForEachTile", "b")
	if a.D != b.D {
		panic(fmt.Sprintf("riesz: ForEachTile: dimensions %d and %d differ", a.D, b.D))
	}
	if a.N == 0 || b.N == 0 {
		return
	}
	t := ws.tileBuf()
	ws.pack(b)
	for i0 := 0; i0 < a.N; i0 += TileRows {
		rows := min(TileRows, a.N-i0)
		for j0 := 0; j0 < b.N; j0 += TileCols {
			cols := min(TileCols, b.N-j0)
			k.tile(ws, a, b, i0, rows, j0, cols, t, cols)
			fn(i0, j0, rows, cols, t[:rows*cols])
		}
	}
}
