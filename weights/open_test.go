package weights_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/golden"
	"github.com/densitykv/densitykv/weights"
	"github.com/densitykv/densitykv/weights/weightstest"
)

func goldenPart(t *testing.T, kind weights.Kind) string {
	t.Helper()
	switch kind {
	case weights.DiT:
		return filepath.Join(golden.Wan(t), "weights.safetensors")
	case weights.VAE:
		return filepath.Join(golden.VAE(t), "weights.safetensors")
	}
	return filepath.Join(golden.T5(t), "weights.safetensors")
}

func writeST(t *testing.T, p string, names ...string) string {
	t.Helper()
	var ts []checkpoint.WriteTensor
	for _, n := range names {
		ts = append(ts, checkpoint.WriteTensor{Name: n, Shape: []int{2, 2}, Data: []float32{1, 2, 3, 4}})
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := checkpoint.WriteSafetensorsFile(p, ts, nil); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRefusals checks that weights of another kind, or of no known
// layout, are refused in a few lines that say what was found, what it
// looks like and what the flag reads.
func TestRefusals(t *testing.T) {
	dir := t.TempDir()
	lora := writeST(t, filepath.Join(dir, "lora.safetensors"), "diffusion_model.blocks.0.self_attn.q.lora_down.weight", "diffusion_model.blocks.0.self_attn.q.lora_up.weight")
	other := writeST(t, filepath.Join(dir, "clip.safetensors"), "visual.transformer.resblocks.0.attn.in_proj_weight", "visual.proj")
	layoutCases := []struct {
		name string
		path string
		want weights.Kind
		says []string
	}{
		{"VAE as DiT", goldenPart(t, weights.VAE), weights.DiT, []string{"--checkpoint", "not a Wan DiT", "found: weights.safetensors, 194 tensors: conv1.bias", "a Wan VAE in the official naming: pass it to --vae", "diffusers naming"}},
		{"DiT as VAE", goldenPart(t, weights.DiT), weights.VAE, []string{"--vae", "a Wan DiT in the official naming: pass it to --checkpoint"}},
		{"T5 as DiT", goldenPart(t, weights.TextEncoder), weights.DiT, []string{"umT5 text encoder in the official naming: pass it to --text-encoder"}},
		{"DiT as text encoder", goldenPart(t, weights.DiT), weights.TextEncoder, []string{"--text-encoder", "pass it to --checkpoint", "UMT5EncoderModel"}},
		{"LoRA as DiT", lora, weights.DiT, []string{"LoRA adapters: pass them to --lora"}},
		{"unknown", other, weights.VAE, []string{"nothing of Wan2.1", "visual.proj"}},
	}
	for _, c := range layoutCases {
		t.Run(c.name, func(t *testing.T) {
			_, err := weights.Open(c.path, c.want, weights.Options{})
			var le *weights.LayoutError
			if !errors.As(err, &le) {
				t.Fatalf("error %v, want a *LayoutError", err)
			}
			msg := err.Error()
			for _, s := range c.says {
				if !strings.Contains(msg, s) {
					t.Errorf("error does not say %q:\n%s", s, msg)
				}
			}
			if n := strings.Count(msg, "\n"); n > 10 || len(msg) > 2000 {
				t.Errorf("%d lines, %d bytes: not a few readable lines:\n%s", n+1, len(msg), msg)
			}
		})
	}
}

// TestFolderRefusals: a folder without weights, of two weight files, a
// model folder without the part asked for, and shards with a gap are
// refused saying so; safetensors beside PyTorch files are read.
func TestFolderRefusals(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	os.MkdirAll(empty, 0o755)
	os.WriteFile(filepath.Join(empty, "README.md"), []byte("x"), 0o644)
	two := filepath.Join(dir, "two")
	writeST(t, filepath.Join(two, "a.safetensors"), "x")
	writeST(t, filepath.Join(two, "b.safetensors"), "y")
	model := filepath.Join(dir, "model")
	if err := weightstest.ModelFolder(model); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(model, "vae"), 0o755)
	gap := filepath.Join(dir, "gap")
	writeST(t, filepath.Join(gap, "m-00001-of-00003.safetensors"), "x")
	writeST(t, filepath.Join(gap, "m-00003-of-00003.safetensors"), "y")
	for _, c := range []struct {
		name, path string
		says       []string
	}{
		{"folder without weights", empty, []string{"a folder holding README.md", "no weight files"}},
		{"two files", two, []string{"2 weight files: a.safetensors, b.safetensors", "name the file"}},
		{"model folder without transformer", model, []string{"diffusers model folder (model_index.json) without a transformer/ folder", "vae/"}},
		{"shards with a gap", gap, []string{"2 weight files"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := weights.Open(c.path, weights.DiT, weights.Options{})
			if err == nil {
				t.Fatal("no error")
			}
			for _, s := range c.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error does not say %q:\n%v", s, err)
				}
			}
		})
	}

	// A Hugging Face folder with the same weights as safetensors and as
	// PyTorch files: the safetensors are read.
	both := filepath.Join(dir, "both")
	if _, err := weightstest.Write(both, weights.DiT, []weightstest.Tensor{{Name: "head.modulation", Shape: []int{2}, Data: []float32{1, 2}},
		{Name: "head.head.bias", Shape: []int{2}, Data: []float32{1, 2}}},
		weightstest.Options{Shards: 2, File: "model"}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(both, "pytorch_model.bin"), []byte("PK"), 0o644)
	os.WriteFile(filepath.Join(both, "pytorch_model.bin.index.json"), []byte("{}"), 0o644)
	if src, err := weights.Open(both, weights.DiT, weights.Options{}); err != nil || src.Index == "" || len(src.Files) != 2 {
		t.Fatalf("safetensors beside .bin files: %v", err)
	} else {
		src.Close()
	}
}

