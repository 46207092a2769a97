package vmath

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// TestFMA32 checks FMA32 against a·b + c computed exactly with math/big and
// rounded once to float32, on random operands of every magnitude class
// (products that cancel c, tiny and denormal results, overflow).
func TestFMA32(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	val := func() float32 {
		switch r.IntN(5) {
		case 0:
			return math.Float32frombits(r.Uint32()) // anything, NaN and Inf included
		case 1:
			return math.Float32frombits(r.Uint32() & 0x807fffff) // denormal or zero
		default:
			return float32(math.Ldexp(r.NormFloat64(), r.IntN(80)-40))
		}
	}
	for i := 0; i < 200000; i++ {
		a, b, c := val(), val(), val()
		if i%3 == 0 { // c close to −a·b: cancellation
			c = -float32(float64(a) * float64(b))
		}
		got := FMA32(a, b, c)
		want := float32(math.FMA(float64(a), float64(b), float64(c)))
		if !math.IsNaN(float64(want)) && !math.IsInf(float64(want), 0) && !math.IsNaN(float64(a)*float64(b)+float64(c)) {
			x := new(big.Float).SetPrec(200).SetFloat64(float64(a))
			x.Mul(x, new(big.Float).SetFloat64(float64(b)))
			x.Add(x, new(big.Float).SetFloat64(float64(c)))
			want, _ = x.Float32()
			if want == 0 { // the sign of an exact zero sum: IEEE's rules, as math.FMA gives them
				want = float32(math.FMA(float64(a), float64(b), float64(c)))
			}
		}
		if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
			t.Fatalf("FMA32(%g, %g, %g) = %g (%#x), want %g (%#x)", a, b, c, got, math.Float32bits(got), want, math.Float32bits(want))
		}
	}
}

// TestExp32 measures Exp32 against e^x rounded to float32 over the whole
// range [−104, 89] and at its special points: within 1 ulp (normal
// results), exact at 0, monotone, gradual underflow to 0 and overflow to
// +Inf where e^x rounds there (a denormal result is one of the two
// neighbours of e^x).
func TestExp32(t *testing.T) {
	worst, wrong, n := 0.0, 0, 0
	prev := float32(0)
	check := func(x float32) {
		got := Exp32(x)
		want := math.Exp(float64(x))
		w32 := float32(want)
		n++
		if got != w32 {
			wrong++
		}
		if w32 < minNormal32 || math.IsInf(float64(w32), 0) {
			if math.Abs(float64(got)-want) >= math.SmallestNonzeroFloat32 && !(math.IsInf(float64(got), 1) && want > math.MaxFloat32) {
				t.Fatalf("Exp32(%v) = %v, want %v (denormal or overflow range)", x, got, want)
			}
			return
		}
		ulp := float64(math.Nextafter32(w32, float32(math.Inf(1))) - w32)
		if e := math.Abs(float64(got)-want) / ulp; e > worst {
			worst = e
		}
	}
	for x := float32(-104); x <= 89; x += 0.000731 {
		check(x)
		if got := Exp32(x); got < prev {
			t.Fatalf("Exp32 not monotone at %v: %v < %v", x, got, prev)
		} else {
			prev = got
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 200000; i++ {
		check(float32(-2 + 2*r.Float64())) // the softmax's common range
	}
	t.Logf("worst error %.3f ulp; %d of %d (%.2f %%) not correctly rounded", worst, wrong, n, 100*float64(wrong)/float64(n))
	if worst > 1 {
		t.Fatalf("worst error %.3f ulp > 1", worst)
	}
	if Exp32(0) != 1 || Exp32(float32(math.Copysign(0, -1))) != 1 {
		t.Fatalf("Exp32(±0) = %v, %v", Exp32(0), Exp32(float32(math.Copysign(0, -1))))
	}
	if got := Exp32(-104); got != 0 {
		t.Fatalf("Exp32(−104) = %v, want 0", got)
	}
	if got := Exp32(-103); got == 0 || got >= minNormal32 {
		t.Fatalf("Exp32(−103) = %v, want a denormal", got)
	}
	if got := Exp32(89); !math.IsInf(float64(got), 1) {
		t.Fatalf("Exp32(89) = %v, want +Inf", got)
	}
	if got := Exp32(88.7); math.IsInf(float64(got), 0) || got < 3e38 {
		t.Fatalf("Exp32(88.7) = %v, want finite near 3.3e38", got)
	}
}

// TestExp32Clamped: Exp32 inside the clamps, 0 and +Inf beyond them at
// every magnitude up to ±Inf, NaN kept bit for bit.
func TestExp32Clamped(t *testing.T) {
	inf := float32(math.Inf(1))
	for _, x := range []float32{-103.5, -50, -1, -1e-30, 0, 0.5, 1, 20, 88.7} {
		if got, want := Exp32Clamped(x), Exp32(x); math.Float32bits(got) != math.Float32bits(want) {
			t.Errorf("Exp32Clamped(%v) = %v, Exp32 gives %v", x, got, want)
		}
	}
	for _, x := range []float32{Exp32Lo, -104.5, -1e4, -math.MaxFloat32, -inf} {
		if got := Exp32Clamped(x); got != 0 || math.Signbit(float64(got)) {
			t.Errorf("Exp32Clamped(%v) = %v, want +0", x, got)
		}
	}
	for _, x := range []float32{88.8, Exp32Hi, 89.5, 1e4, math.MaxFloat32, inf} {
		if got := Exp32Clamped(x); !math.IsInf(float64(got), 1) {
			t.Errorf("Exp32Clamped(%v) = %v, want +Inf", x, got)
		}
	}
	for _, b := range []uint32{0x7fc00000, 0xffc00001, 0x7fa00000} {
		x := math.Float32frombits(b)
		if got := Exp32Clamped(x); math.Float32bits(got) != b {
			t.Errorf("Exp32Clamped(NaN %#08x) = %#08x, want the argument", b, math.Float32bits(got))
		}
	}
}
