package compute

import (
	"fmt"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/nn"
)

var _ VAEOps = (*CPU)(nil)

// cpuConv is a CPU ConvWeights: the nn.Conv itself, packed at prec, and
// the scratch of its products.
type cpuConv struct {
	c   *nn.Conv
	eng *nn.ConvEngine
}

func (w cpuConv) Shape() (cin, cout, kt, kh, kw int) {
	return w.c.Cin, w.c.Cout, w.c.KT, w.c.KH, w.c.KW
}
func (w cpuConv) Precision() gemm.Precision { return w.eng.Prec }

func (c *CPU) LoadConv(cv *nn.Conv, prec gemm.Precision) ConvWeights {
	w := cpuConv{cv, &nn.ConvEngine{Prec: prec}}
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
	cw.c.Apply(cw.eng, vals(out)[:m], frames, hs, ws, up, r)
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

// Transpose sets dst[c][r] = src[r][c] for src [rows][cols].
func Transpose(dst, src []float32, rows, cols int) {
	for r := 0; r < rows; r++ {
		for j, v := range src[r*cols : (r+1)*cols] {
			dst[j*rows+r] = v
		}
	}
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
			needs = append(needs, Need{fmt.Sprintf("input frame %d", i), f, cin * hs * ws})
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
