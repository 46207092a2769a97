package gpu

import (
	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/nn"
)

// Meter is a compute.Backend that computes nothing and allocates nothing:
// it counts the device memory a Backend allocates for the same calls, the
// sizes its buffers are allocated at, freed when the Backend frees them
// (at once, or once the batch that may read them has run), and their
// peak. It meters the VAE decoder's operations (compute.VAEOps, with New,
// View, Param, Free, Upload, Download, Flush and Attention: the calls
// vae.Model.Rehearse makes), the sizes from the same functions as the
// Backend's (convLayout, convChunk, matrixBytes); any other operation
// panics. Its tensors hold no values: Download reads zeros.
type Meter struct {
	compute.Backend // nil: the operations a Meter does not meter

	// Now is the memory allocated now, by kind; Peak is each kind's most
	// (not necessarily at the same moment) and PeakTotal the most of the
	// sum. Largest is the largest buffer.
	Now, Peak        MeterUse
	PeakTotal        int64
	Largest          int64
	pending          []meterBuf // released, freed when the batch runs
	recorded         bool       // the batch is not empty
	convs            [2]*meterTensor
	bf16, bf16Values int64 // the bfloat16 operands' buffer (bytes) and its values
}

// MeterUse is device memory by what holds it, in bytes.
type MeterUse struct {
	Weights int64 // LoadConv's and Param's: the weights, biases, norm gammas
	Tensors int64 // New's: the tensors a caller makes (a VAE decoder's frames)
	Scratch int64 // the Backend's own: the convolutions' im2col and product, the bfloat16 operands
}

// Total is the sum of the kinds.
func (u MeterUse) Total() int64 { return u.Weights + u.Tensors + u.Scratch }

// The kinds of MeterUse.
const (
	meterWeights = iota
	meterTensors
	meterScratch
)

type meterBuf struct {
	kind  int
	bytes int64
}

// meterTensor is a Meter tensor: n values, bytes of the kind's memory
// when it owns its buffer (New, Param), none for a view.
type meterTensor struct {
	n     int
	buf   meterBuf
	owner bool
}

func (t *meterTensor) Len() int { return t.n }

// meterConv is a Meter ConvWeights.
type meterConv struct {
	cin, cout, kt, kh, kw int
	prec                  gemm.Precision
	depth                 int // columns of A per input frame
	a                     meterBuf
	bias                  *meterTensor
}

func (w *meterConv) Shape() (cin, cout, kt, kh, kw int) { return w.cin, w.cout, w.kt, w.kh, w.kw }
func (w *meterConv) Precision() gemm.Precision          { return w.prec }

var _ compute.Backend = (*Meter)(nil)

func (m *Meter) String() string { return "device memory meter" }

// use adds bytes of kind (negative: frees them) and follows the peaks.
func (m *Meter) use(kind int, bytes int64) {
	switch kind {
	case meterWeights:
		m.Now.Weights += bytes
		m.Peak.Weights = max(m.Peak.Weights, m.Now.Weights)
	case meterTensors:
		m.Now.Tensors += bytes
		m.Peak.Tensors = max(m.Peak.Tensors, m.Now.Tensors)
	default:
		m.Now.Scratch += bytes
		m.Peak.Scratch = max(m.Peak.Scratch, m.Now.Scratch)
	}
	m.PeakTotal = max(m.PeakTotal, m.Now.Total())
	m.Largest = max(m.Largest, bytes)
}

// alloc is the Backend's alloc: n float32 values, at least one.
func (m *Meter) alloc(kind, n int) *meterTensor {
	t := &meterTensor{n: n, buf: meterBuf{kind, 4 * int64(max(n, 1))}, owner: true}
	m.use(kind, t.buf.bytes)
	return t
}

// release is the Backend's release: b is freed now when nothing is
// recorded, else once the batch has run.
func (m *Meter) release(b meterBuf) {
	if !m.recorded {
		m.use(b.kind, -b.bytes)
		return
	}
	m.pending = append(m.pending, b)
}

