package checkpoint

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
)

// DType is a tensor element type, spelled as in safetensors headers.
type DType string

// Element types understood by the readers.
const (
	F64  DType = "F64"
	F32  DType = "F32"
	F16  DType = "F16"
	BF16 DType = "BF16"
	// F8E4M3 and F8E5M2 are the 8-bit floats of PyTorch's float8_e4m3fn
	// (no infinities, one NaN pattern, range ±448) and float8_e5m2 (IEEE
	// style, range ±57344), as safetensors spells them. Every value of
	// either is a float32 and a bfloat16 exactly.
	F8E4M3 DType = "F8_E4M3"
	F8E5M2 DType = "F8_E5M2"
	I64    DType = "I64"
	I32    DType = "I32"
	I16    DType = "I16"
	I8     DType = "I8"
	U8     DType = "U8"
	Bool   DType = "BOOL"
)

// Size returns the element size in bytes, or 0 for an unknown type.
func (d DType) Size() int {
	switch d {
	case F64, I64:
		return 8
	case F32, I32:
		return 4
	case F16, BF16, I16:
		return 2
	case I8, U8, Bool, F8E4M3, F8E5M2:
		return 1
	}
	return 0
}

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool {
	return d == F64 || d == F32 || d == F16 || d == BF16 || d == F8E4M3 || d == F8E5M2
}

// ErrFormat is wrapped by every error about a malformed file.
var ErrFormat = errors.New("malformed file")

// ErrChecksum is wrapped by every error about data whose checksum does not
// match the one the file records (the CRC-32 of a PyTorch zip record).
var ErrChecksum = errors.New("checksum mismatch")

// MaxHeaderBytes bounds the JSON header of a safetensors file (100 MB, as
// the reference implementation does).
const MaxHeaderBytes = 100 << 20

// Info describes one tensor of a safetensors file.
type Info struct {
	Name  string
	DType DType
	Shape []int
	// Begin and End are byte offsets into the data section.
	Begin, End int64
}

// Elems returns the number of elements of the tensor (1 for a scalar).
func (i Info) Elems() int64 { return numel(i.Shape) }

func numel(shape []int) int64 {
	n := int64(1)
	for _, s := range shape {
		n *= int64(s)
	}
	return n
}

// Safetensors is an open safetensors file. It reads tensors on demand from
// its io.ReaderAt and is safe for concurrent use when the ReaderAt is.
type Safetensors struct {
	r        io.ReaderAt
	dataOff  int64
	infos    map[string]Info
	names    []string // sorted
	Metadata map[string]string
	closer   io.Closer
}

// OpenSafetensors opens the safetensors file at path. Close releases it.
func OpenSafetensors(path string) (*Safetensors, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: safetensors: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("checkpoint: safetensors: %w", err)
	}
	s, err := NewSafetensors(f, st.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	s.closer = f
	return s, nil
}

// Close closes the underlying file when the Safetensors was opened by path.
func (s *Safetensors) Close() error {
	if s.closer != nil {
		return s.closer.Close()
	}
	return nil
}

