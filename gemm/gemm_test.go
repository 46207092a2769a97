package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// forceGeneric switches to the naive reference loops and returns a func
// restoring the previous path.
func forceGeneric() func() {
	old := useFast
	useFast = false
	return func() { useFast = old }
}

// forcePortableKernel keeps the blocked driver but with the pure-Go
// micro-kernel.
func forcePortableKernel() func() {
	old, olds := kernel, simdKernel
	kernel, simdKernel = kernelGo, false
	return func() { kernel, simdKernel = old, olds }
}

const guard = float32(-7777.5)

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

func sameFloat(x, y float32) bool {
	return x == y || (x != x && y != y)
}

var sizes = []int{0, 1, 3, 4, 5, 15, 16, 17, 31, 32, 33, 127, 128, 129}

func TestNTNNAgainstReference(t *testing.T) {
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
	paths := []struct {
		name string
		set  func() func()
	}{
		{"fast", func() func() { return func() {} }},
		{"portable-kernel", forcePortableKernel},
		{"generic", forceGeneric},
	}
	for _, path := range paths {
		restore := path.set()
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
				c := filled(s.m*ldc + 3)
				if nn {
					NN(s.m, s.n, s.k, a, lda, b, ldb, c, ldc)
				} else {
					NT(s.m, s.n, s.k, a, lda, b, ldb, c, ldc)
				}
				want, abs := ref64(nn, s.m, s.n, s.k, a, lda, b, ldb)
				for i := 0; i < s.m; i++ {
					for j := 0; j < ldc; j++ {
						got := c[i*ldc+j]
						if j >= s.n {
							if got != guard {
								t.Fatalf("%s nn=%v %v: guard at (%d,%d) overwritten: %v", path.name, nn, s, i, j, got)
							}
							continue
						}
						tol := 1e-6*abs[i*s.n+j] + 1e-30
						if d := math.Abs(float64(got) - want[i*s.n+j]); d > tol {
							t.Fatalf("%s nn=%v %v: c[%d][%d] = %v, want %v (|diff| %g > %g)", path.name, nn, s, i, j, got, want[i*s.n+j], d, tol)
						}
					}
				}
				for _, g := range c[s.m*ldc:] {
					if g != guard {
						t.Fatalf("%s nn=%v %v: trailing guard overwritten", path.name, nn, s)
					}
				}
			}
		}
		restore()
	}
}

func TestNaNInfPropagation(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, s := range []struct{ m, n, k int }{{5, 33, 17}, {16, 16, 16}, {129, 40, 130}} {
		a := randMat(rng, s.m, s.k, s.k)
		b := randMat(rng, s.n, s.k, s.k)
		a[2*s.k+3] = float32(math.NaN())
		a[1*s.k+1] = float32(math.Inf(1))
		b[(s.n-1)*s.k+1] = float32(math.Inf(-1))
		b[0] = 0
		a[(s.m-1)*s.k] = float32(math.Inf(1)) // Inf·0 = NaN at (m-1, 0)
		c := make([]float32, s.m*s.n)
		NT(s.m, s.n, s.k, a, s.k, b, s.k, c, s.n)
		g := make([]float32, s.m*s.n)
		restore := forceGeneric()
		NT(s.m, s.n, s.k, a, s.k, b, s.k, g, s.n)
		restore()
		for i := range c {
			gi, ci := g[i], c[i]
			nanOrInf := math.IsNaN(float64(gi)) || math.IsInf(float64(gi), 0)
			if nanOrInf && !sameFloat(gi, ci) {
				t.Fatalf("%v: element %d: fast %v, generic %v", s, i, ci, gi)
			}
			if !nanOrInf && (math.IsNaN(float64(ci)) || math.IsInf(float64(ci), 0)) {
				t.Fatalf("%v: element %d: fast %v, generic %v", s, i, ci, gi)
			}
		}
		if !math.IsNaN(float64(c[2*s.n])) || !math.IsInf(float64(c[1*s.n+s.n-1]), 0) || !math.IsNaN(float64(c[(s.m-1)*s.n])) {
			t.Fatalf("%v: NaN/Inf not propagated: %v %v %v", s, c[2*s.n], c[s.n+s.n-1], c[(s.m-1)*s.n])
		}
	}
}

