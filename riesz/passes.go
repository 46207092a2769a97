package riesz

import (
	"fmt"
	"github.com/densitykv/densitykv/gemm"
	"math"
)

// RowStats is one fused pass over W[x][i] = w(a_x, b_i) that computes, for
// every row x of a (candidates) against the rows of b (a bank):
//
//	sum[x]  += Σ_i W[x][i]                  (external density)
//	mean[x]  = (1/|b|) Σ_i W[x][i]·inv[i]   (mean-normalised score)
//	max[x]   = max_i W[x][i]·inv[i]         (max-normalised score)
//
// inv[i] is the bank's inverse baseline 1/max(b_i, δ). Any output may be nil
// to skip it; sum is added to, mean and max are overwritten. With an empty b,
// mean and max are 0.
func (k Kernel) RowStats(a, b Set, inv []float32, sum, mean, maxs []float64, ws *Workspace) {
	k.RowStatsCached(a, b, inv, sum, mean, maxs, nil, ws)
}

// RowStatsCached is RowStats that also stores the interaction matrix
// W[x][i] in cache (a.N×b.N, row stride b.N) when cache is not nil, for a
// later ScanRows. The statistics are identical either way.
func (k Kernel) RowStatsCached(a, b Set, inv []float32, sum, mean, maxs []float64, cache []float32, ws *Workspace) {
	if len(inv) < b.N {
		panic(fmt.Sprintf("riesz: RowStats: %d inverse baselines for %d bank rows", len(inv), b.N))
	}
	for _, o := range [][]float64{sum, mean, maxs} {
		if o != nil && len(o) < a.N {
			panic(fmt.Sprintf("riesz: RowStats: output of length %d for %d rows", len(o), a.N))
		}
	}
	for x := 0; x < a.N; x++ {
		if mean != nil {
			mean[x] = 0
		}
		if maxs != nil {
			maxs[x] = 0
		}
	}
	if b.N == 0 || a.N == 0 {
		return
	}
	// Tiles are reduced while they are still in cache memory, in 512-column
	// segments (the cached path writes them straight into the cache), so
	// both paths give identical results.
	if cache != nil && len(cache) < a.N*b.N {
		panic(fmt.Sprintf("riesz: RowStatsCached: cache of %d for a %d×%d matrix", len(cache), a.N, b.N))
	}
	ws.pack(b)
	M := b.N
	t := ws.tileBuf()
	for i0 := 0; i0 < a.N; i0 += TileRows {
		rows := min(TileRows, a.N-i0)
		for j0 := 0; j0 < M; j0 += TileCols {
			cols := min(TileCols, M-j0)
			dst, ld := t, cols
			if cache != nil {
				dst, ld = cache[i0*M+j0:], M
			}
			k.tileStats(ws, a, b, i0, rows, j0, cols, dst, ld, inv, func(r int, s, sn float64, m float32) {
				x := i0 + r
				if sum != nil {
					sum[x] += s
				}
				if mean != nil {
					mean[x] += sn
				}
				if maxs != nil && float64(m) > maxs[x] {
					maxs[x] = float64(m)
				}
			})
		}
	}
	if mean != nil {
		inm := 1 / float64(b.N)
		for x := 0; x < a.N; x++ {
			mean[x] *= inm
		}
	}
}

// Sums is one pass over W[i][j] = w(a_i, b_j) that adds the row sums
// Σ_j W[i][j] to rows[i] and the column sums Σ_i W[i][j] to cols[j]. Either
// output may be nil.
func (k Kernel) Sums(a, b Set, rows, cols []float64, ws *Workspace) {
	if rows != nil && len(rows) < a.N || cols != nil && len(cols) < b.N {
		panic(fmt.Sprintf("riesz: Sums: outputs of length %d, %d for a %d×%d product", len(rows), len(cols), a.N, b.N))
	}
	if a.N == 0 || b.N == 0 {
		return
	}
	if cols == nil {
		// Row sums only: fused epilogue.
		t := ws.tileBuf()
		ws.pack(b)
		for i0 := 0; i0 < a.N; i0 += TileRows {
			nr := min(TileRows, a.N-i0)
			for j0 := 0; j0 < b.N; j0 += TileCols {
				nc := min(TileCols, b.N-j0)
				k.tileStats(ws, a, b, i0, nr, j0, nc, t, nc, nil, func(r int, s, _ float64, _ float32) {
					rows[i0+r] += s
				})
			}
		}
		return
	}
	k.ForEachTile(a, b, ws, func(i0, j0, nr, nc int, w []float32) {
		var c []float64
		if cols != nil {
			c = cols[j0 : j0+nc]
		}
		for r := 0; r < nr; r++ {
			s := epiRowSumCols(w[r*nc:r*nc+nc], c)
			if rows != nil {
				rows[i0+r] += s
			}
		}
	})
}

