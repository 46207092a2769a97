package riesz

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestNewValidates(t *testing.T) {
	cases := []struct {
		name          string
		sigma, p, eps float64
		want          string
	}{
		{"sigma0", 0, 2, 1, "sigma"},
		{"sigmaNaN", math.NaN(), 2, 1, "sigma"},
		{"sigmaInf", math.Inf(1), 2, 1, "sigma"},
		{"p0", 8, 0, 1, "p ="},
		{"pneg", 8, -1, 1, "p ="},
		{"pInf", 8, math.Inf(1), 1, "p ="},
		{"eps0", 8, 2, 0, "eps"},
		{"epsNaN", 8, 2, math.NaN(), "eps"},
		{"overflow", 8, 8, 1e-10, "overflows"},
		{"tinySigma", 1e-20, 2, 1, "range"},
	}
	for _, c := range cases {
		_, err := New(c.sigma, c.p, c.eps)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "riesz: ") {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
	if _, err := New(8, 2, 1); err != nil {
		t.Fatal(err)
	}
}

// TestSpecialCasedPowers checks p = 1, 2, 4 (no math.Pow) and a general p
// against the math.Pow definition.
func TestSpecialCasedPowers(t *testing.T) {
	for _, p := range []float64{1, 2, 4, 0.5, 2.5, 3} {
		for _, eps := range []float64{1, 0.25} {
			k := MustNew(8, p, eps)
			for _, d2 := range []float64{0, 1e-8, 0.5, 3, 64, 1e3, 1e6} {
				want := math.Pow(eps+d2/64, -p)
				if got := k.Eval(d2); math.Abs(got-want) > 1e-14*want {
					t.Errorf("p=%v eps=%v Eval(%v) = %v, want %v", p, eps, d2, got, want)
				}
				if got := float64(k.Eval32(float32(d2))); math.Abs(got-want) > 3e-6*want {
					t.Errorf("p=%v eps=%v Eval32(%v) = %v, want %v", p, eps, d2, got, want)
				}
				row := []float32{0}
				// a·b such that |a|²+|b|²−2a·b = d2 with |a|² = |b|² = 1e3.
				row[0] = float32((2e3 - d2) / 2)
				k.fromDots(row, 1e3, []float32{1e3})
				if d2 < 1e3 && math.Abs(float64(row[0])-want) > 1e-4*want+1e-9 {
					t.Errorf("p=%v fromDots(d2=%v) = %v, want %v", p, d2, row[0], want)
				}
			}
		}
	}
	// Negative expanded distances clamp to 0 (w = eps^−p).
	k := MustNew(8, 2, 1)
	row := []float32{10}
	k.fromDots(row, 9, []float32{9}) // 9 + 9 − 20 < 0
	if row[0] != 1 {
		t.Errorf("clamp: got %v, want 1", row[0])
	}
}

func randSet(rng *rand.Rand, n, d int, scale float64) Set {
	x := make([]float32, n*d)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * scale)
	}
	return NewSet(x, n, d, nil)
}

func naiveW(k Kernel, a, b Set, i, j int) float64 {
	return float64(k.Eval32(SqDist(a.X[i*a.D:(i+1)*a.D], b.X[j*b.D:(j+1)*b.D])))
}

func near(a, b, rel float64) bool { return math.Abs(a-b) <= rel*math.Abs(b)+1e-9 }