// NewSafetensors parses the header of a safetensors file of size bytes read
// through r. Every tensor's byte range is checked against its dtype and shape
// and against the file size; ranges must not overlap.
func NewSafetensors(r io.ReaderAt, size int64) (*Safetensors, error) {
	var lb [8]byte
	if size < 8 {
		return nil, fmt.Errorf("checkpoint: safetensors: file of %d bytes has no header length: %w", size, ErrFormat)
	}
	if _, err := r.ReadAt(lb[:], 0); err != nil {
		return nil, fmt.Errorf("checkpoint: safetensors: reading header length: %w", err)
	}
	hl := binary.LittleEndian.Uint64(lb[:])
	if hl > MaxHeaderBytes || int64(hl) > size-8 {
		return nil, fmt.Errorf("checkpoint: safetensors: header length %d exceeds file size %d or limit %d: %w", hl, size, MaxHeaderBytes, ErrFormat)
	}
	hdr := make([]byte, hl)
	if _, err := r.ReadAt(hdr, 8); err != nil {
		return nil, fmt.Errorf("checkpoint: safetensors: reading header: %w", err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &raw); err != nil {
		return nil, fmt.Errorf("checkpoint: safetensors: header JSON: %v: %w", err, ErrFormat)
	}
	s := &Safetensors{r: r, dataOff: 8 + int64(hl), infos: make(map[string]Info, len(raw))}
	dataLen := size - s.dataOff
	for name, msg := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &s.Metadata); err != nil {
				return nil, fmt.Errorf("checkpoint: safetensors: __metadata__ must map strings to strings: %v: %w", err, ErrFormat)
			}
			continue
		}
		var e struct {
			DType   DType   `json:"dtype"`
			Shape   []int   `json:"shape"`
			Offsets []int64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(msg, &e); err != nil {
			return nil, fmt.Errorf("checkpoint: safetensors: tensor %q: %v: %w", name, err, ErrFormat)
		}
		es := e.DType.Size()
		if es == 0 {
			return nil, fmt.Errorf("checkpoint: safetensors: tensor %q: unsupported dtype %q: %w", name, e.DType, ErrFormat)
		}
		if len(e.Offsets) != 2 {
			return nil, fmt.Errorf("checkpoint: safetensors: tensor %q: data_offsets has %d values, want 2: %w", name, len(e.Offsets), ErrFormat)
		}
		n := int64(1)
		for _, d := range e.Shape {
			if d < 0 || (d > 0 && n > math.MaxInt64/int64(es)/int64(d)) {
				return nil, fmt.Errorf("checkpoint: safetensors: tensor %q: invalid shape %v: %w", name, e.Shape, ErrFormat)
			}
			n *= int64(d)
		}
		b, en := e.Offsets[0], e.Offsets[1]
		if b < 0 || en < b || en > dataLen {
			return nil, fmt.Errorf("checkpoint: safetensors: tensor %q: data offsets [%d, %d) outside the %d data bytes: %w", name, b, en, dataLen, ErrFormat)
		}
		if en-b != n*int64(es) {
			return nil, fmt.Errorf("checkpoint: safetensors: tensor %q: %d data bytes, want %d for %s %v: %w", name, en-b, n*int64(es), e.DType, e.Shape, ErrFormat)
		}
		if e.Shape == nil {
			e.Shape = []int{}
		}
		s.infos[name] = Info{Name: name, DType: e.DType, Shape: e.Shape, Begin: b, End: en}
		s.names = append(s.names, name)
	}
	sort.Strings(s.names)
	// Overlap check (zero-length tensors may share an offset).
	byOff := make([]Info, 0, len(s.names))
	for _, n := range s.names {
		if i := s.infos[n]; i.End > i.Begin {
			byOff = append(byOff, i)
		}
	}
	sort.Slice(byOff, func(a, b int) bool { return byOff[a].Begin < byOff[b].Begin })
	for i := 1; i < len(byOff); i++ {
		if byOff[i].Begin < byOff[i-1].End {
			return nil, fmt.Errorf("checkpoint: safetensors: tensors %q and %q overlap: %w", byOff[i-1].Name, byOff[i].Name, ErrFormat)
		}
	}
	return s, nil
}

// Names returns the tensor names in sorted order.
func (s *Safetensors) Names() []string { return append([]string(nil), s.names...) }

// Info returns the description of tensor name.
func (s *Safetensors) Info(name string) (Info, bool) {
	i, ok := s.infos[name]
	return i, ok
}

func (s *Safetensors) raw(name string) (Info, []byte, error) {
	i, ok := s.infos[name]
	if !ok {
		return Info{}, nil, fmt.Errorf("checkpoint: safetensors: no tensor %q", name)
	}
	buf := make([]byte, i.End-i.Begin)
	if len(buf) > 0 {
		if _, err := s.r.ReadAt(buf, s.dataOff+i.Begin); err != nil {
			return i, nil, fmt.Errorf("checkpoint: safetensors: reading tensor %q: %w", name, err)
		}
	}
	return i, buf, nil
}

// Float32 reads tensor name converted to float32 (floating types only;
// F64 is rounded to nearest).
func (s *Safetensors) Float32(name string) ([]float32, []int, error) {
	i, b, err := s.raw(name)
	if err != nil {
		return nil, nil, err
	}
	out, err := decodeFloat32(i.DType, b)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint: safetensors: tensor %q: %w", name, err)
	}
	return out, append([]int(nil), i.Shape...), nil
}

// Float64 reads tensor name converted to float64 (floating types only).
func (s *Safetensors) Float64(name string) ([]float64, []int, error) {
	i, b, err := s.raw(name)
	if err != nil {
		return nil, nil, err
	}
	if i.DType == F64 {
		out := make([]float64, len(b)/8)
		for k := range out {
			out[k] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*k:]))
		}
		return out, append([]int(nil), i.Shape...), nil
	}
	f, err := decodeFloat32(i.DType, b)
	if err != nil {
		return nil, nil, fmt.Errorf("checkpoint: safetensors: tensor %q: %w", name, err)
	}
	out := make([]float64, len(f))
	for k, v := range f {
		out[k] = float64(v)
	}
	return out, append([]int(nil), i.Shape...), nil
}

