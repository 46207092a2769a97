package riesz

import (
	"fmt"
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
	k.ForEachTile(a, b, ws, func(i0, j0, rows, cols int, w []float32) {
		iv := inv[j0 : j0+cols]
		for r := 0; r < rows; r++ {
			row := w[r*cols : r*cols+cols]
			var s, sn float64
			var m float32
			for j, v := range row {
				s += float64(v)
				q := v * iv[j]
				sn += float64(q)
				if q > m {
					m = q
				}
			}
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
		}
	})
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
	k.ForEachTile(a, b, ws, func(i0, j0, nr, nc int, w []float32) {
		for r := 0; r < nr; r++ {
			row := w[r*nc : r*nc+nc]
			if rows != nil {
				var s float64
				for _, v := range row {
					s += float64(v)
				}
				rows[i0+r] += s
			}
			if cols != nil {
				c := cols[j0 : j0+nc]
				for j, v := range row {
					c[j] += float64(v)
				}
			}
		}
	})
}

// SelfSums adds to out[i] the Soft-Riesz density of every member of a,
// Φ(i) = Σ_{j≠i} w(a_i, a_j) (paper Eq. density). The diagonal is skipped
// by index, so coincident members still interact (w = eps^(−p)).
func (k Kernel) SelfSums(a Set, out []float64, ws *Workspace) {
	if len(out) < a.N {
		panic(fmt.Sprintf("riesz: SelfSums: output of length %d for %d rows", len(out), a.N))
	}
	if a.N == 0 {
		return
	}
	k.ForEachTile(a, a, ws, func(i0, j0, nr, nc int, w []float32) {
		for r := 0; r < nr; r++ {
			row := w[r*nc : r*nc+nc]
			if d := i0 + r - j0; d >= 0 && d < nc {
				row[d] = 0
			}
			var s float64
			for _, v := range row {
				s += float64(v)
			}
			out[i0+r] += s
		}
	})
}

// Never is the crossing point reported by PrefixScan for a column whose
// running sum never reaches its threshold.
const Never = math.MaxInt32

// PrefixScan walks the rows of a in order (the sorted candidates) against
// every row j of b (the bank's states) and accumulates S_j(r) = Σ_{x<r}
// w(a_x, b_j) in float64. For each column it records the crossing point
//
//	cross[j] = the smallest r in [1, a.N] with base[j] + S_j(r) ≥ thr[j]
//
// (0 when base[j] ≥ thr[j] already, Never when it is never reached). Since
// w ≥ 0, S_j is non-decreasing, so the column violates the threshold for
// exactly the prefixes r ≥ cross[j].
//
// If every > 0, ckpt receives S_j at every multiple of every:
// ckpt[(r/every−1)·b.N + j] = S_j(r) for r = every, 2·every, … ≤ a.N; it must
// hold (a.N/every)·b.N values. Together with a short Sums pass over the
// remaining rows this gives S_j(r) for any r without a second full pass.
func (k Kernel) PrefixScan(a, b Set, base, thr []float64, cross []int32, every int, ckpt []float64, ws *Workspace) {
	if len(base) < b.N || len(thr) < b.N || len(cross) < b.N {
		panic(fmt.Sprintf("riesz: PrefixScan: %d bases, %d thresholds, %d outputs for %d columns", len(base), len(thr), len(cross), b.N))
	}
	if every > 0 {
		if every%TileRows != 0 {
			panic(fmt.Sprintf("riesz: PrefixScan: checkpoint interval %d is not a multiple of %d", every, TileRows))
		}
		if len(ckpt) < (a.N/every)*b.N {
			panic(fmt.Sprintf("riesz: PrefixScan: %d checkpoint values, need %d", len(ckpt), (a.N/every)*b.N))
		}
	}
	acc := ws.scanAcc()
	for j := 0; j < b.N; j++ {
		if base[j] >= thr[j] {
			cross[j] = 0
		} else {
			cross[j] = Never
		}
	}
	if a.N == 0 || b.N == 0 {
		return
	}
	k.ForEachTileByColumn(a, b, ws, func(i0, j0, nr, nc int, w []float32) {
		ac := acc[:nc]
		if i0 == 0 {
			clear(ac)
		}
		cr := cross[j0 : j0+nc]
		bs := base[j0 : j0+nc]
		th := thr[j0 : j0+nc]
		for r := 0; r < nr; r++ {
			row := w[r*nc : r*nc+nc]
			for j, v := range row {
				s := ac[j] + float64(v)
				ac[j] = s
				if cr[j] == Never && bs[j]+s >= th[j] {
					cr[j] = int32(i0 + r + 1)
				}
			}
		}
		if every > 0 {
			if end := i0 + nr; end%every == 0 {
				copy(ckpt[(end/every-1)*b.N+j0:], ac)
			}
		}
	})
}
