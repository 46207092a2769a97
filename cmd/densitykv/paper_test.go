package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/golden"
	"github.com/densitykv/densitykv/wan"
)

// writeSparseLoRA writes a LoRA of rank r in PEFT naming adapting every
// block Linear of a model of cfg's shapes, as a safetensors file whose
// factors are zeros left as a hole (a sparse file: the paper's LongLive
// configurations are checked against the 1.3B shapes, 1.4 GB of factors
// that --dry-run never reads).
func writeSparseLoRA(t *testing.T, path string, cfg wan.Config, r int) {
	t.Helper()
	hdr := map[string]any{}
	var off int64
	add := func(name string, shape ...int) {
		n := int64(2)
		for _, d := range shape {
			n *= int64(d)
		}
		hdr[name] = map[string]any{"dtype": "BF16", "shape": shape, "data_offsets": []int64{off, off + n}}
		off += n
	}
	for l := 0; l < cfg.Layers; l++ {
		for _, s := range []string{"self_attn.q", "self_attn.k", "self_attn.v", "self_attn.o", "cross_attn.q", "cross_attn.k", "cross_attn.v", "cross_attn.o", "ffn.0", "ffn.2"} {
			in, out := cfg.Dim, cfg.Dim
			switch s {
			case "ffn.0":
				out = cfg.FFNDim
			case "ffn.2":
				in = cfg.FFNDim
			}
			k := fmt.Sprintf("base_model.model.blocks.%d.%s", l, s)
			add(k+".lora_A.weight", r, in)
			add(k+".lora_B.weight", out, r)
		}
	}
	js, err := json.Marshal(hdr)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(js)))
	if _, err := f.Write(append(n[:], js...)); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(8 + int64(len(js)) + off); err != nil {
		t.Fatal(err)
	}
}

// TestPaperConfigsResolve: every file of configs/paper loads and resolves
// through generate --config with a user's prompt file of 128 lines (a dry
// run, the tiny golden files standing in for the weights), and takes the
// protocol's prompts: all 128 (main, authors) or the 16-prompt subset
// (ablation), 32 or 4 of them for shard 1/4, 120 s with the 30/60/120 s
// prefixes or 60 s.
func TestPaperConfigsResolve(t *testing.T) {
	dir := t.TempDir()
	var sb strings.Builder
	for i := 0; i < config.PaperPrompts; i++ {
		fmt.Fprintf(&sb, "refined prompt %d\n", i)
	}
	pf := filepath.Join(dir, "refined.txt")
	os.WriteFile(pf, []byte(sb.String()), 0o644)
	lora := filepath.Join(dir, "lora.safetensors")
	writeSparseLoRA(t, lora, wan.DefaultConfig(), 256)
	files := config.PaperConfigs()
	for _, f := range files {
		set := strings.SplitN(f.Path, "/", 2)[0]
		for _, shard := range []string{"0/1", "1/4"} {
			args := []string{"generate", "--config", filepath.Join("..", "..", "configs", "paper", f.Path), "--prompts", pf,
				"--checkpoint", filepath.Join(golden.Wan(t), "weights.safetensors"),
				"--text-encoder", filepath.Join(golden.T5(t), "weights.pth"), "--tokenizer", filepath.Join(golden.T5(t), "spiece.model"),
				"--vae", filepath.Join(golden.PipelineVAE(t), "weights.pth"), "--out", dir, "--dry-run", "--shard", shard}
			if strings.Contains(f.Path, "/longlive/") {
				args = append(args, "--lora", lora)
			}
			code, out, errs := run(t, context.Background(), args...)
			if code != 0 {
				t.Fatalf("%s: exit %d: %s", f.Path, code, errs)
			}
			var idx []int
			for _, ln := range strings.Split(out, "\n") {
				var i int
				if _, err := fmt.Sscanf(ln, "%d  to generate", &i); err == nil {
					idx = append(idx, i)
				}
			}
			want := config.PaperAblationIndices
			if set != "ablation" {
				want = make([]int, config.PaperPrompts)
				for i := range want {
					want[i] = i
				}
			}
			if shard == "1/4" {
				var w []int
				for k, i := range want {
					if k%4 == 1 {
						w = append(w, i)
					}
				}
				want = w
			}
			if !slices.Equal(idx, want) {
				t.Fatalf("%s shard %s: prompts %v, want %v", f.Path, shard, idx, want)
			}
			desc := "seed 0, 160 blocks of 3 latent frames (480 latent frames, 120 s, 1917 frames at 16 fps, crf 18); video_30s.mp4: 477 frames; video_60s.mp4: 957 frames; video_120s.mp4: 1917 frames"
			if set == "ablation" {
				desc = "seed 0, 80 blocks of 3 latent frames (240 latent frames, 60 s, 957 frames at 16 fps, crf 18)\n"
			}
			if !strings.Contains(out, desc) {
				t.Fatalf("%s: %s", f.Path, out)
			}
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Fatalf("a dry run wrote into %s: %v", dir, ents)
	}
}
