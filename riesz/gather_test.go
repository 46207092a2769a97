package riesz

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestGatherRowSumsMatchesSums checks that row sums gathered from a cached
// interaction matrix equal, bit for bit, a Sums pass over the gathered rows
// and columns, for every special-cased and a general exponent, with column
// subsets in arbitrary order spanning several 512-column segments.
func TestGatherRowSumsMatchesSums(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, p := range []float64{1, 2, 4, 1.5} {
		for _, sz := range []struct{ n, m, d int }{{37, 1300, 16}, {5, 70, 8}, {130, 600, 32}} {
			t.Run(fmt.Sprintf("p%v/%dx%dx%d", p, sz.n, sz.m, sz.d), func(t *testing.T) {
				k := MustNew(4, p, 1)
				a := randSet(rng, sz.n, sz.d, 1)
				b := randSet(rng, sz.m, sz.d, 1)
				var ws Workspace
				cache := make([]float32, a.N*b.N)
				k.RowStatsCached(a, b, make([]float32, b.N), make([]float64, a.N), nil, nil, cache, &ws)
				rows := make([]int32, 0, a.N)
				for _, x := range rng.Perm(a.N)[:a.N*2/3+1] {
					rows = append(rows, int32(x))
				}
				cols := make([]int32, 0, b.N)
				for _, x := range rng.Perm(b.N)[:b.N/2+3] {
					cols = append(cols, int32(x))
				}
				slices.Sort(cols)
				got := make([]float64, len(rows))
				k.GatherRowSums(cache, b.N, rows, cols, got, make([]float32, len(cols)+16))
				// The same rows and columns as sets of their own.
				sa := Set{X: make([]float32, len(rows)*a.D), Norms: make([]float32, len(rows)), N: len(rows), D: a.D}
				for i, x := range rows {
					copy(sa.X[i*a.D:], a.X[int(x)*a.D:int(x+1)*a.D])
					sa.Norms[i] = a.Norms[x]
				}
				sb := Set{X: make([]float32, len(cols)*b.D), Norms: make([]float32, len(cols)), N: len(cols), D: b.D}
				for j, c := range cols {
					copy(sb.X[j*b.D:], b.X[int(c)*b.D:int(c+1)*b.D])
					sb.Norms[j] = b.Norms[c]
				}
				mat := make([]float32, sa.N*sb.N)
				k.RowStatsCached(sa, sb, make([]float32, sb.N), make([]float64, sa.N), nil, nil, mat, &ws)
				for i, x := range rows {
					for j, c := range cols {
						if mat[i*sb.N+j] != cache[int(x)*b.N+int(c)] {
							t.Fatalf("interaction (%d, %d) depends on its position: %v recomputed, %v cached", i, j, mat[i*sb.N+j], cache[int(x)*b.N+int(c)])
						}
					}
				}
				want := make([]float64, len(rows))
				k.Sums(sa, sb, want, nil, &ws)
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("row %d (candidate %d): gathered %v, Sums %v", i, rows[i], got[i], want[i])
					}
					if want[i] <= 0 {
						t.Fatalf("row %d: sum %v not positive", i, want[i])
					}
				}
			})
		}
	}
}

// BenchmarkGatherRowSums sums every candidate's interactions with half of
// a full paper-scale bank from a cached 4680×9360 matrix (the bank's
// speculative eviction sums, one head).
func BenchmarkGatherRowSums(b *testing.B) {
	n, m := 4680, 9360
	rng := rand.New(rand.NewPCG(1, 1))
	w := make([]float32, n*m)
	for i := range w {
		w[i] = rng.Float32()
	}
	rows := make([]int32, n)
	for i, x := range rng.Perm(n) {
		rows[i] = int32(x)
	}
	cols := make([]int32, m/2)
	for j, c := range rng.Perm(m)[:m/2] {
		cols[j] = int32(c)
	}
	slices.Sort(cols)
	k := MustNew(8, 2, 1)
	out := make([]float64, n)
	buf := make([]float32, len(cols)+16)
	for b.Loop() {
		clear(out)
		k.GatherRowSums(w, m, rows, cols, out, buf)
	}
	b.ReportMetric(float64(n*len(cols))*float64(b.N)/b.Elapsed().Seconds()/1e9, "Gelem/s")
}
