package checkpoint

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
)

// RawTensor is one tensor of a checkpoint opened with OpenRaw: its
// normalised name, element type and shape, with its data read on demand
// and left undecoded, so that a caller can keep a large model in its
// stored precision (e.g. bfloat16) without a float32 copy.
type RawTensor struct {
	Name  string // normalised by NormalizeKey
	DType DType
	Shape []int
	// Stored is the tensor's name in the file when Name is another one
	// (a layout's name mapped onto the model's, package weights); errors
	// name the tensor by it. Empty: Name.
	Stored string
	// Scale, when not 0, multiplies every value as it is decoded
	// (ReadFloat32): the per-tensor scale of an fp8 weight stored scaled
	// (ComfyUI's scale_weight / weight_scale). The product is rounded to
	// float32 once.
	Scale float32

	open func() (io.Reader, error)
	file string // the file's path, for errors (OpenRaw)
}

// File returns the path of the tensor's file ("" when not opened by
// path).
func (t RawTensor) File() string { return t.file }

// StoredName returns the tensor's name as its file spells it (after
// NormalizeKey).
func (t RawTensor) StoredName() string {
	if t.Stored != "" {
		return t.Stored
	}
	return t.Name
}

// where names the tensor and, when known, its file in errors.
func (t RawTensor) where() string {
	if t.file == "" {
		return fmt.Sprintf("tensor %q", t.StoredName())
	}
	return fmt.Sprintf("tensor %q of %s", t.StoredName(), t.file)
}

// ReadFloat32 reads the tensor into dst (Elems() values) as float32: F32
// as stored, F16, BF16, F8E4M3 and F8E5M2 widened exactly, F64 rounded
// to nearest; with Scale set, each value is then multiplied by it in
// float32 (one rounding; exact for a power-of-two scale). buf is scratch
// (at least 8 bytes; a larger one reads in fewer pieces). It returns an
// error naming the tensor and file for a non-floating dtype, a dst of the
// wrong length or a failed read.
func (t RawTensor) ReadFloat32(dst []float32, buf []byte) error {
	if !t.DType.IsFloat() {
		return fmt.Errorf("checkpoint: %s: dtype %s is not a floating-point type", t.where(), t.DType)
	}
	if int64(len(dst)) != t.Elems() {
		return fmt.Errorf("checkpoint: %s: %d values for shape %v", t.where(), len(dst), t.Shape)
	}
	r, err := t.Reader()
	if err != nil {
		return err
	}
	es := t.DType.Size()
	if len(buf) < 8 {
		buf = make([]byte, 8)
	}
	buf = buf[:len(buf)/es*es]
	i := 0
	for i < len(dst) {
		b := buf[:min(len(buf), (len(dst)-i)*es)]
		if _, err := io.ReadFull(r, b); err != nil {
			return fmt.Errorf("checkpoint: %s: reading %d bytes at element %d: %w", t.where(), len(b), i, err)
		}
		d := dst[i : i+len(b)/es]
		t.DType.Decode(d, b)
		if t.Scale != 0 {
			for k, v := range d {
				d[k] = v * t.Scale
			}
		}
		i += len(d)
	}
	return nil
}

// Elems returns the number of elements (1 for a scalar).
func (t RawTensor) Elems() int64 { return numel(t.Shape) }

// Bytes returns the size of the tensor's data, Elems() × DType.Size().
func (t RawTensor) Bytes() int64 { return t.Elems() * int64(t.DType.Size()) }

// Reader returns a reader of exactly Bytes() bytes: the elements in
// row-major order, little-endian, as the file stores them. A strided
// PyTorch view is gathered first (its storage is read whole); a contiguous
// one, the usual case, is read straight from the file.
func (t RawTensor) Reader() (io.Reader, error) {
	r, err := t.open()
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %s: %w", t.where(), err)
	}
	return &exactReader{r: r, left: t.Bytes(), name: t.where()}, nil
}

// exactReader turns an early end of the data into an error naming the
// tensor (a file truncated after it was opened, or a zip record shorter
// than its directory says), and names it in every other read error (a
// PyTorch record whose CRC-32 does not match).
type exactReader struct {
	r    io.Reader
	left int64
	name string // tensor "x" of file
}

func (x *exactReader) Read(p []byte) (int, error) {
	if x.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > x.left {
		p = p[:x.left]
	}
	n, err := x.r.Read(p)
	x.left -= int64(n)
	if err == io.EOF && x.left > 0 {
		return n, fmt.Errorf("checkpoint: %s: data ends %d bytes early: %w", x.name, x.left, io.ErrUnexpectedEOF)
	}
	if err == io.EOF || (err == nil && x.left == 0) {
		return n, nil
	}
	if err != nil {
		return n, fmt.Errorf("checkpoint: %s: %w", x.name, err)
	}
	return n, nil
}

