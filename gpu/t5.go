package gpu

import (
	"fmt"

	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/nn"
	"github.com/densitykv/densitykv/vulkan"
)

// umT5's operations (package t5): the Backend's LoadLinearBF16, Mul and
// BiasedAttention, and the kernels they record (shaders/t5_*.comp).

// SoftmaxBias records nn.SoftmaxBiasRow on every score row of s
// [heads][n][n] (float32, from element sOff of its buffer), in place:
// row i of head h takes bias [heads][2n−1] from element biasOff (its
// values n−1−i … 2n−2−i of head h's) and the key mask keep [n] from
// element keepOff (a key is kept where its value is not 0). One
// invocation per row: the CPU's steps in its order, the float64 sum on
// exact64.glsl's conversions, vmath.Exp32Clamped and the division by
// exact.glsl (shaders/t5_softmax.glsl). It needs shaderFloat64.
func SoftmaxBias(dev *vulkan.Device, batch *vulkan.Batch, s *vulkan.Buffer, sOff int, bias *vulkan.Buffer, biasOff int, keep *vulkan.Buffer, keepOff, n, heads int) error {
	if err := softmaxBias(dev, batch, s, sOff, bias, biasOff, keep, keepOff, n, heads); err != nil {
		return fmt.Errorf("gpu: SoftmaxBias: %w", err)
	}
	return nil
}

func softmaxBias(dev *vulkan.Device, batch *vulkan.Batch, s *vulkan.Buffer, sOff int, bias *vulkan.Buffer, biasOff int, keep *vulkan.Buffer, keepOff, n, heads int) error {
	if n < 0 || heads < 0 || sOff < 0 || biasOff < 0 || keepOff < 0 {
		return fmt.Errorf("negative size or offset (n %d, heads %d, offsets %d, %d, %d)", n, heads, sOff, biasOff, keepOff)
	}
	if n == 0 || heads == 0 {
		return nil
	}
	for _, o := range []struct {
		name string
		buf  *vulkan.Buffer
		n    int64
	}{{"scores", s, int64(sOff) + int64(heads)*int64(n)*int64(n)}, {"bias", bias, int64(biasOff) + int64(heads)*int64(2*n-1)}, {"keep", keep, int64(keepOff) + int64(n)}} {
		if err := checkElems(o.name, o.buf, o.n, 4, "float32"); err != nil {
			return err
		}
	}
	if err := needFloat64(dev); err != nil {
		return err
	}
	module, err := exactModule(dev, "t5_softmax")
	if err != nil {
		return err
	}
	groups, err := grid(dev, int64(heads)*int64(n), 64)
	if err != nil {
		return err
	}
	k, err := newKernel(dev, module, vulkan.KernelSpec{Name: module, Bindings: 3, PushSize: 20})
	if err != nil {
		return err
	}
	batch.Dispatch(k, groups, words(uint32(n), uint32(heads), uint32(sOff), uint32(biasOff), uint32(keepOff)), s, bias, keep)
	return nil
}

// Mul records x[xOff + i] *= y[yOff + i] for i < n (compute.Mul; float32
// buffers, shaders/t5_mul.comp).
func Mul(dev *vulkan.Device, batch *vulkan.Batch, x *vulkan.Buffer, xOff int, y *vulkan.Buffer, yOff, n int) error {
	if n < 0 || xOff < 0 || yOff < 0 {
		return fmt.Errorf("gpu: Mul: negative size or offset (n %d, offsets %d, %d)", n, xOff, yOff)
	}
	if err := checkElems("x", x, int64(xOff)+int64(n), 4, "float32"); err != nil {
		return fmt.Errorf("gpu: Mul: %w", err)
	}
	if err := checkElems("y", y, int64(yOff)+int64(n), 4, "float32"); err != nil {
		return fmt.Errorf("gpu: Mul: %w", err)
	}
	if _, err := CheckExact(dev); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	groups, err := grid(dev, int64(n), 64)
	if err != nil {
		return fmt.Errorf("gpu: Mul: %w", err)
	}
	k, err := newKernel(dev, "t5_mul", vulkan.KernelSpec{Name: "t5_mul", Bindings: 2, PushSize: 12})
	if err != nil {
		return fmt.Errorf("gpu: Mul: %w", err)
	}
	batch.Dispatch(k, groups, words(uint32(n), uint32(xOff), uint32(yOff)), x, y)
	return nil
}

// LoadLinearBF16 uploads l's bfloat16 weights once, as they are (2 bytes
// a weight): at gemm.BF16 for the bfloat16 product, at gemm.F32 for the
// float32 product that widens them as it reads them (Product's bfloat16
// B); and its bias.
func (b *Backend) LoadLinearBF16(l *nn.Linear[uint16], prec gemm.Precision) compute.Linear {
	w := &devLinear{b: b}
	if b.err != nil {
		return w
	}
	if len(l.W) != l.In*l.Out {
		b.fail("LoadLinearBF16", fmt.Errorf("%d weights for %d×%d (packed: %v)", len(l.W), l.Out, l.In, l.W == nil))
		return w
	}
	var err error
	switch prec {
	case gemm.BF16:
		if b.fast != nil {
			w.w, err = b.fastWeights(l.Out, l.In, l.W)
			w.fast = true
			break
		}
		w.w, err = UploadBF16(b.dev, l.Out, l.In, l.W)
	case gemm.F32:
		w.w, err = UploadBF16(b.dev, l.Out, l.In, l.W)
		w.widen = true
	default:
		err = fmt.Errorf("precision %v", prec)
	}
	if err != nil {
		b.fail("LoadLinearBF16", fmt.Errorf("%d×%d: %w", l.Out, l.In, err))
		return w
	}
	if l.B != nil {
		if len(l.B) != l.Out {
			b.fail("LoadLinearBF16", fmt.Errorf("%d biases for %d outputs", len(l.B), l.Out))
			return w
		}
		w.bias = b.Param(l.B).(*devTensor)
	}
	return w
}

