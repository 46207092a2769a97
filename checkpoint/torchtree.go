package checkpoint

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// TorchTensor is a tensor read by TorchTree: its dtype, shape and
// values (strides and storage offset applied), decoded on request.
type TorchTensor struct {
	DType DType
	Shape []int
	raw   []byte // numel(Shape) values, row-major, little-endian
}

// Elems returns the number of values.
func (t *TorchTensor) Elems() int { return int(numel(t.Shape)) }

// Float64 returns the values as float64, whatever the dtype (floats
// exactly, integers exactly up to 2^53, bool as 0 and 1).
func (t *TorchTensor) Float64() []float64 {
	es := t.DType.Size()
	out := make([]float64, t.Elems())
	for k := range out {
		p := t.raw[k*es:]
		if t.DType == F64 {
			out[k] = math.Float64frombits(binary.LittleEndian.Uint64(p))
		} else if t.DType.IsFloat() {
			out[k] = float64(t.DType.float32At(p))
		} else {
			out[k] = float64(intAt(t.DType, p))
		}
	}
	return out
}

// Int64 returns the values of an integer or bool tensor; another dtype is
// an error.
func (t *TorchTensor) Int64() ([]int64, error) {
	if t.DType.IsFloat() {
		return nil, fmt.Errorf("dtype %s is not an integer type", t.DType)
	}
	es := t.DType.Size()
	out := make([]int64, t.Elems())
	for k := range out {
		out[k] = intAt(t.DType, t.raw[k*es:])
	}
	return out, nil
}

// intAt decodes the little-endian integer of dtype d at the start of p.
func intAt(d DType, p []byte) int64 {
	switch d {
	case I64:
		return int64(binary.LittleEndian.Uint64(p))
	case I32:
		return int64(int32(binary.LittleEndian.Uint32(p)))
	case I16:
		return int64(int16(binary.LittleEndian.Uint16(p)))
	case I8:
		return int64(int8(p[0]))
	}
	return int64(p[0]) // U8, Bool
}

// TorchTree reads a PyTorch zip checkpoint whose top level is any mix of
// plain Python data and tensors, as the authors' diagnostic exports are
// (a dictionary of strings, numbers, tuples, lists and dictionaries with
// tensors among them): dictionaries (string keys only) become
// map[string]any, lists and tuples []any, numbers int64 or float64,
// strings, bools, None nil, and tensors *TorchTensor (every dtype the
// readers know; each storage read once). Another object, an integer
// beyond int64 or nesting deeper than 32 is an error naming its key path.
func TorchTree(r io.ReaderAt, size int64) (any, error) {
	top, tf, err := unpickleTorch(r, size)
	if err != nil {
		return nil, err
	}
	out, err := treeValue(tf, top, "top level", 0)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: torch: %w", err)
	}
	return out, nil
}

// TorchTreeFile is TorchTree on the file at path.
func TorchTreeFile(p string) (any, error) {
	return onTorchFile(p, func(r io.ReaderAt, size int64) (any, error) { return TorchTree(r, size) })
}

// treeValue converts an unpickled value, tensors included; path names it
// in errors.
func treeValue(tf *torchFile, v any, path string, depth int) (any, error) {
	return convertValue(v, path, depth, func(x *tensorRef) (any, error) {
		raw, err := tf.gather(x)
		if err != nil {
			return nil, err
		}
		return &TorchTensor{DType: x.st.dtype, Shape: append([]int(nil), x.size...), raw: raw}, nil
	}, " (dict, list, tuple, number, string, bool, None and tensors are read)")
}

// gather returns the bytes of view t, contiguous.
func (tf *torchFile) gather(t *tensorRef) ([]byte, error) {
	if _, err := t.checkView(); err != nil {
		return nil, err
	}
	n := numel(t.size)
	es := int64(t.st.dtype.Size())
	if n == 0 {
		return nil, nil
	}
	raw, err := tf.bytes(t.st)
	if err != nil {
		return nil, err
	}
	return t.strided(raw, n, es), nil
}

// strided copies view t's n elements of es bytes out of its storage's
// bytes raw, in row-major order of the view.
func (t *tensorRef) strided(raw []byte, n, es int64) []byte {
	out := make([]byte, 0, n*es)
	idx := make([]int, len(t.size))
	for k := int64(0); k < n; k++ {
		e := t.offset
		for d, i := range idx {
			e += int64(i) * t.stride[d]
		}
		out = append(out, raw[e*es:(e+1)*es]...)
		for d := len(idx) - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < t.size[d] {
				break
			}
			idx[d] = 0
		}
	}
	return out
}
