package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// randMat returns rows×ld values (plus guard padding) with uniform values in
// [-1, 1); columns beyond cols in each row are guard values.
func randMat(rng *rand.Rand, rows, cols, ld int) []float32 {
	s := make([]float32, rows*ld+3)
	for i := range s {
		s[i] = guard
	}
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			s[i*ld+j] = float32(rng.Float64()*2 - 1)
		}
	}
	return s
}

func filled(n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = guard
	}
	return s
}

// ref64 computes the product in float64 for tolerance checks.
func ref64(nn bool, m, n, k int, a []float32, lda int, b []float32, ldb int) ([]float64, []float64) {
	c := make([]float64, m*n)
	abs := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s, t float64
			for p := 0; p < k; p++ {
				var bv float32
				if nn {
					bv = b[p*ldb+j]
				} else {
					bv = b[j*ldb+p]
				}
				x := float64(a[i*lda+p]) * float64(bv)
				s += x
				t += math.Abs(x)
			}
			c[i*n+j], abs[i*n+j] = s, t
		}
	}
	return c, abs
}

var sizes = []int{0, 1, 3, 4, 5, 15, 16, 17, 31, 32, 33, 127, 128, 129}

// TestNTNNAccuracy checks NT and NN against float64 sums (a sanity check
// of the definition itself: float32 and bfloat16 products of bfloat16-exact
// values stay within a float32 rounding bound), with guards around C.
func TestNTNNAccuracy(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	type shape struct{ m, n, k int }
	var shapes []shape
	for _, m := range []int{0, 1, 4, 5, 17, 129} {
		for _, n := range []int{0, 1, 16, 31, 33, 129, 513} {
			for _, k := range []int{0, 1, 15, 16, 17, 128, 129, 257} {
				shapes = append(shapes, shape{m, n, k})
			}
		}
	}
	for _, prec := range []Precision{F32, BF16} {
		for _, nn := range []bool{false, true} {
			for si, s := range shapes {
				pad := si % 3
				lda, ldc := s.k+pad, s.n+pad
				ldb := s.k + pad
				brows, bcols := s.n, s.k
				if nn {
					ldb = s.n + pad
					brows, bcols = s.k, s.n
				}
				a := randMat(rng, s.m, s.k, lda)
				b := randMat(rng, brows, bcols, ldb)
				if prec == BF16 { // exact bfloat16 inputs: only the sums round
					for i, v := range a {
						a[i] = BF16ToFloat32(RoundBF16(v))
					}
					for i, v := range b {
						b[i] = BF16ToFloat32(RoundBF16(v))
					}
				}
				c := filled(s.m*ldc + 3)
				if nn {
					NNAs(prec, s.m, s.n, s.k, a, lda, b, ldb, c, ldc)
				} else {
					NTAs(prec, s.m, s.n, s.k, a, lda, b, ldb, c, ldc)
				}
				want, abs := ref64(nn, s.m, s.n, s.k, a, lda, b, ldb)
				for i := 0; i < s.m; i++ {
					for j := 0; j < ldc; j++ {
						got := c[i*ldc+j]
						if j >= s.n {
							if got != guard {
								t.Fatalf("%v nn=%v %v: guard at (%d,%d) overwritten: %v", prec, nn, s, i, j, got)
							}
							continue
						}
						tol := 1e-6*abs[i*s.n+j] + 1e-30
						if d := math.Abs(float64(got) - want[i*s.n+j]); d > tol {
							t.Fatalf("%v nn=%v %v: c[%d][%d] = %v, want %v (|diff| %g > %g)", prec, nn, s, i, j, got, want[i*s.n+j], d, tol)
						}
					}
				}
				for _, g := range c[s.m*ldc:] {
					if g != guard {
						t.Fatalf("%v nn=%v %v: trailing guard overwritten", prec, nn, s)
					}
				}
			}
		}
	}
}