func (b *Backend) Mul(x, y compute.Tensor) {
	ts := b.tensors("Mul", compute.Need{Name: "x", T: x}, compute.Need{Name: "y", T: y})
	if ts == nil {
		return
	}
	if x.Len() != y.Len() {
		b.fail("Mul", fmt.Errorf("x has %d values, y %d", x.Len(), y.Len()))
		return
	}
	b.record("Mul", Mul(b.dev, b.batch, ts[0].buf, ts[0].off, ts[1].buf, ts[1].off, x.Len()))
}

// BiasedAttention records nn.BiasedAttention: per head the scores
// q_h·k_hᵀ (NT), SoftmaxBias, then p·v_h (NN) into out's head columns,
// gemm's products at prec (at gemm.BF16, q, k, v and the probabilities
// rounded to bfloat16 operands first). The scores [H][n][n] are probs
// when given, else a buffer of the call's own.
func (b *Backend) BiasedAttention(prec gemm.Precision, out, q, k, v compute.Tensor, n, H, D int, bias, keep, probs compute.Tensor) {
	const op = "BiasedAttention"
	if prec != gemm.F32 && prec != gemm.BF16 {
		b.fail(op, fmt.Errorf("precision %v", prec))
		return
	}
	da := H * D
	needs := []compute.Need{{Name: "out", T: out, N: n * da}, {Name: "q", T: q, N: n * da}, {Name: "k", T: k, N: n * da},
		{Name: "v", T: v, N: n * da}, {Name: "bias", T: bias, N: H * max(2*n-1, 0)}, {Name: "keep", T: keep, N: n}}
	if probs != nil {
		needs = append(needs, compute.Need{Name: "probs", T: probs, N: H * n * n})
	}
	ts := b.tensors(op, needs...)
	if ts == nil || n == 0 || H == 0 || D == 0 {
		return
	}
	for _, t := range ts[1:4] {
		if t.buf == ts[0].buf {
			b.fail(op, fmt.Errorf("out shares a buffer with q, k or v"))
			return
		}
	}
	var s *devTensor
	if probs != nil {
		s = ts[6]
	} else {
		s = b.alloc(op, H*n*n)
		if s.buf == nil {
			return
		}
		defer b.release(s.buf)
	}
	b.record(op, b.biasedAttention(prec, ts[0], ts[1], ts[2], ts[3], s, ts[4], ts[5], n, H, D))
}

// biasedAttention records BiasedAttention's steps on checked operands.
func (b *Backend) biasedAttention(prec gemm.Precision, out, q, k, v, s, bias, keep *devTensor, n, H, D int) error {
	da := H * D
	head := func(t *devTensor, h int) Matrix {
		return Matrix{Buf: t.buf, Prec: gemm.F32, Rows: n, Cols: D, Ld: da, Off: t.off + h*D}
	}
	var tmp []*vulkan.Buffer // the bfloat16 operands, freed once the batch has run
	defer func() {
		for _, buf := range tmp {
			b.release(buf)
		}
	}()
	bf16 := func(src Matrix) (Matrix, error) { return src, nil }
	if prec == gemm.BF16 {
		bf16 = func(src Matrix) (Matrix, error) {
			m, err := NewMatrix(b.dev, gemm.BF16, src.Rows, src.Cols)
			if err != nil {
				return Matrix{}, err
			}
			tmp = append(tmp, m.Buf)
			return m, RoundBF16(b.dev, b.batch, m, src, false)
		}
	}
	var qs, ks, vs Matrix // q, k, v [n][da] at prec
	var err error
	whole := func(t *devTensor) Matrix {
		return Matrix{Buf: t.buf, Prec: gemm.F32, Rows: n, Cols: da, Ld: da, Off: t.off}
	}
	if qs, err = bf16(whole(q)); err != nil {
		return err
	}
	if ks, err = bf16(whole(k)); err != nil {
		return err
	}
	if vs, err = bf16(whole(v)); err != nil {
		return err
	}
	scores := Matrix{Buf: s.buf, Prec: gemm.F32, Rows: n, Cols: n, Ld: n, Off: s.off}
	for h := 0; h < H; h++ {
		c := scores
		c.Off += h * n * n
		if err := NT(b.dev, b.batch, c, headCols(qs, h, D), headCols(ks, h, D), false); err != nil {
			return err
		}
	}
	if err := SoftmaxBias(b.dev, b.batch, s.buf, s.off, bias.buf, bias.off, keep.buf, keep.off, n, H); err != nil {
		return err
	}
	all := Matrix{Buf: s.buf, Prec: gemm.F32, Rows: H * n, Cols: n, Ld: n, Off: s.off}
	ps, err := bf16(all)
	if err != nil {
		return err
	}
	for h := 0; h < H; h++ {
		p := Matrix{Buf: ps.Buf, Prec: ps.Prec, Rows: n, Cols: n, Ld: n, Off: ps.Off + h*n*n}
		if err := NN(b.dev, b.batch, head(out, h), p, headCols(vs, h, D), false); err != nil {
			return err
		}
	}
	return nil
}

// headCols returns head h's D columns of m [n][H·D].
func headCols(m Matrix, h, D int) Matrix {
	m.Off += h * D
	m.Cols = D
	return m
}
