package computetest

import (
	"fmt"

	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/nn"
)

// conv returns an nn.Conv of random weights and bias, packed at prec.
func conv(seed uint64, cin, cout, kt, kh, kw int, prec gemm.Precision) *nn.Conv {
	c := &nn.Conv{Cin: cin, Cout: cout, KT: kt, KH: kh, KW: kw,
		Weight: random(seed, cout*cin*kt*kh*kw), Bias: random(seed+1, cout)}
	c.Pack(prec)
	return c
}

// vaeCases returns the operations the VAE decoder uses: its convolutions
// (causal 3×3×3 with zero history frames and with a full history, the
// time_conv's 3×1×1, 1×1 ones, the fused upsampling; at bf16 channel
// counts whose tap groups need padding and several groups per frame; a
// residual that is the output itself; an input frame that is a view),
// the channel RMS norm with and without SiLU, and the transpose.
func vaeCases() []Case {
	var cs []Case
	type shape struct {
		name                  string
		cin, cout, kt, kh, kw int
		hs, ws                int
		zero                  int // leading zero (nil) frames
		up, res               bool
	}
	shapes := []shape{
		{"causal/first", 4, 6, 3, 3, 3, 5, 7, 2, false, false},
		{"causal/history+res", 5, 5, 3, 3, 3, 6, 3, 0, false, true},
		{"causal/groups", 70, 3, 3, 3, 3, 3, 4, 1, false, false},
		{"time", 3, 6, 3, 1, 1, 4, 5, 1, false, false},
		{"1x1", 7, 9, 1, 1, 1, 5, 6, 0, false, false},
		{"up", 6, 3, 1, 3, 3, 3, 5, 0, true, false},
	}
	for _, prec := range []gemm.Precision{gemm.F32, gemm.BF16} {
		for i, s := range shapes {
			c := conv(uint64(100+i), s.cin, s.cout, s.kt, s.kh, s.kw, prec)
			cs = append(cs, Case{fmt.Sprintf("Conv/%v/%s", prec, s.name), func(b compute.Backend, in func(int) compute.Tensor) compute.Tensor {
				w := b.LoadConv(c, prec)
				n := s.cin * s.hs * s.ws
				frames := make([]compute.Tensor, s.kt)
				for dt := s.zero; dt < s.kt; dt++ {
					frames[dt] = b.View(in(n+3), 3, n) // a view at an offset
				}
				ho, wo := s.hs, s.ws
				if s.up {
					ho, wo = 2*ho, 2*wo
				}
				out := b.New(s.cout * ho * wo)
				var res compute.Tensor
				if s.res {
					out = in(s.cout * ho * wo)
					res = out
				}
				b.Conv(out, w, frames, s.hs, s.ws, s.up, res)
				b.FreeConv(w)
				return out
			}})
		}
	}
	for _, act := range []bool{false, true} {
		cs = append(cs, Case{fmt.Sprintf("RMSNormChannels/act=%v", act), func(b compute.Backend, in func(int) compute.Tensor) compute.Tensor {
			ch, P := 13, 37
			x := in(ch * P)
			b.RMSNormChannels(x, x, ch, P, in(ch), act)
			return x
		}})
	}
	cs = append(cs, Case{"Transpose", func(b compute.Backend, in func(int) compute.Tensor) compute.Tensor {
		y := b.New(7 * 11)
		b.Transpose(y, in(7*11), 7, 11)
		return y
	}})
	return cs
}
