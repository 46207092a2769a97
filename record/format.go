package record

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"slices"

	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/synth"
)

// Magic opens every stream file.
const Magic = "DKVSTRM1"

// Record types of the file format.
const (
	recBlock byte = 'B'
	recLayer byte = 'L'
	recEnd   byte = 'E'
)

// Limits checked before allocating while reading.
const (
	maxHeader       = 1 << 16
	maxLatentValues = 1 << 28
	maxLayerValues  = 1 << 31 // values of q, k, v together in one layer record
)

// DType names the on-disk number format of q, k and v.
type DType string

// Supported dtypes.
const (
	Float32  DType = "f32"
	BFloat16 DType = "bf16"
)

func (d DType) size() int {
	if d == BFloat16 {
		return 2
	}
	return 4
}

// Header is the JSON description at the start of a stream file.
type Header struct {
	Layout memory.Layout `json:"layout"`
	DType  DType         `json:"dtype"`
	Blocks int           `json:"blocks"` // −1 when unknown at write time
	Source string        `json:"source,omitempty"`
	// Memory is the attention budget of the run that recorded the stream
	// (nil in streams written before it was recorded, and in synthetic
	// ones): replaying the stream (simulate, eval) starts from it.
	Memory *Budget `json:"memory,omitempty"`
}

// Budget is a recorded run's attention budget: the memory.Config fields
// that decide how much history every policy keeps, resolved (Capacity
// is M per head in tokens, never 0).
type Budget struct {
	SinkFrames   int `json:"sink_frames"`
	CacheFrames  int `json:"cache_frames"`
	WindowFrames int `json:"window_frames"`
	Capacity     int `json:"capacity"`
}

// BudgetOf returns the budget of a resolved memory configuration.
func BudgetOf(c memory.Config) *Budget {
	return &Budget{SinkFrames: c.SinkFrames, CacheFrames: c.CacheFrames, WindowFrames: c.WindowFrames, Capacity: c.Capacity}
}

// Apply sets c's budget fields to b's.
func (b Budget) Apply(c *memory.Config) {
	c.SinkFrames, c.CacheFrames, c.WindowFrames, c.Capacity = b.SinkFrames, b.CacheFrames, b.WindowFrames, b.Capacity
}

func (h Header) validate() error {
	l := h.Layout
	if l.Height <= 0 || l.Width <= 0 || l.FramesPerBlock <= 0 || l.Layers <= 0 || l.Heads <= 0 || l.HeadDim <= 0 {
		return fmt.Errorf("record: stream header layout %+v must have positive sizes", l)
	}
	if l.Layers > 1<<15 || int64(l.TokensPerBlock())*int64(l.Heads)*int64(l.HeadDim)*3 > maxLayerValues {
		return fmt.Errorf("record: stream header layout %+v is too large", l)
	}
	if h.DType != Float32 && h.DType != BFloat16 {
		return fmt.Errorf("record: stream header dtype %q must be %q or %q", h.DType, Float32, BFloat16)
	}
	if h.Blocks < -1 {
		return fmt.Errorf("record: stream header blocks %d must be ≥ −1", h.Blocks)
	}
	if m := h.Memory; m != nil && (m.SinkFrames < 0 || m.CacheFrames <= 0 || m.WindowFrames <= 0 || m.Capacity <= 0 ||
		m.CacheFrames > 1<<20 || m.WindowFrames > 1<<20 || m.SinkFrames > 1<<20 || m.Capacity > 1<<30) {
		return fmt.Errorf("record: stream header memory budget %+v: want sink_frames ≥ 0 and positive cache_frames, window_frames and capacity (at most 2^20 frames, 2^30 tokens)", *m)
	}
	return nil
}

// Writer writes a stream file: NewWriter, then per block BeginBlock and
// WriteLayer for every layer in order, then Close.
type Writer struct {
	w      *bufio.Writer
	h      Header
	n      int // values per tensor of a layer (T·H·D)
	block  int // index of the open block, −1 before the first
	layer  int // next layer expected in the open block
	blocks int // blocks written
	buf    []byte
	closed bool
}

