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