func TestThreadCountDeterminism(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	m, n, k := 300, 700, 300
	if testing.Short() {
		m, n, k = 150, 600, 140
	}
	a := randMat(rng, m, k, k)
	b := randMat(rng, n, k, k)
	bnn := randMat(rng, k, n, n)
	var ref, refNN []float32
	defer SetThreads(SetThreads(1))
	for _, th := range []int{1, 2, 3, 7} {
		SetThreads(th)
		c := make([]float32, m*n)
		NT(m, n, k, a, k, b, k, c, n)
		cnn := make([]float32, m*n)
		NN(m, n, k, a, k, bnn, n, cnn, n)
		if ref == nil {
			ref, refNN = c, cnn
			continue
		}
		for i := range c {
			if c[i] != ref[i] || cnn[i] != refNN[i] {
				t.Fatalf("threads=%d: element %d differs from threads=1", th, i)
			}
		}
	}
}

func TestNTFuncMatchesNT(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, s := range []struct{ m, n, k int }{{1, 1, 1}, {129, 513, 128}, {260, 1030, 33}, {3, 5, 0}} {
		a := randMat(rng, s.m, s.k, s.k+1)
		b := randMat(rng, s.n, s.k, s.k+2)
		want := make([]float32, s.m*s.n)
		NT(s.m, s.n, s.k, a, s.k+1, b, s.k+2, want, s.n)
		pb := PackNT(nil, s.n, s.k, b, s.k+2)
		got := make([]float32, s.m*s.n)
		pb.Product(s.m, a, s.k+1, got, s.n)
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("%v: PackedB.Product differs from NT at %d", s, i)
			}
		}
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

func TestPackNNMatchesNN(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	m, n, k := 37, 70, 300
	a := randMat(rng, m, k, k)
	b := randMat(rng, k, n, n+3)
	want := make([]float32, m*n)
	NN(m, n, k, a, k, b, n+3, want, n)
	var pb PackedB
	PackNN(&pb, n, k, b, n+3)
	got := make([]float32, m*n)
	pb.Product(m, a, k, got, n)
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("PackNN product differs from NN at %d", i)
		}
	}
	if pb.N() != n || pb.K() != k || pb.Bytes() <= 0 {
		t.Fatalf("PackedB reports n=%d k=%d bytes=%d", pb.N(), pb.K(), pb.Bytes())
	}
}

