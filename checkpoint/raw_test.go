package checkpoint

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// readRaw reads every tensor of f and decodes it with the float32 decoder.
func readRaw(t testing.TB, f *RawFile) map[string][]float32 {
	t.Helper()
	out := map[string][]float32{}
	for _, rt := range f.Tensors {
		r, err := rt.Reader()
		if err != nil {
			t.Fatalf("%s: %v", rt.Name, err)
		}
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatalf("%s: %v", rt.Name, err)
		}
		if int64(len(b)) != rt.Bytes() {
			t.Fatalf("%s: %d bytes, want %d", rt.Name, len(b), rt.Bytes())
		}
		v, err := decodeFloat32(rt.DType, b)
		if err != nil {
			t.Fatalf("%s: %v", rt.Name, err)
		}
		out[rt.Name] = v
	}
	return out
}

// TestRawMatchesLoadTorch: the raw bytes of every view (contiguous, offset,
// transposed, F16, BF16) decode to LoadTorch's values, in state-dict order,
// for stored and deflated records.
func TestRawMatchesLoadTorch(t *testing.T) {
	st := map[string][]byte{
		"0": f32bytes(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11),
		"1": {0x00, 0x3c, 0x00, 0xc0},
		"2": {0x80, 0x3f, 0x40, 0xc0, 0, 0x40},
	}
	ents := map[string][]named{"generator": {
		{"model.blocks.0.w", ptTensor{"0", "FloatStorage", 12, 2, []int{3, 2}, []int{1, 3}}},
		{"model.b", ptTensor{"0", "FloatStorage", 12, 9, []int{2}, []int{1}}},
		{"model.m", ptTensor{"0", "FloatStorage", 12, 1, []int{2, 1, 3}, []int{3, 7, 1}}},
		{"model.h", ptTensor{"1", "HalfStorage", 2, 0, []int{2}, []int{1}}},
		{"model.bf", ptTensor{"2", "BFloat16Storage", 3, 1, []int{2}, []int{1}}},
		{"model.e", ptTensor{"2", "BFloat16Storage", 3, 0, []int{0, 4}, []int{4, 1}}},
	}}
	arc := ptArchive(ents, []string{"generator"}, st)
	deflated := rezip(t, arc, zip.Deflate)
	stored := rezip(t, arc, zip.Store)
	for name, data := range map[string][]byte{"deflate": deflated, "store": stored} {
		t.Run(name, func(t *testing.T) {
			want, err := LoadTorch(bytes.NewReader(data), int64(len(data)), TorchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			f, err := NewRaw(bytes.NewReader(data), int64(len(data)), TorchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, rt := range f.Tensors {
				names = append(names, rt.Name)
				if !slices.Equal(rt.Shape, want[rt.Name].Shape) {
					t.Fatalf("%s: shape %v, want %v", rt.Name, rt.Shape, want[rt.Name].Shape)
				}
			}
			if !slices.Equal(names, []string{"blocks.0.w", "b", "m", "h", "bf", "e"}) {
				t.Fatalf("order %v", names)
			}
			if d := f.Tensors[4].DType; d != BF16 {
				t.Fatalf("bf dtype %s", d)
			}
			got := readRaw(t, f)
			for n, w := range want {
				if !slices.Equal(got[n], w.Data) {
					t.Fatalf("%s: raw %v, LoadTorch %v", n, got[n], w.Data)
				}
			}
		})
	}
	bad := ptArchive(map[string][]named{"generator": {{"model.x", ptTensor{"0", "FloatStorage", 12, 8, []int{2, 3}, []int{3, 1}}}}},
		[]string{"generator"}, st)
	if _, err := NewRaw(bytes.NewReader(bad), int64(len(bad)), TorchOptions{}); err == nil || !strings.Contains(err.Error(), `"model.x"`) {
		t.Fatalf("out-of-bounds view: %v", err)
	}
	if _, err := NewRaw(bytes.NewReader(arc), int64(len(arc)), TorchOptions{Entry: "nope"}); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("missing entry: %v", err)
	}
}

// rezip rewrites a zip archive with every record in the given method.
func rezip(t *testing.T, arc []byte, method uint16) []byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(arc), int64(len(arc)))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		w, err := zw.CreateHeader(&zip.FileHeader{Name: f.Name, Method: method})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(b)
	}
	zw.Close()
	return buf.Bytes()
}

