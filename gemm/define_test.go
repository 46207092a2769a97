package gemm

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// The definition's scalar steps against exact arithmetic (math/big).

// exactRound rounds the exact value x + y·z (float64 inputs, exact in big
// arithmetic) to float32: gradual underflow, or x86 flush-to-zero with
// tininess detected after rounding.
func exactRound(x, y, z float64, ftz bool) float32 {
	if math.IsNaN(x) || math.IsNaN(y) || math.IsNaN(z) || math.IsInf(x, 0) || math.IsInf(y, 0) || math.IsInf(z, 0) {
		return float32(x + y*z)
	}
	p := new(big.Float).SetPrec(4000).Mul(new(big.Float).SetPrec(4000).SetFloat64(y), big.NewFloat(z))
	s := new(big.Float).SetPrec(4000).Add(p, big.NewFloat(x))
	if s.Sign() == 0 {
		// IEEE: an exact zero sum is -0 only if both addends are -0.
		pz := y*z == 0
		if pz && x == 0 && math.Signbit(x) && math.Signbit(y) != math.Signbit(z) {
			return float32(math.Copysign(0, -1))
		}
		return 0
	}
	r, _ := s.Float32()
	if ftz {
		r24 := new(big.Float).SetPrec(24).SetMode(big.ToNearestEven).Set(s)
		if new(big.Float).Abs(r24).Cmp(big.NewFloat(minNormal32)) < 0 {
			return float32(math.Copysign(0, float64(s.Sign())))
		}
	}
	return r
}

// randFloat32 returns float32 values of every class, weighted toward the
// cases where rounding is delicate.
func randFloat32(rng *rand.Rand) float32 {
	switch rng.IntN(10) {
	case 0:
		return math.Float32frombits(rng.Uint32()) // anything, NaN and Inf included
	case 1:
		return math.Float32frombits(rng.Uint32() & 0x807fffff) // denormal or zero
	case 2:
		return float32(math.Ldexp(1+rng.Float64(), -150+rng.IntN(30)))
	default:
		return float32(math.Ldexp(rng.Float64()*2-1, rng.IntN(40)-20))
	}
}

func TestFMA32Exact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	check := func(a, b, c float32) {
		t.Helper()
		want := exactRound(float64(c), float64(a), float64(b), false)
		if got := fma32(a, b, c); !sameBits(got, want) {
			t.Fatalf("fma32(%g, %g, %g) = %g (%#x), want %g (%#x)", a, b, c, got, math.Float32bits(got), want, math.Float32bits(want))
		}
		wantZ := exactRound(float64(c), float64(a), float64(b), true)
		if got := round32(float64(a)*float64(b), float64(c), true); !sameBits(got, wantZ) {
			t.Fatalf("ftz(%g·%g + %g) = %g (%#x), want %g (%#x)", a, b, c, got, math.Float32bits(got), wantZ, math.Float32bits(wantZ))
		}
	}
	// Double rounding through float64: c + a·b lands within 2^-71 of a
	// float32 midpoint (a·b = 2^-24·(1 - 2^-46)), where rounding the
	// float64 sum again would go the wrong way.
	check(float32(1+0x1p-23), float32(0x1p-24+0x1p-47), float32(0x1p0-0x1p-23))
	check(1+0x1p-23, 1-0x1p-23, 1)
	for _, c := range []float32{1, 1 + 0x1p-23, -1, 0x1p100} {
		check(float32(1+0x1p-23), float32(0x1p-1-0x1p-24)*float32(math.Ldexp(1, int(math.Ilogb(float64(c)))-23)), c)
	}
	// The tininess window just below 2^-126.
	for _, d := range []float64{0x1p-152, 0x1p-151, 0x1.8p-151, 0x1p-150, 0x1.8p-150} {
		check(float32(-d*0x1p76), 0x1p-76, minNormal32)
	}
	for i := 0; i < 300000; i++ {
		check(randFloat32(rng), randFloat32(rng), randFloat32(rng))
	}
}

