package vmath

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestExpFdlibm: math.Exp's value (within 1 ulp where math.Exp's amd64
// assembly rounds differently) over the whole range and beyond, NaN kept.
func TestExpFdlibm(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	xs := []float64{0, 1, -1, 1e-300, -1e-9, 709.7, 709.8, -745.1, -745.2, -800, math.Inf(1), math.Inf(-1), 88.7, -87.3}
	for i := 0; i < 10000; i++ {
		xs = append(xs, (r.Float64()-0.5)*200)
	}
	for _, x := range xs {
		got, want := ExpFdlibm(x), math.Exp(x)
		if got != want && math.Abs(got-want) > 4.5e-16*math.Abs(want) {
			t.Fatalf("ExpFdlibm(%v) = %v, math.Exp = %v", x, got, want)
		}
	}
	if !math.IsNaN(ExpFdlibm(math.NaN())) {
		t.Fatal("ExpFdlibm(NaN) not NaN")
	}
}

// TestExp32Cephes: within 2 ulp of math.Exp over the normal range, exact
// at 0, overflow to +Inf, underflow to 0, NaN through.
func TestExp32Cephes(t *testing.T) {
	worst := 0.0
	check := func(x float32) {
		t.Helper()
		want := math.Exp(float64(x))
		got := float64(Exp32Cephes(x))
		rel := math.Abs(got-want) / want
		worst = max(worst, rel)
		if rel > 2*math.Pow(2, -23) {
			t.Fatalf("Exp32Cephes(%v) = %v, want %v (rel %.3g)", x, got, want, rel)
		}
	}
	for x := float32(-87.3); x < 88.72; x += 0.001 {
		check(x)
	}
	r := rand.New(rand.NewPCG(7, 8))
	for i := 0; i < 200000; i++ {
		check(float32(r.Float64()*176 - 87.3))
	}
	for _, x := range []float32{0, float32(math.Copysign(0, -1)), 1e-8, -1e-8, 88.7228, -87.3365, 0.34657359, -0.34657359} {
		check(x)
	}
	t.Logf("worst relative error %.3g (%.2f ulp)", worst, worst/math.Pow(2, -23))
	if Exp32Cephes(0) != 1 || !math.IsInf(float64(Exp32Cephes(88.8)), 1) || !math.IsInf(float64(Exp32Cephes(float32(math.Inf(1)))), 1) ||
		Exp32Cephes(-88) != 0 || Exp32Cephes(float32(math.Inf(-1))) != 0 || !math.IsNaN(float64(Exp32Cephes(float32(math.NaN())))) {
		t.Fatal("special values")
	}
}

// TestExp32NoFMA: relative error below 2.5e-7 over [−87.3, 88.7], and
// its clamps and special values.
func TestExp32NoFMA(t *testing.T) {
	worst := 0.0
	for x := float32(-87.3); x <= 88.7; x += 0.000731 {
		want := math.Exp(float64(x))
		got := float64(Exp32NoFMA(x))
		if rel := math.Abs(got-want) / want; rel > worst {
			worst = rel
		}
	}
	t.Logf("worst relative error %.3g", worst)
	if worst > 2.5e-7 {
		t.Errorf("Exp32NoFMA relative error %.3g", worst)
	}
	if Exp32NoFMA(89) != float32(math.Inf(1)) || Exp32NoFMA(-88) != 0 || !math.IsNaN(float64(Exp32NoFMA(float32(math.NaN())))) || Exp32NoFMA(0) != 1 {
		t.Error("Exp32NoFMA special values")
	}
}

// TestExpsDistinct: the models' exponentials are distinct definitions
// (why they are kept apart: one in place of another changes pinned
// bits): each differs from its Exp or Exp32 counterpart on some inputs of
// the range the models use.
func TestExpsDistinct(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	var d64, dCephes, dNoFMA, dPair int
	for i := 0; i < 100000; i++ {
		x := -20 + 40*r.Float64()
		if ExpFdlibm(x) != Exp(x) {
			d64++
		}
		x32 := float32(x)
		e, c, n := Exp32(x32), Exp32Cephes(x32), Exp32NoFMA(x32)
		if c != e {
			dCephes++
		}
		if n != e {
			dNoFMA++
		}
		if c != n {
			dPair++
		}
	}
	t.Logf("of 100000 values: ExpFdlibm≠Exp %d, Exp32Cephes≠Exp32 %d, Exp32NoFMA≠Exp32 %d, Exp32Cephes≠Exp32NoFMA %d", d64, dCephes, dNoFMA, dPair)
	if d64 == 0 || dCephes == 0 || dNoFMA == 0 || dPair == 0 {
		t.Fatal("two exponentials agree everywhere: one definition is written twice")
	}
}