// TestPassesAgainstNaive checks every fused pass against direct loops on
// sizes that straddle the tile edges.
func TestPassesAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var ws Workspace
	for _, sz := range [][3]int{{1, 1, 1}, {3, 5, 7}, {TileRows - 1, TileCols + 1, 16}, {TileRows + 3, 2*TileCols + 5, 33}, {300, 40, 128}} {
		n, m, d := sz[0], sz[1], sz[2]
		for _, p := range []float64{1, 2, 4, 1.5} {
			k := MustNew(3, p, 1)
			a := randSet(rng, n, d, 0.5)
			b := randSet(rng, m, d, 0.5)
			inv := make([]float32, m)
			for i := range inv {
				inv[i] = float32(0.5 + rng.Float64())
			}
			sum := make([]float64, n)
			mean := make([]float64, n)
			mx := make([]float64, n)
			k.RowStats(a, b, inv, sum, mean, mx, &ws)
			sum2 := make([]float64, n)
			mean2 := make([]float64, n)
			mx2 := make([]float64, n)
			cache := make([]float32, n*m)
			k.RowStatsCached(a, b, inv, sum2, mean2, mx2, cache, &ws)
			if !slices.Equal(sum, sum2) || !slices.Equal(mean, mean2) || !slices.Equal(mx, mx2) {
				t.Fatalf("%v: cached RowStats differs", sz)
			}
			for x := 0; x < n; x += 7 {
				for i := 0; i < m; i += 5 {
					if want := naiveW(k, a, b, x, i); !near(float64(cache[x*m+i]), want, 1e-5) {
						t.Fatalf("%v: cache[%d][%d] = %v, want %v", sz, x, i, cache[x*m+i], want)
					}
				}
			}
			rows := make([]float64, n)
			cols := make([]float64, m)
			k.Sums(a, b, rows, cols, &ws)
			wantCols := make([]float64, m)
			for x := 0; x < n; x++ {
				var s, sn, smx float64
				for i := 0; i < m; i++ {
					w := naiveW(k, a, b, x, i)
					s += w
					q := float64(float32(w) * inv[i])
					sn += q
					smx = math.Max(smx, q)
					wantCols[i] += w
				}
				if !near(sum[x], s, 1e-5) || !near(mean[x], sn/float64(m), 1e-5) || !near(mx[x], smx, 1e-5) || !near(rows[x], s, 1e-5) {
					t.Fatalf("%v p=%v row %d: sum %v mean %v max %v rows %v, want %v %v %v", sz, p, x, sum[x], mean[x], mx[x], rows[x], s, sn/float64(m), smx)
				}
			}
			for i := range cols {
				if !near(cols[i], wantCols[i], 1e-5) {
					t.Fatalf("%v col %d: %v, want %v", sz, i, cols[i], wantCols[i])
				}
			}
			checkSelfSums(t, k, a, &ws, 1e-5)
		}
	}
}

// TestPrefixScan checks crossing points and checkpoints against a direct
// running sum.
func TestPrefixScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var ws Workspace
	k := MustNew(2, 2, 1)
	for _, sz := range [][3]int{{1, 3, 4}, {TileRows, 7, 5}, {3*TileRows + 17, TileCols + 9, 12}} {
		n, m, d := sz[0], sz[1], sz[2]
		a := randSet(rng, n, d, 1)
		b := randSet(rng, m, d, 1)
		rem := make([]float64, m)
		for j := range rem {
			rem[j] = rng.Float64() * float64(n) * 0.05
		}
		rem[0] = -1 // already over
		rem[m-1] = math.Inf(1)
		cross := make([]int32, m)
		// One slot more than the multiples of TileRows: the final sums.
		ckpt := make([]float64, (n/TileRows+1)*m)
		k.PrefixScan(a, b, rem, cross, TileRows, ckpt, &ws)
		// The cached path agrees bit for bit, in any row order.
		cache := make([]float32, n*m)
		k.Matrix(a, b, cache, &ws)
		order := make([]int32, n)
		for i := range order {
			order[i] = int32(i)
		}
		cross2 := make([]int32, m)
		ckpt2 := make([]float64, len(ckpt))
		ScanRows(cache, m, order, rem, cross2, TileRows, ckpt2, &ws)
		if !slices.Equal(cross, cross2) || !slices.Equal(ckpt, ckpt2) {
			t.Fatalf("%v: ScanRows differs from PrefixScan", sz)
		}
		for j := 0; j < m; j++ {
			want := int32(Never)
			if rem[j] <= 0 {
				want = 0
			}
			var s float64
			for r := 1; r <= n; r++ {
				s += naiveW(k, a, b, r-1, j)
				if want == Never && s >= rem[j] {
					want = int32(r)
				}
				if r%TileRows == 0 && !near(ckpt[(r/TileRows-1)*m+j], s, 1e-6) {
					t.Fatalf("%v: ckpt r=%d col %d: %v, want %v", sz, r, j, ckpt[(r/TileRows-1)*m+j], s)
				}
			}
			if cross[j] != want {
				t.Fatalf("%v: cross[%d] = %d, want %d", sz, j, cross[j], want)
			}
			last := ckpt[(n/TileRows)*m+j]
			if n%TileRows == 0 {
				if last != 0 {
					t.Fatalf("%v: final slot written although n is a multiple of %d", sz, TileRows)
				}
				continue
			}
			if !near(last, s, 1e-6) {
				t.Fatalf("%v: final S col %d = %v, want %v", sz, j, last, s)
			}
		}
		// The final sums equal the last checkpoint plus the remaining rows
		// (Sums), bit for bit: the bank uses either.
		if r0 := n / TileRows * TileRows; r0 < n {
			S := make([]float64, m)
			if r0 > 0 {
				copy(S, ckpt[(r0/TileRows-1)*m:])
			}
			k.Sums(a.Rows(r0, n), b, nil, S, &ws)
			if !slices.Equal(S, ckpt[(n/TileRows)*m:]) {
				t.Fatalf("%v: final checkpoint differs from checkpoint + Sums of the remaining rows", sz)
			}
		}
	}
}