func TestNaNInfPropagation(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, prec := range []Precision{F32, BF16} {
		for _, s := range []struct{ m, n, k int }{{5, 33, 17}, {16, 16, 16}, {129, 40, 130}} {
			a := randMat(rng, s.m, s.k, s.k)
			b := randMat(rng, s.n, s.k, s.k)
			a[2*s.k+3] = float32(math.NaN())
			a[1*s.k+1] = float32(math.Inf(1))
			b[(s.n-1)*s.k+1] = float32(math.Inf(-1))
			b[0] = 0
			a[(s.m-1)*s.k] = float32(math.Inf(1)) // Inf·0 = NaN at (m-1, 0)
			c := make([]float32, s.m*s.n)
			NTAs(prec, s.m, s.n, s.k, a, s.k, b, s.k, c, s.n)
			if !math.IsNaN(float64(c[2*s.n])) || !math.IsInf(float64(c[1*s.n+s.n-1]), 0) || !math.IsNaN(float64(c[(s.m-1)*s.n])) {
				t.Fatalf("%v %v: NaN/Inf not propagated: %v %v %v", prec, s, c[2*s.n], c[s.n+s.n-1], c[(s.m-1)*s.n])
			}
		}
	}
}

func TestNTFuncTiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, s := range []struct{ m, n, k int }{{1, 1, 1}, {129, 513, 128}, {260, 1030, 33}, {3, 5, 0}} {
		a := randMat(rng, s.m, s.k, s.k+1)
		b := randMat(rng, s.n, s.k, s.k+2)
		want := make([]float32, s.m*s.n)
		NT(s.m, s.n, s.k, a, s.k+1, b, s.k+2, want, s.n)
		pb := PackNT(nil, s.n, s.k, b, s.k+2)
		check := func(name string, seq bool) func(w, i0, j0, rows, cols int, tile []float32, ldt int) {
			seen := make([]int, s.m*s.n)
			lastI, lastJ := -1, -1
			t.Cleanup(func() {
				for i, v := range seen {
					if v != 1 {
						t.Errorf("%s %v: element %d seen %d times", name, s, i, v)
						return
					}
				}
			})
			return func(w, i0, j0, rows, cols int, tile []float32, ldt int) {
				if rows < 1 || rows > TileM || cols < 1 || cols > TileN || i0%TileM != 0 || j0%TileN != 0 {
					t.Fatalf("%s: bad tile %d %d %d %d", name, i0, j0, rows, cols)
				}
				if seq {
					if !(i0 > lastI || (i0 == lastI && j0 > lastJ)) {
						t.Fatalf("%s: tile (%d,%d) after (%d,%d)", name, i0, j0, lastI, lastJ)
					}
					lastI, lastJ = i0, j0
				}
				for r := 0; r < rows; r++ {
					for c := 0; c < cols; c++ {
						seen[(i0+r)*s.n+j0+c]++
						if tile[r*ldt+c] != want[(i0+r)*s.n+j0+c] {
							t.Fatalf("%s %v: tile value (%d,%d) differs from NT", name, s, i0+r, j0+c)
						}
						tile[r*ldt+c] = float32(math.NaN()) // fn may scribble
					}
				}
			}
		}
		f := check("NTFunc", true)
		NTFunc(s.m, s.n, s.k, a, s.k+1, b, s.k+2, func(i0, j0, rows, cols int, tile []float32, ldt int) {
			f(0, i0, j0, rows, cols, tile, ldt)
		})
		f2 := check("PackedB.TileFunc", true)
		pb.TileFunc(s.m, a, s.k+1, func(i0, j0, rows, cols int, tile []float32, ldt int) {
			f2(0, i0, j0, rows, cols, tile, ldt)
		})
		// Parallel: per-row sums must not depend on the thread count.
		rowSum := func(th int) []float64 {
			defer SetThreads(SetThreads(th))
			sums := make([]float64, s.m)
			NTFuncParallel(s.m, s.n, s.k, a, s.k+1, b, s.k+2, func(w, i0, j0, rows, cols int, tile []float32, ldt int) {
				for r := 0; r < rows; r++ {
					for c := 0; c < cols; c++ {
						sums[i0+r] += float64(tile[r*ldt+c])
					}
				}
			})
			return sums
		}
		s1, s2 := rowSum(1), rowSum(3)
		for i := range s1 {
			if s1[i] != s2[i] {
				t.Fatalf("%v: NTFuncParallel row sums depend on threads at row %d", s, i)
			}
		}
	}
}

