// Package torchtest writes small PyTorch zip checkpoints (the torch.save
// format since 1.6) for tests: a pickled dictionary, possibly nested, of
// contiguous float32 tensors, each in its own storage record.
package torchtest

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strconv"
)

// Tensor is a contiguous row-major float32 tensor.
type Tensor struct {
	Shape []int
	Data  []float32
}

// KV is one dictionary entry: Value is a *Tensor or a Dict.
type KV struct {
	Key   string
	Value any
}

// Dict is an ordered dictionary.
type Dict []KV

// Options varies the archive for tests of malformed files.
type Options struct {
	// Omit drops the zip records whose names it accepts (the records are
	// "archive/data.pkl" and "archive/data/<n>", n = 0, 1, … in the order
	// the tensors appear).
	Omit func(record string) bool
}

// Write writes top as a PyTorch zip checkpoint to w.
func Write(w io.Writer, top Dict, opt Options) error {
	p := &pickler{}
	var storages [][]byte
	p.op(0x80, 2)
	if err := p.dict(top, &storages); err != nil {
		return err
	}
	p.op('.')
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	add := func(name string, b []byte) error {
		if opt.Omit != nil && opt.Omit(name) {
			return nil
		}
		f, err := zw.Create(name)
		if err != nil {
			return err
		}
		_, err = f.Write(b)
		return err
	}
	if err := add("archive/data.pkl", p.b); err != nil {
		return err
	}
	for i, s := range storages {
		if err := add("archive/data/"+strconv.Itoa(i), s); err != nil {
			return err
		}
	}
	if err := add("archive/version", []byte("3\n")); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// Bytes is Write into a byte slice; it panics on a malformed Dict.
func Bytes(top Dict, opt Options) []byte {
	var b bytes.Buffer
	if err := Write(&b, top, opt); err != nil {
		panic(err)
	}
	return b.Bytes()
}

type pickler struct{ b []byte }

func (p *pickler) op(b ...byte) { p.b = append(p.b, b...) }

func (p *pickler) str(s string) {
	p.op('X')
	p.b = binary.LittleEndian.AppendUint32(p.b, uint32(len(s)))
	p.b = append(p.b, s...)
}

func (p *pickler) int(v int) {
	p.op('J')
	p.b = binary.LittleEndian.AppendUint32(p.b, uint32(int32(v)))
}

func (p *pickler) global(mod, name string) { p.op('c'); p.b = append(p.b, mod+"\n"+name+"\n"...) }

func (p *pickler) tuple(vs []int) {
	p.op('(')
	for _, v := range vs {
		p.int(v)
	}
	p.op('t')
}

func (p *pickler) dict(d Dict, storages *[][]byte) error {
	p.op('}', '(')
	for _, e := range d {
		p.str(e.Key)
		switch v := e.Value.(type) {
		case *Tensor:
			if err := p.tensor(v, storages); err != nil {
				return fmt.Errorf("torchtest: %s: %w", e.Key, err)
			}
		case Dict:
			if err := p.dict(v, storages); err != nil {
				return err
			}
		default:
			return fmt.Errorf("torchtest: %s: value %T is neither *Tensor nor Dict", e.Key, e.Value)
		}
	}
	p.op('u')
	return nil
}

// tensor pickles torch._utils._rebuild_tensor_v2(storage, 0, size, stride,
// False, OrderedDict()) with a persistent-id storage.
func (p *pickler) tensor(t *Tensor, storages *[][]byte) error {
	n := 1
	for _, s := range t.Shape {
		n *= s
	}
	if n != len(t.Data) {
		return fmt.Errorf("shape %v holds %d values, have %d", t.Shape, n, len(t.Data))
	}
	stride := make([]int, len(t.Shape))
	st := 1
	for i := len(t.Shape) - 1; i >= 0; i-- {
		stride[i] = st
		st *= t.Shape[i]
	}
	key := strconv.Itoa(len(*storages))
	raw := make([]byte, 0, 4*n)
	for _, v := range t.Data {
		raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(v))
	}
	*storages = append(*storages, raw)
	p.global("torch._utils", "_rebuild_tensor_v2")
	p.op('(')
	p.op('(')
	p.str("storage")
	p.global("torch", "FloatStorage")
	p.str(key)
	p.str("cpu")
	p.int(n)
	p.op('t', 'Q')
	p.int(0)
	p.tuple(t.Shape)
	p.tuple(stride)
	p.op(0x89) // False
	p.global("collections", "OrderedDict")
	p.op(')', 'R')
	p.op('t', 'R')
	return nil
}
