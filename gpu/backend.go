package gpu

import (
	"fmt"

	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/nn"
	"github.com/densitykv/densitykv/rope"
	"github.com/densitykv/densitykv/vulkan"
)

// Backend is the compute.Backend of a Vulkan device: tensors are device
// buffers (float32), weights are uploaded once by LoadLinear (bfloat16
// weights stay bfloat16 on the device), and every operation is recorded
// into one command batch with this package's exact kernels, the CPU's
// bits; Flush and Download run the batch. Every operation of
// compute.Backend has its kernel here (nothing runs on the CPU behind the
// caller's back). The kernels of nn.go bind whole
// buffers: their tensors must not be views at an offset (Copy and Linear
// take any view).
type Backend struct {
	dev     *vulkan.Device
	batch   *vulkan.Batch
	err     error
	freed   []*vulkan.Buffer         // freed once the batch that may read them has run
	scratch Matrix                   // bfloat16 operands of the bf16 products, grown as needed
	convs   [2]*devTensor            // the convolutions' im2col and product (vae.go), grown as needed
	ropes   map[ropeGrid]*RopeTables // Rope's tables, grown as positions are asked for

	fast *fastState // fast mode (fast.go: NewFastBackend); nil in exact mode
}

// ropeGrid is a rope.Table on a height×width grid.
type ropeGrid struct {
	r             *rope.Table
	height, width int
}

var _ compute.Backend = (*Backend)(nil)

// NewBackend returns the backend of dev, after the exactness probe
// (CheckExact): a device unfit for exact mode is refused.
func NewBackend(dev *vulkan.Device) (*Backend, error) {
	if _, err := CheckExact(dev); err != nil {
		return nil, err
	}
	return &Backend{dev: dev, batch: dev.NewBatch()}, nil
}

// Device returns the backend's device.
func (b *Backend) Device() *vulkan.Device { return b.dev }

// devTensor is a Backend tensor: n float32 values from element off of buf.
type devTensor struct {
	b      *Backend
	buf    *vulkan.Buffer
	off, n int
	owner  bool // made by New or Param (not a view): Free frees buf
}

func (t *devTensor) Len() int { return t.n }

// matrix returns t's first rows×cols values as a float32 Matrix.
func (t *devTensor) matrix(rows, cols int) Matrix {
	return Matrix{Buf: t.buf, Prec: gemm.F32, Rows: rows, Cols: cols, Ld: cols, Off: t.off}
}

// devLinear is a Backend Linear: W [Out][In] at the product's precision
// (or, with widen, bfloat16 weights of a float32 product: LoadLinearBF16
// at gemm.F32) and the bias (nil: none).
type devLinear struct {
	b     *Backend
	w     Matrix
	bias  *devTensor
	widen bool
	fast  bool // w is a FastOperand (fast mode's bfloat16 weights, fast.go)
}

func (w *devLinear) In() int  { return w.w.Cols }
func (w *devLinear) Out() int { return w.w.Rows }

func (b *Backend) String() string { return b.dev.String() }

func (b *Backend) fail(op string, err error) {
	if b.err == nil {
		b.err = fmt.Errorf("gpu: %s: %w", op, err)
	}
}

// tensors checks op's operands (this backend's, long enough) and returns
// them as device tensors; nil (the error kept) skips the operation.
func (b *Backend) tensors(op string, needs ...compute.Need) []*devTensor {
	if b.err != nil {
		return nil
	}
	if err := compute.Check(op, needs...); err != nil {
		if b.err == nil {
			b.err = fmt.Errorf("gpu: %w", err) // Check names op
		}
		return nil
	}
	ts := make([]*devTensor, len(needs))
	for i, n := range needs {
		t, ok := n.T.(*devTensor)
		if !ok || t.b != b {
			b.fail(op, fmt.Errorf("%s is a tensor of another backend (%T)", n.Name, n.T))
			return nil
		}
		ts[i] = t
	}
	return ts
}

func (b *Backend) alloc(op string, n int) *devTensor {
	buf, err := b.dev.Alloc(4 * int64(max(n, 1)))
	if err != nil {
		b.fail(op, err)
		return &devTensor{b: b}
	}
	return &devTensor{b: b, buf: buf, n: n, owner: true}
}