// run is the Backend's run: the batch runs, the buffers released since
// are freed.
func (m *Meter) run() {
	for _, b := range m.pending {
		m.use(b.kind, -b.bytes)
	}
	m.pending, m.recorded = m.pending[:0], false
}

func (m *Meter) New(n int) compute.Tensor {
	t := m.alloc(meterTensors, max(n, 0))
	m.recorded = true // the zero fill
	return t
}

func (m *Meter) View(t compute.Tensor, off, n int) compute.Tensor { return &meterTensor{n: n} }

func (m *Meter) Param(v []float32) compute.Tensor {
	t := m.alloc(meterWeights, len(v))
	m.run() // Upload runs what is recorded
	return t
}

func (m *Meter) Free(t compute.Tensor) {
	if d, ok := t.(*meterTensor); ok && d != nil && d.owner {
		m.release(d.buf)
		d.owner = false
	}
}

func (m *Meter) Upload(dst compute.Tensor, src []float32) { m.run() }

func (m *Meter) Download(dst []float32, src compute.Tensor) error {
	clear(dst)
	m.run()
	return nil
}

func (m *Meter) Flush() error {
	m.run()
	return nil
}

func (m *Meter) Attention(prec gemm.Precision, out, q, k, v compute.Tensor, T, S, H, D int, scale float32) {
	m.recorded = true
}

func (m *Meter) LoadConv(c *nn.Conv, prec gemm.Precision) compute.ConvWeights {
	k, depth, _, _ := convLayout(c, prec)
	w := &meterConv{cin: c.Cin, cout: c.Cout, kt: c.KT, kh: c.KH, kw: c.KW, prec: prec, depth: depth,
		a: meterBuf{meterWeights, matrixBytes(prec, int64(c.Cout)*int64(k))}}
	m.use(meterWeights, w.a.bytes) // uploaded at once, the batch not run
	w.bias = m.alloc(meterWeights, c.Cout)
	m.run() // the bias: Param
	return w
}

func (m *Meter) FreeConv(w compute.ConvWeights) {
	if d, ok := w.(*meterConv); ok && d.bias != nil {
		m.release(d.a)
		m.Free(d.bias)
		d.bias = nil
	}
}

// Conv grows the Backend's convolution scratch as its Conv does: the
// im2col of a chunk of pixels, the product C [Cout][P] and, at bf16, the
// im2col's bfloat16 operands.
func (m *Meter) Conv(out compute.Tensor, w compute.ConvWeights, in []compute.Tensor, hs, ws int, up bool, res compute.Tensor) {
	cw := w.(*meterConv)
	P := hs * ws
	if up {
		P *= 4
	}
	pc := convChunk(cw.depth, P)
	m.scratch(0, cw.depth*pc)
	m.scratch(1, cw.cout*P)
	if cw.prec == gemm.BF16 {
		if n := int64(cw.depth) * int64(pc); n > m.bf16Values {
			if m.bf16 > 0 {
				m.release(meterBuf{meterScratch, m.bf16})
			}
			m.bf16, m.bf16Values = matrixBytes(gemm.BF16, n), n
			m.use(meterScratch, m.bf16)
		}
	}
	m.recorded = true
}

// scratch is the Backend's convScratch: tensor i grown to n values.
func (m *Meter) scratch(i, n int) {
	if t := m.convs[i]; t != nil && t.n >= n {
		return
	}
	if t := m.convs[i]; t != nil {
		m.release(t.buf)
	}
	m.convs[i] = m.alloc(meterScratch, n)
}

func (m *Meter) RMSNormChannels(dst, src compute.Tensor, ch, P int, gamma compute.Tensor, act bool) {
	m.recorded = true
}

func (m *Meter) Transpose(dst, src compute.Tensor, rows, cols int) { m.recorded = true }
