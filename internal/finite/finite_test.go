package finite

import (
	"math"
	"testing"
)

func TestFirst(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	for _, c := range []struct {
		x    []float32
		want int
	}{
		{nil, -1},
		{[]float32{0, 1, -2, math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32}, -1},
		{[]float32{0, inf, nan}, 1},
		{[]float32{nan}, 0},
		{[]float32{1, 2, -inf}, 2},
		{[]float32{math.Float32frombits(0x7f800001)}, 0}, // a signalling NaN
	} {
		if got := First(c.x); got != c.want {
			t.Errorf("First(%v) = %d, want %d", c.x, got, c.want)
		}
	}
}

// FuzzFirst: First agrees with math.IsNaN and math.IsInf on every bit
// pattern.
func FuzzFirst(f *testing.F) {
	f.Add(uint32(0), uint32(0x7f800000))
	f.Add(uint32(0xff800001), uint32(1))
	f.Fuzz(func(t *testing.T, a, b uint32) {
		x := []float32{math.Float32frombits(a), math.Float32frombits(b)}
		want := -1
		for i, v := range x {
			if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
				want = i
				break
			}
		}
		if got := First(x); got != want {
			t.Fatalf("First(%08x, %08x) = %d, want %d", a, b, got, want)
		}
	})
}
