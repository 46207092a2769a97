package t5

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/weights"
	"github.com/densitykv/densitykv/weights/weightstest"
)

func encodeBits(t *testing.T, m *Model) []byte {
	t.Helper()
	ids := []int32{5, 17, 256, 3, 999, 1, 0, 0}
	mask := []int32{1, 1, 1, 1, 1, 1, 0, 0}
	out, err := m.Encode(ids, mask)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, v := range out {
		u := math.Float32bits(v)
		b.Write([]byte{byte(u), byte(u >> 8), byte(u >> 16), byte(u >> 24)})
	}
	return b.Bytes()
}

// TestLayoutsLoadTheSameModel writes the golden encoder in Hugging Face's
// UMT5EncoderModel layout (a folder with config.json and shards with an
// index; a diffusers model folder's text_encoder/) and as ComfyUI's fp16,
// bf16 and fp8 e4m3fn scaled files, and checks that each loads to the
// model the official layout of the same values gives: every weight and an
// encoding, bit for bit.
func TestLayoutsLoadTheSameModel(t *testing.T) {
	var ts []weightstest.Tensor
	for _, w := range goldenTensors(t) {
		ts = append(ts, weightstest.Tensor{Name: w.Name, Shape: w.Shape, Data: w.Data.([]float32)})
	}
	hfConfig := map[string]any{"architectures": []string{"UMT5EncoderModel"}, "relative_attention_max_distance": 128, "layer_norm_epsilon": 1e-6}
	for _, c := range []struct {
		name   string
		o      weightstest.Options
		folder bool
		want   string
	}{
		{"Hugging Face folder", weightstest.Options{Layout: "Hugging Face", Shards: 2, Config: hfConfig}, false, "UMT5EncoderModel (Hugging Face naming), 2 shards of model.safetensors.index.json"},
		{"diffusers model folder", weightstest.Options{Layout: "Hugging Face", DType: checkpoint.BF16, Other: checkpoint.BF16, Config: hfConfig}, true, "BF16"},
		{"ComfyUI fp16", weightstest.Options{Layout: "Hugging Face", DType: checkpoint.F16, Other: checkpoint.F16}, false, "F16"},
		{"ComfyUI fp8 e4m3fn scaled", weightstest.Options{Layout: "Hugging Face", DType: checkpoint.F8E4M3, Other: checkpoint.F16, Scaled: "legacy"}, false, "ComfyUI scaled_fp8"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			sub := ""
			if c.folder {
				sub = "text_encoder"
			}
			ref, path, err := weightstest.WritePair(dir, weights.TextEncoder, ts, c.o, sub)
			if err != nil {
				t.Fatal(err)
			}
			want, err := Load(ref, LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := Load(path, LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(got.Loaded, c.want) {
				t.Errorf("Loaded %q does not say %q", got.Loaded, c.want)
			}
			if !sameWeights(want, got) || want.Rounded != got.Rounded {
				t.Fatalf("the weights differ (rounded %d, %d)", want.Rounded, got.Rounded)
			}
			if !bytes.Equal(encodeBits(t, want), encodeBits(t, got)) {
				t.Fatal("the encodings differ")
			}
			cfg, err := Inspect(path, LoadOptions{})
			if err != nil || cfg != want.Config {
				t.Fatalf("Inspect: %+v, %v", cfg, err)
			}
		})
	}
}

// TestHFTiedEmbedding: a UMT5EncoderModel file may store the embedding as
// encoder.embed_tokens.weight, shared.weight or both (the copy is
// ignored), and a whole umT5's decoder is ignored; config.json's
// relative_attention_max_distance and layer_norm_epsilon are read.
func TestHFTiedEmbedding(t *testing.T) {
	l := weights.Find(weights.TextEncoder, "Hugging Face")
	base := goldenTensors(t)
	var names []string
	for _, w := range base {
		names = append(names, w.Name)
	}
	want, err := Load(writeST(t, base), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		embed []string
		extra []string
	}{
		{"embed_tokens only", []string{"encoder.embed_tokens.weight"}, nil},
		{"both", []string{"shared.weight", "encoder.embed_tokens.weight"}, nil},
		{"whole umT5", []string{"shared.weight"}, []string{"decoder.block.0.layer.0.SelfAttention.q.weight", "lm_head.weight"}},
		{"ComfyUI's tokenizer inside", []string{"shared.weight"}, []string{"spiece_model"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var ws []checkpoint.WriteTensor
			for _, w := range base {
				n, ok := l.FromOfficial(w.Name, names)
				if !ok {
					t.Fatal(w.Name)
				}
				if n != "shared.weight" {
					ws = append(ws, checkpoint.WriteTensor{Name: n, Shape: w.Shape, Data: w.Data})
					continue
				}
				for _, e := range c.embed {
					ws = append(ws, checkpoint.WriteTensor{Name: e, Shape: w.Shape, Data: w.Data})
				}
			}
			for _, e := range c.extra {
				ws = append(ws, checkpoint.WriteTensor{Name: e, Shape: []int{2, 2}, Data: []float32{1, 2, 3, 4}})
			}
			got, err := Load(writeST(t, ws), LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !sameWeights(want, got) {
				t.Fatal("the weights differ")
			}
		})
	}
	dir := t.TempDir()
	var ts []weightstest.Tensor
	for _, w := range base {
		ts = append(ts, weightstest.Tensor{Name: w.Name, Shape: w.Shape, Data: w.Data.([]float32)})
	}
	if _, err := weightstest.Write(dir, weights.TextEncoder, ts, weightstest.Options{Layout: "Hugging Face",
		Config: map[string]any{"relative_attention_max_distance": 64, "layer_norm_epsilon": 1e-5}}); err != nil {
		t.Fatal(err)
	}
	cfg, err := Inspect(dir, LoadOptions{})
	if err != nil || cfg.MaxDist != 64 || cfg.Eps != 1e-5 {
		t.Fatalf("config.json not read: %+v %v", cfg, err)
	}
	if cfg, err := Inspect(dir, LoadOptions{MaxDist: 100, Eps: 1e-7}); err != nil || cfg.MaxDist != 100 || cfg.Eps != 1e-7 {
		t.Fatalf("options do not override config.json: %+v %v", cfg, err)
	}
}
