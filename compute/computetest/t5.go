package computetest

import (
	"fmt"
	"math"

	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/nn"
)

// bf16Linear returns an nn.Linear[uint16] of random bfloat16 weights (and
// bias), not packed, as umT5 holds its matrices.
func bf16Linear(seed uint64, in, out int, bias bool) *nn.Linear[uint16] {
	w := random(seed, in*out)
	l := &nn.Linear[uint16]{In: in, Out: out, W: make([]uint16, len(w))}
	for i, v := range w {
		l.W[i] = gemm.RoundBF16(v)
	}
	if bias {
		l.B = random(seed+1, out)
	}
	return l
}

// t5Cases returns the operations umT5's forward (package t5) adds.
func t5Cases() []Case {
	var cs []Case
	for _, prec := range []gemm.Precision{gemm.F32, gemm.BF16} {
		for _, bias := range []bool{false, true} {
			l := bf16Linear(21, 37, 19, bias)
			cs = append(cs, Case{fmt.Sprintf("LinearBF16/%v/bias=%v", prec, bias), func(b compute.Backend, in func(int) compute.Tensor) compute.Tensor {
				w := b.LoadLinearBF16(l, prec)
				y := b.New(5 * 19)
				b.Linear(y, w, in(5*37), 5)
				return y
			}})
		}
		for _, withProbs := range []bool{false, true} {
			cs = append(cs, Case{fmt.Sprintf("BiasedAttention/%v/probs=%v", prec, withProbs), func(b compute.Backend, in func(int) compute.Tensor) compute.Tensor {
				n, H, D := 7, 3, 5
				q, k, v := in(n*H*D), in(n*H*D), in(n*H*D)
				// keep: keys 2 and 5 masked (0 and −0), the others kept
				// (1, a large value, a NaN-free random sign).
				keep := b.New(n)
				b.Upload(keep, []float32{1, 1, 0, 30, 1, float32(math.Copysign(0, -1)), -2})
				out := b.New(n * H * D)
				var probs compute.Tensor
				if withProbs {
					probs = b.New(H * n * n)
				}
				b.BiasedAttention(prec, out, q, k, v, n, H, D, in(H*(2*n-1)), keep, probs)
				if withProbs {
					both := b.New(n*H*D + H*n*n)
					b.Copy(both, 0, out, 0, n*H*D)
					b.Copy(both, n*H*D, probs, 0, H*n*n)
					return both
				}
				return out
			}})
		}
		cs = append(cs, Case{fmt.Sprintf("BiasedAttention/%v/all-masked", prec), func(b compute.Backend, in func(int) compute.Tensor) compute.Tensor {
			n, H, D := 4, 2, 3
			out := b.New(n * H * D)
			b.BiasedAttention(prec, out, in(n*H*D), in(n*H*D), in(n*H*D), n, H, D, in(H*(2*n-1)), b.New(n), nil)
			return out
		}})
	}
	cs = append(cs, Case{"Mul", func(b compute.Backend, in func(int) compute.Tensor) compute.Tensor {
		x := in(101)
		b.Mul(x, in(101))
		return x
	}}, Case{"Mul/views", func(b compute.Backend, in func(int) compute.Tensor) compute.Tensor {
		x := in(60)
		b.Mul(b.View(x, 7, 40), b.View(in(50), 3, 40))
		return x
	}})
	return cs
}
