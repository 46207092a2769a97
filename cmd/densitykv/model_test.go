package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/golden"
	"github.com/densitykv/densitykv/rollout"
	"github.com/densitykv/densitykv/runfolder"
	"github.com/densitykv/densitykv/weights"
	"github.com/densitykv/densitykv/weights/weightstest"
)

// writeDiffusersModel writes the golden tiny DiT, text encoder, tokenizer
// and pipeline VAE as a diffusers model folder (model_index.json;
// transformer/ and text_encoder/ sharded with an index, in diffusers' and
// Hugging Face's names; vae/ in diffusers' names; tokenizer/spiece.model).
func writeDiffusersModel(t *testing.T, dir string) {
	t.Helper()
	if err := weightstest.ModelFolder(dir); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		src, sub string
		kind     weights.Kind
		o        weightstest.Options
	}{
		{filepath.Join(golden.Wan(t), "weights.safetensors"), "transformer", weights.DiT, weightstest.Options{Layout: "diffusers", File: "diffusion_pytorch_model", Shards: 2}},
		{filepath.Join(golden.PipelineVAE(t), "weights.safetensors"), "vae", weights.VAE, weightstest.Options{Layout: "diffusers", File: "diffusion_pytorch_model"}},
		{filepath.Join(golden.T5(t), "weights.safetensors"), "text_encoder", weights.TextEncoder, weightstest.Options{Layout: "Hugging Face", Shards: 2,
			Config: map[string]any{"relative_attention_max_distance": 128, "layer_norm_epsilon": 1e-6}}},
	} {
		sd, err := checkpoint.LoadFile(c.src, checkpoint.TorchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := weightstest.Write(filepath.Join(dir, c.sub), c.kind, weightstest.FromStateDict(sd), c.o); err != nil {
			t.Fatal(err)
		}
	}
	spm, err := os.ReadFile(filepath.Join(golden.T5(t), "spiece.model"))
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "tokenizer"), 0o755)
	if err := os.WriteFile(filepath.Join(dir, "tokenizer", "spiece.model"), spm, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestGenerateFromDiffusersModel: --model DIR runs a diffusers model
// folder (its transformer/, vae/, text_encoder/ and tokenizer/) to the
// same latents as the official files, records the parts it used and
// says what it loaded; --checkpoint DIR alone takes the folder's
// transformer; a folder that is no diffusers model is refused.
func TestGenerateFromDiffusersModel(t *testing.T) {
	ffTools(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "Wan2.1-T2V-1.3B-Diffusers")
	writeDiffusersModel(t, model)
	common := []string{"generate", "--arch", "tiny", "--prompt", "a heron lands on a lake", "--latent-height", "6", "--latent-width", "8",
		"--blocks", "1", "--policy", "native", "--preview=false", "--trace-step", "-1", "--out", dir}
	latents := func(name string) []byte {
		t.Helper()
		man, err := rollout.ReadManifest(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		var b []byte
		for i := range man.Shards {
			x, err := rollout.ReadBlock(filepath.Join(dir, name), man, i)
			if err != nil {
				t.Fatal(err)
			}
			b = append(b, f32bytes(x)...)
		}
		return b
	}
	code, _, errs := run(t, context.Background(), append(common, "--name", "official", "--checkpoint", filepath.Join(golden.Wan(t), "weights.safetensors"),
		"--text-encoder", filepath.Join(golden.T5(t), "weights.safetensors"), "--tokenizer", filepath.Join(golden.T5(t), "spiece.model"),
		"--vae", filepath.Join(golden.PipelineVAE(t), "weights.safetensors"))...)
	if code != 0 {
		t.Fatalf("official files: exit %d: %s", code, errs)
	}
	code, _, errs = run(t, context.Background(), append(common, "--name", "diffusers", "--model", model)...)
	if code != 0 {
		t.Fatalf("--model: exit %d: %s", code, errs)
	}
	for _, s := range []string{"DiT: diffusers WanTransformer3DModel (diffusers naming), 2 shards of diffusion_pytorch_model.safetensors.index.json",
		"VAE: diffusers AutoencoderKLWan (diffusers naming)", "text encoder: UMT5EncoderModel (Hugging Face naming), 2 shards"} {
		if !strings.Contains(errs, s) {
			t.Errorf("the output does not say %q:\n%s", s, errs)
		}
	}
	if !bytes.Equal(latents("official"), latents("diffusers")) {
		t.Fatal("--model gives other latents than the official files")
	}
	var gc config.GenerateConfig
	if err := runfolder.LoadConfig(filepath.Join(dir, "diffusers"), &gc); err != nil {
		t.Fatal(err)
	}
	G := gc.Generate
	if G.ModelDir != model || G.Checkpoint != filepath.Join(model, "transformer") || G.VAE != filepath.Join(model, "vae") ||
		G.TextEncoder != filepath.Join(model, "text_encoder") || G.Tokenizer != filepath.Join(model, "tokenizer") {
		t.Fatalf("recorded parts: %+v", G)
	}
	// The transformer alone, by the model folder.
	code, _, errs = run(t, context.Background(), append(common, "--name", "ckpt", "--checkpoint", model,
		"--text-encoder", filepath.Join(golden.T5(t), "weights.safetensors"), "--tokenizer", filepath.Join(golden.T5(t), "spiece.model"))...)
	if code != 0 {
		t.Fatalf("--checkpoint MODEL: exit %d: %s", code, errs)
	}
	if !bytes.Equal(latents("official"), latents("ckpt")) {
		t.Fatal("--checkpoint MODEL gives other latents")
	}
	code, _, errs = run(t, context.Background(), append(common, "--name", "nomodel", "--model", filepath.Join(model, "vae"))...)
	if code != exitUsage || !strings.Contains(errs, "not a diffusers model folder (no model_index.json)") {
		t.Fatalf("--model of a folder without model_index.json: exit %d: %s", code, errs)
	}
}
