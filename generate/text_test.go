package generate

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/golden"
)

func textOptions(t *testing.T, textLen int) TextOptions {
	g := golden.T5(t)
	return TextOptions{Encoder: filepath.Join(g, "weights_bf16.pth"), Tokenizer: filepath.Join(g, "spiece.model"), TextLen: textLen}
}

func mustCheck(t *testing.T, o TextOptions) *TextInputs {
	t.Helper()
	in, err := CheckText(o)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// TestEncodePromptsGolden: the text stage (clean, tokenize, T5 layout,
// umT5) gives Wan's T5EncoderModel output for every golden prompt: the
// rows [0, seq_len) within the golden tolerance (1e-4 relative L2), with
// the golden seq_len, piece count and truncation.
func TestEncodePromptsGolden(t *testing.T) {
	g := golden.T5(t)
	var side struct {
		Config struct {
			TextLen int `json:"text_len"`
		} `json:"config"`
		Prompts []struct {
			Key       string `json:"key"`
			Raw       string `json:"raw"`
			Cleaned   string `json:"cleaned"`
			SeqLen    int    `json:"seq_len"`
			Pieces    int    `json:"n_pieces"`
			Truncated bool   `json:"truncated"`
		} `json:"prompts"`
	}
	b, err := os.ReadFile(filepath.Join(g, "encode.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &side); err != nil {
		t.Fatal(err)
	}
	if len(side.Prompts) == 0 || side.Config.TextLen <= 0 {
		t.Fatalf("encode.json: %d prompts, text_len %d", len(side.Prompts), side.Config.TextLen)
	}
	st, err := checkpoint.OpenSafetensors(filepath.Join(g, "encode.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, file := range []string{"weights_bf16.pth", "weights.safetensors"} {
		o := textOptions(t, side.Config.TextLen)
		o.Encoder = filepath.Join(g, file)
		var prompts []string
		for _, p := range side.Prompts {
			prompts = append(prompts, p.Raw)
		}
		var warned []string
		o.Warn = func(m string) { warned = append(warned, m) }
		es, err := EncodePrompts(o, mustCheck(t, o), prompts)
		if err != nil {
			t.Fatal(err)
		}
		truncated := 0
		for i, p := range side.Prompts {
			e := es[i]
			want, shape, err := st.Float64(p.Key + ".output")
			if err != nil {
				t.Fatal(err)
			}
			if e.SeqLen != p.SeqLen || e.Pieces != p.Pieces || e.Truncated != p.Truncated || e.Cleaned != p.Cleaned ||
				!slices.Equal(shape, []int{e.SeqLen, e.Dim}) || e.TextLen != side.Config.TextLen {
				t.Fatalf("%s %s: seq_len %d pieces %d truncated %v dim %d, golden %d %d %v %v", file, p.Key, e.SeqLen, e.Pieces, e.Truncated, e.Dim, p.SeqLen, p.Pieces, p.Truncated, shape)
			}
			var num, den float64
			for k, w := range want {
				d := float64(e.Values[k]) - w
				num += d * d
				den += w * w
			}
			if rel := math.Sqrt(num / den); !(rel <= 1e-4) {
				t.Errorf("%s %s: relative L2 %.3g > 1e-4", file, p.Key, rel)
			}
			if p.Truncated {
				truncated++
			}
		}
		// One warning per truncated prompt (the shared set has one).
		if len(warned) != truncated || truncated > 0 && !strings.Contains(warned[0], fmt.Sprintf("text length %d", side.Config.TextLen)) {
			t.Fatalf("%d truncated golden prompts, warnings %q", truncated, warned)
		}
	}
}

// TestEncodePromptsCache: embeddings are written to the cache and read
// back bit for bit without the encoder (its file is gone); a changed
// text length misses; a damaged cache file is computed again with a
// warning; repeated prompts are encoded once.
func TestEncodePromptsCache(t *testing.T) {
	dir := t.TempDir()
	o := textOptions(t, 16)
	enc := filepath.Join(dir, "enc.pth")
	b, _ := os.ReadFile(o.Encoder)
	os.WriteFile(enc, b, 0o644)
	o.Encoder, o.CacheDir = enc, filepath.Join(dir, "cache")
	in := mustCheck(t, o)
	prompts := []string{"a heron lands on a lake", "a red panda walks through snow, cinematic, with a long tail and a very long description", "a heron lands on a lake"}
	encoded := 0
	o.Progress = func(done, total int) { encoded = total }
	first, err := EncodePrompts(o, in, prompts)
	if err != nil {
		t.Fatal(err)
	}
	if encoded != 2 || first[0] != first[2] || first[0].Cached || !first[1].Truncated {
		t.Fatalf("first pass: %d encoded (want 2: one repeat), cached %v, truncated %v", encoded, first[0].Cached, first[1].Truncated)
	}
	files, _ := filepath.Glob(filepath.Join(o.CacheDir, "*.safetensors"))
	if len(files) != 2 {
		t.Fatalf("cache holds %v", files)
	}
	// Cached: the encoder is not needed.
	os.Rename(enc, enc+".away")
	encoded = 0
	again, err := EncodePrompts(o, in, prompts)
	if err != nil {
		t.Fatalf("all cached, no encoder: %v", err)
	}
	for i := range prompts {
		if !again[i].Cached || !slices.Equal(again[i].Values, first[i].Values) || again[i].Key != first[i].Key || again[i].Cleaned != first[i].Cleaned {
			t.Fatalf("prompt %d: cached %v, equal %v", i, again[i].Cached, slices.Equal(again[i].Values, first[i].Values))
		}
	}
	if encoded != 0 {
		t.Fatal("a cached prompt was encoded")
	}
	// Discard: the values stay in the cache.
	od := o
	od.Discard = true
	light, err := EncodePrompts(od, in, prompts)
	if err != nil || light[1].Values != nil {
		t.Fatalf("Discard kept the values (%v)", err)
	}
	back, err := ReadEmbedding(CachePath(o.CacheDir, light[1].Key))
	if err != nil || !slices.Equal(back.Values, first[1].Values) {
		t.Fatalf("the discarded values are not in the cache: %v", err)
	}
	os.Rename(enc+".away", enc)
	// Another text length is another key.
	o8 := o
	o8.TextLen = 8
	if in.CacheKey(prompts[0], 8, compute.FP32) == in.CacheKey(prompts[0], 16, compute.FP32) || in.CacheKey(prompts[0], 8, compute.FP32) == in.CacheKey(prompts[1], 8, compute.FP32) || in.CacheKey(prompts[0], 8, compute.FP32) == in.CacheKey(prompts[0], 8, compute.BF16) ||
		in.CacheKey(prompts[0], 8, compute.BF16) == in.CacheKey(prompts[0], 8, compute.BF16Fast) {
		t.Fatal("cache keys collide")
	}
	short, err := EncodePrompts(o8, mustCheck(t, o8), prompts[:1])
	if err != nil || short[0].Cached || short[0].SeqLen != 8 {
		t.Fatalf("text length 8: cached %v, seq_len %d (%v)", short[0].Cached, short[0].SeqLen, err)
	}
	// A damaged cache file: a warning, then computed again.
	p := filepath.Join(o.CacheDir, first[1].Key+".safetensors")
	data, _ := os.ReadFile(p)
	os.WriteFile(p, data[:len(data)-7], 0o644)
	var warned []string
	o.Warn = func(m string) { warned = append(warned, m) }
	fixed, err := EncodePrompts(o, in, prompts[1:2])
	if err != nil || fixed[0].Cached || !slices.Equal(fixed[0].Values, first[1].Values) {
		t.Fatalf("damaged cache file: %v, cached %v", err, fixed[0].Cached)
	}
	if len(warned) != 2 || !strings.Contains(warned[0], "text cache") || !strings.Contains(warned[1], "16 keeps the first 15") {
		t.Fatalf("warnings %q", warned)
	}
}

// TestCheckTextRefuses: missing and corrupt files, and text lengths out of
// range, are errors naming the file.
func TestCheckTextRefuses(t *testing.T) {
	dir := t.TempDir()
	o := textOptions(t, 512)
	cut := filepath.Join(dir, "cut.pth")
	b, _ := os.ReadFile(o.Encoder)
	os.WriteFile(cut, b[:len(b)/2], 0o644)
	garbage := filepath.Join(dir, "spiece.model")
	os.WriteFile(garbage, []byte("not a model"), 0o644)
	for _, c := range []struct {
		mod  func(*TextOptions)
		want string
	}{
		{func(o *TextOptions) { o.Encoder = cut }, cut},
		{func(o *TextOptions) { o.Encoder = filepath.Join(dir, "none.pth") }, "none.pth"},
		{func(o *TextOptions) { o.Tokenizer = garbage }, garbage},
		{func(o *TextOptions) { o.Tokenizer = dir }, dir},
		{func(o *TextOptions) { o.TextLen = 0 }, "text length 0"},
		{func(o *TextOptions) { o.Encoder = "" }, "need a text encoder"},
	} {
		oo := o
		c.mod(&oo)
		if _, err := CheckText(oo); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want mention of %q", oo, err, c.want)
		}
	}
	// A folder holding spiece.model is a tokenizer.
	oo := o
	oo.Tokenizer = filepath.Dir(o.Tokenizer)
	if in, err := CheckText(oo); err != nil || filepath.Base(in.TokenizerPath) != "spiece.model" {
		t.Fatalf("tokenizer folder: %v", err)
	}
}

// TestEmbeddingFile: Write and ReadEmbedding round-trip; a file with
// other metadata, shape or values is refused with its name.
func TestEmbeddingFile(t *testing.T) {
	dir := t.TempDir()
	e := &Embedding{Prompt: "p", Cleaned: "p", Pieces: 2, SeqLen: 3, TextLen: 8, Dim: 2, Values: []float32{1, 2, 3, 4, 5, 6}, Encoder: "sha256:a", Tokenizer: "sha256:b", Key: "k"}
	p := filepath.Join(dir, "e.safetensors")
	if err := e.Write(p); err != nil {
		t.Fatal(err)
	}
	got, err := ReadEmbedding(p)
	if err != nil || got.Prompt != "p" || got.SeqLen != 3 || got.Dim != 2 || !slices.Equal(got.Values, e.Values) || got.Key != "k" {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	write := func(name string, meta map[string]string, shape []int, v []float32) string {
		q := filepath.Join(dir, name)
		if err := checkpoint.WriteSafetensorsFile(q, []checkpoint.WriteTensor{{Name: "context", Shape: shape, Data: v}}, meta); err != nil {
			t.Fatal(err)
		}
		return q
	}
	meta := func(k, v string) map[string]string {
		m := map[string]string{"format": embeddingFormat, "prompt": "p", "pieces": "2", "seq_len": "3", "text_len": "8", "truncated": "false"}
		m[k] = v
		return m
	}
	for _, c := range []struct {
		path, want string
	}{
		{write("fmt", meta("format", "x"), []int{3, 2}, e.Values), "format"},
		{write("seq", meta("seq_len", "4"), []int{3, 2}, e.Values), "shape"},
		{write("num", meta("pieces", "two"), []int{3, 2}, e.Values), "metadata pieces"},
		{write("nan", meta("x", ""), []int{3, 2}, []float32{1, 2, 3, float32(math.NaN()), 5, 6}), "NaN at row 1 column 1"},
		{write("long", meta("text_len", "2"), []int{3, 2}, e.Values), "text length 2"},
	} {
		if _, err := ReadEmbedding(c.path); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), c.path) {
			t.Errorf("%s: %v, want mention of %q", c.path, err, c.want)
		}
	}
}

// FuzzReadEmbedding: any file is read as a valid embedding or refused
// with an error; a valid one has consistent sizes and finite values.
func FuzzReadEmbedding(f *testing.F) {
	dir := f.TempDir()
	e := &Embedding{Prompt: "p", Cleaned: "p", Pieces: 2, SeqLen: 3, TextLen: 8, Dim: 2, Values: []float32{1, 2, 3, 4, 5, 6}, Key: "k"}
	p := filepath.Join(dir, "seed.safetensors")
	if err := e.Write(p); err != nil {
		f.Fatal(err)
	}
	seed, _ := os.ReadFile(p)
	f.Add(seed)
	f.Add(seed[:len(seed)-4])
	f.Add([]byte("not a safetensors file"))
	f.Fuzz(func(t *testing.T, b []byte) {
		q := filepath.Join(t.TempDir(), "e.safetensors")
		if err := os.WriteFile(q, b, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := ReadEmbedding(q)
		if err != nil {
			return
		}
		if got.SeqLen < 1 || got.SeqLen > got.TextLen || got.Dim < 1 || len(got.Values) != got.SeqLen*got.Dim {
			t.Fatalf("accepted %+v", got)
		}
		for _, v := range got.Values {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("accepted a non-finite value")
			}
		}
	})
}