// RawFile is a checkpoint opened by OpenRaw.
type RawFile struct {
	// Tensors in file order: the state dict's order for PyTorch files,
	// data offset order for safetensors.
	Tensors []RawTensor
	// Metadata is a safetensors file's __metadata__ (nil for PyTorch
	// checkpoints).
	Metadata map[string]string
	closer   io.Closer
}

// Close releases the file.
func (f *RawFile) Close() error {
	if f.closer != nil {
		return f.closer.Close()
	}
	return nil
}

// OpenRaw opens a .safetensors file or a PyTorch zip checkpoint (chosen by
// content, as LoadFile does) and lists its tensors without reading their
// data. opt applies to PyTorch checkpoints only. Sizes are checked against
// the file as by LoadFile. Close releases the file.
func OpenRaw(p string, opt TorchOptions) (*RawFile, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: open: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("checkpoint: open: %w", err)
	}
	rf, err := NewRaw(f, st.Size(), opt)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%w (file %s)", err, p)
	}
	rf.closer = f
	for i := range rf.Tensors {
		rf.Tensors[i].file = p
	}
	return rf, nil
}

// NewRaw is OpenRaw on size bytes read through r (a PyTorch zip archive if
// they start with a zip header, else safetensors).
func NewRaw(r io.ReaderAt, size int64, opt TorchOptions) (*RawFile, error) {
	var magic [4]byte
	if n, _ := r.ReadAt(magic[:], 0); n == 4 && string(magic[:]) == zipMagic {
		return rawTorch(r, size, opt)
	}
	return rawSafetensors(r, size)
}

func rawSafetensors(r io.ReaderAt, size int64) (*RawFile, error) {
	s, err := NewSafetensors(r, size)
	if err != nil {
		return nil, err
	}
	infos := make([]Info, 0, len(s.names))
	for _, n := range s.names {
		infos = append(infos, s.infos[n])
	}
	sort.SliceStable(infos, func(a, b int) bool { return infos[a].Begin < infos[b].Begin })
	out := &RawFile{Metadata: s.Metadata}
	seen := map[string]bool{}
	for _, i := range infos {
		nk := NormalizeKey(i.Name)
		if seen[nk] {
			return nil, fmt.Errorf("checkpoint: safetensors: keys normalise to the same name %q", nk)
		}
		seen[nk] = true
		off, n := s.dataOff+i.Begin, i.End-i.Begin
		out.Tensors = append(out.Tensors, RawTensor{Name: nk, DType: i.DType, Shape: append([]int(nil), i.Shape...),
			open: func() (io.Reader, error) { return io.NewSectionReader(r, off, n), nil }})
	}
	return out, nil
}

func rawTorch(r io.ReaderAt, size int64, opt TorchOptions) (*RawFile, error) {
	top, tf, err := unpickleTorch(r, size)
	if err != nil {
		return nil, err
	}
	sd, want, err := selectEntry(top, opt)
	if err != nil {
		return nil, err
	}
	out := &RawFile{}
	seen := map[string]bool{}
	for _, e := range sd {
		t, ok := e.v.(*tensorRef)
		if !ok {
			return nil, fmt.Errorf("checkpoint: torch: entry %q: key %q holds %T, not a tensor", want, e.k, e.v)
		}
		contiguous, err := t.checkView()
		if err != nil {
			return nil, fmt.Errorf("checkpoint: torch: tensor %q: %w", e.k, err)
		}
		nk := NormalizeKey(e.k)
		if seen[nk] {
			return nil, fmt.Errorf("checkpoint: torch: keys normalise to the same name %q", nk)
		}
		seen[nk] = true
		rec := tf.records[t.st.key]
		if err := checkRecord(rec, size); err != nil {
			return nil, fmt.Errorf("checkpoint: torch: tensor %q: %w", e.k, err)
		}
		open := func() (io.Reader, error) { return tf.rawView(rec, t, contiguous) }
		out.Tensors = append(out.Tensors, RawTensor{Name: nk, DType: t.st.dtype, Shape: append([]int(nil), t.size...), open: open})
	}
	return out, nil
}

