package generate

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/golden"
	"github.com/densitykv/densitykv/weights"
	"github.com/densitykv/densitykv/weights/weightstest"
)

// goldenEncoder returns the golden umT5 encoder's tensors.
func goldenEncoder(t *testing.T) []weightstest.Tensor {
	t.Helper()
	sd, err := checkpoint.LoadFile(filepath.Join(golden.T5(t), "weights.safetensors"), checkpoint.TorchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return weightstest.FromStateDict(sd)
}

// TestTextFromDiffusersFolder: a diffusers model folder given as both
// --text-encoder and --tokenizer (text_encoder/ in Hugging Face's
// UMT5EncoderModel layout, sharded with an index; tokenizer/ with
// spiece.model) gives the embeddings of the official files, bit for bit.
func TestTextFromDiffusersFolder(t *testing.T) {
	g := golden.T5(t)
	dir := filepath.Join(t.TempDir(), "Wan2.1-T2V-1.3B-Diffusers")
	if err := weightstest.ModelFolder(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := weightstest.Write(filepath.Join(dir, "text_encoder"), weights.TextEncoder, goldenEncoder(t),
		weightstest.Options{Layout: "Hugging Face", Shards: 2, Config: map[string]any{"relative_attention_max_distance": 128, "layer_norm_epsilon": 1e-6}}); err != nil {
		t.Fatal(err)
	}
	spm, err := os.ReadFile(filepath.Join(g, "spiece.model"))
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "tokenizer"), 0o755)
	if err := os.WriteFile(filepath.Join(dir, "tokenizer", "spiece.model"), spm, 0o644); err != nil {
		t.Fatal(err)
	}
	prompts := []string{"a red panda walks through snow, cinematic", "ein Fuchs im Schnee"}
	embed := func(o TextOptions) []*Embedding {
		in, err := CheckText(o)
		if err != nil {
			t.Fatal(err)
		}
		es, err := EncodePrompts(o, in, prompts)
		if err != nil {
			t.Fatal(err)
		}
		return es
	}
	want := embed(TextOptions{Encoder: filepath.Join(g, "weights.safetensors"), Tokenizer: filepath.Join(g, "spiece.model"), TextLen: 16})
	var loaded string
	got := embed(TextOptions{Encoder: dir, Tokenizer: dir, TextLen: 16, Loaded: func(s string) { loaded = s }})
	for i := range want {
		if !bytes.Equal(f32b(want[i].Values), f32b(got[i].Values)) || want[i].SeqLen != got[i].SeqLen {
			t.Fatalf("prompt %d: the embeddings differ", i)
		}
	}
	if !strings.Contains(loaded, "UMT5EncoderModel (Hugging Face naming), 2 shards") {
		t.Errorf("Loaded reported %q", loaded)
	}
}

func f32b(v []float32) []byte {
	var b bytes.Buffer
	for _, x := range v {
		u := math.Float32bits(x)
		b.Write([]byte{byte(u), byte(u >> 8), byte(u >> 16), byte(u >> 24)})
	}
	return b.Bytes()
}

// TestCheckTextVocabulary: a tokenizer is refused, naming both sizes,
// when the encoder's embedding has fewer rows than it has pieces, or far
// more (another model's tokenizer: 4,000 pieces against umT5-XXL's
// 256,384 rows was accepted); T5's sentinel rows (umT5: 384) are not.
func TestCheckTextVocabulary(t *testing.T) {
	g := golden.T5(t)
	base := goldenEncoder(t)
	in, err := CheckText(TextOptions{Encoder: filepath.Join(g, "weights.safetensors"), Tokenizer: filepath.Join(g, "spiece.model"), TextLen: 16})
	if err != nil {
		t.Fatal(err)
	}
	pieces := in.Tokenizer.VocabSize()
	for _, c := range []struct {
		rows int
		says string // "" accepted
	}{
		{pieces, ""},
		{pieces + 384, ""},
		{pieces + MaxExtraRows, ""},
		{pieces + MaxExtraRows + 1, "the tokenizer is not the encoder's"},
		{pieces - 1, "more than the"},
		{64 * pieces, "the tokenizer is not the encoder's"},
	} {
		ts := make([]weightstest.Tensor, len(base))
		copy(ts, base)
		for i, w := range ts {
			if w.Name == "token_embedding.weight" {
				d := make([]float32, c.rows*w.Shape[1])
				copy(d, w.Data)
				ts[i] = weightstest.Tensor{Name: w.Name, Shape: []int{c.rows, w.Shape[1]}, Data: d}
			}
		}
		p, err := weightstest.Write(t.TempDir(), weights.TextEncoder, ts, weightstest.Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = CheckText(TextOptions{Encoder: p, Tokenizer: filepath.Join(g, "spiece.model"), TextLen: 16})
		switch {
		case c.says == "" && err != nil:
			t.Errorf("%d rows for %d pieces: %v", c.rows, pieces, err)
		case c.says != "" && (err == nil || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), strconv.Itoa(pieces)) || !strings.Contains(err.Error(), strconv.Itoa(c.rows))):
			t.Errorf("%d rows for %d pieces: %v, want %q naming both sizes", c.rows, pieces, err, c.says)
		}
	}
}
