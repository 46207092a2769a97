package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/densitykv/densitykv/internal/asmtext"
)

// geluInputs are values that exercise every branch of GELUTanh32: zeros,
// denormals, the exponential's clamps (|v| ≳ 10 and far beyond), ±Inf, NaNs
// of both signs and payloads, the largest finite values, and random values
// over several scales.
func geluInputs() []float32 {
	xs := []float32{0, float32(math.Copysign(0, -1)), 1e-45, -1e-45, 1e-39, -1e-39, 1e-20, -1e-20,
		0.5, -0.5, 1, -1, 3, -3, 5.4, -5.4, 10, -10, 10.1, -10.1, 30, -30, 1e3, -1e3, 1e13, -1e13,
		math.MaxFloat32, -math.MaxFloat32, float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.NaN()), math.Float32frombits(0xffc00001), math.Float32frombits(0x7f800001)}
	r := rand.New(rand.NewPCG(7, 8))
	for _, s := range []float64{1e-3, 0.3, 1, 3, 8, 12, 100} {
		for i := 0; i < 4000; i++ {
			xs = append(xs, float32(r.NormFloat64()*s))
		}
	}
	for i := 0; i < 4000; i++ {
		xs = append(xs, math.Float32frombits(r.Uint32()))
	}
	return xs
}

// TestGELUKernelBitIdentical: the assembly kernel (where this CPU runs it)
// gives GELUTanh32's bits for every input, at every slice length and offset
// (tails of 0–15 values run geluGo).
func TestGELUKernelBitIdentical(t *testing.T) {
	if !geluAsm() {
		t.Logf("no assembly GELU in this build or on this CPU: geluSlice is geluGo")
	}
	xs := geluInputs()
	want := make([]float32, len(xs))
	for i, v := range xs {
		want[i] = GELUTanh32(v)
	}
	for _, n := range []int{0, 1, 15, 16, 17, 31, 32, 33, 47, 48, 49, 64, 100, len(xs)} {
		for _, off := range []int{0, 3} {
			if off+n > len(xs) {
				continue
			}
			got := append([]float32(nil), xs[off:off+n]...)
			geluSlice(got)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[off+i]) {
					t.Fatalf("n %d off %d: gelu(%v [%#08x]) = %v [%#08x], definition %v [%#08x]", n, off, xs[off+i],
						math.Float32bits(xs[off+i]), got[i], math.Float32bits(got[i]), want[off+i], math.Float32bits(want[off+i]))
				}
			}
		}
	}
	// GELUTanh (parallel chunks) gives the same bits.
	got := append([]float32(nil), xs...)
	GELUTanh(got)
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("GELUTanh(%v) = %v, definition %v", xs[i], got[i], want[i])
		}
	}
}

// TestGELUAccuracy: GELUTanh32 against v/(1 + e^(−2z)) with float64
// math.Exp, in float32 ulp of the exact value where it is not below
// |v|/8 (v ≳ −1.2), and in ulp of |v| elsewhere (where the value falls off
// as e^(−2z) and its relative error grows with z's), with the stated
// limits: +Inf maps to +Inf, −Inf and NaN give NaN.
func TestGELUAccuracy(t *testing.T) {
	worstRel, worstAbs := 0.0, 0.0
	for _, v := range geluInputs() {
		got := GELUTanh32(v)
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, -1) {
			if !math.IsNaN(float64(got)) {
				t.Fatalf("gelu(%v) = %v, want NaN", v, got)
			}
			continue
		}
		if math.IsInf(f, 1) {
			if float64(got) != f {
				t.Fatalf("gelu(%v) = %v", v, got)
			}
			continue
		}
		// The same function in a form without cancellation, math.Exp in
		// float64 (0.5·v·(1 + tanh z) loses everything below v ≈ −9).
		want := f / (1 + math.Exp(-2*math.Sqrt(2/math.Pi)*(f+0.044715*f*f*f)))
		d := math.Abs(float64(got) - want)
		if math.Abs(want) >= math.Abs(f)/8 {
			e := d / ulp32(want)
			worstRel = max(worstRel, e)
			if e > 3 {
				t.Fatalf("gelu(%v) = %v, want %v (%.2f ulp)", v, got, want, e)
			}
		} else {
			e := d / ulp32(f)
			worstAbs = max(worstAbs, e)
			if e > 1 {
				t.Fatalf("gelu(%v) = %v, want %v (%.2f ulp of v)", v, got, want, e)
			}
		}
	}
	t.Logf("worst error %.3f ulp (v ≳ −1.2), %.3f ulp of v (below)", worstRel, worstAbs)
}

// TestGELUTanhReference: GELUTanh against the tanh form in float64.
func TestGELUTanhReference(t *testing.T) {
	for _, v := range []float32{-30, -5, -1, -0.1, 0, 1e-6, 0.3, 1, 4, 30} {
		x := []float32{v}
		GELUTanh(x)
		f := float64(v)
		want := 0.5 * f * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(f+0.044715*f*f*f)))
		if math.Abs(float64(x[0])-want) > 1e-6*math.Max(1, math.Abs(want)) {
			t.Errorf("gelu(%v) = %v, want %v", v, x[0], want)
		}
	}
}

// TestGELUGeneratedAssemblyUpToDate regenerates gelu_amd64.s with
// gen_gelu.go and requires the checked-in file to match it.
func TestGELUGeneratedAssemblyUpToDate(t *testing.T) {
	asmtext.CheckGenerated(t, "gen_gelu.go", "gelu_amd64.s")
}
