package checkpoint

import (
	"bytes"
	"encoding/binary"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/internal/torchtest"
)

// TestTorchTree: plain data and tensors mixed, as the authors' exports
// are, come back as Go values and TorchTensors: integer and half tensors
// (a strided view of an int64 storage) decoded exactly.
func TestTorchTree(t *testing.T) {
	b := torchtest.Bytes(torchtest.Dict{
		{Key: "format", Value: "v2"}, {Key: "n", Value: 1560},
		{Key: "layers", Value: torchtest.Dict{{Key: "0", Value: torchtest.Dict{
			{Key: "heads", Value: torchtest.List{0, 3}},
			{Key: "mass", Value: &torchtest.Tensor{Shape: []int{1, 2}, Data: []float32{0.25, 0.75}}},
		}}}},
	}, torchtest.Options{})
	v, err := TorchTree(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	top := v.(map[string]any)
	l0 := top["layers"].(map[string]any)["0"].(map[string]any)
	m := l0["mass"].(*TorchTensor)
	if top["format"] != "v2" || top["n"] != int64(1560) || !slices.Equal(l0["heads"].([]any), []any{int64(0), int64(3)}) ||
		!slices.Equal(m.Shape, []int{1, 2}) || !slices.Equal(m.Float64(), []float64{0.25, 0.75}) || m.DType != F32 {
		t.Fatalf("tree %v", top)
	}
	if _, err := m.Int64(); err == nil {
		t.Error("Int64 of a float tensor")
	}

	var ids, half []byte
	for _, x := range []int64{-5, 7, 1 << 40} {
		ids = binary.LittleEndian.AppendUint64(ids, uint64(x))
	}
	half = binary.LittleEndian.AppendUint16(half, 0x3c00) // 1.0
	half = binary.LittleEndian.AppendUint16(half, 0xc000) // −2.0
	raw := ptArchive(map[string][]struct {
		name string
		t    ptTensor
	}{"e": {
		{"ids", ptTensor{key: "0", storage: "LongStorage", numel: 3, size: []int{2}, stride: []int{2}}},
		{"h", ptTensor{key: "1", storage: "HalfStorage", numel: 2, size: []int{2}, stride: []int{1}}},
	}}, []string{"e"}, map[string][]byte{"0": ids, "1": half})
	v, err = TorchTree(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	e := v.(map[string]any)["e"].(map[string]any)
	got, err := e["ids"].(*TorchTensor).Int64()
	if err != nil || !slices.Equal(got, []int64{-5, 1 << 40}) {
		t.Errorf("strided int64 view: %v %v", got, err)
	}
	if h := e["h"].(*TorchTensor); !slices.Equal(h.Float64(), []float64{1, -2}) || h.DType != F16 {
		t.Errorf("half tensor: %v", h.Float64())
	}
	// A view beyond its storage names its key path.
	bad := ptArchive(map[string][]struct {
		name string
		t    ptTensor
	}{"e": {{"ids", ptTensor{key: "0", storage: "LongStorage", numel: 3, size: []int{3}, stride: []int{2}}}}}, []string{"e"}, map[string][]byte{"0": ids})
	if _, err := TorchTree(bytes.NewReader(bad), int64(len(bad))); err == nil || !strings.Contains(err.Error(), "top level.e.ids") {
		t.Errorf("view beyond the storage: %v", err)
	}
}

// TestWriteSafetensorsStream: tensors written piece by piece read back as
// written; a tensor that writes another number of bytes than its shape
// holds is an error naming it.
func TestWriteSafetensorsStream(t *testing.T) {
	var buf bytes.Buffer
	vals := []float32{1, 2, 3, 4, 5, 6}
	err := WriteSafetensorsStream(&buf, []StreamTensor{{Name: "a", DType: F32, Shape: []int{2, 3}, Write: func(w io.Writer) error {
		for _, v := range vals {
			if err := binary.Write(w, binary.LittleEndian, v); err != nil {
				return err
			}
		}
		return nil
	}}}, map[string]string{"k": "v"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSafetensors(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	got, shape, err := s.Float32("a")
	if err != nil || !slices.Equal(got, vals) || !slices.Equal(shape, []int{2, 3}) || s.Metadata["k"] != "v" {
		t.Fatalf("read back %v %v %v %v", got, shape, s.Metadata, err)
	}
	err = WriteSafetensorsStream(io.Discard, []StreamTensor{{Name: "short", DType: F32, Shape: []int{2}, Write: func(w io.Writer) error {
		_, err := w.Write(make([]byte, 4))
		return err
	}}}, nil)
	if err == nil || !strings.Contains(err.Error(), `tensor "short": 4 bytes written`) {
		t.Errorf("short tensor: %v", err)
	}
}
