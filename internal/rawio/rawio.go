// Package rawio reads and writes slices of fixed-size numbers as
// little-endian bytes without a per-element step or a temporary copy on
// little-endian machines (a view of the slice's memory), and with one on
// others. The snapshot writers use it to stream large tensors straight to a
// file.
package rawio

import (
	"encoding/binary"
	"io"
	"math"
	"unsafe"
)

// littleEndian reports whether this machine stores numbers little-endian.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// Number is a fixed-size number type these functions move.
type Number interface {
	uint8 | uint16 | uint32 | uint64 | int32 | int64 | float32 | float64
}

func size[T Number]() int {
	var z T
	return int(unsafe.Sizeof(z))
}

// view returns x's memory as bytes.
func view[T Number](x []T) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), len(x)*size[T]())
}

// Bytes returns x as little-endian bytes: a view of x's memory on a
// little-endian machine (valid while x is, and changed with it), a copy
// otherwise.
func Bytes[T Number](x []T) []byte {
	if littleEndian {
		return view(x)
	}
	out := make([]byte, len(x)*size[T]())
	encode(out, x)
	return out
}

func encode[T Number](dst []byte, x []T) {
	le := binary.LittleEndian
	for i, v := range x {
		switch any(v).(type) {
		case uint8:
			dst[i] = byte(uint8(v))
		case uint16:
			le.PutUint16(dst[2*i:], uint16(v))
		case uint32, int32:
			le.PutUint32(dst[4*i:], uint32(v))
		case float32:
			le.PutUint32(dst[4*i:], math.Float32bits(float32(v)))
		case uint64, int64:
			le.PutUint64(dst[8*i:], uint64(v))
		case float64:
			le.PutUint64(dst[8*i:], math.Float64bits(float64(v)))
		}
	}
}

func decode[T Number](dst []T, b []byte) {
	le := binary.LittleEndian
	for i := range dst {
		var v any
		switch any(dst[i]).(type) {
		case uint8:
			v = b[i]
		case uint16:
			v = le.Uint16(b[2*i:])
		case uint32:
			v = le.Uint32(b[4*i:])
		case int32:
			v = int32(le.Uint32(b[4*i:]))
		case float32:
			v = math.Float32frombits(le.Uint32(b[4*i:]))
		case uint64:
			v = le.Uint64(b[8*i:])
		case int64:
			v = int64(le.Uint64(b[8*i:]))
		case float64:
			v = math.Float64frombits(le.Uint64(b[8*i:]))
		}
		dst[i] = v.(T)
	}
}

// Write writes x to w as little-endian bytes.
func Write[T Number](w io.Writer, x []T) error {
	_, err := w.Write(Bytes(x))
	return err
}

// ReadFull fills dst with len(dst) little-endian numbers read from r
// (io.ReadFull's errors).
func ReadFull[T Number](r io.Reader, dst []T) error {
	if littleEndian {
		_, err := io.ReadFull(r, view(dst))
		return err
	}
	b := make([]byte, len(dst)*size[T]())
	if _, err := io.ReadFull(r, b); err != nil {
		return err
	}
	decode(dst, b)
	return nil
}