// TestFMA32DoubleRounding searches for inputs where float32(a·b + c in
// float64) is wrong, to show the slow path is needed and taken.
func TestFMA32DoubleRounding(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	found := 0
	for i := 0; i < 200000 && found < 3; i++ {
		// c + a·b with a·b just off half an ulp of c.
		c := float32(1 + float64(rng.IntN(1<<23))*0x1p-23)
		a := float32(1 + float64(rng.IntN(1<<23))*0x1p-23)
		b := float32((0x1p-24 + float64(rng.IntN(64)-32)*0x1p-70) / float64(a))
		naive := float32(float64(a)*float64(b) + float64(c))
		want := exactRound(float64(c), float64(a), float64(b), false)
		if got := fma32(a, b, c); !sameBits(got, want) {
			t.Fatalf("fma32(%g, %g, %g) = %g, want %g", a, b, c, got, want)
		}
		if naive != want {
			found++
		}
	}
	if found == 0 {
		t.Fatal("no double-rounding case found: the search no longer exercises the slow path")
	}
}

func TestRoundBF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for i := 0; i < 200000; i++ {
		v := randFloat32(rng)
		h := RoundBF16(v)
		if v != v {
			if g := BF16ToFloat32(h); g == g {
				t.Fatalf("RoundBF16(NaN %#x) = %#x, not NaN", math.Float32bits(v), h)
			}
			continue
		}
		want := new(big.Float).SetPrec(8).SetMode(big.ToNearestEven).SetFloat64(float64(v))
		w, _ := want.Float64()
		if math.Abs(w) > math.MaxFloat32 { // beyond float32: bfloat16 Inf
			w = math.Inf(int(math.Copysign(1, w)))
		}
		if got := float64(BF16ToFloat32(h)); got != w || math.Signbit(got) != math.Signbit(w) {
			// bfloat16 has float32's exponent range, so the 8-bit rounding
			// above is exact unless v is denormal (fewer bits there).
			if math.Float32bits(v)&0x7f800000 != 0 {
				t.Fatalf("RoundBF16(%g) = %g, want %g", v, got, w)
			}
			// Denormal: the rounding is on the absolute grid 2^-133.
			q := math.RoundToEven(float64(v) * 0x1p133)
			if got != q*0x1p-133 {
				t.Fatalf("RoundBF16(denormal %g) = %g, want %g", v, got, q*0x1p-133)
			}
		}
	}
	if bf16Operand(RoundBF16(float32(0x1p-130))) != 0 || !math.Signbit(float64(bf16Operand(RoundBF16(-float32(0x1p-130))))) {
		t.Fatal("a denormal bfloat16 operand is not read as a zero of its sign")
	}
}

// TestDotBF16Blocks checks the structure of the bfloat16 definition: it
// is not a sequential chain, and a product split at a multiple of
// BF16Block and continued from C equals the whole.
func TestDotBF16Blocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	differs := 0
	for it := 0; it < 2000; it++ {
		k := 1 + rng.IntN(200)
		a, b := make([]float32, k), make([]float32, k)
		for i := range a {
			a[i] = bf16Operand(RoundBF16(float32(rng.NormFloat64())))
			b[i] = bf16Operand(RoundBF16(float32(rng.NormFloat64())))
		}
		at := func(q int) float32 { return a[q] }
		bt := func(q int) float32 { return b[q] }
		whole := dotBF16(k, at, bt, 0)
		if s := rng.IntN(k/BF16Block+1) * BF16Block; s < k {
			part := dotBF16(s, at, bt, 0)
			rest := dotBF16(k-s, func(q int) float32 { return a[s+q] }, func(q int) float32 { return b[s+q] }, part)
			if !sameBits(rest, whole) {
				t.Fatalf("k=%d split at %d: %g, whole %g", k, s, rest, whole)
			}
		}
		var seq float32
		for q := 0; q < k; q++ {
			seq = fmaBF16(a[q], b[q], seq)
		}
		if seq != whole {
			differs++
		}
	}
	if differs < 500 {
		t.Fatalf("the block definition equals a sequential chain on %d of 2000 products: not the AMX scheme", 2000-differs)
	}
}
