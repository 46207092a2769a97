package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/internal/torchtest"
)

// TestLoRAChecked: generate says what LoRA it merged (file, adapters,
// naming, rank, alpha, scale); --backbone longlive refuses adapters of
// another rank than its 256 (a rank-2 file would be merged at 128× its
// scale) and --backbone self-forcing any LoRA, both unless --lora-alpha
// is given, before any work.
func TestLoRAChecked(t *testing.T) {
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "two.pt")
	writeTwoEntryCheckpoint(t, ckpt)
	lora := filepath.Join(dir, "lora.pt")
	writeTinyLoRA(t, lora)
	small := filepath.Join(dir, "rank2.pt")
	var gen torchtest.Dict
	for l := 0; l < 2; l++ {
		for _, s := range []string{"self_attn.q", "self_attn.k", "self_attn.v", "self_attn.o", "cross_attn.q", "cross_attn.k", "cross_attn.v", "cross_attn.o", "ffn.0", "ffn.2"} {
			in, out := 64, 64
			if s == "ffn.0" {
				out = 128
			} else if s == "ffn.2" {
				in = 128
			}
			k := "base_model.model.blocks." + strconv.Itoa(l) + "." + s
			gen = append(gen, torchtest.KV{Key: k + ".lora_A.weight", Value: &torchtest.Tensor{Shape: []int{2, in}, Data: make([]float32, 2*in)}},
				torchtest.KV{Key: k + ".lora_B.weight", Value: &torchtest.Tensor{Shape: []int{out, 2}, Data: make([]float32, 2*out)}})
		}
	}
	if err := os.WriteFile(small, torchtest.Bytes(torchtest.Dict{{Key: "generator_lora", Value: gen}}, torchtest.Options{}), 0o644); err != nil {
		t.Fatal(err)
	}
	text := tinyText(t, dir)
	args := func(name string, extra ...string) []string {
		return append([]string{"generate", "--arch", "tiny", "--checkpoint", ckpt, "--text", text, "--latent-height", "6", "--latent-width", "8",
			"--blocks", "1", "--out", dir, "--name", name, "--preview=false", "--trace-step", "-1", "--policy", "native"}, extra...)
	}
	code, _, errs := run(t, context.Background(), args("ll", "--backbone", "longlive", "--lora", lora)...)
	if code != 0 || !strings.Contains(errs, "lora: merged "+lora+": 20 adapters (PEFT naming), rank 256, alpha 256: scale 1") {
		t.Fatalf("exit %d, no line saying what was merged:\n%s", code, errs)
	}
	for _, c := range []struct {
		name string
		args []string
		says string
	}{
		{"longlive rank 2", []string{"--backbone", "longlive", "--lora", small}, "rank-2 adapters; --backbone longlive's are rank 256"},
		{"self-forcing", []string{"--backbone", "self-forcing", "--lora", lora}, "--backbone self-forcing takes no LoRA"},
	} {
		code, _, errs := run(t, context.Background(), args(c.name, c.args...)...)
		if code != exitUsage || !strings.Contains(errs, c.says) {
			t.Errorf("%s: exit %d, %q, want a usage error saying %q", c.name, code, errs, c.says)
		}
		if _, err := os.Stat(filepath.Join(dir, c.name)); !os.IsNotExist(err) {
			t.Errorf("%s: the run folder was made before the refusal", c.name)
		}
		code, _, errs = run(t, context.Background(), args(c.name+"-asked", append(c.args, "--lora-alpha", "2")...)...)
		if code != 0 || !strings.Contains(errs, "alpha 2: scale") {
			t.Errorf("%s with --lora-alpha 2: exit %d: %s", c.name, code, errs)
		}
	}
}