// NewWriter validates h, writes the header and returns the writer.
func NewWriter(w io.Writer, h Header) (*Writer, error) {
	if h.DType == "" {
		h.DType = Float32
	}
	if err := h.validate(); err != nil {
		return nil, err
	}
	js, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("record: stream header: %w", err)
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	var pre [12]byte
	copy(pre[:8], Magic)
	binary.LittleEndian.PutUint32(pre[8:], uint32(len(js)))
	if _, err := bw.Write(pre[:]); err != nil {
		return nil, fmt.Errorf("record: write header: %w", err)
	}
	if _, err := bw.Write(js); err != nil {
		return nil, fmt.Errorf("record: write header: %w", err)
	}
	l := h.Layout
	return &Writer{w: bw, h: h, n: l.TokensPerBlock() * l.Heads * l.HeadDim, block: -1}, nil
}

// ResumeWriter continues a stream of which a Writer wrote the header h and
// the complete blocks first..next−1 and was then flushed (Flush), not
// closed: w must be positioned right after them, for instance the file
// truncated to the size it had at that Flush (which also drops an end
// record written since). It writes nothing itself; the next block must be
// block next (any index when next == first, as for NewWriter).
func ResumeWriter(w io.Writer, h Header, first, next int) (*Writer, error) {
	if h.DType == "" {
		h.DType = Float32
	}
	if err := h.validate(); err != nil {
		return nil, err
	}
	if first < 0 || next < first || next > math.MaxInt32 {
		return nil, fmt.Errorf("record: resume writer: blocks %d..%d", first, next-1)
	}
	l := h.Layout
	sw := &Writer{w: bufio.NewWriterSize(w, 1<<20), h: h, n: l.TokensPerBlock() * l.Heads * l.HeadDim, block: -1, blocks: next - first}
	if next > first {
		sw.block, sw.layer = next-1, l.Layers
	}
	return sw, nil
}

// Flush writes the buffered records to the underlying writer. Between
// blocks, what is then written is a resume point for ResumeWriter.
func (w *Writer) Flush() error {
	if err := w.w.Flush(); err != nil {
		return fmt.Errorf("record: flush: %w", err)
	}
	return nil
}

// Header returns the header the writer wrote.
func (w *Writer) Header() Header { return w.h }

func (w *Writer) record(typ byte, payload []byte) error {
	var pre [5]byte
	pre[0] = typ
	binary.LittleEndian.PutUint32(pre[1:], uint32(len(payload)))
	crc := crc32.NewIEEE()
	crc.Write(pre[:1])
	crc.Write(payload)
	var post [4]byte
	binary.LittleEndian.PutUint32(post[:], crc.Sum32())
	if _, err := w.w.Write(pre[:]); err != nil {
		return fmt.Errorf("record: write record %c: %w", typ, err)
	}
	if _, err := w.w.Write(payload); err != nil {
		return fmt.Errorf("record: write record %c: %w", typ, err)
	}
	if _, err := w.w.Write(post[:]); err != nil {
		return fmt.Errorf("record: write record %c: %w", typ, err)
	}
	return nil
}

// BeginBlock starts block index (which must be the previous index + 1, or
// any non-negative index for the first block). latent is optional, with
// shape (F, C, H', W'); pass nil and a zero shape when unavailable.
func (w *Writer) BeginBlock(index int, latent []float32, shape [4]int) error {
	switch {
	case w.closed:
		return errors.New("record: BeginBlock after Close")
	case w.block >= 0 && w.layer != w.h.Layout.Layers:
		return fmt.Errorf("record: begin block %d: block %d has %d of %d layers", index, w.block, w.layer, w.h.Layout.Layers)
	case index < 0 || (w.block >= 0 && index != w.block+1):
		return fmt.Errorf("record: begin block %d: want block %d", index, w.block+1)
	case index > math.MaxInt32:
		return fmt.Errorf("record: begin block %d: index too large", index)
	}
	nl := 1
	for _, s := range shape {
		if s < 0 {
			return fmt.Errorf("record: begin block %d: latent shape %v has a negative size", index, shape)
		}
		nl *= s
	}
	if latent == nil {
		nl = 0
		shape = [4]int{}
	}
	if nl != len(latent) || nl > maxLatentValues {
		return fmt.Errorf("record: begin block %d: latent has %d values, shape %v", index, len(latent), shape)
	}
	p := w.buf[:0]
	p = binary.LittleEndian.AppendUint32(p, uint32(index))
	for _, s := range shape {
		p = binary.LittleEndian.AppendUint32(p, uint32(s))
	}
	for _, x := range latent {
		p = binary.LittleEndian.AppendUint32(p, math.Float32bits(x))
	}
	w.buf = p
	if err := w.record(recBlock, p); err != nil {
		return err
	}
	w.block, w.layer = index, 0
	w.blocks++
	return nil
}

