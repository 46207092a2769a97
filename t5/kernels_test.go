package t5

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func randBF16(r *rand.Rand, n int, std float64) []uint16 {
	w := make([]uint16, n)
	for i := range w {
		w[i] = roundBF16(float32(r.NormFloat64() * std))
	}
	return w
}

func widenAll(w []uint16) []float32 {
	out := make([]float32, len(w))
	for i, h := range w {
		out[i] = widen(h)
	}
	return out
}

// TestRoundBF16: round to nearest, ties to even, against a float64
// reference; NaN stays NaN; the largest values overflow to Inf.
func TestRoundBF16(t *testing.T) {
	ref := func(f float32) uint16 {
		b := math.Float32bits(f)
		lo, hi := uint16(b>>16), uint16(b>>16)+1
		dl := math.Abs(float64(widen(lo)) - float64(f))
		dh := math.Abs(float64(widen(hi)) - float64(f))
		if b&0x7fffffff >= 0x7f7f8000 && b&0x7fffffff < 0x7f800000 { // above the largest bfloat16 + half ulp
			return uint16(b>>16)&0x8000 | 0x7f80
		}
		switch {
		case dl < dh:
			return lo
		case dh < dl:
			return hi
		case lo&1 == 0:
			return lo
		}
		return hi
	}
	r := rand.New(rand.NewPCG(5, 6))
	check := func(b uint32) {
		f := math.Float32frombits(b)
		got := roundBF16(f)
		if f != f {
			if w := widen(got); w == w {
				t.Fatalf("NaN %#x → %#x", b, got)
			}
			return
		}
		if want := ref(f); got != want {
			t.Fatalf("%#x (%v) → %#x, want %#x", b, f, got, want)
		}
	}
	for i := 0; i < 1_000_000; i++ {
		check(r.Uint32())
	}
	for _, b := range []uint32{0, 0x80000000, 0x3f808000, 0x3f818000, 0x3f80ffff, 0x7f7fffff, 0x7f7f7fff, 0x7f7f8000,
		0xff7fffff, 0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, 0x00000001, 0x00008000, 0x00018000} {
		check(b)
	}
	for h := 0; h < 1<<16; h++ {
		if v := widen(uint16(h)); v == v && roundBF16(v) != uint16(h) {
			t.Fatalf("bfloat16 %#x does not round to itself", h)
		}
	}
}

func FuzzRoundBF16(f *testing.F) {
	f.Add(uint32(0x3f808000))
	f.Fuzz(func(t *testing.T, b uint32) {
		v := math.Float32frombits(b)
		h := roundBF16(v)
		if v != v {
			if widen(h) == widen(h) {
				t.Fatalf("NaN %#x → %#x", b, h)
			}
			return
		}
		// Nearest: no bfloat16 neighbour is closer.
		d := math.Abs(float64(widen(h)) - float64(v))
		for _, o := range []uint16{h - 1, h + 1} {
			if w := widen(o); w == w && !math.IsInf(float64(w), 0) && math.Abs(float64(w)-float64(v)) < d {
				t.Fatalf("%v → %v, but %v is closer", v, widen(h), w)
			}
		}
	})
}

// TestSoftmaxRow: probabilities sum to 1, masked keys get exactly 0, a
// row with no kept key is uniform, the bias is added.
func TestSoftmaxRow(t *testing.T) {
	s := []float32{1, 2, 3, 100}
	softmaxRow(s, []float32{0, 0, 1, 0}, []bool{true, true, true, false})
	e := []float64{math.E, math.E * math.E, math.Exp(4)}
	sum := e[0] + e[1] + e[2]
	for j, w := range e {
		if math.Abs(float64(s[j])-w/sum) > 1e-7 {
			t.Fatalf("p = %v", s)
		}
	}
	if s[3] != 0 {
		t.Fatalf("masked key p = %v", s[3])
	}
	u := []float32{5, -3, 8}
	softmaxRow(u, []float32{1, 2, 3}, []bool{false, false, false})
	for _, p := range u {
		if math.Abs(float64(p)-1.0/3) > 1e-7 {
			t.Fatalf("all masked: %v, want uniform", u)
		}
	}
}

func ExampleConfig_RelativeBucket() {
	c := UMT5XXL()
	for _, r := range []int{-16, -15, -1, 0, 1, 16, 127, 128, -500} {
		fmt.Print(c.RelativeBucket(r), " ")
	}
	// Output: 10 9 1 0 17 26 31 31 15
}
