package riesz

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/densitykv/densitykv/internal/vmath"
)

// The assembly computes the interaction's 1/x without a division (see
// gen_epilogue.go, func (g *gen) recip): for x in [2^-125, 2^125) whose
// significand is not all ones
//
//	y0 = VRCP14PS(x)             |y0·x − 1| ≤ 2^-14 (any such y0)
//	e  = fma(−x, y0, 1)
//	y1 = fma(e, y0, y0)          one of the two float32 values around 1/x
//	r  = fma(−x, y1, 1)
//	y  = fma(r, y1, y1)          = RN(1/x)
//
// and by VDIVPS for the other lanes (NaN, ≤ 0, denormal, tiny, huge, all
// ones). The tests below show that y is the IEEE quotient 1/x for every x
// of one binade and every y0 the documented error bound of VRCP14PS
// allows, whatever a CPU's table returns. Every step is an fma of normal
// float32 values, exact up to its one rounding, so scaling x by 2^k (and
// y0, y1, y by 2^-k) scales every step exactly as long as all of them stay
// normal, which the range [2^-125, 2^125) ensures (the extreme binades are
// checked as well). Analytically: with ε = 1 − x·y0 (|ε| ≤ 2^-14),
// y0 + ε·y0 = (1 − ε²)/x, and e = RN(ε) is within 2^-38 of ε, so y1 is
// rounded from a value within 2^-28/x of 1/x, 1/16 ulp: y1 is RD(1/x) or
// RU(1/x); the tests check this rather than rely on it.

// rcp14Err is the documented bound of VRCP14PS: |y0·x − 1| ≤ 2^-14.
const rcp14Err = 0x1p-14

// recipFinal is the last step: y = fma(fma(−x, y1, 1), y1, y1).
func recipFinal(x, y1 float32) float32 {
	r := vmath.FMA32(-x, y1, 1)
	return vmath.FMA32(r, y1, y1)
}

// recipFirst is the first step: y1 = fma(fma(−x, y0, 1), y0, y0).
func recipFirst(x, y0 float32) float32 {
	e := vmath.FMA32(-x, y0, 1)
	return vmath.FMA32(e, y0, y0)
}

// next32 and prev32 are the neighbouring float32 values of a positive
// normal v.
func next32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) + 1) }
func prev32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) - 1) }

// around returns the float32 values within one ulp of 1/x for a positive
// normal x: RD(1/x) and RU(1/x), or, where 1/x is a float32 (x a power of
// two), 1/x and its two neighbours. x·q is exact in float64, and so is
// its difference with 1.
func around(x float32) []float32 {
	q := 1 / x
	switch d := float64(x)*float64(q) - 1; {
	case d < 0: // q < 1/x
		return []float32{q, next32(q)}
	case d > 0:
		return []float32{prev32(q), q}
	}
	return []float32{prev32(q), q, next32(q)}
}

// rcp14Range returns the smallest and largest float32 y0 with |y0·x − 1| ≤
// 2^-14 for a positive normal x with a normal 1/x (y0·x is exact in
// float64, and so is its difference with 1).
func rcp14Range(x float32) (lo, hi float32) {
	ok := func(y0 float32) bool { return math.Abs(float64(y0)*float64(x)-1) <= rcp14Err }
	lo = float32((1 - rcp14Err) / float64(x))
	for !ok(lo) {
		lo = next32(lo)
	}
	for ok(prev32(lo)) {
		lo = prev32(lo)
	}
	hi = float32((1 + rcp14Err) / float64(x))
	for !ok(hi) {
		hi = prev32(hi)
	}
	for ok(next32(hi)) {
		hi = next32(hi)
	}
	return lo, hi
}

// allOnes reports whether x's significand is all ones: the one case the
// assembly divides (see TestRecipFinalStepExhaustive).
func allOnes(x float32) bool { return math.Float32bits(x)&(1<<23-1) == 1<<23-1 }