// WriteLayer writes layer of the open block; layers must come in order.
func (w *Writer) WriteLayer(layer int, q, k, v []float32) error {
	switch {
	case w.closed:
		return errors.New("record: WriteLayer after Close")
	case w.block < 0:
		return fmt.Errorf("record: write layer %d: no open block", layer)
	case layer != w.layer:
		return fmt.Errorf("record: block %d: write layer %d, want layer %d", w.block, layer, w.layer)
	case len(q) != w.n || len(k) != w.n || len(v) != w.n:
		return fmt.Errorf("record: block %d layer %d: q, k, v have %d, %d, %d values, want %d", w.block, layer, len(q), len(k), len(v), w.n)
	}
	p := w.buf[:0]
	p = binary.LittleEndian.AppendUint32(p, uint32(w.block))
	p = binary.LittleEndian.AppendUint16(p, uint16(layer))
	for _, t := range [3][]float32{q, k, v} {
		p = appendValues(p, t, w.h.DType)
	}
	w.buf = p
	if err := w.record(recLayer, p); err != nil {
		return err
	}
	w.layer++
	return nil
}

// Close writes the end record and flushes; it does not close the underlying
// writer. The last block must be complete.
func (w *Writer) Close() error {
	if w.closed {
		return nil
	}
	if w.block >= 0 && w.layer != w.h.Layout.Layers {
		return fmt.Errorf("record: close: block %d has %d of %d layers", w.block, w.layer, w.h.Layout.Layers)
	}
	p := binary.LittleEndian.AppendUint32(nil, uint32(w.blocks))
	if err := w.record(recEnd, p); err != nil {
		return err
	}
	w.closed = true
	if err := w.w.Flush(); err != nil {
		return fmt.Errorf("record: close: %w", err)
	}
	return nil
}

func appendValues(p []byte, x []float32, d DType) []byte {
	if d == BFloat16 {
		for _, v := range x {
			p = binary.LittleEndian.AppendUint16(p, ToBF16(v))
		}
		return p
	}
	for _, v := range x {
		p = binary.LittleEndian.AppendUint32(p, math.Float32bits(v))
	}
	return p
}

