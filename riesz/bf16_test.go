package riesz

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/gemm"
)

// TestBF16Sets checks the precision of a pass's dot products: two BF16
// sets use gemm's bfloat16 product, which differs from the float32 product
// of the same (bfloat16-exact) values on some elements, the pass is
// deterministic, and mixing a BF16 set with a float32 one panics.
func TestBF16Sets(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	n, m, d := 70, 90, 128
	x := func(k int) []float32 {
		s := make([]float32, k*d)
		for i := range s {
			s[i] = gemm.BF16ToFloat32(gemm.RoundBF16(float32(rng.NormFloat64())))
		}
		return s
	}
	a, b := NewSet(x(n), n, d, nil), NewSet(x(m), m, d, nil)
	k := MustNew(8, 2, 1)
	var ws Workspace
	pass := func(a, b Set) []float32 {
		out := make([]float32, n*m)
		k.ForEachTile(a, b, &ws, func(i0, j0, rows, cols int, w []float32) {
			for r := 0; r < rows; r++ {
				copy(out[(i0+r)*m+j0:(i0+r)*m+j0+cols], w[r*cols:r*cols+cols])
			}
		})
		return out
	}
	f32 := pass(a, b)
	a.BF16, b.BF16 = true, true
	bf, bf2 := pass(a, b), pass(a, b)
	differ := 0
	for i := range f32 {
		if bf[i] != bf2[i] {
			t.Fatalf("bf16 pass not deterministic at %d", i)
		}
		if bf[i] != f32[i] {
			differ++
		}
	}
	if differ == 0 {
		t.Fatal("BF16 sets give the float32 product's interactions everywhere: the bfloat16 product is not in use")
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "riesz: a pass over a fp32 set and a bf16 set") {
			t.Fatalf("mixed precisions: panic %v", r)
		}
	}()
	a.BF16 = false
	pass(a, b)
}

// TestBF16StorageSets: a BF16 set holding its vectors as bfloat16 bits
// (X16) gives every pass the same results, bit for bit, as the same set
// in X, on either side of the pass and for sizes around the tiles.
func TestBF16StorageSets(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	d := 64
	mk := func(n int) (Set, Set) {
		h := make([]uint16, n*d)
		x := make([]float32, n*d)
		for i := range h {
			h[i] = gemm.RoundBF16(float32(rng.NormFloat64()))
			x[i] = gemm.BF16ToFloat32(h[i])
		}
		f := NewSet(x, n, d, nil)
		f.BF16 = true
		return f, Set{X16: h, Norms: f.Norms, N: n, D: d, BF16: true}
	}
	k := MustNew(5, 2, 1)
	for _, sz := range [][2]int{{1, 1}, {130, 70}, {257, 513}, {128, 1030}} {
		af, ah := mk(sz[0])
		bf, bh := mk(sz[1])
		inv := make([]float32, sz[1])
		for i := range inv {
			inv[i] = float32(rng.Float64() + 0.5)
		}
		type out struct {
			sum, mean, maxs, rows, cols, self []float64
			cache                             []float32
			cross                             []int32
			ckpt                              []float64
		}
		run := func(a, b Set) out {
			var ws Workspace
			o := out{sum: make([]float64, a.N), mean: make([]float64, a.N), maxs: make([]float64, a.N),
				rows: make([]float64, a.N), cols: make([]float64, b.N), self: make([]float64, a.N), cache: make([]float32, a.N*b.N)}
			k.RowStatsCached(a, b, inv, o.sum, o.mean, o.maxs, o.cache, &ws)
			k.Sums(a, b, o.rows, o.cols, &ws)
			k.SelfSums(a, o.self, &ws)
			rem := make([]float64, b.N)
			for i := range rem {
				rem[i] = 0.5
			}
			o.cross = make([]int32, b.N)
			o.ckpt = make([]float64, ((a.N+127)/128)*b.N)
			k.PrefixScan(a, b, rem, o.cross, 128, o.ckpt, &ws)
			return o
		}
		want := run(af, bf)
		for _, c := range []struct {
			name string
			a, b Set
		}{{"X16 left", ah, bf}, {"X16 right", af, bh}, {"both", ah, bh}, {"rows of X16", ah.Rows(0, ah.N), bh.Rows(0, bh.N)}} {
			got := run(c.a, c.b)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%v %s: results differ from the float32-held set's", sz, c.name)
			}
		}
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "not BF16") {
			t.Fatalf("X16 set without BF16: panic %v", r)
		}
	}()
	_, h := mk(3)
	h.BF16 = false
	var ws Workspace
	k.Sums(h, h, make([]float64, 3), nil, &ws)
}
