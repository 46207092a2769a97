package nn

import (
	"math"
	"testing"
)

// TestSiLU: within 1e-6 relative of x/(1 + e^−x) in float64 math.Exp.
func TestSiLU(t *testing.T) {
	xs := []float32{-30, -5, -1, -0.1, 0, 1e-6, 0.3, 1, 4, 30}
	y := make([]float32, len(xs))
	SiLU(y, xs)
	for i, v := range xs {
		f := float64(v)
		if want := f / (1 + math.Exp(-f)); math.Abs(float64(y[i])-want) > 1e-6*math.Max(1, math.Abs(want)) {
			t.Errorf("SiLU(%v) = %v, want %v", v, y[i], want)
		}
	}
	SiLU(xs, xs) // in place: the same values
	for i := range xs {
		if xs[i] != y[i] {
			t.Fatalf("in place: [%d] = %v, want %v", i, xs[i], y[i])
		}
	}
}

// TestSiLU64: within 1e-9 relative of y/(1 + e^−y) with math.Exp, the
// sign kept, at and beyond the exponential's clamps.
func TestSiLU64(t *testing.T) {
	for _, y := range []float64{-800, -709.5, -30, -1, -1e-3, 0, 1e-3, 0.5, 2, 30, 709.5, 800} {
		want := y / (1 + math.Exp(-y))
		if got := SiLU64(y); math.Abs(got-want) > 1e-9*math.Max(1, math.Abs(want)) || math.Signbit(got) != math.Signbit(want) {
			t.Errorf("SiLU64(%v) = %v, want %v", y, got, want)
		}
	}
}

// TestGELUTanh32 against the float64 formula of Wan's GELU.
func TestGELUTanh32(t *testing.T) {
	for u := -12.0; u <= 12; u += 0.0007 {
		want := 0.5 * u * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(u+0.044715*u*u*u)))
		got := float64(GELUTanh32(float32(u)))
		if math.Abs(got-want) > 3e-7*max(1, math.Abs(u)) {
			t.Fatalf("gelu(%v) = %v, want %v", u, got, want)
		}
	}
	for _, u := range []float32{float32(math.Inf(1)), 1e20, -1e20} {
		if g := GELUTanh32(u); math.IsNaN(float64(g)) || (u > 0 && g != u) || (u < 0 && g != 0) {
			t.Fatalf("gelu(%v) = %v", u, g)
		}
	}
	// −Inf gives NaN, as Wan's 0.5·u·(1 + tanh(z)) does (−Inf·0).
	if g := GELUTanh32(float32(math.Inf(-1))); !math.IsNaN(float64(g)) {
		t.Fatalf("gelu(−Inf) = %v, want NaN as in Wan", g)
	}
}

// TestSiLU32 checks SiLU32 at the extremes and NaN (its exponential is
// vmath.Exp32NoFMA, tested there).
func TestSiLU32(t *testing.T) {
	for _, c := range []struct{ v, want float32 }{{0, 0}, {-100, 0}, {100, 100}, {-1e30, 0}, {1e30, 1e30}} {
		if got := SiLU32(c.v); got != c.want {
			t.Errorf("SiLU32(%v) = %v, want %v", c.v, got, c.want)
		}
	}
	if v := SiLU32(float32(math.NaN())); !math.IsNaN(float64(v)) {
		t.Errorf("SiLU32(NaN) = %v", v)
	}
}