// ToBF16 rounds x to bfloat16 (round to nearest even; NaN stays NaN).
func ToBF16(x float32) uint16 {
	b := math.Float32bits(x)
	if x != x {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// FromBF16 widens a bfloat16 to float32.
func FromBF16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// FileReader reads a stream file written by Writer. It implements synth.Reader.
type FileReader struct {
	r       *bufio.Reader
	h       Header
	n       int
	block   int // current block index, −1 before the first
	started bool
	layer   int // next layer record to read in the current block
	done    bool
	pend    byte // type of a record header already read but not consumed (0 none)
	pendLen int
	buf     []byte
	q, k, v []float32
	latent  []float32
}

// NewFileReader reads and validates the header.
func NewFileReader(r io.Reader) (*FileReader, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	var pre [12]byte
	if _, err := io.ReadFull(br, pre[:]); err != nil {
		return nil, fmt.Errorf("record: read stream header: %w", err)
	}
	if string(pre[:8]) != Magic {
		return nil, fmt.Errorf("record: stream magic %q, want %q", pre[:8], Magic)
	}
	n := binary.LittleEndian.Uint32(pre[8:])
	if n > maxHeader {
		return nil, fmt.Errorf("record: stream header of %d bytes exceeds %d", n, maxHeader)
	}
	js := make([]byte, n)
	if _, err := io.ReadFull(br, js); err != nil {
		return nil, fmt.Errorf("record: read stream header: %w", err)
	}
	var h Header
	if err := json.Unmarshal(js, &h); err != nil {
		return nil, fmt.Errorf("record: stream header: %w", err)
	}
	if err := h.validate(); err != nil {
		return nil, err
	}
	l := h.Layout
	return &FileReader{r: br, h: h, n: l.TokensPerBlock() * l.Heads * l.HeadDim, block: -1}, nil
}

// Header returns the file's header.
func (f *FileReader) Header() Header { return f.h }

// Layout implements Reader.
func (f *FileReader) Layout() memory.Layout { return f.h.Layout }

// Blocks implements synth.Reader (the header's count, −1 when unknown).
func (f *FileReader) Blocks() int { return f.h.Blocks }

// peek reads the next record header (type and payload length) once.
func (f *FileReader) peek() (byte, int, error) {
	if f.pend != 0 {
		return f.pend, f.pendLen, nil
	}
	var pre [5]byte
	if _, err := io.ReadFull(f.r, pre[:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, 0, fmt.Errorf("record: block %d: read record: %w (missing end record)", f.block, err)
	}
	n := binary.LittleEndian.Uint32(pre[1:])
	var max int64
	switch pre[0] {
	case recBlock:
		max = 20 + 4*maxLatentValues
	case recLayer:
		max = 6 + 3*int64(f.n)*int64(f.h.DType.size())
	case recEnd:
		max = 4
	default:
		return 0, 0, fmt.Errorf("record: block %d: unknown record type %#x", f.block, pre[0])
	}
	if int64(n) > max {
		return 0, 0, fmt.Errorf("record: block %d: record %c of %d bytes exceeds %d", f.block, pre[0], n, max)
	}
	f.pend, f.pendLen = pre[0], int(n)
	return f.pend, f.pendLen, nil
}

// payload reads the pending record's payload and checks its CRC.
func (f *FileReader) payload() ([]byte, error) {
	typ, n := f.pend, f.pendLen
	f.pend = 0
	// Read in chunks so that a corrupt length cannot allocate more than
	// about twice the bytes actually present.
	b := f.buf[:0]
	for need := n + 4; len(b) < need; {
		chunk := min(need-len(b), 1<<20)
		b = slices.Grow(b, chunk)
		m, err := io.ReadFull(f.r, b[len(b):len(b)+chunk])
		b = b[:len(b)+m]
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("record: block %d: read record %c: %w", f.block, typ, err)
		}
	}
	f.buf = b
	crc := crc32.NewIEEE()
	crc.Write([]byte{typ})
	crc.Write(b[:n])
	if got, want := crc.Sum32(), binary.LittleEndian.Uint32(b[n:]); got != want {
		return nil, fmt.Errorf("record: block %d: record %c checksum %#x, want %#x", f.block, typ, got, want)
	}
	return b[:n], nil
}

// NextBlock implements Reader.
func (f *FileReader) NextBlock() (synth.BlockInfo, error) {
	if f.done {
		return synth.BlockInfo{}, io.EOF
	}
	// Skip the unread layers of the current block.
	for f.started && f.layer < f.h.Layout.Layers {
		if _, _, _, err := f.Layer(f.layer); err != nil {
			return synth.BlockInfo{}, err
		}
	}
	typ, n, err := f.peek()
	if err != nil {
		return synth.BlockInfo{}, err
	}
	switch typ {
	case recEnd:
		p, err := f.payload()
		if err != nil {
			return synth.BlockInfo{}, err
		}
		if n != 4 {
			return synth.BlockInfo{}, fmt.Errorf("record: end record of %d bytes, want 4", n)
		}
		count := int(binary.LittleEndian.Uint32(p))
		if f.h.Blocks >= 0 && count != f.h.Blocks {
			return synth.BlockInfo{}, fmt.Errorf("record: end record counts %d blocks, header says %d", count, f.h.Blocks)
		}
		f.done = true
		return synth.BlockInfo{}, io.EOF
	case recLayer:
		return synth.BlockInfo{}, fmt.Errorf("record: block %d: layer record where a block record was expected", f.block)
	}
	if n < 20 {
		return synth.BlockInfo{}, fmt.Errorf("record: block record of %d bytes, want ≥ 20", n)
	}
	p, err := f.payload()
	if err != nil {
		return synth.BlockInfo{}, err
	}
	idx := int(binary.LittleEndian.Uint32(p))
	if f.started && idx != f.block+1 {
		return synth.BlockInfo{}, fmt.Errorf("record: block record %d follows block %d", idx, f.block)
	}
	var shape [4]int
	nl := 1
	for i := range shape {
		shape[i] = int(binary.LittleEndian.Uint32(p[4+4*i:]))
		nl *= shape[i]
		if nl > maxLatentValues {
			return synth.BlockInfo{}, fmt.Errorf("record: block %d: latent shape too large", idx)
		}
	}
	if shape == [4]int{} {
		nl = 0
	}
	if len(p) != 20+4*nl {
		return synth.BlockInfo{}, fmt.Errorf("record: block %d: record of %d bytes for latent shape %v", idx, len(p), shape)
	}
	info := synth.BlockInfo{Index: idx}
	if nl > 0 {
		if cap(f.latent) < nl {
			f.latent = make([]float32, nl)
		}
		f.latent = f.latent[:nl]
		for i := range f.latent {
			f.latent[i] = math.Float32frombits(binary.LittleEndian.Uint32(p[20+4*i:]))
		}
		info.Latent, info.LatentShape = f.latent, shape
	}
	f.block, f.started, f.layer = idx, true, 0
	return info, nil
}

// Layer implements Reader.
func (f *FileReader) Layer(l int) (q, k, v []float32, err error) {
	if !f.started || f.done {
		return nil, nil, nil, errors.New("record: Layer called without a current block")
	}
	if l < f.layer || l >= f.h.Layout.Layers {
		return nil, nil, nil, fmt.Errorf("record: block %d: layer %d out of order (next %d of %d)", f.block, l, f.layer, f.h.Layout.Layers)
	}
	for f.layer <= l {
		typ, n, err := f.peek()
		if err != nil {
			return nil, nil, nil, err
		}
		want := 6 + 3*f.n*f.h.DType.size()
		if typ != recLayer || n != want {
			return nil, nil, nil, fmt.Errorf("record: block %d: record %c of %d bytes where layer %d (%d bytes) was expected", f.block, typ, n, f.layer, want)
		}
		p, err := f.payload()
		if err != nil {
			return nil, nil, nil, err
		}
		b, ly := int(binary.LittleEndian.Uint32(p)), int(binary.LittleEndian.Uint16(p[4:]))
		if b != f.block || ly != f.layer {
			return nil, nil, nil, fmt.Errorf("record: layer record (block %d, layer %d) where (block %d, layer %d) was expected", b, ly, f.block, f.layer)
		}
		f.layer++
		if f.layer <= l {
			continue // skipped layer: no need to decode
		}
		p = p[6:]
		if f.q == nil { // allocated once the first full record is present
			f.q, f.k, f.v = make([]float32, f.n), make([]float32, f.n), make([]float32, f.n)
		}
		sz := f.n * f.h.DType.size()
		for i, t := range [3][]float32{f.q, f.k, f.v} {
			decodeValues(t, p[i*sz:(i+1)*sz], f.h.DType)
		}
	}
	return f.q, f.k, f.v, nil
}

func decodeValues(dst []float32, p []byte, d DType) {
	if d == BFloat16 {
		for i := range dst {
			dst[i] = FromBF16(binary.LittleEndian.Uint16(p[2*i:]))
		}
		return
	}
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(p[4*i:]))
	}
}

// Copy writes every remaining block of r to w (all layers) and returns the
// number of blocks copied. It does not Close w.
func Copy(w *Writer, r synth.Reader) (int, error) {
	if w.h.Layout != r.Layout() {
		return 0, fmt.Errorf("record: copy: writer layout %+v differs from stream layout %+v", w.h.Layout, r.Layout())
	}
	n := 0
	for {
		info, err := r.NextBlock()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if err := w.BeginBlock(info.Index, info.Latent, info.LatentShape); err != nil {
			return n, err
		}
		for l := 0; l < r.Layout().Layers; l++ {
			q, k, v, err := r.Layer(l)
			if err != nil {
				return n, err
			}
			if err := w.WriteLayer(l, q, k, v); err != nil {
				return n, err
			}
		}
		n++
	}
}