// TestRawSafetensors: raw bytes decode to Float32's values, tensors in
// data order with normalised names; a truncated file is an error.
func TestRawSafetensors(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteSafetensors(&buf, []WriteTensor{
		{"model.z", []int{2, 2}, []float32{1, 2, 3, float32(math.Inf(1))}},
		{"a", []int{3}, []float64{-1, 0.5, 2}},
		{"i", []int{2}, []int64{7, -7}},
	}, nil); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()
	f, err := NewRaw(bytes.NewReader(data), int64(len(data)), TorchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Tensors) != 3 || f.Tensors[0].Name != "z" || f.Tensors[1].Name != "a" || f.Tensors[2].DType != I64 {
		t.Fatalf("tensors %+v", f.Tensors)
	}
	r, _ := f.Tensors[1].Reader()
	b, _ := io.ReadAll(r)
	if v, _ := decodeFloat32(F64, b); !slices.Equal(v, []float32{-1, 0.5, 2}) {
		t.Fatalf("a = %v", v)
	}
	r, _ = f.Tensors[0].Reader()
	b, _ = io.ReadAll(r)
	if v, _ := decodeFloat32(F32, b); !slices.Equal(v, []float32{1, 2, 3, float32(math.Inf(1))}) {
		t.Fatalf("z = %v", v)
	}
	if _, err := NewRaw(bytes.NewReader(data[:len(data)-4]), int64(len(data)-4), TorchOptions{}); err == nil || !errors.Is(err, ErrFormat) {
		t.Fatalf("truncated safetensors: %v", err)
	}
	p := filepath.Join(t.TempDir(), "x.safetensors")
	if err := os.WriteFile(p, data[:20], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenRaw(p, TorchOptions{}); err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("OpenRaw of a bad file: %v, want the path in the error", err)
	}
	if _, err := OpenRaw(filepath.Join(t.TempDir(), "missing.pth"), TorchOptions{}); err == nil {
		t.Fatal("missing file opened")
	}
}

func FuzzRaw(f *testing.F) {
	st := map[string][]byte{"0": f32bytes(0, 1, 2, 3, 4, 5)}
	f.Add(ptArchive(map[string][]named{"generator": {{"model.w", ptTensor{"0", "FloatStorage", 6, 1, []int{2, 2}, []int{1, 2}}}}},
		[]string{"generator"}, st))
	f.Add(ptArchive(map[string][]named{"generator": {{"model.w", ptTensor{"0", "FloatStorage", 6, 1, []int{2, 2}, []int{2, 1}}}}},
		[]string{"generator"}, st))
	var buf bytes.Buffer
	WriteSafetensors(&buf, []WriteTensor{{"a", []int{2}, []float32{1, 2}}, {"b", []int{1}, []int64{3}}}, nil)
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		rf, err := NewRaw(bytes.NewReader(data), int64(len(data)), TorchOptions{})
		if err != nil {
			return
		}
		for _, rt := range rf.Tensors {
			r, err := rt.Reader()
			if err != nil {
				continue
			}
			b, err := io.ReadAll(r)
			if err == nil && int64(len(b)) != rt.Bytes() {
				t.Fatalf("%s: %d bytes, want %d", rt.Name, len(b), rt.Bytes())
			}
		}
	})
}

// TestRawLyingDirectory: a zip directory that claims a storage record far
// larger than the file is rejected before anything is allocated.
func TestRawLyingDirectory(t *testing.T) {
	st := map[string][]byte{"0": f32bytes(1, 2, 3, 4)}
	arc := rezip(t, ptArchive(map[string][]named{"generator": {{"model.w", ptTensor{"0", "FloatStorage", 4, 0, []int{4}, []int{1}}}}},
		[]string{"generator"}, st), zip.Store)
	if _, err := NewRaw(bytes.NewReader(arc), int64(len(arc)), TorchOptions{}); err != nil {
		t.Fatal(err)
	}
	name := []byte("archive/data/0")
	bad := append([]byte(nil), arc...)
	patched := false
	for i := 0; i+46 < len(bad); i++ {
		// Central directory header: signature, sizes at 20 and 24, name at 46.
		if binary.LittleEndian.Uint32(bad[i:]) == 0x02014b50 && bytes.HasPrefix(bad[i+46:], name) {
			binary.LittleEndian.PutUint32(bad[i+20:], 1<<30)
			binary.LittleEndian.PutUint32(bad[i+24:], 1<<30)
			patched = true
		}
	}
	if !patched {
		t.Fatal("central directory entry not found")
	}
	_, err := NewRaw(bytes.NewReader(bad), int64(len(bad)), TorchOptions{})
	if err == nil || !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "does not fit") {
		t.Fatalf("lying directory: %v", err)
	}
}