// checkRecord bounds a storage record's sizes by the file's, so that a
// lying zip directory cannot make a reader allocate more than the data can
// fill: a stored record must lie inside the file, and a deflated one
// cannot expand more than deflate's maximum ratio (1032:1).
func checkRecord(rec *zip.File, size int64) error {
	switch rec.Method {
	case zip.Store:
		off, err := rec.DataOffset()
		if err != nil {
			return err
		}
		if rec.CompressedSize64 != rec.UncompressedSize64 || off < 0 || rec.CompressedSize64 > uint64(size-off) {
			return fmt.Errorf("stored record %s of %d bytes at offset %d does not fit the %d-byte file: %w", rec.Name, rec.UncompressedSize64, off, size, ErrFormat)
		}
	case zip.Deflate:
		if rec.UncompressedSize64/1032 > rec.CompressedSize64 || rec.CompressedSize64 > uint64(size) {
			return fmt.Errorf("deflated record %s claims %d bytes from %d: %w", rec.Name, rec.UncompressedSize64, rec.CompressedSize64, ErrFormat)
		}
	}
	return nil
}

// checkView checks that the view lies inside its storage and reports
// whether it is contiguous (row-major strides; dimensions of size 1 may
// have any stride).
func (t *tensorRef) checkView() (contiguous bool, err error) {
	n := numel(t.size)
	if n == 0 {
		return true, nil
	}
	maxIdx := t.offset
	for i, s := range t.size {
		if t.stride[i] > 0 && int64(s-1) > (math.MaxInt64-maxIdx)/t.stride[i] {
			return false, fmt.Errorf("size %v stride %v overflow", t.size, t.stride)
		}
		maxIdx += int64(s-1) * t.stride[i]
	}
	if maxIdx >= t.st.numel {
		return false, fmt.Errorf("view offset %d size %v stride %v reaches element %d of a %d-element storage", t.offset, t.size, t.stride, maxIdx, t.st.numel)
	}
	want := int64(1)
	for d := len(t.size) - 1; d >= 0; d-- {
		if t.size[d] != 1 && t.stride[d] != want {
			return false, nil
		}
		want *= int64(t.size[d])
	}
	return true, nil
}

// rawView returns the bytes of view t of the storage in record rec. The
// record is read through the zip reader from its start to its end, so that
// its CRC-32 is checked: a contiguous view is streamed (the bytes before it
// are skipped, the rest of the record is read before the view's last bytes
// are returned, and a mismatch is returned instead of them); a strided one
// is gathered from the whole record, checked before it is returned.
func (tf *torchFile) rawView(rec *zip.File, t *tensorRef, contiguous bool) (io.Reader, error) {
	es := int64(t.st.dtype.Size())
	n := numel(t.size)
	if n == 0 {
		return bytes.NewReader(nil), nil
	}
	rc, err := rec.Open()
	if err != nil {
		return nil, recordError(rec, err)
	}
	if contiguous {
		return &recordView{rec: rec, rc: rc, skip: t.offset * es, left: n * es}, nil
	}
	defer rc.Close()
	raw := make([]byte, t.st.numel*es)
	if _, err := io.ReadFull(rc, raw); err != nil {
		return nil, recordError(rec, err)
	}
	if err := drainRecord(rec, rc); err != nil {
		return nil, err
	}
	return bytes.NewReader(t.strided(raw, n, es)), nil
}

// recordView streams the contiguous view [skip, skip+left) of a zip record
// opened with rec.Open. Before it returns the view's last bytes it reads
// the record to its end, where the zip reader checks the CRC-32; on a
// mismatch that Read returns no bytes and the error, so that io.ReadFull
// and io.ReadAll report it.
type recordView struct {
	rec        *zip.File
	rc         io.ReadCloser
	skip, left int64
	err        error
}

func (v *recordView) fail(err error) (int, error) {
	v.err = err
	v.rc.Close()
	return 0, err
}

func (v *recordView) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	if v.skip > 0 {
		if _, err := io.CopyN(io.Discard, v.rc, v.skip); err != nil {
			return v.fail(recordError(v.rec, err))
		}
		v.skip = 0
	}
	if v.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) < v.left {
		n, err := v.rc.Read(p)
		v.left -= int64(n)
		if err == io.EOF {
			return v.fail(recordError(v.rec, io.ErrUnexpectedEOF))
		}
		if err != nil {
			return v.fail(recordError(v.rec, err))
		}
		return n, nil
	}
	// The last bytes of the view: check the record before handing them out.
	p = p[:v.left]
	if _, err := io.ReadFull(v.rc, p); err != nil {
		return v.fail(recordError(v.rec, err))
	}
	if err := drainRecord(v.rec, v.rc); err != nil {
		return v.fail(err)
	}
	v.left = 0
	v.err = io.EOF
	v.rc.Close()
	return len(p), nil
}