func TestPanics(t *testing.T) {
	cases := []struct {
		name, want string
		f          func()
	}{
		{"negative", "negative size", func() { NT(-1, 1, 1, nil, 1, nil, 1, nil, 1) }},
		{"short A", "A has 3 values, need 4", func() { NT(2, 2, 2, make([]float32, 3), 2, make([]float32, 4), 2, make([]float32, 4), 2) }},
		{"short B", "B has", func() { NN(2, 2, 2, make([]float32, 4), 2, make([]float32, 3), 2, make([]float32, 4), 2) }},
		{"short C", "C has", func() { NT(2, 2, 2, make([]float32, 4), 2, make([]float32, 4), 2, make([]float32, 3), 2) }},
		{"ld", "leading dimension 1 < 2", func() { NT(2, 2, 2, make([]float32, 4), 1, make([]float32, 4), 2, make([]float32, 4), 2) }},
		{"pack", "gemm.PackNT: B has", func() { PackNT(nil, 3, 2, make([]float32, 5), 2) }},
		{"product", "gemm.PackedB.Product: A has", func() {
			PackNT(nil, 2, 2, make([]float32, 4), 2).Product(2, make([]float32, 3), 2, make([]float32, 4), 2)
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
	NT(m, n, k, a, k, b, k, c, n)
	if allocs := testing.AllocsPerRun(10, func() { NT(m, n, k, a, k, b, k, c, n) }); allocs > 0 {
		t.Fatalf("NT allocates %v times per call in steady state", allocs)
	}
	pb := PackNT(nil, n, k, b, k)
	fn := func(i0, j0, rows, cols int, tile []float32, ldt int) {}
	pb.TileFunc(m, a, k, fn)
	if allocs := testing.AllocsPerRun(10, func() { pb.TileFunc(m, a, k, fn) }); allocs > 0 {
		t.Fatalf("TileFunc allocates %v times per call in steady state", allocs)
	}
}

func FuzzNTAgainstGeneric(f *testing.F) {
	f.Add(uint8(5), uint8(33), uint8(17), uint64(1))
	f.Add(uint8(1), uint8(1), uint8(0), uint64(2))
	f.Add(uint8(4), uint8(32), uint8(128), uint64(3))
	f.Fuzz(func(t *testing.T, m8, n8, k8 uint8, seed uint64) {
		m, n, k := int(m8%70), int(n8), int(k8)
		rng := rand.New(rand.NewPCG(seed, 1))
		a := randMat(rng, m, k, k)
		b := randMat(rng, n, k, k)
		c := make([]float32, m*n)
		NT(m, n, k, a, k, b, k, c, n)
		want, abs := ref64(false, m, n, k, a, k, b, k)
		for i := range c {
			if d := math.Abs(float64(c[i]) - want[i]); d > 1e-6*abs[i]+1e-30 {
				t.Fatalf("m=%d n=%d k=%d: element %d = %v, want %v", m, n, k, i, c[i], want[i])
			}
		}
	})
}

func TestProductSub(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 13))
	for _, gen := range []bool{false, true} {
		if gen {
			defer forceGeneric()()
		}
		n, k := 100, 300
		b := randMat(rng, n, k, k)
		pb := PackNT(nil, n, k, b, k)
		bnn := randMat(rng, k, n, n)
		pn := PackNN(nil, n, k, bnn, n)
		for _, r := range []struct{ m, j0, j1, k0, k1 int }{{5, 0, 100, 0, 300}, {130, 32, 97, 7, 200}, {1, 64, 64, 0, 3}, {3, 96, 100, 299, 300}} {
			kk, nc := r.k1-r.k0, r.j1-r.j0
			a := randMat(rng, r.m, kk, kk+1)
			for _, nn := range []bool{false, true} {
				p := pb
				if nn {
					p = pn
				}
				c := randMat(rng, r.m, nc, nc+2)
				c0 := append([]float32(nil), c...)
				p.ProductSub(r.m, a, kk+1, r.j0, r.j1, r.k0, r.k1, c, nc+2, true)
				for i := 0; i < r.m; i++ {
					for j := 0; j < nc; j++ {
						want := float64(c0[i*(nc+2)+j])
						tol := math.Abs(want)
						for q := 0; q < kk; q++ {
							bv := b[(r.j0+j)*k+r.k0+q]
							if nn {
								bv = bnn[(r.k0+q)*n+r.j0+j]
							}
							x := float64(a[i*(kk+1)+q]) * float64(bv)
							want += x
							tol += math.Abs(x)
						}
						if d := math.Abs(float64(c[i*(nc+2)+j]) - want); d > 1e-6*tol+1e-30 {
							t.Fatalf("generic=%v nn=%v %v: (%d,%d) = %v, want %v", gen, nn, r, i, j, c[i*(nc+2)+j], want)
						}
					}
					if c[i*(nc+2)+nc] != c0[i*(nc+2)+nc] {
						t.Fatalf("generic=%v nn=%v %v: padding overwritten", gen, nn, r)
					}
				}
			}
		}
	}
}

func TestMulPacked(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 15))
	for _, gen := range []bool{false, true} {
		restore := func() {}
		if gen {
			restore = forceGeneric()
		}
		m, n, k := 70, 100, 300
		a := randMat(rng, m, k, k+1)
		at := randMat(rng, k, m, m+2) // A2 = atᵀ
		b := randMat(rng, n, k, k)
		pa := PackA(nil, m, k, a, k+1)
		pat := PackAT(nil, m, k, at, m+2)
		pb := PackNT(nil, n, k, b, k)
		// A panel written by hand through Resize must equal PackA.
		var ph PackedA
		d := ph.Resize(m, k)
		for i := range d {
			d[i] = 0
		}
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
		bt := randMat(rng, n, 400, 400) // B with a longer inner dimension, offset bk0
		pbt := PackNT(nil, n, 400, bt, 400)
		for _, r := range []struct{ i0, i1, j0, j1, k0, k1 int }{{0, 70, 0, 100, 0, 300}, {4, 67, 32, 97, 7, 200}, {68, 70, 96, 100, 299, 300}, {0, 4, 0, 32, 5, 5}} {
			for _, useT := range []bool{false, true} {
				p := pa
				if useT {
					p = pat
				}
				rows, cols := r.i1-r.i0, r.j1-r.j0
				c := randMat(rng, rows, cols, cols+1)
				c0 := append([]float32(nil), c...)
				kk := r.k1 - r.k0
				MulPacked(rows, cols, kk, p, r.i0, r.k0, pb, r.j0, r.k0, c, cols+1, true)
				// Same A block against B columns shifted by 100 in depth.
				c2 := append([]float32(nil), c0...)
				MulPacked(rows, cols, kk, p, r.i0, r.k0, pbt, r.j0, r.k0+100, c2, cols+1, true)
				for i := 0; i < rows; i++ {
					for j := 0; j < cols; j++ {
						want := float64(c0[i*(cols+1)+j])
						tol := math.Abs(want)
						for q := 0; q < kk; q++ {
							av := a[(r.i0+i)*(k+1)+r.k0+q]
							if useT {
								av = at[(r.k0+q)*(m+2)+r.i0+i]
							}
							x := float64(av) * float64(bt[(r.j0+j)*400+r.k0+100+q])
							want += x
							tol += math.Abs(x)
						}
						if d := math.Abs(float64(c2[i*(cols+1)+j]) - want); d > 1e-6*tol+1e-30 {
							t.Fatalf("offset B: generic=%v T=%v %v: (%d,%d) = %v, want %v", gen, useT, r, i, j, c2[i*(cols+1)+j], want)
						}
					}
				}
				for i := 0; i < rows; i++ {
					for j := 0; j < cols; j++ {
						want := float64(c0[i*(cols+1)+j])
						tol := math.Abs(want)
						for q := r.k0; q < r.k1; q++ {
							av := a[(r.i0+i)*(k+1)+q]
							if useT {
								av = at[q*(m+2)+r.i0+i]
							}
							x := float64(av) * float64(b[(r.j0+j)*k+q])
							want += x
							tol += math.Abs(x)
						}
						if d := math.Abs(float64(c[i*(cols+1)+j]) - want); d > 1e-6*tol+1e-30 {
							t.Fatalf("generic=%v T=%v %v: (%d,%d) = %v, want %v", gen, useT, r, i, j, c[i*(cols+1)+j], want)
						}
					}
					if c[i*(cols+1)+cols] != c0[i*(cols+1)+cols] {
						t.Fatalf("%v: padding column overwritten", r)
					}
				}
			}
		}
		restore()
	}
}

// TestCrossCheckSizes runs the fast path against the reference loops for
// every m, n in sizes (around the vector width, the register block and the
// tiles) with guard values around C.
func TestCrossCheckSizes(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 17))
	for _, k := range []int{1, 16, 17, 129} {
		for _, m := range sizes {
			for _, n := range sizes {
				for _, nn := range []bool{false, true} {
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
					fast := filled(m*ldc + 3)
					slow := filled(m*ldc + 3)
					f := NT
					if nn {
						f = NN
					}
					f(m, n, k, a, k, b, ldb, fast, ldc)
					restore := forceGeneric()
					f(m, n, k, a, k, b, ldb, slow, ldc)
					restore()
					for i := range fast {
						d := math.Abs(float64(fast[i]) - float64(slow[i]))
						if d > 4e-6*float64(k) || (slow[i] == guard) != (fast[i] == guard) {
							t.Fatalf("nn=%v m=%d n=%d k=%d: element %d fast %v generic %v", nn, m, n, k, i, fast[i], slow[i])
						}
					}
				}
			}
		}
	}
}
