package riesz

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestSelfSumsMatrix: SelfSumsMatrix over Matrix's interactions equals
// SelfSums bit for bit, over several tiles (rows beyond TileRows, columns
// beyond TileCols) and for float32 and bfloat16 sets.
func TestSelfSumsMatrix(t *testing.T) {
	k := MustNew(3, 2, 1)
	rng := rand.New(rand.NewPCG(5, 6))
	for _, tc := range []struct {
		n, d int
		bf   bool
	}{{0, 4, false}, {1, 4, false}, {2, 3, false}, {37, 16, false}, {700, 8, false}, {300, 16, true}} {
		x := make([]float32, tc.n*tc.d)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
			if tc.bf {
				x[i] = math.Float32frombits(math.Float32bits(x[i]) &^ 0xffff)
			}
		}
		if tc.n > 5 {
			copy(x[tc.d:2*tc.d], x[:tc.d]) // coincident members
		}
		nrm := make([]float32, tc.n)
		Norms(nrm, x, tc.n, tc.d)
		s := Set{X: x, Norms: nrm, N: tc.n, D: tc.d, BF16: tc.bf}
		var ws Workspace
		want := make([]float64, tc.n)
		for i := range want {
			want[i] = float64(i) / 7 // added to, as SelfSums
		}
		got := append([]float64(nil), want...)
		k.SelfSums(s, want, &ws)
		w := make([]float32, tc.n*tc.n)
		if tc.n > 0 {
			k.Matrix(s, s, w, &ws)
		}
		SelfSumsMatrix(w, tc.n, got)
		for i := range want {
			if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
				t.Fatalf("n=%d d=%d bf16=%v: out[%d] = %v, SelfSums %v", tc.n, tc.d, tc.bf, i, got[i], want[i])
			}
		}
	}
}
