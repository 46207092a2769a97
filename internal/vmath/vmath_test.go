package vmath

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestExp: within the documented 5e-10 relative of math.Exp over the range,
// exact at 0 and at the range's ends' neighbourhood finite and normal.
func TestExp(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	xs := []float64{0, -708, 709, 1, -1, 0.5, -0.34657359, 0.34657359, 88.72, -103.97}
	for i := 0; i < 100000; i++ {
		xs = append(xs, -708+r.Float64()*1417)
	}
	worst := 0.0
	for _, x := range xs {
		got, want := Exp(x), math.Exp(x)
		if e := math.Abs(got-want) / want; e > worst {
			worst = e
		}
		if math.IsInf(got, 0) || got < 0x1p-1022 {
			t.Fatalf("Exp(%v) = %v: not a normal number", x, got)
		}
	}
	if worst > 5e-10 {
		t.Fatalf("worst relative error %.3g", worst)
	}
	t.Logf("worst relative error %.3g", worst)
	if Exp(0) != 1 {
		t.Fatalf("Exp(0) = %v", Exp(0))
	}
}
