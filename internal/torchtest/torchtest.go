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

// KV is one dictionary entry: Value is a *Tensor, a Dict, or plain data:
// int, float64, string, bool, nil or a List of these.
type KV struct {
	Key   string
	Value any
}

// Dict is an ordered dictionary.
type Dict []KV

// List is a Python list of values as a KV's Value may hold.
type List []any

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
	p.Op(0x80, 2)
	if err := p.dict(top, &storages); err != nil {
		return err
	}
	p.Op('.')
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
	if err := add("archive/data.pkl", p.B); err != nil {
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

// Pickler appends pickle protocol-2 opcodes to B: the few that torch.save
// archives use (also for hand-built archives in tests).
type Pickler struct{ B []byte }

// Op appends raw opcode bytes.
func (p *Pickler) Op(b ...byte) { p.B = append(p.B, b...) }

// Str appends a BINUNICODE string.
func (p *Pickler) Str(s string) {
	p.Op('X')
	p.B = binary.LittleEndian.AppendUint32(p.B, uint32(len(s)))
	p.B = append(p.B, s...)
}

// Int appends a BININT.
func (p *Pickler) Int(v int) {
	p.Op('J')
	p.B = binary.LittleEndian.AppendUint32(p.B, uint32(int32(v)))
}

// Global appends a GLOBAL mod.name.
func (p *Pickler) Global(mod, name string) { p.Op('c'); p.B = append(p.B, mod+"\n"+name+"\n"...) }

// Tuple appends a tuple of ints.
func (p *Pickler) Tuple(vs ...int) {
	p.Op('(')
	for _, v := range vs {
		p.Int(v)
	}
	p.Op('t')
}

type pickler struct{ Pickler }

func (p *pickler) dict(d Dict, storages *[][]byte) error {
	p.Op('}', '(')
	for _, e := range d {
		p.Str(e.Key)
		if err := p.value(e.Key, e.Value, storages); err != nil {
			return err
		}
	}
	p.Op('u')
	return nil
}

func (p *pickler) value(key string, value any, storages *[][]byte) error {
	switch v := value.(type) {
	case *Tensor:
		if err := p.tensor(v, storages); err != nil {
			return fmt.Errorf("torchtest: %s: %w", key, err)
		}
	case Dict:
		return p.dict(v, storages)
	case List:
		p.Op(']', '(')
		for i, x := range v {
			if err := p.value(fmt.Sprintf("%s[%d]", key, i), x, storages); err != nil {
				return err
			}
		}
		p.Op('e')
	case int:
		if int64(v) != int64(int32(v)) {
			return fmt.Errorf("torchtest: %s: int %d beyond 32 bits", key, v)
		}
		p.Int(v)
	case float64:
		p.Op('G')
		p.B = binary.BigEndian.AppendUint64(p.B, math.Float64bits(v))
	case string:
		p.Str(v)
	case bool:
		if v {
			p.Op(0x88)
		} else {
			p.Op(0x89)
		}
	case nil:
		p.Op('N')
	default:
		return fmt.Errorf("torchtest: %s: value %T is not a *Tensor, Dict, List, int, float64, string, bool or nil", key, value)
	}
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
	p.Global("torch._utils", "_rebuild_tensor_v2")
	p.Op('(')
	p.Op('(')
	p.Str("storage")
	p.Global("torch", "FloatStorage")
	p.Str(key)
	p.Str("cpu")
	p.Int(n)
	p.Op('t', 'Q')
	p.Int(0)
	p.Tuple(t.Shape...)
	p.Tuple(stride...)
	p.Op(0x89) // False
	p.Global("collections", "OrderedDict")
	p.Op(')', 'R')
	p.Op('t', 'R')
	return nil
}
