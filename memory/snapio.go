package memory

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"

	"github.com/densitykv/densitykv/internal/rawio"
)

// The snapshot stream (format 2): the magic, then the policy's state as a
// sequence of fields written straight to the destination as they are
// encoded (nothing larger than a bufio buffer is held), then the seal:
// the trailer magic, the number of bytes before it, and the CRC-32C of
// every byte before the CRC. A reader decodes field by field into a new
// state, bounding every count before it allocates, and the policy takes
// the state only once the seal checks.
const (
	snapMagic2   = "DKVMEM02"
	snapTrailer2 = "DKVSEAL2"
)

var castagnoli = rawio.Castagnoli

// snapWriter encodes fields to w, counting and checksumming the bytes. The
// first error sticks; every later write is skipped.
type snapWriter struct {
	bw  *bufio.Writer
	cw  *rawio.CRCWriter
	err error
}

func newSnapWriter(w io.Writer) *snapWriter {
	cw := &rawio.CRCWriter{W: w}
	return &snapWriter{bw: bufio.NewWriterSize(cw, 1<<20), cw: cw}
}

func (w *snapWriter) bytes(p []byte) {
	if w.err == nil {
		_, w.err = w.bw.Write(p)
	}
}

func (w *snapWriter) u8(v uint8) { w.bytes([]byte{v}) }

func (w *snapWriter) u64(v uint64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	w.bytes(b[:])
}

func (w *snapWriter) int(v int) { w.u64(uint64(int64(v))) }

func (w *snapWriter) bool(v bool) {
	if v {
		w.u8(1)
	} else {
		w.u8(0)
	}
}

// slice writes len(x) then the values.
func snapSlice[T rawio.Number](w *snapWriter, x []T) {
	w.int(len(x))
	if w.err == nil {
		w.err = rawio.Write(w.bw, x)
	}
}

func (w *snapWriter) ints(x []int) {
	w.int(len(x))
	for _, v := range x {
		w.int(v)
	}
}

// tensor writes the dtype (0 float32, 1 bfloat16) and the values.
func (w *snapWriter) tensor(t tensor) {
	if t.b16 != nil {
		w.u8(1)
		snapSlice(w, t.b16)
		return
	}
	w.u8(0)
	snapSlice(w, t.f32)
}

// frame writes the id, the Ready flag and every layer's K and V.
func (w *snapWriter) frame(f *frame) {
	w.int(f.ID)
	w.bool(f.Ready)
	for l := range f.K {
		w.tensor(f.K[l])
		w.tensor(f.V[l])
	}
}

func (w *snapWriter) frames(fs []*frame) {
	w.int(len(fs))
	for _, f := range fs {
		w.frame(f)
	}
}

// seal flushes and writes the trailer and the checksum.
func (w *snapWriter) seal() error {
	w.bytes([]byte(snapTrailer2))
	if w.err == nil {
		w.err = w.bw.Flush()
	}
	if w.err != nil {
		return w.err
	}
	var b [12]byte
	binary.LittleEndian.PutUint64(b[:], uint64(w.cw.N)+8) // the bytes before the CRC
	if _, err := w.cw.Write(b[:8]); err != nil {
		return err
	}
	binary.LittleEndian.PutUint32(b[8:], w.cw.CRC)
	_, err := w.cw.W.Write(b[8:])
	return err
}

// snapReader decodes fields from r, checksumming the bytes. The first
// error sticks (later reads return zero values); errors wrap ErrSnapshot.
type snapReader struct {
	r    io.Reader
	name string // the policy, for errors
	crc  uint32
	n    int64
	err  error
}

// errTruncated marks a stream that ends before its seal.
var errTruncated = errors.New("truncated")

func (r *snapReader) fail(format string, a ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s: %s", ErrSnapshot, r.name, fmt.Sprintf(format, a...))
	}
}

func (r *snapReader) read(p []byte) bool {
	if r.err != nil {
		return false
	}
	k, err := io.ReadFull(r.r, p)
	r.crc = crc32.Update(r.crc, castagnoli, p[:k])
	r.n += int64(k)
	if err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			r.fail("%v at byte %d (the stream ends before its seal)", errTruncated, r.n)
		} else {
			r.fail("read at byte %d: %v", r.n, err)
		}
		return false
	}
	return true
}

func (r *snapReader) u8() uint8 {
	var b [1]byte
	r.read(b[:])
	return b[0]
}