// Int64 reads an integer (or BOOL) tensor name as int64.
func (s *Safetensors) Int64(name string) ([]int64, []int, error) {
	i, b, err := s.raw(name)
	if err != nil {
		return nil, nil, err
	}
	es := i.DType.Size()
	out := make([]int64, len(b)/es)
	for k := range out {
		p := b[k*es:]
		switch i.DType {
		case I64:
			out[k] = int64(binary.LittleEndian.Uint64(p))
		case I32:
			out[k] = int64(int32(binary.LittleEndian.Uint32(p)))
		case I16:
			out[k] = int64(int16(binary.LittleEndian.Uint16(p)))
		case I8:
			out[k] = int64(int8(p[0]))
		case U8, Bool:
			out[k] = int64(p[0])
		default:
			return nil, nil, fmt.Errorf("checkpoint: safetensors: tensor %q: dtype %s is not an integer type", name, i.DType)
		}
	}
	return out, append([]int(nil), i.Shape...), nil
}

// decodeFloat32 converts raw little-endian floating values to float32.
func decodeFloat32(d DType, b []byte) ([]float32, error) {
	es := d.Size()
	if !d.IsFloat() {
		return nil, fmt.Errorf("dtype %s is not a floating-point type", d)
	}
	out := make([]float32, len(b)/es)
	for k := range out {
		out[k] = d.float32At(b[k*es:])
	}
	return out, nil
}

// Decode converts the little-endian values b of floating-point dtype d to
// float32 into dst (len(b)/d.Size() of them), exactly but for F64's
// rounding to nearest. Another dtype gives zeros.
func (d DType) Decode(dst []float32, b []byte) {
	es := d.Size()
	switch d {
	case F32:
		for k := range dst {
			dst[k] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*k:]))
		}
	case BF16:
		for k := range dst {
			dst[k] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*k:])) << 16)
		}
	default:
		for k := range dst {
			dst[k] = d.float32At(b[k*es:])
		}
	}
}

// float32At decodes the little-endian value of floating-point dtype d at
// the start of p to float32 (exactly, but for F64's rounding); 0 for
// another dtype.
func (d DType) float32At(p []byte) float32 {
	switch d {
	case F32:
		return math.Float32frombits(binary.LittleEndian.Uint32(p))
	case F64:
		return float32(math.Float64frombits(binary.LittleEndian.Uint64(p)))
	case F16:
		return HalfToFloat32(binary.LittleEndian.Uint16(p))
	case BF16:
		return math.Float32frombits(uint32(binary.LittleEndian.Uint16(p)) << 16)
	case F8E4M3:
		return E4M3ToFloat32(p[0])
	case F8E5M2:
		return E5M2ToFloat32(p[0])
	}
	return 0
}

// E4M3ToFloat32 converts a float8_e4m3fn value (sign, 4 exponent bits of
// bias 7, 3 mantissa bits; S.1111.111 is NaN, there are no infinities) to
// float32 exactly.
func E4M3ToFloat32(b byte) float32 {
	sign := uint32(b>>7) << 31
	exp := uint32(b>>3) & 0xf
	man := uint32(b) & 7
	switch {
	case exp == 0xf && man == 7:
		return math.Float32frombits(sign | 0x7fc00000)
	case exp == 0:
		v := float32(man) * (1.0 / (1 << 9)) // subnormal: man · 2^−9
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+120)<<23 | man<<20)
}

// E5M2ToFloat32 converts a float8_e5m2 value (sign, 5 exponent bits of
// bias 15, 2 mantissa bits, IEEE infinities and NaNs) to float32 exactly:
// it is the upper byte of an IEEE binary16.
func E5M2ToFloat32(b byte) float32 { return HalfToFloat32(uint16(b) << 8) }

// HalfToFloat32 converts an IEEE 754 binary16 value to float32 exactly.
func HalfToFloat32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // Inf / NaN
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp == 0:
		if man == 0 {
			return math.Float32frombits(sign)
		}
		// Subnormal: value = man · 2^−24.
		v := float32(man) * (1.0 / (1 << 24))
		if sign != 0 {
			v = -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
}

// WriteTensor is one tensor to write: Data is []float32, []float64, []int32
// or []int64 and must hold numel(Shape) values, or Encoded holding them
// already encoded (e.g. BF16, F8_E4M3).
type WriteTensor struct {
	Name  string
	Shape []int
	Data  any
}

// Encoded is tensor data already encoded as DType, little-endian, for
// WriteSafetensors.
type Encoded struct {
	DType DType
	Bytes []byte
}

