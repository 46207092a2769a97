package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/densitykv/densitykv/gemm"
)

func randBF16(r *rand.Rand, n int, std float64) []uint16 {
	w := make([]uint16, n)
	for i := range w {
		w[i] = gemm.RoundBF16(float32(r.NormFloat64() * std))
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

func randF32(r *rand.Rand, n int, std float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * std)
	}
	return x
}

// firstDiff returns the first index where a and b differ in their bits
// (0 when their lengths differ), or −1.
func firstDiff(a, b []float32) int {
	if len(a) != len(b) {
		return 0
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// TestWidenPanelsLayout: widenPanels writes exactly what gemm.PackNT
// packs from the widened weights, padding included, for widths around
// the panel width.
func TestWidenPanelsLayout(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, cols := range []int{1, 5, 31, 32, 33, 64, 100, 128} {
		for _, k := range []int{1, 7, 128, 129, 300} {
			w := randBF16(r, cols*k, 1)
			want := gemm.PackNT(nil, cols, k, widenAll(w), k).Panels()
			var pb gemm.PackedB
			got := pb.Resize(cols, k)
			for i := range got {
				got[i] = float32(math.NaN()) // must all be overwritten
			}
			widenPanels(got, w, k, cols)
			if len(got) != len(want) {
				t.Fatalf("cols %d k %d: %d panel values, want %d", cols, k, len(got), len(want))
			}
			if i := firstDiff(got, want); i >= 0 {
				t.Fatalf("cols %d k %d: panel value %d = %v, want %v", cols, k, i, got[i], want[i])
			}
		}
	}
}

// linear is what both instantiations of Linear offer.
type linear interface {
	Pack(prec gemm.Precision)
	Apply(y, x []float32, rows int)
	Stream(y []float32, rows int, s *Scratch)
	Weight() []float32
	Bytes() int64
}

// newLinear returns a Linear with bfloat16 or float32 weights (random,
// with a bias when bias is set) and its weights as float32.
func newLinear(r *rand.Rand, bf16, bias bool, in, out int) (linear, []float32, []float32) {
	var b []float32
	if bias {
		b = randF32(r, out, 0.5)
	}
	if bf16 {
		w := randBF16(r, in*out, 1/math.Sqrt(float64(in)))
		return &Linear[uint16]{In: in, Out: out, W: w, B: b}, widenAll(w), b
	}
	w := randF32(r, in*out, 1/math.Sqrt(float64(in)))
	return &Linear[float32]{In: in, Out: out, W: w, B: b}, append([]float32(nil), w...), b
}

// TestLinearMatchesNT: Stream (weights as they are) and Apply (packed)
// both equal gemm.NTAs on the weights as float32, then the bias added in
// float32, bit for bit, for both weight types at both precisions, for
// shapes around gemm's blocking (MR 4, NR 32, KC 128, 128-column blocks,
// 32-depth bfloat16 blocks) and any thread count; Weight returns the
// weights at the packed precision.
func TestLinearMatchesNT(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	prev := gemm.SetThreads(0)
	defer gemm.SetThreads(prev)
	var s Scratch
	for _, rows := range []int{1, 3, 5, 33, 130} {
		for _, in := range []int{1, 7, 129, 300} {
			for _, out := range []int{1, 31, 33, 129, 300} {
				x := randF32(r, rows*in, 1)
				for _, prec := range []gemm.Precision{gemm.F32, gemm.BF16} {
					for _, kind := range []struct{ bf16, bias bool }{{true, false}, {true, true}, {false, false}, {false, true}} {
						l, w, b := newLinear(r, kind.bf16, kind.bias, in, out)
						want := make([]float32, rows*out)
						gemm.NTAs(prec, rows, out, in, x, in, w, in, want, out)
						for i := range want {
							if b != nil {
								want[i] += b[i%out]
							}
						}
						check := func(what string, th int, got []float32) {
							t.Helper()
							if i := firstDiff(got, want); i >= 0 {
								t.Fatalf("%s (bf16 weights %v, bias %v) %v rows %d in %d out %d threads %d: y[%d] = %v, want %v",
									what, kind.bf16, kind.bias, prec, rows, in, out, th, i, got[i], want[i])
							}
						}
						for _, th := range []int{1, 2, 3} {
							gemm.SetThreads(th)
							got := nans(rows * out)
							s.PackInput(prec, x, rows, in)
							l.Stream(got, rows, &s)
							check("Stream", th, got)
						}
						l.Pack(prec)
						for _, th := range []int{1, 3} {
							gemm.SetThreads(th)
							got := nans(rows * out)
							l.Apply(got, x, rows)
							check("Apply", th, got)
						}
						wp := l.Weight()
						for i, v := range w {
							if prec == gemm.BF16 {
								v = widen(gemm.RoundBF16(v))
							}
							if wp[i] != v {
								t.Fatalf("packed at %v: Weight()[%d] = %v, want %v", prec, i, wp[i], v)
							}
						}
					}
				}
			}
		}
	}
}

// TestLinearMisuse: Apply before Pack and Stream after Pack, or on an
// input packed for another shape, panic with an "nn:" message.
func TestLinearMisuse(t *testing.T) {
	mustPanic := func(what string, f func()) {
		t.Helper()
		defer func() {
			if r := recover(); r == nil {
				t.Fatalf("%s: no panic", what)
			} else if msg, ok := r.(string); !ok || len(msg) < 4 || msg[:4] != "nn: " {
				t.Fatalf("%s: panic %v, want an nn: message", what, r)
			}
		}()
		f()
	}
	l := &Linear[float32]{In: 3, Out: 2, W: make([]float32, 6)}
	y, x := make([]float32, 4), make([]float32, 6)
	mustPanic("Apply before Pack", func() { l.Apply(y, x, 2) })
	var s Scratch
	s.PackInput(gemm.F32, x, 3, 2)
	mustPanic("Stream on a 3×2 input", func() { l.Stream(y, 2, &s) })
	s.PackInput(gemm.F32, x, 2, 3)
	l.Pack(gemm.F32)
	mustPanic("Stream after Pack", func() { l.Stream(y, 2, &s) })
}

// TestLinearBytes: float32 weights take 4 bytes, bfloat16 ones 2, the bias
// 4; packed, what gemm holds.
func TestLinearBytes(t *testing.T) {
	l16 := &Linear[uint16]{In: 64, Out: 32, W: make([]uint16, 64*32), B: make([]float32, 32)}
	l32 := &Linear[float32]{In: 64, Out: 32, W: make([]float32, 64*32)}
	if got := l16.Bytes(); got != 2*64*32+4*32 {
		t.Errorf("bf16 weights with bias: %d bytes", got)
	}
	if got := l32.Bytes(); got != 4*64*32 {
		t.Errorf("float32 weights: %d bytes", got)
	}
	l32.Pack(gemm.F32)
	if got := l32.Bytes(); got < 4*64*32 {
		t.Errorf("packed float32 weights: %d bytes", got)
	}
}

func nans(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(math.NaN())
	}
	return x
}
