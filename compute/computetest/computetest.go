// Package computetest checks a compute.Backend against the CPU backend:
// every operation on the same inputs (tiny, odd shapes; bfloat16 and
// float32 products; per-group vectors with offsets and strides) must give
// the same bits.
package computetest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/nn"
	"github.com/densitykv/densitykv/rope"
)

// Case is one operation: Run records it on b with inputs made by in (the
// same values on every backend) and returns the tensor to compare.
type Case struct {
	Name string
	Run  func(b compute.Backend, in func(n int) compute.Tensor) (out compute.Tensor)
}

// random returns n values of a fixed sequence seeded by seed, some large,
// some tiny, with signed zeros.
func random(seed uint64, n int) []float32 {
	r := rand.New(rand.NewPCG(seed, 7))
	v := make([]float32, n)
	for i := range v {
		switch r.IntN(16) {
		case 0:
			v[i] = float32(r.NormFloat64() * 30)
		case 1:
			v[i] = float32(math.Copysign(0, r.NormFloat64()))
		default:
			v[i] = float32(r.NormFloat64())
		}
	}
	return v
}

// linear returns a packed nn.Linear of random weights (and bias).
func linear(seed uint64, in, out int, bias bool, prec gemm.Precision) *nn.Linear[float32] {
	l := &nn.Linear[float32]{In: in, Out: out, W: random(seed, in*out)}
	if bias {
		l.B = random(seed+1, out)
	}
	l.Pack(prec)
	return l
}

// Cases returns the operations the DiT's forward uses.
func Cases() []Case {
	var cs []Case
	for _, prec := range []gemm.Precision{gemm.F32, gemm.BF16} {
		for _, bias := range []bool{false, true} {
			l := linear(11, 37, 19, bias, prec)
			cs = append(cs, Case{fmt.Sprintf("Linear/%v/bias=%v", prec, bias), func(b compute.Backend, in func(int) compute.Tensor) compute.Tensor {
				w := b.LoadLinear(l, prec)
				y := b.New(5 * 19)
				b.Linear(y, w, in(5*37), 5)
				return y
			}})
		}
		cs = append(cs, Case{fmt.Sprintf("Attention/%v", prec), func(b compute.Backend, in func(int) compute.Tensor) compute.Tensor {
			T, S, H, D := 5, 9, 2, 8
			out := b.New(T * H * D)
			b.Attention(prec, out, in(T*H*D), in(S*H*D), in(S*H*D), T, S, H, D, 0.3)
			return out
		}})
	}
	cs = append(cs, t5Cases()...)
	rows, d := 7, 33
	cs = append(cs,
		Case{"LayerNorm", func(b compute.Backend, in func(int) compute.Tensor) compute.Tensor {
			y := b.New(rows * d)
			b.LayerNorm(y, in(rows*d), rows, d, 1e-6, nil, nil)
			return y
		}},
		Case{"LayerNorm/affine", func(b compute.Backend, in func(int) compute.Tensor) compute.Tensor {
			x := in(rows * d)
			b.LayerNorm(x, x, rows, d, 1e-6, in(d), in(d))
			return x
		}},
		Case{"RMSNorm", func(b compute.Backend, in func(int) compute.Tensor) compute.Tensor {
			y := b.New(rows * d)
			b.RMSNorm(y, in(rows*d), rows, d, 1e-6, in(d))
			return y
		}},
		Case{"GELUTanh", func(b compute.Backend, in func(int) compute.Tensor) compute.Tensor {
			x := in(101)
			b.GELUTanh(x)
			return x
		}},
		Case{"SiLU", func(b compute.Backend, in func(int) compute.Tensor) compute.Tensor {
			y := b.New(101)
			b.SiLU(y, in(101))
			return y
		}},
		Case{"Modulate", func(b compute.Backend, in func(int) compute.Tensor) compute.Tensor {
			y, mods := in(rows*d), in(3*6*d) // groups of 3 rows: 3 groups
			b.Modulate(y, rows, d, 3, compute.Vec{T: mods, Off: 0, Stride: 6 * d}, compute.Vec{T: mods, Off: d, Stride: 6 * d})
			return y
		}},
		Case{"GatedAdd", func(b compute.Backend, in func(int) compute.Tensor) compute.Tensor {
			x := in(rows * d)
			b.GatedAdd(x, in(rows*d), rows, d, 2, compute.Vec{T: in(5 * d), Off: d, Stride: d})
			return x
		}},
		Case{"Add", func(b compute.Backend, in func(int) compute.Tensor) compute.Tensor {
			x := in(rows * d)
			b.Add(x, in(rows*d))
			return x
		}},
		Case{"AddBias", func(b compute.Backend, in func(int) compute.Tensor) compute.Tensor {
			x := in(rows * d)
			b.AddBias(x, rows, d, in(d))
			return x
		}},
		Case{"Copy/View", func(b compute.Backend, in func(int) compute.Tensor) compute.Tensor {
			x := b.New(40)
			b.Copy(b.View(x, 3, 30), 2, in(50), 17, 20)
			return x
		}},
	)
	// Rope: frames of a 3×5 grid, 2 heads of 10 (the temporal, height
	// and width pairs split unevenly), from a token offset, at temporal
	// positions past the first tables (they grow), and on a view that
	// starts at a token.
	r10, err := rope.New(10, 10000)
	if err != nil {
		panic(err)
	}
	const heads, H, W = 2, 3, 5
	row, frame := heads*10, H*W*heads*10
	cs = append(cs,
		Case{"Rope/frames", func(b compute.Backend, in func(int) compute.Tensor) compute.Tensor {
			x := in(7*row + 3*frame)
			b.Rope(x, 7, heads, r10, H, W, 2, 3)
			return x
		}},
		Case{"Rope/grown", func(b compute.Backend, in func(int) compute.Tensor) compute.Tensor {
			x := in(2 * frame)
			b.Rope(x, 0, heads, r10, H, W, 0, 1)
			b.Rope(x, H*W, heads, r10, H, W, 40, 1)
			return x
		}},
		Case{"Rope/view", func(b compute.Backend, in func(int) compute.Tensor) compute.Tensor {
			x := in(3*row + 2*frame)
			b.Rope(b.View(x, 3*row, 2*frame), 0, heads, r10, H, W, 5, 2)
			return x
		}},
	)
	cs = append(cs, vaeCases()...)
	return cs
}

// Run runs every case on b and on the CPU backend and fails the test on
// any differing bit. The cases named in missing must instead fail on b
// with compute.ErrNoKernel (operations b does not compute yet).
func Run(t *testing.T, b compute.Backend, missing ...string) {
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			want, err := eval(compute.NewCPU(), c)
			if err != nil {
				t.Fatalf("cpu: %v", err)
			}
			got, err := eval(b, c)
			if slices.Contains(missing, c.Name) {
				if !errors.Is(err, compute.ErrNoKernel) {
					t.Fatalf("%v: error %v, want compute.ErrNoKernel", b, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%v: %v", b, err)
			}
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%v: value %d is %v (%#08x), the CPU's %v (%#08x)", b, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
				}
			}
		})
	}
}

// eval runs c on b and returns its output's values.
func eval(b compute.Backend, c Case) ([]float32, error) {
	seed := uint64(0)
	in := func(n int) compute.Tensor {
		seed++
		t := b.New(n)
		b.Upload(t, random(seed, n))
		return t
	}
	out := c.Run(b, in)
	v := make([]float32, out.Len())
	err := b.Download(v, out)
	return v, err
}