func TestPackedSizes(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	m, n, k := 37, 70, 300
	b := randMat(rng, k, n, n+3)
	for _, prec := range []Precision{F32, BF16} {
		pb := PackNNAs(nil, prec, n, k, b, n+3)
		if pb.N() != n || pb.K() != k || pb.Bytes() <= 0 || pb.Precision() != prec {
			t.Fatalf("PackedB reports n=%d k=%d bytes=%d prec=%v", pb.N(), pb.K(), pb.Bytes(), pb.Precision())
		}
		pa := PackAAs(nil, prec, m, 50, b, n+3)
		if pa.M() != m || pa.K() != 50 || pa.Bytes() <= 0 || pa.Precision() != prec {
			t.Fatalf("PackedA reports m=%d k=%d bytes=%d prec=%v", pa.M(), pa.K(), pa.Bytes(), pa.Precision())
		}
		if (pa.Data() == nil) != (prec == BF16) || (pb.Panels() == nil) != (prec == BF16) {
			t.Fatalf("%v: Data/Panels nil = %v, %v", prec, pa.Data() == nil, pb.Panels() == nil)
		}
	}
}

func TestPanics(t *testing.T) {
	bf := func() (*PackedA, *PackedB) {
		return PackAAs(nil, BF16, 4, 64, make([]float32, 256), 64), PackNTAs(nil, BF16, 32, 64, make([]float32, 2048), 64)
	}
	cases := []struct {
		name, want string
		f          func()
	}{
		{"negative", "negative size", func() { NT(-1, 1, 1, nil, 1, nil, 1, nil, 1) }},
		{"short A", "A has 3 values, need 4", func() { NT(2, 2, 2, make([]float32, 3), 2, make([]float32, 4), 2, make([]float32, 4), 2) }},
		{"short B", "B has", func() { NN(2, 2, 2, make([]float32, 4), 2, make([]float32, 3), 2, make([]float32, 4), 2) }},
		{"short C", "C has", func() { NT(2, 2, 2, make([]float32, 4), 2, make([]float32, 4), 2, make([]float32, 3), 2) }},
		{"ld", "leading dimension 1 < 2", func() { NT(2, 2, 2, make([]float32, 4), 1, make([]float32, 4), 2, make([]float32, 4), 2) }},
		{"pack", "gemm.PackNT: B has 5 values", func() { PackNT(nil, 3, 2, make([]float32, 5), 2) }},
		{"pack bf16", "gemm.PackNTBF16: B has 5 values", func() { PackNTBF16(nil, BF16, 3, 2, make([]uint16, 5), 2) }},
		{"pack overflow", "overflows", func() { PackA(nil, 1<<40, 1<<40, nil, 1<<40) }},
		{"precision", "unknown precision", func() { PackAAs(nil, Precision(7), 1, 1, []float32{1}, 1) }},
		{"product", "gemm.PackedB.Product: A has", func() {
			PackNT(nil, 2, 2, make([]float32, 4), 2).Product(2, make([]float32, 3), 2, make([]float32, 4), 2)
		}},
		{"mixed precision", "A is fp32 and B is bf16", func() {
			_, pb := bf()
			MulPacked(4, 32, 64, PackA(nil, 4, 64, make([]float32, 256), 64), 0, 0, pb, 0, 0, make([]float32, 128), 32, false)
		}},
		{"bf16 offset", "multiples of 32", func() {
			pa, pb := bf()
			MulPacked(4, 32, 30, pa, 0, 2, pb, 0, 2, make([]float32, 128), 32, false)
		}},
		{"bf16 sub offset", "k0 of a bf16 operand of 32", func() {
			_, pb := bf()
			pb.ProductSub(1, make([]float32, 60), 60, 0, 32, 4, 64, make([]float32, 32), 32, false)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if r == nil || !strings.Contains(fmt.Sprint(r), tc.want) {
					t.Fatalf("panic %v, want one containing %q", r, tc.want)
				}
			}()
			tc.f()
		})
	}
}

func TestSteadyStateAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under the race detector")
	}
	defer SetThreads(SetThreads(1))
	m, n, k := 64, 300, 128
	a, b, c := make([]float32, m*k), make([]float32, n*k), make([]float32, m*n)
	for _, prec := range []Precision{F32, BF16} {
		NTAs(prec, m, n, k, a, k, b, k, c, n)
		if allocs := testing.AllocsPerRun(10, func() { NTAs(prec, m, n, k, a, k, b, k, c, n) }); allocs > 0 {
			t.Fatalf("%v: NT allocates %v times per call in steady state", prec, allocs)
		}
		pb := PackNTAs(nil, prec, n, k, b, k)
		fn := func(i0, j0, rows, cols int, tile []float32, ldt int) {}
		pb.TileFunc(m, a, k, fn)
		if allocs := testing.AllocsPerRun(10, func() { pb.TileFunc(m, a, k, fn) }); allocs > 0 {
			t.Fatalf("%v: TileFunc allocates %v times per call in steady state", prec, allocs)
		}
		pa := PackAAs(nil, prec, m, k, a, k)
		MulPacked(m, n, 100, pa, 0, 0, pb, 0, 0, c, n, false)
		if allocs := testing.AllocsPerRun(10, func() { MulPacked(m, n, 100, pa, 0, 0, pb, 0, 0, c, n, false) }); allocs > 0 {
			t.Fatalf("%v: MulPacked allocates %v times per call in steady state", prec, allocs)
		}
	}
}

func TestResizeLayout(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 15))
	m, n, k := 70, 100, 300
	a := randMat(rng, m, k, k+1)
	pa := PackA(nil, m, k, a, k+1)
	// A panel written by hand through Resize must equal PackA.
	var ph PackedA
	d := ph.Resize(m, k)
	clear(d)
	for i := 0; i < m; i++ {
		for q := 0; q < k; q++ {
			d[(i/MR)*k*MR+q*MR+i%MR] = a[i*(k+1)+q]
		}
	}
	for i := range d {
		if d[i] != pa.Data()[i] {
			t.Fatalf("PackA layout differs from the documented one at %d", i)
		}
	}
	b := randMat(rng, n, k, k)
	pb := PackNT(nil, n, k, b, k)
	var bh PackedB
	e := bh.Resize(n, k)
	clear(e)
	for j := 0; j < n; j++ {
		for q := 0; q < k; q++ {
			e[(j/NR)*k*NR+q*NR+j%NR] = b[j*k+q]
		}
	}
	for i := range e {
		if e[i] != pb.Panels()[i] {
			t.Fatalf("PackNT layout differs from the documented one at %d", i)
		}
	}
}

// TestCrossCheckSizes runs the selected kernels against the pure-Go kernel
// for every m, n in sizes (around the vector width, the register block and
// the tiles) with guard values around C, bit for bit.
func TestCrossCheckSizes(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 17))
	for _, prec := range []Precision{F32, BF16} {
		for _, k := range []int{1, 17, 129} {
			for _, m := range sizes {
				for _, n := range sizes {
					nn := (m+n)%2 == 0
					ldc := n + 1 + m%2 // odd and even padding
					a := randMat(rng, m, k, k)
					var b []float32
					var ldb int
					if nn {
						ldb = n + 1
						b = randMat(rng, k, n, ldb)
					} else {
						ldb = k
						b = randMat(rng, n, k, ldb)
					}
					f := NTAs
					if nn {
						f = NNAs
					}
					fast := filled(m*ldc + 3)
					slow := filled(m*ldc + 3)
					f(prec, m, n, k, a, k, b, ldb, fast, ldc)
					withKernel(t, prec, "go", func() { f(prec, m, n, k, a, k, b, ldb, slow, ldc) })
					compareC(t, fmt.Sprintf("%v %s nn=%v m=%d n=%d k=%d", prec, KernelName(prec), nn, m, n, k), fast, slow)
				}
			}
		}
	}
}