// TestShardIndexRefusals: a shard index that does not match its shards
// names the tensor and the files.
func TestShardIndexRefusals(t *testing.T) {
	dir := t.TempDir()
	// Shard indexes that do not match their shards.
	ts := []weightstest.Tensor{{Name: "head.modulation", Shape: []int{2}, Data: []float32{1, 2}},
		{Name: "head.head.weight", Shape: []int{2, 2}, Data: []float32{1, 2, 3, 4}}, {Name: "head.head.bias", Shape: []int{2}, Data: []float32{1, 2}}}
	sharded := filepath.Join(dir, "sharded")
	if _, err := weightstest.Write(sharded, weights.DiT, ts, weightstest.Options{Shards: 2}); err != nil {
		t.Fatal(err)
	}
	if src, err := weights.Open(sharded, weights.DiT, weights.Options{}); err != nil || len(src.Tensors) != 3 || len(src.Files) != 2 {
		t.Fatalf("sharded: %v", err)
	} else {
		src.Close()
	}
	idxPath := filepath.Join(sharded, "model.safetensors.index.json")
	raw, _ := os.ReadFile(idxPath)
	edit := func(f func(wm map[string]string)) {
		var idx map[string]any
		json.Unmarshal(raw, &idx)
		wm := map[string]string{}
		for k, v := range idx["weight_map"].(map[string]any) {
			wm[k] = v.(string)
		}
		f(wm)
		idx["weight_map"] = wm
		b, _ := json.Marshal(idx)
		os.WriteFile(idxPath, b, 0o644)
	}
	for _, c := range []struct {
		name string
		f    func(map[string]string)
		says string
	}{
		{"moved", func(wm map[string]string) { wm["head.modulation"] = "model-00002-of-00002.safetensors" }, "head.modulation (in model-00001-of-00002.safetensors, the index says model-00002-of-00002.safetensors)"},
		{"left out", func(wm map[string]string) { delete(wm, "head.head.bias") }, "head.head.bias (in model-00001-of-00002.safetensors, not in the index)"},
		{"phantom", func(wm map[string]string) { wm["head.extra"] = "model-00001-of-00002.safetensors" }, "head.extra (in no shard)"},
		{"missing shard", func(wm map[string]string) { wm["head.extra"] = "model-00009-of-00009.safetensors" }, "names model-00009-of-00009.safetensors, which is missing"},
		{"escaping", func(wm map[string]string) { wm["head.extra"] = "../x.safetensors" }, "want a file name in the index's folder"},
	} {
		t.Run(c.name, func(t *testing.T) {
			edit(c.f)
			_, err := weights.Open(sharded, weights.DiT, weights.Options{})
			if err == nil || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("error %v, want %q", err, c.says)
			}
		})
	}
}

