package vae

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// randConv returns a random convolution (weights packed).
func randConv(cin, cout, kt, kh, kw int, seed uint64) *Conv {
	r := rand.New(rand.NewPCG(seed, 1))
	c := &Conv{Cin: cin, Cout: cout, KT: kt, KH: kh, KW: kw, slot: -1}
	c.Weight = make([]float32, cout*cin*kt*kh*kw)
	c.Bias = make([]float32, cout)
	for i := range c.Weight {
		c.Weight[i] = float32(r.NormFloat64())
	}
	for i := range c.Bias {
		c.Bias[i] = float32(r.NormFloat64())
	}
	c.pack()
	return c
}

func randFrame(n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 2))
	f := make([]float32, n)
	for i := range f {
		f[i] = float32(r.NormFloat64())
	}
	return f
}

// BenchmarkConv times one output frame of the real decoder's convolution
// shapes (all taps reading a frame) and reports GFLOP/s.
func BenchmarkConv(b *testing.B) {
	for _, c := range []struct {
		name             string
		cin, cout, kt, k int
		h, w             int
		up               bool
	}{
		{"res384-60x104", 384, 384, 3, 3, 60, 104, false},
		{"res384-120x208", 384, 384, 3, 3, 120, 208, false},
		{"res192-240x416", 192, 192, 3, 3, 240, 416, false},
		{"res96-480x832", 96, 96, 3, 3, 480, 832, false},
		{"head96to3-480x832", 96, 3, 3, 3, 480, 832, false},
		{"time_conv384-120x208", 384, 768, 3, 1, 120, 208, false},
		{"resample192to96-240x416up", 192, 96, 1, 3, 240, 416, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			cv := randConv(c.cin, c.cout, c.kt, c.k, c.k, 1)
			in := make([][]float32, c.kt)
			for i := range in {
				in[i] = randFrame(c.cin*c.h*c.w, uint64(i))
			}
			ho, wo := c.h, c.w
			if c.up {
				ho, wo = 2*ho, 2*wo
			}
			out := make([]float32, c.cout*ho*wo)
			var e engine
			for b.Loop() {
				cv.apply(&e, out, in, c.h, c.w, c.up, nil)
			}
			b.ReportMetric(float64(e.flops)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

var _ = fmt.Sprint
