package gpu

import (
	"encoding/binary"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/densitykv/densitykv/vulkan"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// The operations of shaders/exact64ops.comp (its push constant op).
const (
	op64Div = iota
	op64Sqrt
	op64ToF32
	op64FromF32
	op64MulAdd
	op64Sub
)

// ex64Upload allocates a buffer holding v (at least one value).
func ex64Upload(t testing.TB, dev *vulkan.Device, v []uint64) *vulkan.Buffer {
	t.Helper()
	b, err := dev.Alloc(int64(8 * max(len(v), 1)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Free)
	raw := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(raw[8*i:], x)
	}
	if err := dev.Upload(b, 0, raw); err != nil {
		t.Fatal(err)
	}
	return b
}

// ex64Run runs exact64ops' op over (a[i], b[i], c[i]) and returns the results.
func ex64Run(t *testing.T, dev *vulkan.Device, op int, x ex64Case) []uint64 {
	t.Helper()
	n := len(x.a)
	k, err := newKernel(dev, "exact64ops", vulkan.KernelSpec{Name: "exact64ops", Bindings: 4, PushSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	out := ex64Upload(t, dev, make([]uint64, n))
	batch := dev.NewBatch()
	groups := uint32((n + 63) / 64)
	batch.Dispatch(k, [3]uint32{min(groups, 1024), (groups + 1023) / 1024, 1}, words(uint32(op), uint32(n)),
		out, ex64Upload(t, dev, x.a), ex64Upload(t, dev, x.b), ex64Upload(t, dev, x.c))
	if err := batch.Run(); err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 8*n)
	if err := dev.Download(out, 0, raw); err != nil {
		t.Fatal(err)
	}
	got := make([]uint64, n)
	for i := range got {
		got[i] = binary.LittleEndian.Uint64(raw[8*i:])
	}
	return got
}

// ex64Case is one operation's inputs (float64 bits).
type ex64Case struct{ a, b, c []uint64 }

func (x *ex64Case) add(a, b, c uint64) {
	x.a, x.b, x.c = append(x.a, a), append(x.b, b), append(x.c, c)
}

// ex64Specials: zeros, the smallest and largest denormals and normals,
// ±Inf, NaNs, 1 and its neighbours, powers of two.
var ex64Specials = []uint64{
	0, 1 << 63, 1, 1<<63 | 1, 3, 0x000fffffffffffff, 0x800fffffffffffff, 0x0008000000000000,
	0x0010000000000000, 0x0010000000000001, 0x7fefffffffffffff, 0xffefffffffffffff,
	0x7ff0000000000000, 0xfff0000000000000, 0x7ff8000000000000, 0xfff8000000000001, 0x7ff0000000000001,
	0x3ff0000000000000, 0xbff0000000000000, 0x3ff0000000000001, 0x3fefffffffffffff, 0x3fffffffffffffff,
	0x4000000000000000, 0x3cb0000000000000, 0x4330000000000000, 0x5ff0000000000000, 0x1ff0000000000000,
	0x3ff6a09e667f3bcd, 0x47efffffe0000000, 0x36a0000000000000, 0x3690000000000000, 0x381fffffffffffff,
}

// ex64Inputs returns n triples: every pair of specials, then random bit
// patterns with a third of hard cases: quotients and roots within an ulp
// of a halfway point (a = b·m rounded, m a 54-bit midpoint; a = m²
// rounded), denormal quotients, overflow and underflow, and values near
// the float32 range's ends.
func ex64Inputs(r *rand.Rand, n int) ex64Case {
	var x ex64Case
	for _, a := range ex64Specials {
		for _, b := range ex64Specials {
			x.add(a, b, r.Uint64())
		}
	}
	mid := func() *big.Float { // a 54-bit odd significand: a halfway point of float64s
		return new(big.Float).SetPrec(200).SetInt64(int64(r.Uint64()>>10 | 1<<53 | 1))
	}
	for len(x.a) < n {
		a, b := r.Uint64(), r.Uint64()
		switch r.IntN(9) {
		case 0: // a/b within an ulp of a halfway point
			b = b&0x800fffffffffffff | uint64(r.IntN(400)+800)<<52
			p := new(big.Float).SetPrec(200).Mul(mid(), new(big.Float).SetFloat64(math.Float64frombits(b)))
			p.SetMantExp(p, -53+r.IntN(200)-100)
			f, _ := p.Float64()
			a = math.Float64bits(f) + uint64(r.IntN(3)) - 1
		case 1: // sqrt(a) within an ulp of a halfway point
			m := mid()
			p := new(big.Float).SetPrec(200).Mul(m, m)
			p.SetMantExp(p, -106+2*(r.IntN(1000)-500))
			f, _ := p.Float64()
			a = math.Float64bits(f) + uint64(r.IntN(3)) - 1
		case 2: // denormal results and operands
			a = r.Uint64() & 0x81ffffffffffffff
			b = b&0x800fffffffffffff | uint64(r.IntN(80)+990)<<52
		case 3: // overflow and underflow
			a = a&0x800fffffffffffff | uint64(r.IntN(60)+1980)<<52
			b = b & 0x801fffffffffffff
		case 4: // around float32's range: conversions to float32 that overflow, round to denormals or to zero
			a = a&0x800fffffffffffff | uint64(r.IntN(320)+1023-160)<<52
		case 5: // float32 values (exact conversions) and float64s one ulp around them
			a = math.Float64bits(float64(math.Float32frombits(uint32(a)))) + uint64(r.IntN(3)) - 1
		}
		x.add(a, b, r.Uint64())
	}
	return x
}

// ex64Same compares float64 bits, any NaN equal to any NaN.
func ex64Same(x, y uint64) bool {
	nan := func(b uint64) bool { return b&(1<<63-1) > 0x7ff0000000000000 }
	return x == y || (nan(x) && nan(y))
}

// ex64Check compares got with want(i) and reports the first differences.
func ex64Check(t *testing.T, name string, x ex64Case, got []uint64, want func(i int) uint64) {
	t.Helper()
	bad := 0
	for i, g := range got {
		if w := want(i); !ex64Same(g, w) {
			if bad < 5 {
				t.Errorf("%s(%#016x, %#016x, %#016x) = %#016x, want %#016x", name, x.a[i], x.b[i], x.c[i], g, w)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d results differ", name, bad, len(got))
	}
}

func f64(b uint64) float64 { return math.Float64frombits(b) }

// TestExact64: div64 and sqrt64 against Go's float64 division and
// math.Sqrt on a million inputs each (random bit patterns and the hard
// cases), every perfect square of a 26-bit integer sample and its
// neighbours, the conversions both ways, and the native float64 multiply,
// add and subtract (unfused, correctly rounded).
func TestExact64(t *testing.T) {
	dev := vulkantest.Open(t)
	if !dev.Info().Float64 || !dev.Info().Int64 {
		t.Fatalf("device %v lacks shaderFloat64 or shaderInt64", dev)
	}
	r := rand.New(rand.NewPCG(11, 12))
	x := ex64Inputs(r, 1<<20)
	ex64Check(t, "div64", x, ex64Run(t, dev, op64Div, x), func(i int) uint64 {
		return math.Float64bits(f64(x.a[i]) / f64(x.b[i]))
	})
	ex64Check(t, "sqrt64", x, ex64Run(t, dev, op64Sqrt, x), func(i int) uint64 {
		return math.Float64bits(math.Sqrt(f64(x.a[i])))
	})
	// f64_to_f32's float32 bits, compared as the float64 of that float32
	// (one to one but for NaN payloads).
	got := ex64Run(t, dev, op64ToF32, x)
	for i, g := range got {
		got[i] = math.Float64bits(float64(math.Float32frombits(uint32(g))))
	}
	ex64Check(t, "f64_to_f32", x, got, func(i int) uint64 {
		return math.Float64bits(float64(float32(f64(x.a[i]))))
	})
	ex64Check(t, "f32_to_f64", x, ex64Run(t, dev, op64FromF32, x), func(i int) uint64 {
		return math.Float64bits(float64(math.Float32frombits(uint32(x.a[i]))))
	})
	ex64Check(t, "a·b + c", x, ex64Run(t, dev, op64MulAdd, x), func(i int) uint64 {
		return math.Float64bits(float64(f64(x.a[i])*f64(x.b[i])) + f64(x.c[i]))
	})
	ex64Check(t, "a − b", x, ex64Run(t, dev, op64Sub, x), func(i int) uint64 {
		return math.Float64bits(f64(x.a[i]) - f64(x.b[i]))
	})

	// Perfect squares of 26-bit integers (a sample) and their neighbours,
	// scaled by even powers of two into the normal and denormal ranges.
	var sq ex64Case
	for k := 0; k < 1<<15; k++ {
		m := r.Uint64()>>38 | 1<<25
		v := math.Float64bits(math.Ldexp(float64(m*m), 2*(r.IntN(1100)-600)))
		sq.add(v-1, 0, 0)
		sq.add(v, 0, 0)
		sq.add(v+1, 0, 0)
	}
	ex64Check(t, "sqrt64", sq, ex64Run(t, dev, op64Sqrt, sq), func(i int) uint64 {
		return math.Float64bits(math.Sqrt(f64(sq.a[i])))
	})
}