// TestUnsupportedRefusals: an image-to-video DiT, a quantisation other
// than fp8 and a scale of nothing are refused naming the tensors.
func TestUnsupportedRefusals(t *testing.T) {
	dir := t.TempDir()
	// An image-to-video diffusers DiT names its extra tensors.
	i2v := writeST(t, filepath.Join(dir, "i2v.safetensors"), "blocks.0.attn1.to_q.weight", "condition_embedder.image_embedder.norm1.weight", "blocks.0.attn2.add_k_proj.weight")
	if _, err := weights.Open(i2v, weights.DiT, weights.Options{}); err == nil || !strings.Contains(err.Error(), "image-to-video") || !strings.Contains(err.Error(), "condition_embedder.image_embedder.norm1.weight") {
		t.Fatalf("i2v: %v", err)
	}
	// Quantisations other than fp8, and a scale of nothing.
	nv := filepath.Join(dir, "nvfp4.safetensors")
	q := []byte(`{"format": "nvfp4"}`)
	checkpoint.WriteSafetensorsFile(nv, []checkpoint.WriteTensor{{Name: "head.head.weight", Shape: []int{1, 1}, Data: []float32{1}},
		{Name: "head.head.comfy_quant", Shape: []int{len(q)}, Data: checkpoint.Encoded{DType: checkpoint.U8, Bytes: q}}}, nil)
	if _, err := weights.Open(nv, weights.DiT, weights.Options{}); err == nil || !strings.Contains(err.Error(), `head.head is quantised as "nvfp4"`) {
		t.Fatalf("nvfp4: %v", err)
	}
	orphan := filepath.Join(dir, "orphan.safetensors")
	checkpoint.WriteSafetensorsFile(orphan, []checkpoint.WriteTensor{{Name: "head.modulation", Shape: []int{1}, Data: []float32{1}},
		{Name: "head.head.scale_weight", Shape: []int{}, Data: []float32{2}}}, nil)
	if _, err := weights.Open(orphan, weights.DiT, weights.Options{}); err == nil || !strings.Contains(err.Error(), "scales head.head.weight, which is not in the file") {
		t.Fatalf("orphan scale: %v", err)
	}
}

// TestTokenizerFile finds the tokenizer in files and folders.
func TestTokenizerFile(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "model")
	weightstest.ModelFolder(model)
	tok := filepath.Join(model, "tokenizer")
	os.MkdirAll(tok, 0o755)
	os.WriteFile(filepath.Join(tok, "tokenizer.json"), []byte("{}"), 0o644)
	if p, err := weights.TokenizerFile(model); err != nil || p != filepath.Join(tok, "tokenizer.json") {
		t.Fatalf("tokenizer.json only: %q %v", p, err)
	}
	os.WriteFile(filepath.Join(tok, "spiece.model"), []byte("x"), 0o644)
	for _, p := range []string{model, tok, filepath.Join(tok, "spiece.model")} {
		if got, err := weights.TokenizerFile(p); err != nil || got != filepath.Join(tok, "spiece.model") {
			t.Fatalf("%s: %q %v", p, got, err)
		}
	}
	if _, err := weights.TokenizerFile(dir); err == nil || !strings.Contains(err.Error(), "no spiece.model or tokenizer.json") || !strings.Contains(err.Error(), "model/") {
		t.Fatalf("a folder without a tokenizer: %v", err)
	}
}