func (r *snapReader) u64() uint64 {
	var b [8]byte
	r.read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

// int reads an integer that must lie in [lo, hi].
func (r *snapReader) int(what string, lo, hi int64) int {
	v := int64(r.u64())
	if r.err == nil && (v < lo || v > hi) {
		r.fail("%s %d outside [%d, %d]", what, v, lo, hi)
		return 0
	}
	return int(v)
}

func (r *snapReader) bool(what string) bool {
	switch v := r.u8(); v {
	case 0:
		return false
	case 1:
		return true
	default:
		r.fail("%s flag %d, want 0 or 1", what, v)
		return false
	}
}

// chunk is the largest allocation a count read from the stream can cause
// before the bytes are there: longer slices grow as they are read.
const chunk = 16 << 20

// snapRead reads a slice written by snapSlice; its length must be want
// (want ≥ 0) or at most max (want < 0).
func snapRead[T rawio.Number](r *snapReader, what string, want, max int) []T {
	lo, hi := int64(0), int64(max)
	if want >= 0 {
		lo, hi = int64(want), int64(want)
	}
	n := r.int(what+" length", lo, hi)
	if r.err != nil {
		return nil
	}
	var z T
	per := int(binary.Size(z))
	out := make([]T, 0, min(n, chunk/per))
	for len(out) < n && r.err == nil {
		k := min(n-len(out), chunk/per)
		out = append(out, make([]T, k)...)
		if err := readCRC(r, out[len(out)-k:]); err != nil {
			return nil
		}
	}
	return out
}

// readCRC fills dst from the stream.
func readCRC[T rawio.Number](r *snapReader, dst []T) error {
	if r.err != nil {
		return r.err
	}
	if err := rawio.ReadFull(&crcReader{r: r}, dst); err != nil {
		if r.err == nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				r.fail("%v at byte %d (the stream ends before its seal)", errTruncated, r.n)
			} else {
				r.fail("read at byte %d: %v", r.n, err)
			}
		}
		return r.err
	}
	return nil
}

// crcReader reads from the snapshot stream, checksumming.
type crcReader struct{ r *snapReader }

func (c *crcReader) Read(p []byte) (int, error) {
	k, err := c.r.r.Read(p)
	c.r.crc = crc32.Update(c.r.crc, castagnoli, p[:k])
	c.r.n += int64(k)
	return k, err
}

func (r *snapReader) ints(what string, max int, lo, hi int64) []int {
	n := r.int(what+" length", 0, int64(max))
	var out []int
	for i := 0; i < n && r.err == nil; i++ {
		out = append(out, r.int(what, lo, hi))
	}
	return out
}

// tensor reads a tensor of exactly n values.
func (r *snapReader) tensor(what string, n int) tensor {
	switch k := r.u8(); {
	case r.err != nil:
		return tensor{}
	case k == 0:
		return tensor{f32: snapRead[float32](r, what, n, 0)}
	case k == 1:
		return tensor{b16: snapRead[uint16](r, what, n, 0)}
	default:
		r.fail("%s dtype %d, want 0 (float32) or 1 (bfloat16)", what, k)
		return tensor{}
	}
}

// frame reads a frame of layers layers of n values per tensor, with an id
// in [0, maxID].
func (r *snapReader) frame(what string, layers, n int, maxID int) *frame {
	f := newFrame(r.int(what+" frame id", 0, int64(maxID)), layers)
	f.Ready = r.bool(what + " frame ready")
	for l := 0; l < layers && r.err == nil; l++ {
		f.K[l] = r.tensor(fmt.Sprintf("%s frame %d layer %d keys", what, f.ID, l), n)
		f.V[l] = r.tensor(fmt.Sprintf("%s frame %d layer %d values", what, f.ID, l), n)
	}
	return f
}

func (r *snapReader) frames(what string, layers, n, maxFrames, maxID int) []*frame {
	k := r.int(what+" frames", 0, int64(maxFrames))
	var out []*frame
	for i := 0; i < k && r.err == nil; i++ {
		out = append(out, r.frame(what, layers, n, maxID))
	}
	return out
}

// seal reads the trailer and checks the length and the checksum.
func (r *snapReader) seal() error {
	var magic [8]byte
	r.read(magic[:])
	if r.err == nil && string(magic[:]) != snapTrailer2 {
		r.fail("trailer %q at byte %d, want %q (the stream has more or other fields than its policy state)", magic[:], r.n-8, snapTrailer2)
	}
	before := r.n
	n := r.u64()
	if r.err == nil && int64(n) != before+8 {
		r.fail("the seal counts %d bytes, the stream has %d", n, before+8)
	}
	want := r.crc
	var b [4]byte
	if r.err == nil {
		if _, err := io.ReadFull(r.r, b[:]); err != nil {
			r.fail("%v: no checksum after the trailer", errTruncated)
		} else if got := binary.LittleEndian.Uint32(b[:]); got != want {
			r.fail("checksum %08x, want %08x", want, got)
		}
	}
	return r.err
}

// maxInt is the largest count a snapshot field may claim when no tighter
// bound is known (allocation still follows the bytes read).
const maxInt = math.MaxInt32