// TestRecipFinalStepExhaustive checks the last step on every significand:
// for x in [1, 2) and every y1 within one ulp of 1/x (RD(1/x) and RU(1/x)),
// the residual fma(−x, y1, 1) is exact and fma(fma(−x, y1, 1), y1, y1)
// is RN(1/x) bit for bit, except for the all-ones significand 2 − 2^-23:
// 1/x = 0.5 + 2^-25 + 2^-49 + … is just above the midpoint of 0.5 and
// 0.5 + 2^-24, and from y1 = 0.5 the step lands exactly on the midpoint
// (r = 2^-24) and rounds to even, 0.5. The assembly sends those lanes to
// VDIVPS. (A y1 one ulp beyond RN(1/x) on the far side, 1.5 ulp from 1/x,
// fails for 31 more significands; the first step never gives one:
// TestRecipFirstStep.)
func TestRecipFinalStepExhaustive(t *testing.T) {
	bad, exc := 0, 0
	for m := uint32(0); m < 1<<23; m++ {
		x := math.Float32frombits(0x3f800000 | m)
		q := 1 / x
		for _, y1 := range around(x) {
			// The residual is exact: 1 − x·y1 in float64 is (x·y1 has
			// 48 bits and is near 1).
			if r := vmath.FMA32(-x, y1, 1); float64(r) != 1-float64(x)*float64(y1) {
				t.Fatalf("x = %#x: y1 = %#x: residual %v is rounded", math.Float32bits(x), math.Float32bits(y1), r)
			}
			if y := recipFinal(x, y1); math.Float32bits(y) != math.Float32bits(q) {
				if allOnes(x) {
					exc++
					continue
				}
				if bad++; bad <= 10 {
					t.Errorf("x = %#x: y1 = %#x gives %#x, 1/x = %#x", math.Float32bits(x), math.Float32bits(y1), math.Float32bits(y), math.Float32bits(q))
				}
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d failures", bad)
	}
	t.Logf("all-ones significand: %d of its y1 fail (division fallback)", exc)
}

// TestRecipFirstStep checks that the first step brings every y0 the
// VRCP14PS bound allows to within one ulp of 1/x: every such y0 for a
// sample of x (the ends of the binade, all-ones significands, random
// ones), and for every x of [1, 2) the two ends of the interval of y0,
// where |e| is largest, and RN(1/x) itself.
func TestRecipFirstStep(t *testing.T) {
	within := func(x, y0 float32) bool {
		y1 := recipFirst(x, y0)
		for _, v := range around(x) {
			if y1 == v {
				return true
			}
		}
		t.Errorf("x = %#x: y0 = %#x gives y1 = %#x, 1/x = %#x", math.Float32bits(x), math.Float32bits(y0), math.Float32bits(y1), math.Float32bits(1/x))
		return false
	}
	sample := []uint32{0, 1, 2, 0x7fffff, 0x7ffffe, 0x400000, 0x3fffff, 0x555555, 0x2aaaaa}
	rng := rand.New(rand.NewPCG(5, 6))
	for len(sample) < 1024 {
		sample = append(sample, rng.Uint32()&0x7fffff)
	}
	for _, m := range sample {
		x := math.Float32frombits(0x3f800000 | m)
		lo, hi := rcp14Range(x)
		for y0 := lo; y0 <= hi; y0 = next32(y0) {
			if !within(x, y0) {
				t.FailNow()
			}
		}
	}
	for m := uint32(0); m < 1<<23; m++ {
		x := math.Float32frombits(0x3f800000 | m)
		lo, hi := rcp14Range(x)
		if !within(x, lo) || !within(x, hi) || !within(x, 1/x) {
			t.FailNow()
		}
	}
}

// TestRecipExtremeBinades checks the whole sequence (both ends of the
// VRCP14PS interval and RN(1/x) as y0) in the first and last binades of
// [2^-125, 2^125) and their neighbours, where the scaling argument is
// closest to its limits: a sample of significands, the all-ones one
// (which must fail somewhere, or the fallback would be unneeded) skipped.
func TestRecipExtremeBinades(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	ms := []uint32{0, 1, 0x7ffffe, 0x400000}
	for len(ms) < 1<<14 {
		if m := rng.Uint32() & 0x7fffff; m != 0x7fffff {
			ms = append(ms, m)
		}
	}
	for _, exp := range []int{-125, -124, 123, 124} {
		for _, m := range ms {
			x := float32(math.Ldexp(float64(math.Float32frombits(0x3f800000|m)), exp))
			q := 1 / x
			lo, hi := rcp14Range(x)
			for _, y0 := range []float32{lo, hi, q} {
				if y := recipFinal(x, recipFirst(x, y0)); math.Float32bits(y) != math.Float32bits(q) {
					t.Fatalf("x = %#x: y0 = %#x gives %#x, 1/x = %#x", math.Float32bits(x), math.Float32bits(y0), math.Float32bits(y), math.Float32bits(q))
				}
			}
		}
	}
}

// TestRecipAsmAllSignificands runs every significand of several binades
// (the low end of the fast path's range and the binade below it, around
// 1, and the binade of MaxDenominator ≈ 2^119.6, above which every x is
// capped) through the tile epilogue and requires the IEEE quotient 1/x bit
// for bit: on an AVX-512 CPU this checks the reciprocal sequence with this
// CPU's VRCP14PS. With dot 0, na 0, eps 0, s 1 and pow 1 the denominator
// is nb exactly (c = nb, d2 = c, t = 0 + d2·1), capped at MaxDenominator.
func TestRecipAsmAllSignificands(t *testing.T) { eachReciprocal(t, testRecipAsmAllSignificands) }

func testRecipAsmAllSignificands(t *testing.T) {
	const cols = 1 << 12
	xs := make([]float32, 1<<23)
	got := make([]float32, len(xs))
	for _, exp := range []int{-126, -125, -124, -1, 0, 1, 60, 119} {
		for m := range xs {
			xs[m] = float32(math.Ldexp(float64(math.Float32frombits(0x3f800000|uint32(m))), exp))
			got[m] = 0
		}
		rows := len(xs) / cols
		na := make([]float32, rows)
		for r := 0; r < rows; r++ {
			epiTileFromDots(got[r*cols:], cols, 1, cols, na[r:], xs[r*cols:], 0, 1, 1)
		}
		for m, x := range xs {
			want := 1 / min(x, MaxDenominator)
			if math.Float32bits(got[m]) != math.Float32bits(want) {
				t.Fatalf("x = %#x (2^%d): got %#x, want 1/x = %#x", math.Float32bits(x), exp, math.Float32bits(got[m]), math.Float32bits(want))
			}
		}
	}
}

// recipSpecials are denominators around and outside the fast path's range.
func recipSpecials() []float32 {
	f := math.Float32frombits
	v := []float32{
		0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		f(0x7fc00000), f(0x7fc12345), f(0xffc00000), f(0xffd54321), f(0x7fa00001), // NaN: quiet, payloads, negative, signalling
		f(1), f(0x007fffff), f(0x00400000), f(0x00000003), // denormal
		f(0x00800000), f(0x00ffffff), f(0x00fffffe), // [2^-126, 2^-125)
		f(0x01000000), f(0x01000001), f(0x017fffff), // 2^-125, its binade
		f(0x7dffffff), f(0x7dfffffe), f(0x7e000000), f(0x7e000001), // around 2^125
		f(0x7f7fffff), 1e36, f(0x7b40ae0f), f(0x7b40ae0e), 3e36, // huge, MaxDenominator and its neighbours (above it capped)
		-1, -1e-40, -3e38,
	}
	for e := -126; e <= 127; e += 7 { // all-ones significands
		v = append(v, float32(math.Ldexp(2-0x1p-23, e)))
	}
	for e := -149; e < -126; e += 5 {
		v = append(v, float32(math.Ldexp(1.5, e)))
	}
	return v
}

// TestRecipAsmFallback checks the epilogues on denominators that take the
// division fallback (NaN, ±0, negative, denormal, tiny, huge, ±Inf,
// all-ones significands), alone or mixed with ordinary ones at every lane
// position and row length (full chunks, single chunks, masked tails),
// against the pure-Go definition bit for bit, NaN payloads included, with
// the statistics of the fused epilogue; lanes past a tail must add 0.
func TestRecipAsmFallback(t *testing.T) { eachReciprocal(t, testRecipAsmFallback) }

func testRecipAsmFallback(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	sp := recipSpecials()
	for _, n := range []int{1, 5, 15, 16, 17, 31, 32, 33, 48, 63, 64, 65, 100} {
		for trial := 0; trial < 12; trial++ {
			nb := make([]float32, n)
			for j := range nb {
				switch {
				case trial == 0 || rng.IntN(4) == 0:
					nb[j] = sp[rng.IntN(len(sp))]
				default:
					nb[j] = float32(math.Ldexp(rng.Float64()+0.5, rng.IntN(60)-30))
				}
			}
			if trial == 1 { // one special lane in ordinary ones
				for j := range nb {
					nb[j] = float32(1 + rng.Float64())
				}
				nb[rng.IntN(n)] = sp[rng.IntN(len(sp))]
			}
			inv := make([]float32, n)
			for j := range inv {
				inv[j] = float32(rng.Float64())
			}
			// na 0 gives x = nb exactly; others shift x, and make the
			// lanes past a tail nonzero (NaN for na = NaN) if unmasked.
			for _, na := range []float32{0, 1, float32(math.NaN())} {
				for _, eps := range []float32{0, -2, 1e-30} {
					name := fmt.Sprintf("n%d/trial%d/na%v/eps%v", n, trial, na, eps)
					checkRecipTile(t, name, slices.Clone(nb), inv, na, eps)
				}
			}
		}
	}
}

func checkRecipTile(t *testing.T, name string, nb, inv []float32, na, eps float32) {
	t.Helper()
	n := len(nb)
	// Bit for bit, NaN payloads included, except where na and nb are
	// both NaN: which of the two c = na + nb keeps is not part of the
	// definition (the Go compiler may swap the operands; VADDPS keeps
	// its first).
	same := func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }
	if na != na {
		same = same32
	}
	dots := make([]float32, n) // x = nb exactly when na = 0 and eps = 0
	nas := []float32{na}
	want, got := slices.Clone(dots), slices.Clone(dots)
	tileFromDotsGeneric(want, n, 1, n, nas, nb, eps, 1, 1)
	epiTileFromDots(got, n, 1, n, nas, nb, eps, 1, 1)
	for j := range want {
		if !same(got[j], want[j]) {
			t.Fatalf("%s: fromDots [%d] (nb %#x) = %#x, want %#x", name, j, math.Float32bits(nb[j]), math.Float32bits(got[j]), math.Float32bits(want[j]))
		}
	}
	for _, iv := range [][]float32{nil, inv} {
		want, got := slices.Clone(dots), slices.Clone(dots)
		var ws, wsn, gs, gsn [1]float64
		var wm, gm [1]float32
		tileStatsGeneric(want, n, 1, n, nas, nb, iv, eps, 1, 1, ws[:], wsn[:], wm[:])
		epiTileStats(got, n, 1, n, nas, nb, iv, eps, 1, 1, gs[:], gsn[:], gm[:])
		for j := range want {
			if !same(got[j], want[j]) {
				t.Fatalf("%s inv=%v: tileStats [%d] (nb %#x) = %#x, want %#x", name, iv != nil, j, math.Float32bits(nb[j]), math.Float32bits(got[j]), math.Float32bits(want[j]))
			}
		}
		if !same64(gs[0], ws[0]) || !same64(gsn[0], wsn[0]) || !same32(gm[0], wm[0]) {
			t.Fatalf("%s inv=%v: stats (%v, %v, %v), want (%v, %v, %v)", name, iv != nil, gs[0], gsn[0], gm[0], ws[0], wsn[0], wm[0])
		}
	}
}