// New returns a tensor of n zeros (a fill recorded in the batch).
func (b *Backend) New(n int) compute.Tensor {
	if n < 0 {
		b.fail("New", fmt.Errorf("%d values", n))
		n = 0
	}
	t := b.alloc("New", n)
	if t.buf != nil {
		b.batch.Fill(t.buf, 0, t.buf.Size(), 0)
	}
	return t
}

func (b *Backend) View(t compute.Tensor, off, n int) compute.Tensor {
	if off < 0 || n < 0 {
		b.fail("View", fmt.Errorf("%d values at %d", n, off))
		return &devTensor{b: b}
	}
	ts := b.tensors("View", compute.Need{Name: "tensor", T: t, N: off + n})
	if ts == nil {
		return &devTensor{b: b}
	}
	return &devTensor{b: b, buf: ts[0].buf, off: ts[0].off + off, n: n}
}

// Param uploads v now (running what is recorded first).
func (b *Backend) Param(v []float32) compute.Tensor {
	t := b.alloc("Param", len(v))
	b.Upload(t, v)
	return t
}

func (b *Backend) Free(t compute.Tensor) {
	if d, ok := t.(*devTensor); ok && d != nil && d.owner && d.buf != nil {
		b.release(d.buf)
		d.buf = nil
	}
}

// release frees buf now if nothing is recorded, else once the batch has
// run.
func (b *Backend) release(buf *vulkan.Buffer) {
	if b.batch.Len() == 0 {
		buf.Free()
		return
	}
	b.freed = append(b.freed, buf)
}

// Upload runs what is recorded, then writes src into dst.
func (b *Backend) Upload(dst compute.Tensor, src []float32) {
	ts := b.tensors("Upload", compute.Need{Name: "destination", T: dst, N: len(src)})
	if ts == nil {
		return
	}
	if dst.Len() != len(src) {
		b.fail("Upload", fmt.Errorf("%d values into a tensor of %d", len(src), dst.Len()))
		return
	}
	if b.run() != nil {
		return
	}
	if err := b.dev.UploadFloat32s(ts[0].buf, 4*int64(ts[0].off), src); err != nil {
		b.fail("Upload", err)
	}
}

// Download runs what is recorded and copies src into dst; it returns the
// first error since the last Flush or Download (and forgets it).
func (b *Backend) Download(dst []float32, src compute.Tensor) error {
	if ts := b.tensors("Download", compute.Need{Name: "source", T: src, N: len(dst)}); ts != nil {
		if src.Len() != len(dst) {
			b.fail("Download", fmt.Errorf("a tensor of %d values into %d", src.Len(), len(dst)))
		} else if b.run() == nil {
			if err := b.dev.DownloadFloat32s(ts[0].buf, 4*int64(ts[0].off), dst); err != nil {
				b.fail("Download", err)
			}
		}
	}
	return b.Flush()
}

// Flush runs what is recorded and returns the first error since the last
// Flush or Download (and forgets it; after an error, the tensors written
// since hold undefined values).
func (b *Backend) Flush() error {
	b.run()
	err := b.err
	b.err = nil
	return err
}

// run submits the batch (nothing after an error: the batch is dropped)
// and frees the buffers released since.
func (b *Backend) run() error {
	if b.err == nil {
		if err := b.batch.Run(); err != nil {
			b.fail("batch", err)
		}
	}
	b.batch = b.dev.NewBatch()
	for _, buf := range b.freed {
		buf.Free()
	}
	b.freed = b.freed[:0]
	return b.err
}

