package checkpoint

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
)

// StreamTensor is a tensor that WriteSafetensorsStream writes without
// holding its data: Write writes numel(Shape)·DType.Size() bytes,
// little-endian, in row-major order.
type StreamTensor struct {
	Name  string
	DType DType
	Shape []int
	Write func(w io.Writer) error
}

// WriteSafetensorsStream writes tensors (in the given order) and metadata
// as a safetensors file to w, the layout of WriteSafetensors, asking each
// tensor for its data in turn: a file larger than memory can be written
// piece by piece. A tensor that writes another number of bytes than its
// shape and dtype say is an error naming it.
func WriteSafetensorsStream(w io.Writer, tensors []StreamTensor, metadata map[string]string) error {
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
	sizes := make([]int64, len(tensors))
	for i, t := range tensors {
		if t.Name == "" || t.Name == "__metadata__" || hdr[t.Name] != nil {
			return fmt.Errorf("checkpoint: write safetensors: invalid or duplicate tensor name %q", t.Name)
		}
		if t.DType.Size() == 0 || t.Write == nil {
			return fmt.Errorf("checkpoint: write safetensors: tensor %q: dtype %q or no data", t.Name, t.DType)
		}
		for _, s := range t.Shape {
			if s < 0 {
				return fmt.Errorf("checkpoint: write safetensors: tensor %q: negative dimension in shape %v", t.Name, t.Shape)
			}
		}
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		sizes[i] = numel(shape) * int64(t.DType.Size())
		hdr[t.Name] = entry{DType: t.DType, Shape: shape, Offsets: []int64{off, off + sizes[i]}}
		off += sizes[i]
	}
	h, err := json.Marshal(hdr)
	if err != nil {
		return fmt.Errorf("checkpoint: write safetensors: header: %w", err)
	}
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	var lb [8]byte
	binary.LittleEndian.PutUint64(lb[:], uint64(len(h)))
	if _, err := w.Write(append(lb[:], h...)); err != nil {
		return fmt.Errorf("checkpoint: write safetensors: %w", err)
	}
	for i, t := range tensors {
		cw := &countWriter{w: w}
		if err := t.Write(cw); err != nil {
			return fmt.Errorf("checkpoint: write safetensors: tensor %q: %w", t.Name, err)
		}
		if cw.n != sizes[i] {
			return fmt.Errorf("checkpoint: write safetensors: tensor %q: %d bytes written, its shape %v of %s holds %d", t.Name, cw.n, t.Shape, t.DType, sizes[i])
		}
	}
	return nil
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
