package wan

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestExpGoMatchesMathExp(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	xs := []float64{0, 1, -1, 1e-300, -1e-9, 709.7, 709.8, -745.1, -745.2, -800, math.Inf(1), math.Inf(-1), 88.7, -87.3}
	for i := 0; i < 10000; i++ {
		xs = append(xs, (r.Float64()-0.5)*200)
	}
	for _, x := range xs {
		got, want := expGo(x), math.Exp(x)
		if got != want && math.Abs(got-want) > 4.5e-16*math.Abs(want) {
			t.Fatalf("expGo(%v) = %v, math.Exp = %v", x, got, want)
		}
	}
	if !math.IsNaN(expGo(math.NaN())) {
		t.Fatal("expGo(NaN) not NaN")
	}
}

func TestGeluSiluReference(t *testing.T) {
	for _, v := range []float32{-30, -5, -1, -0.1, 0, 1e-6, 0.3, 1, 4, 30} {
		x := []float32{v}
		geluTanh(x)
		f := float64(v)
		want := 0.5 * f * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(f+0.044715*f*f*f)))
		if math.Abs(float64(x[0])-want) > 1e-6*math.Max(1, math.Abs(want)) {
			t.Errorf("gelu(%v) = %v, want %v", v, x[0], want)
		}
		y := []float32{0}
		silu(y, []float32{v})
		if ws := f / (1 + math.Exp(-f)); math.Abs(float64(y[0])-ws) > 1e-6*math.Max(1, math.Abs(ws)) {
			t.Errorf("silu(%v) = %v, want %v", v, y[0], ws)
		}
	}
}
