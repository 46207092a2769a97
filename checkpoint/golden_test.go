package checkpoint_test

// The tests that read the shared golden folder (package golden imports
// checkpoint, so they are external tests).

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/golden"
)

func TestGoldenWeightsSafetensorsEqualTorch(t *testing.T) {
	dir := golden.Wan(t)
	st, err := checkpoint.LoadFile(filepath.Join(dir, "weights.safetensors"), checkpoint.TorchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pt, err := checkpoint.LoadFile(filepath.Join(dir, "weights_generator.pt"), checkpoint.TorchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The tensors weights.json lists (names with the wrapper prefix
	// "model.", which checkpoint.LoadFile strips), with their shapes.
	var side struct {
		Tensors map[string]struct {
			Shape []int `json:"shape"`
		} `json:"tensors"`
	}
	if b, err := os.ReadFile(filepath.Join(dir, "weights.json")); err != nil || json.Unmarshal(b, &side) != nil || len(side.Tensors) == 0 {
		t.Fatalf("weights.json: %v (%d tensors)", err, len(side.Tensors))
	}
	if len(st) != len(side.Tensors) || len(pt) != len(side.Tensors) {
		t.Fatalf("tensor counts %d (safetensors) and %d (torch), weights.json lists %d", len(st), len(pt), len(side.Tensors))
	}
	for n, x := range side.Tensors {
		if w := st[checkpoint.NormalizeKey(n)]; w == nil || !slices.Equal(w.Shape, x.Shape) {
			t.Fatalf("%s missing or mis-shaped: %+v, weights.json has %v", n, w, x.Shape)
		}
	}
	for n, a := range st {
		b, ok := pt[n]
		if !ok {
			t.Fatalf("torch checkpoint lacks %s", n)
		}
		if !slices.Equal(a.Shape, b.Shape) {
			t.Fatalf("%s: shapes %v vs %v", n, a.Shape, b.Shape)
		}
		for i := range a.Data {
			if math.Float32bits(a.Data[i]) != math.Float32bits(b.Data[i]) {
				t.Fatalf("%s[%d]: %v vs %v", n, i, a.Data[i], b.Data[i])
			}
		}
	}
	f, _ := os.Open(filepath.Join(dir, "weights_generator.pt"))
	defer f.Close()
	fi, _ := f.Stat()
	ents, err := checkpoint.TorchEntries(f, fi.Size())
	if err != nil || len(ents) != 1 || ents[0] != "generator" {
		t.Fatalf("TorchEntries = %v, %v; want [generator]", ents, err)
	}
	if _, err := checkpoint.LoadTorch(f, fi.Size(), checkpoint.TorchOptions{Entry: "generator_lora"}); err == nil || !strings.Contains(err.Error(), "generator_lora") {
		t.Fatalf("missing entry error = %v", err)
	}
}

// TestRawGoldenT5: the tiny umT5 checkpoints (bf16 and f32 .pth, f32
// safetensors) read raw hold the same numbers as checkpoint.LoadFile's, and the bf16
// file's tensors stay checkpoint.BF16.
func TestRawGoldenT5(t *testing.T) {
	dir := golden.MustFind(t, golden.EnvT5, "t5")
	// The encoder's tensors in checkpoint order, as encode.json lists them.
	var side struct {
		Weights struct {
			Keys []string `json:"keys"`
		} `json:"weights"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "encode.json"))
	if err == nil {
		err = json.Unmarshal(b, &side)
	}
	keys := side.Weights.Keys
	if err != nil || len(keys) == 0 {
		t.Fatalf("encode.json: %v (%d weight keys)", err, len(keys))
	}
	for _, c := range []struct {
		file  string
		dtype checkpoint.DType
	}{{"weights.pth", checkpoint.F32}, {"weights_bf16.pth", checkpoint.BF16}, {"weights.safetensors", checkpoint.F32}} {
		t.Run(c.file, func(t *testing.T) {
			p := filepath.Join(dir, c.file)
			want, err := checkpoint.LoadFile(p, checkpoint.TorchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			f, err := checkpoint.OpenRaw(p, checkpoint.TorchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if len(f.Tensors) != len(want) || len(want) != len(keys) {
				t.Fatalf("%d raw tensors, %d loaded, encode.json lists %d", len(f.Tensors), len(want), len(keys))
			}
			if f.Tensors[0].Name != keys[0] {
				t.Fatalf("first tensor %s, encode.json's first %s", f.Tensors[0].Name, keys[0])
			}
			got := readFloat32s(t, f)
			for _, rt := range f.Tensors {
				if rt.DType != c.dtype {
					t.Fatalf("%s: dtype %s, want %s", rt.Name, rt.DType, c.dtype)
				}
				if !slices.Equal(got[rt.Name], want[rt.Name].Data) {
					t.Fatalf("%s differs from checkpoint.LoadFile", rt.Name)
				}
			}
		})
	}
}

// readFloat32s reads every tensor of f through the public API
// (RawTensor.ReadFloat32).
func readFloat32s(t testing.TB, f *checkpoint.RawFile) map[string][]float32 {
	t.Helper()
	out := map[string][]float32{}
	for _, rt := range f.Tensors {
		v := make([]float32, rt.Elems())
		if err := rt.ReadFloat32(v, nil); err != nil {
			t.Fatalf("%s: %v", rt.Name, err)
		}
		out[rt.Name] = v
	}
	return out
}

// FuzzTorch: LoadTorch never returns a tensor whose values do not fill its
// shape. Seeds: testdata/fuzz/FuzzTorch (a transposed view, strides 1, 2)
// and, when the golden folder is present, the Wan generator's .pt file.
func FuzzTorch(f *testing.F) {
	if dir, err := golden.Find(golden.EnvWan, "wan"); err == nil {
		if b, err := os.ReadFile(filepath.Join(dir, "weights_generator.pt")); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sd, err := checkpoint.LoadTorch(bytes.NewReader(data), int64(len(data)), checkpoint.TorchOptions{})
		if err != nil {
			return
		}
		for n, v := range sd {
			elems := int64(1)
			for _, d := range v.Shape {
				elems *= int64(d)
			}
			if int64(len(v.Data)) != elems {
				t.Fatalf("%s: %d values for shape %v", n, len(v.Data), v.Shape)
			}
		}
	})
}
