package eval

import (
	"math"
	"sort"

	"github.com/densitykv/densitykv/gemm"
)

// Attend computes single-head softmax attention for nq queries:
//
//	w[i][j] = softmax_j(q_i·k_j/√d) over the rows j < n with !skip(j)
//	out[i] = Σ_j w[i][j]·v_j
//
// q is [nq][d] contiguous; row j of k and v starts at j·ld (ld ≥ d, so one
// head of a [S][H][D] tensor is k[h·D:] with ld = H·D). Skipped rows get
// weight 0. w (len ≥ nq·n) and out (len ≥ nq·d) are overwritten. With no
// unskipped row, w and out are zero.
func Attend(q []float32, nq, d int, k, v []float32, ld, n int, skip func(j int) bool, w, out []float32) {
	w, out = w[:nq*n], out[:nq*d]
	if n == 0 || nq == 0 {
		clear(out)
		return
	}
	gemm.NT(nq, n, d, q, d, k, ld, w, n)
	scale := 1 / math.Sqrt(float64(d))
	for i := 0; i < nq; i++ {
		row := w[i*n : (i+1)*n]
		m := math.Inf(-1)
		for j, x := range row {
			if skip != nil && skip(j) {
				continue
			}
			m = math.Max(m, float64(x)*scale)
		}
		if math.IsInf(m, -1) {
			clear(row)
			continue
		}
		var s float64
		for j, x := range row {
			if skip != nil && skip(j) {
				row[j] = 0
				continue
			}
			e := math.Exp(float64(x)*scale - m)
			row[j] = float32(e)
			s += e
		}
		inv := 1 / s
		for j := range row {
			row[j] = float32(float64(row[j]) * inv)
		}
	}
	gemm.NN(nq, d, n, w, n, v, ld, out, d)
}

// RelL2 returns ‖a − b‖₂ / ‖b‖₂ (0 when both are zero, +Inf when only b is).
func RelL2(a, b []float32) float64 {
	var num, den float64
	for i := range b {
		d := float64(a[i]) - float64(b[i])
		num += d * d
		den += float64(b[i]) * float64(b[i])
	}
	if den == 0 {
		if num == 0 {
			return 0
		}
		return math.Inf(1)
	}
	return math.Sqrt(num / den)
}

// TopKRecall returns, for the weights w of one query over candidate rows,
// the fraction of the k highest-weighted rows with eligible(j) that are
// kept(j). Ties at the k-th weight are broken by the lower row index. It
// returns NaN when no row is eligible; with fewer than k eligible rows all
// of them count.
func TopKRecall(w []float32, k int, eligible, kept func(j int) bool) float64 {
	return recallOf(TopK(nil, w, k, eligible), kept)
}

func recallOf(top []int, kept func(j int) bool) float64 {
	if len(top) == 0 {
		return math.NaN()
	}
	hit := 0
	for _, j := range top {
		if kept(j) {
			hit++
		}
	}
	return float64(hit) / float64(len(top))
}

// TopK appends to dst the indices of the (at most) k largest w[j] with
// eligible(j), largest first, ties broken by the lower index.
func TopK(dst []int, w []float32, k int, eligible func(j int) bool) []int {
	if k <= 0 {
		return dst
	}
	base := len(dst)
	for j, x := range w {
		if !eligible(j) {
			continue
		}
		n := len(dst) - base
		if n == k && x <= w[dst[len(dst)-1]] {
			continue
		}
		if n < k {
			dst = append(dst, j)
		} else {
			dst[len(dst)-1] = j
		}
		// Bubble the new entry up; strict > keeps earlier indices first on ties.
		for i := len(dst) - 1; i > base && x > w[dst[i-1]]; i-- {
			dst[i], dst[i-1] = dst[i-1], dst[i]
		}
	}
	return dst
}

// CoverageRadius returns the maximum and mean over the nx points x ([nx][d])
// of the Euclidean distance to the nearest of the nr points r ([nr][d]),
// computed exactly by NearestRetained. With nr = 0 both are +Inf (nothing
// covers); with nx = 0 both are 0.
func CoverageRadius(x []float32, nx int, r []float32, nr, d int) (maxDist, meanDist float64) {
	if nx == 0 {
		return 0, 0
	}
	if nr == 0 {
		return math.Inf(1), math.Inf(1)
	}
	dist := make([]float64, nx)
	NearestRetained(x, nx, r, nr, d, nil, dist)
	var sum float64
	for _, v := range dist {
		maxDist = math.Max(maxDist, v)
		sum += v
	}
	return maxDist, sum / float64(nx)
}

// nnSlots is how many near-minimal candidates NearestRetained remembers per
// point before it falls back to re-measuring every r for that point.
const nnSlots = 8

