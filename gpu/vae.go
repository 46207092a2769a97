package gpu

import (
	"fmt"
	"math"

	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/nn"
	"github.com/densitykv/densitykv/vulkan"
)

// The VAE decoder's operations (package vae): the Backend's LoadConv,
// Conv, RMSNormChannels and Transpose, and the kernels they record
// (shaders/vae_*.comp).
//
// A convolution is nn.Conv.Apply's products, not a kernel of its own:
// per output value, nn.Conv chains gemm.MulPacked over the input frames
// in order, and within a frame over its tap groups (at bf16 each group's
// depth padded with zeros to gemm.BF16Block), continuing C's chain (acc).
// A float32 product is one fused multiply-add chain in depth order and a
// bfloat16 one adds its blocks of 32 depths to C in order, so the groups
// of a frame concatenated (with the same padding) are one product of the
// same bits. Conv therefore records, per input frame that is not a zero
// frame, the frame's im2col (vae_im2col.comp: the operand nn.Conv's fill
// packs, rows in the same order, the padding rows zero; at bf16 rounded
// by RoundBF16 as gemm.PackPanelsAs rounds, operand bits) and one NN
// Product with the frame's columns of the weights (accumulating after the
// first frame), then nn.AddBias (vae_bias.comp). Pixels are cut into
// chunks that bound the im2col buffer; a chunk changes no chain.

// im2colElems bounds the im2col buffer of one product (float32 values; a
// variable for the tests of the chunks).
var im2colElems = 1 << 24

var _ compute.VAEOps = (*Backend)(nil)

// devConv is a Backend ConvWeights: the product's left operand A
// [Cout][K] (nn.Conv.OperandF32, or OperandBF16 rounded to bfloat16), the
// bias, and the layout of a frame's columns.
type devConv struct {
	b                     *Backend
	cin, cout, kt, kh, kw int
	prec                  gemm.Precision
	a                     Matrix
	bias                  *devTensor
	depth                 int // columns of A per input frame (frame dt's from dt·depth)
	g, gdepth             int // taps per group, and a group's depth (padded at bf16)
}

func (w *devConv) Shape() (cin, cout, kt, kh, kw int) { return w.cin, w.cout, w.kt, w.kh, w.kw }
func (w *devConv) Precision() gemm.Precision          { return w.prec }

func (b *Backend) LoadConv(c *nn.Conv, prec gemm.Precision) compute.ConvWeights {
	w := &devConv{b: b, prec: prec}
	if b.err != nil {
		return w
	}
	if err := compute.CheckConv("LoadConv", c, prec); err != nil {
		b.failNamed(err)
		return w
	}
	w.cin, w.cout, w.kt, w.kh, w.kw = c.Cin, c.Cout, c.KT, c.KH, c.KW
	var k int
	k, w.depth, w.g, w.gdepth = convLayout(c, prec)
	var err error
	if prec == gemm.BF16 {
		a, _, _ := c.OperandBF16()
		bits := make([]uint16, len(a))
		for i, x := range a {
			bits[i] = gemm.RoundBF16(x) // gemm.PackAAs's rounding
		}
		w.a, err = UploadBF16(b.dev, c.Cout, k, bits)
	} else {
		w.a, err = UploadF32(b.dev, c.Cout, k, c.OperandF32())
	}
	if err != nil {
		b.fail("LoadConv", fmt.Errorf("%d→%d (%d×%d×%d): %w", c.Cin, c.Cout, c.KT, c.KH, c.KW, err))
		return w
	}
	w.bias = b.Param(c.Bias).(*devTensor)
	return w
}

// convLayout returns the columns k of c's left operand A at prec (its
// depth over the KT frames: KT·KH·KW·Cin, or at bf16 the tap groups padded
// to gemm.BF16Block, nn.Conv.BF16Offsets), the columns per input frame,
// the taps per group and a group's depth. It reads c's shape only.
func convLayout(c *nn.Conv, prec gemm.Precision) (k, depth, g, gdepth int) {
	spatial := c.KH * c.KW
	if prec == gemm.BF16 {
		_, k = c.BF16Offsets()
		g = c.GroupTaps()
		return k, k / c.KT, g, (g*c.Cin + gemm.BF16Block - 1) / gemm.BF16Block * gemm.BF16Block
	}
	return c.KT * spatial * c.Cin, spatial * c.Cin, spatial, spatial * c.Cin
}