// LoadLinear uploads l's weights at prec (float32, or the bfloat16 bits
// of its bfloat16 values) and its bias.
func (b *Backend) LoadLinear(l *nn.Linear[float32], prec gemm.Precision) compute.Linear {
	w := &devLinear{b: b}
	if b.err != nil {
		return w
	}
	vals := l.Weight()
	var err error
	switch prec {
	case gemm.F32:
		w.w, err = UploadF32(b.dev, l.Out, l.In, vals)
	case gemm.BF16:
		bits := make([]uint16, len(vals))
		for i, x := range vals {
			bits[i] = gemm.RoundBF16(x) // exact: the packed values are bfloat16
		}
		if b.fast != nil {
			w.w, err = b.fastWeights(l.Out, l.In, bits)
			w.fast = true
			break
		}
		w.w, err = UploadBF16(b.dev, l.Out, l.In, bits)
	default:
		err = fmt.Errorf("precision %v", prec)
	}
	if err != nil {
		b.fail("LoadLinear", fmt.Errorf("%d×%d: %w", l.Out, l.In, err))
		return w
	}
	if l.B != nil {
		w.bias = b.Param(l.B).(*devTensor)
	}
	return w
}

func (b *Backend) FreeLinear(w compute.Linear) {
	if d, ok := w.(*devLinear); ok && d.w.Buf != nil {
		b.release(d.w.Buf)
		d.w.Buf = nil
		b.Free(d.bias)
	}
}

// Linear records y = x·Wᵀ (gemm's product at the weights' precision, x
// rounded to bfloat16 operands first at bf16), then the bias.
func (b *Backend) Linear(y compute.Tensor, w compute.Linear, x compute.Tensor, rows int) {
	l, ok := w.(*devLinear)
	if !ok || l.b != b || l.w.Buf == nil {
		b.fail("Linear", fmt.Errorf("weights of another backend, or freed (%T)", w))
		return
	}
	in, out := l.In(), l.Out()
	ts := b.tensors("Linear", compute.Need{Name: "y", T: y, N: rows * out}, compute.Need{Name: "x", T: x, N: rows * in})
	if ts == nil || rows == 0 {
		return
	}
	if l.fast {
		b.fastLinear(ts[0], ts[1], l, rows)
		return
	}
	a := ts[1].matrix(rows, in)
	if l.w.Prec == gemm.BF16 && !l.widen {
		a = b.bf16(rows, in)
		if b.err != nil {
			return
		}
		if err := RoundBF16(b.dev, b.batch, a, ts[1].matrix(rows, in), false); err != nil {
			b.fail("Linear", err)
			return
		}
	}
	if err := NT(b.dev, b.batch, ts[0].matrix(rows, out), a, l.w, false); err != nil {
		b.fail("Linear", err)
		return
	}
	if l.bias != nil {
		b.AddBias(y, rows, out, l.bias)
	}
}

// bf16 returns the bfloat16 scratch matrix as rows×cols, grown if needed.
func (b *Backend) bf16(rows, cols int) Matrix {
	if n := rows * cols; b.scratch.Buf == nil || b.scratch.Rows*b.scratch.Cols < n {
		if b.scratch.Buf != nil {
			b.release(b.scratch.Buf)
		}
		m, err := NewMatrix(b.dev, gemm.BF16, 1, n)
		if err != nil {
			b.fail("Linear", err)
			return Matrix{}
		}
		b.scratch = m
	}
	return Matrix{Buf: b.scratch.Buf, Prec: gemm.BF16, Rows: rows, Cols: cols, Ld: cols}
}

func (b *Backend) Attention(prec gemm.Precision, out, q, k, v compute.Tensor, T, S, H, D int, scale float32) {
	ts := b.tensors("Attention", compute.Need{Name: "out", T: out, N: T * H * D}, compute.Need{Name: "q", T: q, N: T * H * D},
		compute.Need{Name: "k", T: k, N: S * H * D}, compute.Need{Name: "v", T: v, N: S * H * D})
	if ts == nil {
		return
	}
	for i, t := range ts {
		if t.off != 0 {
			b.fail("Attention", fmt.Errorf("operand %d is a view at element %d: the kernel reads whole buffers", i, t.off))
			return
		}
	}
	if err := Attention(b.dev, b.batch, prec, ts[0].buf, ts[1].buf, ts[2].buf, ts[3].buf, T, S, H, D, scale); err != nil {
		b.fail("Attention", err)
	}
}