// NearestRetained finds, for each of the nx points x ([nx][d]), the nearest
// of the nr points r ([nr][d]): idx[i] (if idx is not nil) receives its
// index and dist[i] (if not nil) the Euclidean distance, computed in float64
// as √Σ(x−r)² over the float32 coordinates. Ties go to the lower index.
// With nr = 0, idx is −1 and dist +Inf.
//
// The search is exact, not approximate: a float32 product (package gemm)
// gives |x|² + |r|² − 2x·r for every pair, whose error is at most
// E = 2γ_d·‖x‖·‖r‖ (plus float64 rounding) with γ_d = d·u/(1 − d·u), u =
// 2⁻²⁴, whatever the summation order; every r within 2E of a point's
// smallest product value is re-measured in float64, and the true nearest is
// always among them. Points with more than a few such candidates are
// re-measured against every r.
func NearestRetained(x []float32, nx int, r []float32, nr, d int, idx []int32, dist []float64) {
	if nr == 0 {
		for i := 0; i < nx; i++ {
			if idx != nil {
				idx[i] = -1
			}
			if dist != nil {
				dist[i] = math.Inf(1)
			}
		}
		return
	}
	if nx == 0 {
		return
	}
	rn := make([]float64, nr)
	var rmax float64
	for j := range rn {
		rn[j] = sqNorm(r[j*d : (j+1)*d])
		rmax = math.Max(rmax, rn[j])
	}
	u := math.Ldexp(1, -24)
	gamma := float64(d) * u / (1 - float64(d)*u)
	type cand struct {
		j int32
		v float64
	}
	type row struct {
		xn, win, best float64
		n             int
		overflow      bool
		c             [nnSlots]cand
	}
	rows := make([]row, nx)
	for i := range rows {
		xn := sqNorm(x[i*d : (i+1)*d])
		e := 2*gamma*math.Sqrt(xn*rmax) + 1e-12*(xn+rmax)
		rows[i] = row{xn: xn, win: 2 * e, best: math.Inf(1)}
	}
	gemm.NTFunc(nx, nr, d, x, d, r, d, func(i0, j0, nrow, ncol int, tile []float32, ldt int) {
		for a := 0; a < nrow; a++ {
			rw := &rows[i0+a]
			thr := rw.best + rw.win
			for s, dot := range tile[a*ldt : a*ldt+ncol] {
				v := rw.xn + rn[j0+s] - 2*float64(dot)
				if v > thr {
					continue
				}
				if v < rw.best {
					rw.best = v
					thr = v + rw.win
				}
				if rw.overflow {
					continue
				}
				if rw.n == nnSlots {
					k := 0 // drop candidates the new minimum has ruled out
					for _, c := range rw.c[:rw.n] {
						if c.v <= thr {
							rw.c[k] = c
							k++
						}
					}
					rw.n = k
					if k == nnSlots {
						rw.overflow = true
						continue
					}
				}
				rw.c[rw.n] = cand{int32(j0 + s), v}
				rw.n++
			}
		}
	})
	for i := range rows {
		rw := &rows[i]
		xi := x[i*d : (i+1)*d]
		best, bj := math.Inf(1), int32(-1)
		try := func(j int32) {
			if v := sqDist64(xi, r[int(j)*d:(int(j)+1)*d]); v < best || (v == best && j < bj) {
				best, bj = v, j
			}
		}
		if rw.overflow || rw.n == 0 { // n = 0 only for non-finite input
			for j := 0; j < nr; j++ {
				try(int32(j))
			}
		} else {
			thr := rw.best + rw.win
			for _, c := range rw.c[:rw.n] {
				if c.v <= thr {
					try(c.j)
				}
			}
		}
		if idx != nil {
			idx[i] = bj
		}
		if dist != nil {
			dist[i] = math.Sqrt(best)
		}
	}
}

// sqDist64 is Σ(a−b)² in float64.
func sqDist64(a, b []float32) float64 {
	var s float64
	for i, x := range a {
		t := float64(x) - float64(b[i])
		s += t * t
	}
	return s
}

func sqNorm(x []float32) float64 {
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	return s
}

// MidRanks ranks values (1 = best) with tied values sharing the mean of the
// ranks they span (midranks: 1, 2.5, 2.5, 4). lowerBetter selects the
// direction. NaN values rank after every number, tied among themselves.
func MidRanks(values []float64, lowerBetter bool) []float64 {
	n := len(values)
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	key := func(i int) float64 {
		v := values[i]
		if math.IsNaN(v) {
			return math.Inf(1)
		}
		if !lowerBetter {
			return -v
		}
		return v
	}
	nan := func(i int) bool { return math.IsNaN(values[i]) }
	less := func(a, b int) bool {
		if nan(a) != nan(b) {
			return nan(b)
		}
		return key(a) < key(b)
	}
	sort.SliceStable(idx, func(a, b int) bool { return less(idx[a], idx[b]) })
	ranks := make([]float64, n)
	for i := 0; i < n; {
		j := i + 1
		for j < n && !less(idx[i], idx[j]) && !less(idx[j], idx[i]) {
			j++
		}
		mid := float64(i+j+1) / 2 // mean of ranks i+1 … j
		for t := i; t < j; t++ {
			ranks[idx[t]] = mid
		}
		i = j
	}
	return ranks
}

// RoundTo rounds v to the given number of decimals (ranks use the displayed
// values, as the paper does).
func RoundTo(v float64, decimals int) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	p := math.Pow(10, float64(decimals))
	return math.Round(v*p) / p
}