// convChunk returns the output pixels per im2col of a convolution of
// depth columns per input frame and P output pixels: as many as keep the
// im2col buffer within im2colElems values, at least one.
func convChunk(depth, P int) int { return min(P, max(1, im2colElems/depth)) }

func (b *Backend) FreeConv(w compute.ConvWeights) {
	if d, ok := w.(*devConv); ok && d.a.Buf != nil {
		b.release(d.a.Buf)
		d.a.Buf = nil
		b.Free(d.bias)
	}
}

func (b *Backend) Conv(out compute.Tensor, w compute.ConvWeights, in []compute.Tensor, hs, ws int, up bool, res compute.Tensor) {
	cw, ok := w.(*devConv)
	if !ok || cw.b != b || cw.a.Buf == nil {
		b.fail("Conv", fmt.Errorf("weights of another backend, or freed (%T)", w))
		return
	}
	needs, err := compute.ConvNeeds(w, out, in, hs, ws, up, res)
	if err != nil {
		b.failNamed(err)
		return
	}
	ts := b.tensors("Conv", needs...)
	if ts == nil {
		return
	}
	P := needs[0].N / cw.cout
	pc := convChunk(cw.depth, P)
	col := b.convScratch(0, cw.depth*pc)
	cm := b.convScratch(1, cw.cout*P) // C [Cout][P]
	var col16 Matrix
	if cw.prec == gemm.BF16 {
		col16 = b.bf16(cw.depth, pc)
	}
	if b.err != nil {
		return
	}
	first, frame := true, 1 // ts[frame] is the next present input frame
	for dt, f := range in {
		if f == nil {
			continue
		}
		for p0 := 0; p0 < P; p0 += pc {
			n := min(pc, P-p0)
			if err := b.im2col(cw, ts[frame], col, hs, ws, up, p0, n); err != nil {
				b.fail("Conv", err)
				return
			}
			bm := Matrix{Buf: col.buf, Prec: gemm.F32, Rows: cw.depth, Cols: n, Ld: n}
			if cw.prec == gemm.BF16 {
				src := bm
				bm = col16
				bm.Cols, bm.Ld = n, n
				if err := RoundBF16(b.dev, b.batch, bm, src, true); err != nil {
					b.fail("Conv", err)
					return
				}
			}
			a := cw.a
			a.Cols, a.Off = cw.depth, dt*cw.depth
			c := Matrix{Buf: cm.buf, Prec: gemm.F32, Rows: cw.cout, Cols: n, Ld: P, Off: p0}
			if err := NN(b.dev, b.batch, c, a, bm, !first); err != nil {
				b.fail("Conv", err)
				return
			}
		}
		first = false
		frame++
	}
	var r *devTensor
	if res != nil {
		r = ts[len(ts)-1]
	}
	b.record("Conv", b.convBias(ts[0], cm, cw.bias, r, cw.cout, P))
}

// convScratch returns the convolutions' scratch tensor i (0: the im2col,
// 1: the product), at least n values, grown as needed: the batch runs its
// operations one after the other, so every convolution recorded in it
// may use the same buffers. A grown one's old buffer is freed once the
// batch has run.
func (b *Backend) convScratch(i, n int) *devTensor {
	if t := b.convs[i]; t != nil && t.n >= n {
		return t
	}
	if b.convs[i] != nil {
		b.Free(b.convs[i])
	}
	b.convs[i] = b.alloc("Conv", n)
	if b.convs[i].buf == nil {
		b.convs[i] = nil
		return &devTensor{b: b}
	}
	return b.convs[i]
}

// failNamed keeps err, which names its operation, when it is the first.
func (b *Backend) failNamed(err error) {
	if b.err == nil {
		b.err = fmt.Errorf("gpu: %w", err)
	}
}

