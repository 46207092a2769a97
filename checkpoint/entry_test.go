package checkpoint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/internal/torchtest"
)

// TestTorchEntry checks the entry that LoadFile reads, as TorchEntry
// reports it: generator before generator_ema when both are present and
// none is named (Self-Forcing's inference.py without --use_ema), the named
// one otherwise, the top level, and "" for a safetensors file.
func TestTorchEntry(t *testing.T) {
	one := func(v float32) torchtest.Dict {
		return torchtest.Dict{{Key: "model.x", Value: &torchtest.Tensor{Shape: []int{1}, Data: []float32{v}}}}
	}
	dir := t.TempDir()
	write := func(name string, top torchtest.Dict) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, torchtest.Bytes(top, torchtest.Options{}), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	both := write("both.pt", torchtest.Dict{{Key: "generator_ema", Value: one(2)}, {Key: "generator", Value: one(1)}})
	top := write("top.pt", one(3))
	for _, c := range []struct {
		path, entry, want string
		value             float32
	}{
		{both, "", "generator", 1},
		{both, "generator_ema", "generator_ema", 2},
		{both, "generator", "generator", 1},
		{top, "", TopLevel, 3},
	} {
		got, err := TorchEntry(c.path, TorchOptions{Entry: c.entry})
		if err != nil || got != c.want {
			t.Errorf("TorchEntry(%s, %q) = %q, %v; want %q", filepath.Base(c.path), c.entry, got, err, c.want)
		}
		sd, err := LoadFile(c.path, TorchOptions{Entry: c.entry})
		if err != nil || sd["x"].Data[0] != c.value {
			t.Errorf("LoadFile(%s, %q) read %v, %v; want the value %v of entry %s", filepath.Base(c.path), c.entry, sd, err, c.value, c.want)
		}
	}
	if _, err := TorchEntry(both, TorchOptions{Entry: "generator_lora"}); err == nil || !strings.Contains(err.Error(), `no entry "generator_lora"`) || !strings.Contains(err.Error(), "both.pt") {
		t.Errorf("missing entry: %v", err)
	}
	st := filepath.Join(dir, "w.safetensors")
	if err := WriteSafetensorsFile(st, []WriteTensor{{Name: "x", Shape: []int{1}, Data: []float32{1}}}, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := TorchEntry(st, TorchOptions{}); err != nil || got != "" {
		t.Errorf("safetensors: %q, %v", got, err)
	}
	if _, err := TorchEntry(filepath.Join(dir, "missing.pt"), TorchOptions{}); err == nil {
		t.Error("a missing file has an entry")
	}
	bad := filepath.Join(dir, "bad.pt")
	os.WriteFile(bad, []byte("PK\x03\x04 not really"), 0o644)
	if _, err := TorchEntry(bad, TorchOptions{}); err == nil || !strings.Contains(err.Error(), "bad.pt") {
		t.Errorf("corrupt zip: %v", err)
	}
}
