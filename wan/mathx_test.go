package wan

import (
	"math"
	"testing"
)

func TestGeluReference(t *testing.T) {
	for _, v := range []float32{-30, -5, -1, -0.1, 0, 1e-6, 0.3, 1, 4, 30} {
		x := []float32{v}
		geluTanh(x)
		f := float64(v)
		want := 0.5 * f * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(f+0.044715*f*f*f)))
		if math.Abs(float64(x[0])-want) > 1e-6*math.Max(1, math.Abs(want)) {
			t.Errorf("gelu(%v) = %v, want %v", v, x[0], want)
		}
	}
}