// im2col records the right operand of one input frame f for output pixels
// p0 … p0+n−1 into col [depth][n] (vae_im2col.comp).
func (b *Backend) im2col(w *devConv, f, col *devTensor, hs, ws int, up bool, p0, n int) error {
	groups, err := grid(b.dev, int64(w.depth)*int64(n), 64)
	if err != nil {
		return err
	}
	k, err := newKernel(b.dev, "vae_im2col", vulkan.KernelSpec{Name: "vae_im2col", Bindings: 2, PushSize: 48})
	if err != nil {
		return err
	}
	u := uint32(0)
	if up {
		u = 1
	}
	push := words(uint32(w.cin), uint32(hs), uint32(ws), u, uint32(w.kh), uint32(w.kw), uint32(w.g), uint32(w.gdepth),
		uint32(w.depth), uint32(p0), uint32(n), uint32(f.off))
	b.batch.Dispatch(k, groups, push, f.buf, col.buf)
	return nil
}

// convBias records out = c + bias[co] (+ res) on c [cout][P]
// (vae_bias.comp: nn.AddBias per output channel).
func (b *Backend) convBias(out, c, bias, res *devTensor, cout, P int) error {
	if _, err := CheckExact(b.dev); err != nil {
		return err
	}
	n := cout * P
	groups, err := grid(b.dev, int64(n), 64)
	if err != nil {
		return err
	}
	k, err := newKernel(b.dev, "vae_bias", vulkan.KernelSpec{Name: "vae_bias", Bindings: 4, PushSize: 20})
	if err != nil {
		return err
	}
	rbuf, roff, has := c.buf, 0, uint32(0)
	if res != nil {
		rbuf, roff, has = res.buf, res.off, 1
	}
	push := words(uint32(n), uint32(P), uint32(out.off), uint32(roff), has)
	b.batch.Dispatch(k, groups, push, out.buf, c.buf, bias.buf, rbuf)
	return nil
}

func (b *Backend) RMSNormChannels(dst, src compute.Tensor, ch, P int, gamma compute.Tensor, act bool) {
	ts := b.tensors("RMSNormChannels", compute.Need{Name: "dst", T: dst, N: ch * P}, compute.Need{Name: "src", T: src, N: ch * P}, compute.Need{Name: "gamma", T: gamma, N: ch})
	if ts == nil || ch*P == 0 {
		return
	}
	b.record("RMSNormChannels", b.rmsNormChannels(ts[0], ts[1], ts[2], ch, P, act))
}

func (b *Backend) rmsNormChannels(dst, src, gamma *devTensor, ch, P int, act bool) error {
	module, err := exactModule(b.dev, "vae_norm")
	if err != nil {
		return err
	}
	groups, err := grid(b.dev, int64(P), 64)
	if err != nil {
		return err
	}
	k, err := newKernel(b.dev, module, vulkan.KernelSpec{Name: module, Bindings: 3, PushSize: 28})
	if err != nil {
		return err
	}
	a := uint32(0)
	if act {
		a = 1
	}
	scale := math.Float32bits(float32(math.Sqrt(float64(ch)))) // nn.RMSNormChannels's √ch
	push := words(uint32(ch), uint32(P), uint32(dst.off), uint32(src.off), uint32(gamma.off), a, scale)
	b.batch.Dispatch(k, groups, push, dst.buf, src.buf, gamma.buf)
	return nil
}

func (b *Backend) Transpose(dst, src compute.Tensor, rows, cols int) {
	ts := b.tensors("Transpose", compute.Need{Name: "dst", T: dst, N: rows * cols}, compute.Need{Name: "src", T: src, N: rows * cols})
	if ts == nil || rows*cols == 0 {
		return
	}
	groups, err := grid(b.dev, int64(rows)*int64(cols), 64)
	if err != nil {
		b.fail("Transpose", err)
		return
	}
	k, err := newKernel(b.dev, "vae_transpose", vulkan.KernelSpec{Name: "vae_transpose", Bindings: 2, PushSize: 16})
	if err != nil {
		b.fail("Transpose", err)
		return
	}
	b.batch.Dispatch(k, groups, words(uint32(rows), uint32(cols), uint32(ts[0].off), uint32(ts[1].off)), ts[0].buf, ts[1].buf)
}
