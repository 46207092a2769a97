package generate

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/golden"
	"github.com/densitykv/densitykv/wan"
)

// TestCheckBackbone: the golden DiT passes in both formats; a missing,
// mis-shaped, extra or integer tensor and a cut file are refused with the
// file and the tensor named; so is the right file for another
// configuration.
func TestCheckBackbone(t *testing.T) {
	g := golden.Wan(t)
	cfg := wan.TinyConfig()
	for _, f := range []string{"weights.safetensors", "weights_generator.pt"} {
		if err := CheckBackbone(filepath.Join(g, f), "", cfg); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if err := CheckBackbone(filepath.Join(g, "weights.safetensors"), "", wan.DefaultConfig()); err == nil || !strings.Contains(err.Error(), "mis-shaped") {
		t.Fatalf("tiny weights for the 1.3B config: %v", err)
	}
	sd, err := checkpoint.LoadFile(filepath.Join(g, "weights.safetensors"), checkpoint.TorchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, edit func(map[string]checkpoint.WriteTensor)) string {
		ts := map[string]checkpoint.WriteTensor{}
		for _, n := range sd.Names() {
			ts[n] = checkpoint.WriteTensor{Name: "model." + n, Shape: sd[n].Shape, Data: sd[n].Data}
		}
		edit(ts)
		var list []checkpoint.WriteTensor
		for _, w := range ts {
			list = append(list, w)
		}
		p := filepath.Join(dir, name)
		if err := checkpoint.WriteSafetensorsFile(p, list, nil); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ok := write("ok.safetensors", func(map[string]checkpoint.WriteTensor) {})
	if err := CheckBackbone(ok, "", cfg); err != nil {
		t.Fatalf("rewritten golden weights: %v", err)
	}
	for _, c := range []struct {
		name string
		edit func(map[string]checkpoint.WriteTensor)
		want string
	}{
		{"missing", func(m map[string]checkpoint.WriteTensor) { delete(m, "blocks.1.ffn.2.weight") }, "blocks.1.ffn.2.weight"},
		{"shape", func(m map[string]checkpoint.WriteTensor) {
			w := m["head.head.bias"]
			n := len(w.Data.([]float32)) - 1
			w.Shape, w.Data = []int{n}, w.Data.([]float32)[:n]
			m["head.head.bias"] = w
		}, "head.head.bias"},
		{"extra", func(m map[string]checkpoint.WriteTensor) {
			m["extra"] = checkpoint.WriteTensor{Name: "model.blocks.0.extra", Shape: []int{1}, Data: []float32{1}}
		}, "blocks.0.extra"},
		{"dtype", func(m map[string]checkpoint.WriteTensor) {
			w := m["blocks.0.norm3.bias"]
			w.Data = make([]int64, len(w.Data.([]float32)))
			m["blocks.0.norm3.bias"] = w
		}, "blocks.0.norm3.bias has dtype I64"},
	} {
		p := write(c.name+".safetensors", c.edit)
		if err := CheckBackbone(p, "", cfg); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v, want mention of %q and the file", c.name, err, c.want)
		}
	}
	b, _ := os.ReadFile(ok)
	cut := filepath.Join(dir, "cut.safetensors")
	os.WriteFile(cut, b[:len(b)-100], 0o644)
	if err := CheckBackbone(cut, "", cfg); err == nil || !strings.Contains(err.Error(), cut) {
		t.Fatalf("cut file: %v", err)
	}
}

// TestLoadVAE: the pipeline VAE decodes the tiny DiT's 16 channels with
// Wan's statistics; the 4-channel golden VAE does not, and wrong
// statistics are refused.
func TestLoadVAE(t *testing.T) {
	p := filepath.Join(golden.PipelineVAE(t), "weights.pth")
	if _, err := LoadVAE(p, nil, nil, 16); err != nil {
		t.Fatal(err)
	}
	// The golden VAE of other latent channels (4 in the shared set: its
	// weights.json says how many).
	var side struct {
		Config struct {
			ZDim int `json:"z_dim"`
		} `json:"config"`
	}
	if b, err := os.ReadFile(filepath.Join(golden.VAE(t), "weights.json")); err != nil || json.Unmarshal(b, &side) != nil || side.Config.ZDim <= 0 || side.Config.ZDim == 16 {
		t.Fatalf("vae weights.json: z_dim %d (%v)", side.Config.ZDim, err)
	}
	z := side.Config.ZDim
	four := filepath.Join(golden.VAE(t), "weights.pth")
	if _, err := LoadVAE(four, nil, nil, 16); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("decodes %d latent channels, the DiT makes 16", z)) {
		t.Fatalf("%d-channel VAE: %v", z, err)
	}
	if _, err := LoadVAE(four, nil, nil, 0); err == nil || !strings.Contains(err.Error(), "mean and std") {
		t.Fatalf("%d-channel VAE with Wan's statistics: %v", z, err)
	}
	mean, std := make([]float32, z), make([]float32, z)
	for i := range std[:z-1] {
		std[i] = 1
	}
	if _, err := LoadVAE(four, mean, std, z); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("std[%d]", z-1)) {
		t.Fatalf("zero std: %v", err)
	}
	if _, err := LoadVAE(p, []float32{0}, []float32{1}, 16); err == nil || !strings.Contains(err.Error(), "1 values") {
		t.Fatalf("short statistics: %v", err)
	}
}