func (b *Backend) Copy(dst compute.Tensor, dstOff int, src compute.Tensor, srcOff, n int) {
	if dstOff < 0 || srcOff < 0 {
		b.fail("Copy", fmt.Errorf("offsets %d and %d", dstOff, srcOff))
		return
	}
	ts := b.tensors("Copy", compute.Need{Name: "destination", T: dst, N: dstOff + n}, compute.Need{Name: "source", T: src, N: srcOff + n})
	if ts != nil {
		b.batch.Copy(ts[0].buf, 4*int64(ts[0].off+dstOff), ts[1].buf, 4*int64(ts[1].off+srcOff), 4*int64(n))
	}
}

func (b *Backend) Rope(x compute.Tensor, tok0, heads int, r *rope.Table, height, width, t0, frames int) {
	if r == nil || tok0 < 0 || heads <= 0 || height <= 0 || width <= 0 || t0 < 0 || frames < 0 {
		b.fail("Rope", fmt.Errorf("table %v, token %d, %d heads, %d×%d grid, frames %d from %d", r != nil, tok0, heads, height, width, frames, t0))
		return
	}
	row := heads * r.HeadDim()
	ts := b.tensors("Rope", compute.Need{Name: "x", T: x, N: tok0*row + frames*height*width*row})
	if ts == nil || frames == 0 {
		return
	}
	if ts[0].off%row != 0 {
		b.fail("Rope", fmt.Errorf("x is a view at element %d, not at a token of %d values", ts[0].off, row))
		return
	}
	rt, err := b.ropeTables(r, height, width, t0+frames)
	if err != nil {
		b.fail("Rope", err)
		return
	}
	b.record("Rope", Rope(b.dev, b.batch, ts[0].buf, ts[0].off/row+tok0, heads, rt, t0, frames))
}

// ropeTables returns the tables of r on a height×width grid with at
// least times temporal positions, made (or grown, doubling) on first use.
func (b *Backend) ropeTables(r *rope.Table, height, width, times int) (*RopeTables, error) {
	g := ropeGrid{r, height, width}
	old := b.ropes[g]
	if old != nil && old.Times >= times {
		return old, nil
	}
	n := max(times, 16)
	if old != nil {
		n = max(n, 2*old.Times)
	}
	rt, err := NewRopeTables(b.dev, r, n, height, width)
	if err != nil {
		return nil, err
	}
	if old != nil {
		b.release(old.Buf) // recorded rotations may still read it
	}
	if b.ropes == nil {
		b.ropes = map[ropeGrid]*RopeTables{}
	}
	b.ropes[g] = rt
	return rt, nil
}

// whole returns the tensors' buffers, failing op for a view at an offset:
// the kernels of nn.go bind whole buffers.
func (b *Backend) whole(op string, ts []*devTensor) []*vulkan.Buffer {
	if ts == nil {
		return nil
	}
	bufs := make([]*vulkan.Buffer, len(ts))
	for i, t := range ts {
		if t.off != 0 {
			b.fail(op, fmt.Errorf("operand %d is a view at element %d: the kernel reads whole buffers", i, t.off))
			return nil
		}
		bufs[i] = t.buf
	}
	return bufs
}

// record fails op with err, if any.
func (b *Backend) record(op string, err error) {
	if err != nil {
		b.fail(op, err)
	}
}

func (b *Backend) LayerNorm(y, x compute.Tensor, rows, d int, eps float64, w, bias compute.Tensor) {
	needs := []compute.Need{{Name: "y", T: y, N: rows * d}, {Name: "x", T: x, N: rows * d}}
	if w != nil || bias != nil {
		needs = append(needs, compute.Need{Name: "w", T: w, N: d}, compute.Need{Name: "b", T: bias, N: d})
	}
	bufs := b.whole("LayerNorm", b.tensors("LayerNorm", needs...))
	if bufs == nil {
		return
	}
	var wb, bb *vulkan.Buffer
	if len(bufs) == 4 {
		wb, bb = bufs[2], bufs[3]
	}
	b.record("LayerNorm", LayerNorm(b.dev, b.batch, bufs[0], bufs[1], rows, d, eps, wb, bb))
}

