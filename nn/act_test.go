package nn

import (
	"math"
	"testing"
)

// TestSiLU: within 4 float32 ulp of x/(1 + e^−x) in float64 math.Exp
// (measured at the result's magnitude), in place giving the same values.
func TestSiLU(t *testing.T) {
	xs := []float32{-80, -30, -5, -1, -0.1, 0, 1e-6, 0.3, 1, 4, 30, 80}
	for x := float32(-20); x <= 20; x += 0.0013 {
		xs = append(xs, x)
	}
	y := make([]float32, len(xs))
	SiLU(y, xs)
	worst := 0.0
	for i, v := range xs {
		f := float64(v)
		want := f / (1 + math.Exp(-f))
		e := math.Abs(float64(y[i])-want) / ulp32(want)
		worst = max(worst, e)
		if e > 4 {
			t.Errorf("SiLU(%v) = %v, want %v (%.2f ulp)", v, y[i], want, e)
		}
	}
	t.Logf("worst error %.2f ulp", worst)
	SiLU(xs, xs) // in place: the same values
	for i := range xs {
		if xs[i] != y[i] {
			t.Fatalf("in place: [%d] = %v, want %v", i, xs[i], y[i])
		}
	}
}

// ulp32 returns the spacing of the float32 values at |x| (the smallest
// denormal below the normal range).
func ulp32(x float64) float64 {
	a := float32(math.Abs(x))
	u := float64(math.Nextafter32(a, float32(math.Inf(1))) - a)
	if u == 0 || math.IsInf(u, 0) || math.IsNaN(u) {
		return math.SmallestNonzeroFloat32
	}
	return u
}

// TestGELUTanh32 against the float64 formula of Wan's GELU, in absolute
// terms of the input's magnitude (the tanh form's own scale), and at ±Inf
// and huge values.
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

// TestSiLU32 checks SiLU32 at the extremes, at the exponential's clamps
// and at NaN.
func TestSiLU32(t *testing.T) {
	for _, c := range []struct{ v, want float32 }{{0, 0}, {-100, 0}, {-89, 0}, {-88, -88 / (1 + float32(math.Exp(88)))},
		{100, 100}, {104, 104}, {-1e30, 0}, {1e30, 1e30}, {float32(math.Inf(1)), float32(math.Inf(1))}} {
		if got := SiLU32(c.v); got != c.want && math.Abs(float64(got-c.want)) > 4*ulp32(float64(c.want)) {
			t.Errorf("SiLU32(%v) = %v, want %v", c.v, got, c.want)
		}
	}
	if v := SiLU32(float32(math.Inf(-1))); !math.IsNaN(float64(v)) {
		t.Errorf("SiLU32(−Inf) = %v, want NaN (−Inf·0, as in PyTorch)", v)
	}
	if v := SiLU32(float32(math.NaN())); !math.IsNaN(float64(v)) {
		t.Errorf("SiLU32(NaN) = %v", v)
	}
}
