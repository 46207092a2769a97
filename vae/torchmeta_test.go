package vae

import (
	"archive/zip"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/internal/torchtest"
)

// TestLoadTorchWithMetadata loads a PyTorch file whose state dict is what
// torch.save(module.state_dict()) writes: a collections.OrderedDict with
// extra pickle state (its _metadata attribute, set by BUILD). The golden
// weights.pth has none, but a checkpoint saved from a live module, as
// Wan2.1_VAE.pth may be, does.
func TestLoadTorchWithMetadata(t *testing.T) {
	m := tinyModel(t, 4)
	var top torchtest.Dict
	for _, w := range modelTensors(m) {
		top = append(top, torchtest.KV{Key: w.Name, Value: &torchtest.Tensor{Shape: w.Shape, Data: w.Data.([]float32)}})
	}
	raw := torchtest.Bytes(top, torchtest.Options{})
	zr, err := zip.NewReader(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	for _, f := range zr.File {
		rc, _ := f.Open()
		b, _ := io.ReadAll(rc)
		rc.Close()
		if strings.HasSuffix(f.Name, "data.pkl") {
			// PROTO 2, EMPTY_DICT, MARK … SETITEMS, STOP → an OrderedDict
			// instance, the same items, then BUILD with
			// {"_metadata": OrderedDict({"": {"version": 1}})}.
			if b[2] != '}' || b[len(b)-1] != '.' {
				t.Fatalf("unexpected pickle start %q end %q", b[:3], b[len(b)-1:])
			}
			var p torchtest.Pickler
			p.Op(b[:2]...)
			p.Global("collections", "OrderedDict")
			p.Op(')', 'R')
			p.Op(b[3 : len(b)-1]...)
			p.Op('}', '(')
			p.Str("_metadata")
			p.Global("collections", "OrderedDict")
			p.Op(')', 'R', '(')
			p.Str("")
			p.Op('}', '(')
			p.Str("version")
			p.Int(1)
			p.Op('u', 'u', 'u', 'b', '.')
			b = p.B
		}
		w, _ := zw.Create(f.Name)
		w.Write(b)
	}
	zw.Close()
	path := filepath.Join(t.TempDir(), "Wan2.1_VAE.pth")
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if p := sameParams(got, m); p != "" {
		t.Fatalf("parameter %s differs", p)
	}
	if !slices.Equal(got.Decoder.HeadConv.Bias, m.Decoder.HeadConv.Bias) {
		t.Fatal("head bias differs")
	}
}
