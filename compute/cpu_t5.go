package compute

import (
	"fmt"
	"sync"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/nn"
)

// The CPU backend's umT5 operations (package t5): each is the code the
// encoder ran before backends, moved to package nn or written here.

// cpuStream is a CPU Linear of bfloat16 weights: the nn.Linear[uint16]
// itself, streamed (nn.Linear.Stream) at prec.
type cpuStream struct {
	l    *nn.Linear[uint16]
	prec gemm.Precision
}

func (w cpuStream) In() int  { return w.l.In }
func (w cpuStream) Out() int { return w.l.Out }

// streamScratch holds the packed inputs and panels of the streamed
// products (one per call in flight).
var streamScratch = sync.Pool{New: func() any { return new(nn.Scratch) }}

func (c *CPU) LoadLinearBF16(l *nn.Linear[uint16], prec gemm.Precision) Linear {
	switch {
	case prec != gemm.F32 && prec != gemm.BF16:
		c.fail(fmt.Errorf("compute: cpu: LoadLinearBF16: precision %v", prec))
	case len(l.W) != l.In*l.Out:
		c.fail(fmt.Errorf("compute: cpu: LoadLinearBF16: %d weights for %d×%d (packed: %v)", len(l.W), l.Out, l.In, l.W == nil))
	case l.B != nil && len(l.B) != l.Out:
		c.fail(fmt.Errorf("compute: cpu: LoadLinearBF16: %d biases for %d outputs", len(l.B), l.Out))
	}
	return cpuStream{l, prec}
}

// stream is Linear of a cpuStream: x packed at the weights' precision,
// then nn.Linear.Stream.
func (c *CPU) stream(y Tensor, w cpuStream, x Tensor, rows int) {
	if !c.ok("Linear", Need{"y", y, rows * w.l.Out}, Need{"x", x, rows * w.l.In}) || rows == 0 {
		return
	}
	s := streamScratch.Get().(*nn.Scratch)
	defer streamScratch.Put(s)
	s.PackInput(w.prec, vals(x), rows, w.l.In)
	w.l.Stream(vals(y), rows, s)
}

func (c *CPU) Mul(x, y Tensor) {
	if c.ok("Mul", Need{"x", x, 0}, Need{"y", y, 0}) {
		if x.Len() != y.Len() {
			c.fail(fmt.Errorf("compute: cpu: Mul: x has %d values, y %d", x.Len(), y.Len()))
			return
		}
		Mul(vals(x), vals(y))
	}
}

func (c *CPU) BiasedAttention(prec gemm.Precision, out, q, k, v Tensor, n, H, D int, bias, keep, probs Tensor) {
	if prec != gemm.F32 && prec != gemm.BF16 {
		c.fail(fmt.Errorf("compute: cpu: BiasedAttention: precision %v", prec))
		return
	}
	needs := []Need{{"out", out, n * H * D}, {"q", q, n * H * D}, {"k", k, n * H * D}, {"v", v, n * H * D},
		{"bias", bias, H * max(2*n-1, 0)}, {"keep", keep, n}}
	if probs != nil {
		needs = append(needs, Need{"probs", probs, H * n * n})
	}
	if !c.ok("BiasedAttention", needs...) {
		return
	}
	kept := make([]bool, n)
	for j, v := range vals(keep)[:n] {
		kept[j] = v != 0
	}
	nn.BiasedAttention(prec, vals(out), vals(q), vals(k), vals(v), n, H, D, vals(bias), kept, vals(probs))
}

// Mul sets x *= y (x[i] = x[i]·y[i], len(y) ≥ len(x)): umT5's gate
// product fc1(h) ⊙ gelu(gate(h)).
func Mul(x, y []float32) {
	for i, v := range y[:len(x)] {
		x[i] *= v
	}
}
