package compute

import (
	"fmt"
	"sync"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/internal/parallel"
	"github.com/densitykv/densitykv/nn"
)

var _ VAEOps = (*CPU)(nil)

// cpuConv is a CPU ConvWeights: the nn.Conv itself, packed at prec.
type cpuConv struct {
	c    *nn.Conv
	prec gemm.Precision
}

func (w cpuConv) Shape() (cin, cout, kt, kh, kw int) {
	return w.c.Cin, w.c.Cout, w.c.KT, w.c.KH, w.c.KW
}
func (w cpuConv) Precision() gemm.Precision { return w.prec }

// convEngines holds the scratch of the convolutions' products
// (nn.ConvEngine), one per call in flight: goroutines may share the CPU.
var convEngines = sync.Pool{New: func() any { return new(nn.ConvEngine) }}

func (c *CPU) LoadConv(cv *nn.Conv, prec gemm.Precision) ConvWeights {
	w := cpuConv{cv, prec}
	if err := CheckConv("LoadConv", cv, prec); err != nil {
		c.fail(fmt.Errorf("compute: cpu: %w", err))
	}
	return w
}

func (c *CPU) FreeConv(ConvWeights) {}

func (c *CPU) Conv(out Tensor, w ConvWeights, in []Tensor, hs, ws int, up bool, res Tensor) {
	cw, ok := w.(cpuConv)
	if !ok {
		c.fail(fmt.Errorf("compute: cpu: Conv: weights of another backend (%T)", w))
		return
	}
	needs, err := ConvNeeds(w, out, in, hs, ws, up, res)
	if err != nil {
		c.fail(fmt.Errorf("compute: cpu: %w", err))
		return
	}
	if !c.ok("Conv", needs...) {
		return
	}
	n, m := cw.c.Cin*hs*ws, needs[0].N // an input frame's values, the output's
	frames := make([][]float32, len(in))
	for i, f := range in {
		if f != nil {
			frames[i] = vals(f)[:n]
		}
	}
	var r []float32
	if res != nil {
		r = vals(res)[:m]
	}
	e := convEngines.Get().(*nn.ConvEngine)
	e.Prec = cw.prec
	cw.c.Apply(e, vals(out)[:m], frames, hs, ws, up, r)
	convEngines.Put(e)
}

func (c *CPU) RMSNormChannels(dst, src Tensor, ch, P int, gamma Tensor, act bool) {
	if c.ok("RMSNormChannels", Need{"dst", dst, ch * P}, Need{"src", src, ch * P}, Need{"gamma", gamma, ch}) {
		nn.RMSNormChannels(vals(dst)[:ch*P], vals(src)[:ch*P], ch, P, vals(gamma), act)
	}
}

func (c *CPU) Transpose(dst, src Tensor, rows, cols int) {
	if c.ok("Transpose", Need{"dst", dst, rows * cols}, Need{"src", src, rows * cols}) {
		Transpose(vals(dst), vals(src), rows, cols)
	}
}

// Transpose sets dst[c][r] = src[r][c] for src [rows][cols], in blocks.
func Transpose(dst, src []float32, rows, cols int) {
	const b = 32
	parallel.For(rows, b*4, func(lo, hi int) {
		for r0 := lo; r0 < hi; r0 += b {
			r1 := min(r0+b, hi)
			for c0 := 0; c0 < cols; c0 += b {
				c1 := min(c0+b, cols)
				for r := r0; r < r1; r++ {
					row := src[r*cols : (r+1)*cols]
					for c := c0; c < c1; c++ {
						dst[c*rows+r] = row[c]
					}
				}
			}
		}
	})
}

// CheckConv returns an error naming op unless c is a convolution of
// positive shape with its weights and bias, packed at prec.
func CheckConv(op string, c *nn.Conv, prec gemm.Precision) error {
	switch {
	case c == nil:
		return fmt.Errorf("%s: no convolution", op)
	case c.Cin <= 0 || c.Cout <= 0 || c.KT <= 0 || c.KH <= 0 || c.KW <= 0:
		return fmt.Errorf("%s: convolution %d→%d (%d×%d×%d)", op, c.Cin, c.Cout, c.KT, c.KH, c.KW)
	case len(c.Weight) != c.Cout*c.Cin*c.KT*c.KH*c.KW || len(c.Bias) != c.Cout:
		return fmt.Errorf("%s: convolution %d→%d (%d×%d×%d) with %d weights and %d biases", op, c.Cin, c.Cout, c.KT, c.KH, c.KW, len(c.Weight), len(c.Bias))
	case prec != gemm.F32 && prec != gemm.BF16:
		return fmt.Errorf("%s: precision %v", op, prec)
	case !c.Packed(prec):
		return fmt.Errorf("%s: convolution %d→%d not packed at %v (nn.Conv.Pack)", op, c.Cin, c.Cout, prec)
	}
	return nil
}

// ConvNeeds checks Conv's frame count and sizes and returns its operands'
// needs for Check (the zero frames left out).
func ConvNeeds(w ConvWeights, out Tensor, in []Tensor, hs, ws int, up bool, res Tensor) ([]Need, error) {
	cin, cout, kt, _, _ := w.Shape()
	ho, wo := hs, ws
	if up {
		ho, wo = 2*hs, 2*ws
	}
	if hs <= 0 || ws <= 0 || len(in) != kt {
		return nil, fmt.Errorf("Conv: %d input frames of %d×%d for a convolution of %d", len(in), hs, ws, kt)
	}
	needs := []Need{{"out", out, cout * ho * wo}}
	for i, f := range in {
		if f != nil {
			needs = append(needs, Need{frameName(i), f, cin * hs * ws})
		}
	}
	if len(needs) == 1 {
		return nil, fmt.Errorf("Conv: no input frame (all %d zero)", kt)
	}
	if res != nil {
		needs = append(needs, Need{"res", res, cout * ho * wo})
	}
	return needs, nil
}

// frameNames name a convolution's first input frames without a Sprintf
// per call.
var frameNames = [...]string{"input frame 0", "input frame 1", "input frame 2"}

// frameName names input frame i.
func frameName(i int) string {
	if i < len(frameNames) {
		return frameNames[i]
	}
	return fmt.Sprintf("input frame %d", i)
}