// SelfSums adds to out[i] the Soft-Riesz density of every member of a,
// Φ(i) = Σ_{j≠i} w(a_i, a_j) (paper Eq. density). Only the tiles on or above
// the diagonal are computed; every pair j > i is added to both out[i] and
// out[j]. The diagonal is skipped by index, so coincident members still
// interact (w = eps^(−p)).
func (k Kernel) SelfSums(a Set, out []float64, ws *Workspace) {
	if len(out) < a.N {
		panic(fmt.Sprintf("riesz: SelfSums: output of length %d for %d rows", len(out), a.N))
	}
	a.check("SelfSums", "a")
	if a.N < 2 {
		return
	}
	t := ws.tileBuf()
	ws.pack(a)
	for i0 := 0; i0 < a.N; i0 += TileRows {
		rows := min(TileRows, a.N-i0)
		// Column tiles start at the micro-kernel column block of the
		// diagonal (a multiple of gemm.NR), not of TileCols: the part
		// below the diagonal that is computed and skipped stays small.
		for j0 := (i0 / gemm.NR) * gemm.NR; j0 < a.N; j0 += TileCols {
			cols := min(TileCols, a.N-j0)
			if j0+cols <= i0+1 {
				continue
			}
			k.tile(ws, a, a, i0, rows, j0, cols, t, cols)
			for r := 0; r < rows; r++ {
				i := i0 + r
				start := max(0, i+1-j0)
				if start >= cols {
					continue
				}
				out[i] += epiRowSumCols(t[r*cols+start:r*cols+cols], out[j0+start:j0+cols])
			}
		}
	}
}

// Never is the crossing point reported by PrefixScan for a column whose
// running sum never reaches its threshold.
const Never = math.MaxInt32

// PrefixScan walks the rows of a in order (the sorted candidates) against
// every row j of b (the bank's states) and accumulates S_j(r) = Σ_{x<r}
// w(a_x, b_j) in float64, row by row. For each column it records the
// crossing point
//
//	cross[j] = the smallest r in [1, a.N] with S_j(r) ≥ rem[j]
//
// (0 when rem[j] ≤ 0, Never when it is never reached); rem[j] is the
// headroom τ·b_j − ρ_j of state j. Since w ≥ 0, S_j is non-decreasing, so
// the column violates the threshold for exactly the prefixes r ≥ cross[j].
//
// If every > 0 (a multiple of TileRows), ckpt receives S_j at every
// multiple of every: ckpt[(r/every−1)·b.N + j] = S_j(r) for r = every,
// 2·every, … ≤ a.N; it must hold (a.N/every)·b.N values. Adding the
// remaining rows with Sums (same order of float64 additions) gives S_j(r)
// for any r without a second full pass. When a.N is not a multiple of every
// and ckpt has room for one more slot (⌈a.N/every⌉·b.N values), that slot
// receives the final sums S_j(a.N).
func (k Kernel) PrefixScan(a, b Set, rem []float64, cross []int32, every int, ckpt []float64, ws *Workspace) {
	checkScan(a.N, b.N, rem, cross, every, ckpt)
	acc, rm := ws.initScan(rem[:b.N], cross[:b.N])
	if a.N == 0 || b.N == 0 {
		return
	}
	k.ForEachTile(a, b, ws, func(i0, j0, nr, nc int, w []float32) {
		ac := acc[j0 : j0+nc]
		cr := cross[j0 : j0+nc]
		rmj := rm[j0 : j0+nc]
		for r := 0; r < nr; r++ {
			epiScanRow(w[r*nc:r*nc+nc], ac, rmj, cr, int32(i0+r+1))
		}
		if every > 0 && j0+nc == b.N {
			if end := i0 + nr; end%every == 0 {
				copy(ckpt[(end/every-1)*b.N:], acc)
			}
		}
	})
	finalCheckpoint(a.N, b.N, every, ckpt, acc)
}

// finalCheckpoint stores the final sums acc = S_j(n) in ckpt's optional
// last slot (see PrefixScan).
func finalCheckpoint(n, m, every int, ckpt, acc []float64) {
	if every > 0 && n%every != 0 && len(ckpt) >= (n/every+1)*m {
		copy(ckpt[(n/every)*m:(n/every+1)*m], acc)
	}
}