// WriteSafetensors writes tensors (in the given order) and metadata as a
// safetensors file to w. Data types: []float32 → F32, []float64 → F64,
// []int32 → I32, []int64 → I64, Encoded → its DType.
func WriteSafetensors(w io.Writer, tensors []WriteTensor, metadata map[string]string) error {
	type entry struct {
		DType   DType   `json:"dtype"`
		Shape   []int   `json:"shape"`
		Offsets []int64 `json:"data_offsets"`
	}
	hdr := make(map[string]any, len(tensors)+1)
	if len(metadata) > 0 {
		hdr["__metadata__"] = metadata
	}
	var off int64
	seen := map[string]bool{}
	for _, t := range tensors {
		if t.Name == "" || t.Name == "__metadata__" || seen[t.Name] {
			return fmt.Errorf("checkpoint: write safetensors: invalid or duplicate tensor name %q", t.Name)
		}
		seen[t.Name] = true
		var d DType
		var n int
		switch x := t.Data.(type) {
		case []float32:
			d, n = F32, len(x)
		case []float64:
			d, n = F64, len(x)
		case []int32:
			d, n = I32, len(x)
		case []int64:
			d, n = I64, len(x)
		case Encoded:
			if x.DType.Size() == 0 || len(x.Bytes)%x.DType.Size() != 0 {
				return fmt.Errorf("checkpoint: write safetensors: tensor %q: %d bytes of dtype %q", t.Name, len(x.Bytes), x.DType)
			}
			d, n = x.DType, len(x.Bytes)/x.DType.Size()
		default:
			return fmt.Errorf("checkpoint: write safetensors: tensor %q: unsupported data type %T", t.Name, t.Data)
		}
		for _, s := range t.Shape {
			if s < 0 {
				return fmt.Errorf("checkpoint: write safetensors: tensor %q: negative dimension in shape %v", t.Name, t.Shape)
			}
		}
		if int64(n) != numel(t.Shape) {
			return fmt.Errorf("checkpoint: write safetensors: tensor %q: %d values for shape %v", t.Name, n, t.Shape)
		}
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		sz := int64(n * d.Size())
		hdr[t.Name] = entry{DType: d, Shape: shape, Offsets: []int64{off, off + sz}}
		off += sz
	}
	h, err := json.Marshal(hdr)
	if err != nil {
		return fmt.Errorf("checkpoint: write safetensors: header: %w", err)
	}
	for len(h)%8 != 0 { // align the data section to 8 bytes, as the reference writer does
		h = append(h, ' ')
	}
	var lb [8]byte
	binary.LittleEndian.PutUint64(lb[:], uint64(len(h)))
	if _, err := w.Write(lb[:]); err != nil {
		return fmt.Errorf("checkpoint: write safetensors: %w", err)
	}
	if _, err := w.Write(h); err != nil {
		return fmt.Errorf("checkpoint: write safetensors: %w", err)
	}
	buf := make([]byte, 0, 1<<16)
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		_, err := w.Write(buf)
		buf = buf[:0]
		return err
	}
	for _, t := range tensors {
		switch x := t.Data.(type) {
		case []float32:
			for _, v := range x {
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
				if len(buf) >= 1<<16 {
					if err := flush(); err != nil {
						return fmt.Errorf("checkpoint: write safetensors: tensor %q: %w", t.Name, err)
					}
				}
			}
		case []float64:
			for _, v := range x {
				buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(v))
				if len(buf) >= 1<<16 {
					if err := flush(); err != nil {
						return fmt.Errorf("checkpoint: write safetensors: tensor %q: %w", t.Name, err)
					}
				}
			}
		case []int32:
			for _, v := range x {
				buf = binary.LittleEndian.AppendUint32(buf, uint32(v))
			}
		case []int64:
			for _, v := range x {
				buf = binary.LittleEndian.AppendUint64(buf, uint64(v))
			}
		case Encoded:
			if err := flush(); err != nil {
				return fmt.Errorf("checkpoint: write safetensors: tensor %q: %w", t.Name, err)
			}
			if _, err := w.Write(x.Bytes); err != nil {
				return fmt.Errorf("checkpoint: write safetensors: tensor %q: %w", t.Name, err)
			}
		}
		if err := flush(); err != nil {
			return fmt.Errorf("checkpoint: write safetensors: tensor %q: %w", t.Name, err)
		}
	}
	return nil
}

// WriteSafetensorsFile writes a safetensors file atomically (temporary file
// + rename).
func WriteSafetensorsFile(path string, tensors []WriteTensor, metadata map[string]string) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("checkpoint: write safetensors: %w", err)
	}
	if err := WriteSafetensors(f, tensors, metadata); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("checkpoint: write safetensors: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("checkpoint: write safetensors: %w", err)
	}
	return nil
}