func TestSqDistAndNorms(t *testing.T) {
	a := []float32{1, 2, 3}
	b := []float32{1, 2, 3}
	if SqDist(a, b) != 0 {
		t.Fatal("SqDist of equal vectors not 0")
	}
	if got := SqDist([]float32{0, 0}, []float32{3, 4}); got != 25 {
		t.Fatalf("SqDist = %v, want 25", got)
	}
	n := make([]float32, 2)
	Norms(n, []float32{3, 4, 1, 0}, 2, 2)
	if n[0] != 25 || n[1] != 1 {
		t.Fatalf("Norms = %v", n)
	}
}

func BenchmarkRowStats(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	n, m, d := 1024, 2048, 128
	a := randSet(rng, n, d, 1)
	s := randSet(rng, m, d, 1)
	inv := make([]float32, m)
	for i := range inv {
		inv[i] = 1
	}
	sum := make([]float64, n)
	mean := make([]float64, n)
	var ws Workspace
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		clear(sum)
		MustNew(8, 2, 1).RowStats(a, s, inv, sum, mean, nil, &ws)
	}
	b.ReportMetric(2*float64(n)*float64(m)*float64(d)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// TestSelfSumsAcrossTiles checks SelfSums against direct sums on sets that
// span several column tiles, so that row blocks start their column tiles
// at micro-kernel offsets inside a TileCols tile.
func TestSelfSumsAcrossTiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var ws Workspace
	k := MustNew(2, 2, 1)
	for _, n := range []int{TileCols + TileRows + 7, 2*TileCols + 3*TileRows + 1} {
		checkSelfSums(t, k, randSet(rng, n, 9, 0.5), &ws, 1e-6)
	}
}

// checkSelfSums compares SelfSums over a with direct sums of naiveW.
func checkSelfSums(t *testing.T, k Kernel, a Set, ws *Workspace, rel float64) {
	t.Helper()
	self := make([]float64, a.N)
	k.SelfSums(a, self, ws)
	for x := 0; x < a.N; x++ {
		var s float64
		for y := 0; y < a.N; y++ {
			if y != x {
				s += naiveW(k, a, a, x, y)
			}
		}
		if !near(self[x], s, rel) {
			t.Fatalf("n=%d d=%d self %d: %v, want %v", a.N, a.D, x, self[x], s)
		}
	}
}