func (b *Backend) RMSNorm(y, x compute.Tensor, rows, d int, eps float64, w compute.Tensor) {
	bufs := b.whole("RMSNorm", b.tensors("RMSNorm", compute.Need{Name: "y", T: y, N: rows * d}, compute.Need{Name: "x", T: x, N: rows * d}, compute.Need{Name: "w", T: w, N: d}))
	if bufs != nil {
		b.record("RMSNorm", RMSNorm(b.dev, b.batch, bufs[0], bufs[1], rows, d, eps, bufs[2]))
	}
}

func (b *Backend) GELUTanh(x compute.Tensor) {
	bufs := b.whole("GELUTanh", b.tensors("GELUTanh", compute.Need{Name: "x", T: x}))
	if bufs != nil {
		b.record("GELUTanh", GELUTanh(b.dev, b.batch, bufs[0], x.Len()))
	}
}

func (b *Backend) SiLU(y, x compute.Tensor) {
	bufs := b.whole("SiLU", b.tensors("SiLU", compute.Need{Name: "y", T: y}, compute.Need{Name: "x", T: x}))
	if bufs == nil {
		return
	}
	if y.Len() != x.Len() {
		b.fail("SiLU", fmt.Errorf("y has %d values, x %d", y.Len(), x.Len()))
		return
	}
	b.record("SiLU", SiLU(b.dev, b.batch, bufs[0], bufs[1], x.Len()))
}

// frameVectors returns v as FrameVectors (its tensor's offset added).
func (b *Backend) frameVectors(v compute.Vec, t *devTensor) FrameVectors {
	return FrameVectors{Buf: t.buf, Off: t.off + v.Off, Stride: v.Stride}
}

func (b *Backend) Modulate(y compute.Tensor, rows, d, groupRows int, shift, scale compute.Vec) {
	g, err := compute.Groups("Modulate", rows, groupRows)
	if err != nil {
		b.fail("Modulate", err)
		return
	}
	ts := b.tensors("Modulate", compute.Need{Name: "y", T: y, N: rows * d}, shift.Need("shift", g, d), scale.Need("scale", g, d))
	if bufs := b.whole("Modulate", ts[:min(len(ts), 1)]); bufs != nil {
		b.record("Modulate", Modulate(b.dev, b.batch, bufs[0], rows, d, groupRows, b.frameVectors(shift, ts[1]), b.frameVectors(scale, ts[2])))
	}
}

func (b *Backend) GatedAdd(x, o compute.Tensor, rows, d, groupRows int, gate compute.Vec) {
	g, err := compute.Groups("GatedAdd", rows, groupRows)
	if err != nil {
		b.fail("GatedAdd", err)
		return
	}
	ts := b.tensors("GatedAdd", compute.Need{Name: "x", T: x, N: rows * d}, compute.Need{Name: "o", T: o, N: rows * d}, gate.Need("gate", g, d))
	if bufs := b.whole("GatedAdd", ts[:min(len(ts), 2)]); bufs != nil {
		b.record("GatedAdd", GatedAdd(b.dev, b.batch, bufs[0], bufs[1], rows, d, groupRows, b.frameVectors(gate, ts[2])))
	}
}

func (b *Backend) Add(x, y compute.Tensor) {
	bufs := b.whole("Add", b.tensors("Add", compute.Need{Name: "x", T: x}, compute.Need{Name: "y", T: y}))
	if bufs == nil {
		return
	}
	if x.Len() != y.Len() {
		b.fail("Add", fmt.Errorf("x has %d values, y %d", x.Len(), y.Len()))
		return
	}
	b.record("Add", Add(b.dev, b.batch, bufs[0], bufs[1], x.Len()))
}

func (b *Backend) AddBias(x compute.Tensor, rows, d int, bias compute.Tensor) {
	bufs := b.whole("AddBias", b.tensors("AddBias", compute.Need{Name: "x", T: x, N: rows * d}, compute.Need{Name: "b", T: bias, N: d}))
	if bufs != nil {
		b.record("AddBias", AddBias(b.dev, b.batch, bufs[0], bufs[0], bufs[1], rows, d))
	}
}
