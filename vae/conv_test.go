package vae

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/densitykv/densitykv/gemm"
)

// naiveConv is the literal definition of Conv.apply in float64 (the
// oracle): out[co][y][x] = bias + Σ W·in over the taps reading a frame,
// with zero outside the frame and nearest 2× upsampling when up.
func naiveConv(c *Conv, in [][]float32, hs, ws int, up bool, res []float32) []float64 {
	ho, wo := hs, ws
	if up {
		ho, wo = 2*hs, 2*ws
	}
	out := make([]float64, c.Cout*ho*wo)
	for co := 0; co < c.Cout; co++ {
		for y := 0; y < ho; y++ {
			for x := 0; x < wo; x++ {
				s := float64(c.Bias[co])
				for dt := 0; dt < c.KT; dt++ {
					if in[dt] == nil {
						continue
					}
					for dy := 0; dy < c.KH; dy++ {
						for dx := 0; dx < c.KW; dx++ {
							sy, sx := y+dy-c.KH/2, x+dx-c.KW/2
							if sy < 0 || sy >= ho || sx < 0 || sx >= wo {
								continue
							}
							if up {
								sy, sx = sy/2, sx/2
							}
							for ci := 0; ci < c.Cin; ci++ {
								w := c.Weight[(((co*c.Cin+ci)*c.KT+dt)*c.KH+dy)*c.KW+dx]
								s += float64(w) * float64(in[dt][(ci*hs+sy)*ws+sx])
							}
						}
					}
				}
				i := (co*ho+y)*wo + x
				if res != nil {
					s += float64(res[i])
				}
				out[i] = s
			}
		}
	}
	return out
}

// TestConvMatchesNaive checks the GEMM convolution against the literal
// loops on random shapes: every kernel kind of the decoder, widths that
// straddle the gemm panel (32) and tile (128) sizes, frames that start
// mid-panel, zero (nil) history frames, the fused upsampling and the
// residual input, and that the result does not depend on the thread count.
func TestConvMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	kinds := []struct{ kt, k int }{{3, 3}, {3, 1}, {1, 1}, {1, 3}}
	for it := 0; it < 60; it++ {
		kd := kinds[it%len(kinds)]
		cin := 1 + r.IntN(40)
		if it%7 == 0 {
			cin = 100 + r.IntN(200) // several tap groups per MulPacked split
		}
		cout := 1 + r.IntN(40)
		hs, ws := 1+r.IntN(9), 1+r.IntN(45)
		if it%5 == 1 {
			ws = 64 + r.IntN(40) // whole panel rows inside the frame (the fast paths)
		}
		if cin >= 100 {
			cout, hs = 1+r.IntN(8), 1+r.IntN(3)
		}
		up := kd.kt == 1 && kd.k == 3 && r.IntN(2) == 0
		name := fmt.Sprintf("%d:%d→%d,%dx%dx%d,%dx%d,up=%v", it, cin, cout, kd.kt, kd.k, kd.k, hs, ws, up)
		c := randConv(cin, cout, kd.kt, kd.k, kd.k, uint64(it))
		in := make([][]float32, kd.kt)
		for i := range in {
			if i == kd.kt-1 || r.IntN(3) > 0 {
				in[i] = randFrame(cin*hs*ws, uint64(100*it+i))
			}
		}
		ho, wo := hs, ws
		if up {
			ho, wo = 2*hs, 2*ws
		}
		var res []float32
		if r.IntN(2) == 0 {
			res = randFrame(cout*ho*wo, uint64(it+999))
		}
		want := naiveConv(c, in, hs, ws, up, res)
		var e engine
		outs := map[int][]float32{}
		for _, th := range []int{1, 2, 3} {
			prev := gemm.SetThreads(th)
			out := make([]float32, cout*ho*wo)
			for i := range out {
				out[i] = float32(math.NaN()) // every value must be written
			}
			c.apply(&e, out, in, hs, ws, up, res)
			gemm.SetThreads(prev)
			outs[th] = out
		}
		if !slices.Equal(outs[1], outs[2]) || !slices.Equal(outs[1], outs[3]) {
			t.Errorf("%s: results depend on the thread count", name)
		}
		var num, den float64
		for i, w := range want {
			d := float64(outs[1][i]) - w
			num += d * d
			den += w * w
		}
		if rel := math.Sqrt(num / den); !(rel < 1e-5) { // float32 sums of up to 8,000 terms; a wrong index gives O(1)
			t.Errorf("%s: relative L2 error %.3g against the naive conv", name, rel)
		}
	}
}

// TestConvInPlaceResidual checks that the residual input may be the output
// itself (how the residual blocks add their shortcut).
func TestConvInPlaceResidual(t *testing.T) {
	c := randConv(20, 20, 3, 3, 3, 3)
	in := [][]float32{randFrame(20*7*50, 1), nil, randFrame(20*7*50, 2)}
	res := randFrame(20*7*50, 3)
	want := make([]float32, len(res))
	var e engine
	c.apply(&e, want, in, 7, 50, false, res)
	got := slices.Clone(res)
	c.apply(&e, got, in, 7, 50, false, got)
	if !slices.Equal(got, want) {
		t.Fatal("in-place residual differs")
	}
}

// TestConvFlops checks the operation count: only taps that read a frame
// count.
func TestConvFlops(t *testing.T) {
	c := randConv(4, 5, 3, 3, 3, 1)
	var e engine
	out := make([]float32, 5*6*7)
	c.apply(&e, out, [][]float32{nil, nil, randFrame(4*6*7, 1)}, 6, 7, false, nil)
	if want := int64(2 * 5 * 4 * 9 * 42); e.flops != want {
		t.Fatalf("flops %d, want %d", e.flops, want)
	}
}