// ScanRows is PrefixScan over a cached interaction matrix W (rows of
// length m, row stride m, as written by Matrix): it walks the rows
// W[rows[0]], W[rows[1]], … in that order. Results equal PrefixScan over the
// same candidates in that order bit for bit.
func ScanRows(w []float32, m int, rows []int32, rem []float64, cross []int32, every int, ckpt []float64, ws *Workspace) {
	checkScan(len(rows), m, rem, cross, every, ckpt)
	acc, rm := ws.initScan(rem[:m], cross[:m])
	// Four rows at a time while no checkpoint falls inside the group (every
	// is a multiple of 4), then one by one; the same additions per column in
	// the same order, so results equal the row-by-row scan bit for bit.
	r4 := len(rows) &^ 3
	for r := 0; r < r4; r += 4 {
		var g [4][]float32
		for k := range g {
			x := int(rows[r+k])
			g[k] = w[x*m : x*m+m]
		}
		for j0 := 0; j0 < m; j0 += TileCols {
			j1 := min(j0+TileCols, m)
			epiScanRows4(g[0][j0:j1], g[1][j0:j1], g[2][j0:j1], g[3][j0:j1], acc[j0:j1], rm[j0:j1], cross[j0:j1], int32(r))
		}
		if every > 0 && (r+4)%every == 0 {
			copy(ckpt[((r+4)/every-1)*m:], acc)
		}
	}
	for r := r4; r < len(rows); r++ {
		x := rows[r]
		// Same 512-column segments as PrefixScan (bit-identical results).
		row := w[int(x)*m : int(x)*m+m]
		for j0 := 0; j0 < m; j0 += TileCols {
			j1 := min(j0+TileCols, m)
			epiScanRow(row[j0:j1], acc[j0:j1], rm[j0:j1], cross[j0:j1], int32(r+1))
		}
		if every > 0 && (r+1)%every == 0 {
			copy(ckpt[((r+1)/every-1)*m:], acc)
		}
	}
	finalCheckpoint(len(rows), m, every, ckpt, acc)
}

func checkScan(n, m int, rem []float64, cross []int32, every int, ckpt []float64) {
	if len(rem) < m || len(cross) < m {
		panic(fmt.Sprintf("riesz: prefix scan: %d headrooms, %d outputs for %d columns", len(rem), len(cross), m))
	}
	if every > 0 {
		if every%TileRows != 0 {
			panic(fmt.Sprintf("riesz: prefix scan: checkpoint interval %d is not a multiple of %d", every, TileRows))
		}
		if len(ckpt) < (n/every)*m {
			panic(fmt.Sprintf("riesz: prefix scan: %d checkpoint values, need %d", len(ckpt), (n/every)*m))
		}
	}
}

// initScan prepares the scan accumulators and the private copy of the
// headrooms (set to +Inf once a column has crossed) and initialises cross.
func (ws *Workspace) initScan(rem []float64, cross []int32) (acc, rm []float64) {
	n := len(rem)
	if cap(ws.acc) < 2*n {
		ws.acc = make([]float64, 2*n)
	}
	acc, rm = ws.acc[:n], ws.acc[n:2*n]
	clear(acc)
	for j, v := range rem {
		if v <= 0 {
			cross[j] = 0
			rm[j] = math.Inf(1)
		} else {
			cross[j] = Never
			rm[j] = v
		}
	}
	return acc, rm
}

// GatherRowSums adds to out[r] the sum of W[rows[r]][cols[k]] over k, read
// from a cached interaction matrix W (rows of length m, row stride m, as
// written by RowStatsCached for a against b); cols must be strictly
// increasing. The result equals, bit for bit, Sums(a', b', out, nil) where
// a' holds the rows rows[·] of a and b' the rows cols[·] of b in that
// order: interactions do not depend on their position in a pass, and the
// gathered values are reduced in 512-column segments exactly as the fused
// row-sum epilogue does. buf is scratch of at least len(cols)+16 values.
func (k Kernel) GatherRowSums(w []float32, m int, rows, cols []int32, out []float64, buf []float32) {
	if len(out) < len(rows) || len(buf) < len(cols)+16 {
		panic(fmt.Sprintf("riesz: GatherRowSums: %d outputs for %d rows, %d scratch values for %d columns", len(out), len(rows), len(buf), len(cols)))
	}
	bits := make([]uint16, (m+15)/16)
	for q, c := range cols {
		if c < 0 || int(c) >= m || q > 0 && c <= cols[q-1] {
			panic(fmt.Sprintf("riesz: GatherRowSums: column %d at %d out of range [0, %d) or not increasing", c, q, m))
		}
		bits[c>>4] |= 1 << (c & 15)
	}
	for r, x := range rows {
		row := w[int(x)*m : int(x)*m+m]
		g := buf[:len(cols)]
		epiCompress(row, bits, cols, buf)
		for j0 := 0; j0 < len(g); j0 += TileCols {
			seg := g[j0:min(j0+TileCols, len(g))]
			out[r] += epiRowSumCols(seg, nil)
		}
	}
}
