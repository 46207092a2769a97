package runinput

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/wan"
	"github.com/densitykv/densitykv/weights"
)

// ResolveGenerate is a generate configuration's input stage: the parts of
// a diffusers model folder (--model) not given are filled in, the
// configuration is checked and derived (config.GenerateConfig.Resolve,
// keys are the file's, named file in errors: it reads no file), and then
// every input file the run reads is checked before any work, without
// reading the weights: the DiT checkpoint (its entry resolved and
// recorded), the LoRA against the backbone (its alpha recorded), the
// prompts file, the --text files, the text encoder and tokenizer, the VAE.
func ResolveGenerate(gc *config.GenerateConfig, keys config.Keys, file string) error {
	G := &gc.Generate
	if err := fillFromModelDir(G); err != nil {
		return err
	}
	if err := gc.Resolve(keys, file); err != nil {
		return err
	}
	if err := resolveEntry(gc); err != nil {
		return err
	}
	if err := resolveLoRA(gc, gc.LoRAAlphaGiven(keys)); err != nil {
		return err
	}
	if err := checkTextFiles(G); err != nil {
		return err
	}
	return checkVAEFile(G)
}

// fillFromModelDir fills the model's parts not given (Checkpoint, VAE,
// TextEncoder, Tokenizer) from the diffusers model folder ModelDir: its
// component folders (weights.Component). A folder without
// model_index.json, or without one of the components, is an error.
func fillFromModelDir(G *config.GenerateSection) error {
	if G.ModelDir == "" {
		return nil
	}
	if _, err := os.Stat(filepath.Join(G.ModelDir, weights.ModelIndex)); err != nil {
		return fmt.Errorf("--model %s: not a diffusers model folder (no %s); give its parts with --checkpoint, --vae, --text-encoder and --tokenizer: %w", G.ModelDir, weights.ModelIndex, err)
	}
	for _, c := range []struct {
		dst  *string
		kind weights.Kind
	}{{&G.Checkpoint, weights.DiT}, {&G.VAE, weights.VAE}, {&G.TextEncoder, weights.TextEncoder}, {&G.Tokenizer, weights.Tokenizer}} {
		if *c.dst != "" {
			continue
		}
		p, err := weights.Component(G.ModelDir, c.kind)
		if err != nil {
			return fmt.Errorf("--model: %w", err)
		}
		*c.dst = p
	}
	return nil
}

// resolveEntry checks the DiT checkpoint and records the entry that will
// be loaded (the automatic choice resolved), warning when an automatic
// choice passed over generator_ema.
func resolveEntry(gc *config.GenerateConfig) error {
	G := &gc.Generate
	if _, err := os.Stat(G.Checkpoint); err != nil {
		return fmt.Errorf("--checkpoint: %w", err)
	}
	files, err := weights.Files(G.Checkpoint, weights.DiT)
	if err != nil {
		return err
	}
	entry := ""
	if len(files) == 1 {
		entry, err = checkpoint.TorchEntry(files[0], checkpoint.TorchOptions{Entry: G.Entry})
	}
	if err != nil {
		from := fmt.Sprintf("--entry %q", G.Entry)
		if p, ok := G.Backbone.Preset(); ok && p.Entry == G.Entry {
			from += fmt.Sprintf(", the %s preset's; name another with --entry", G.Backbone)
		}
		return fmt.Errorf("--checkpoint %s (%s): %w", G.Checkpoint, from, err)
	}
	if G.Entry == "" && G.Backbone == config.BackboneNone && entry == "generator" {
		if ents, err := checkpoint.TorchFileEntries(files[0]); err == nil && slices.Contains(ents, "generator_ema") {
			gc.Warnings = append(gc.Warnings, fmt.Sprintf("generate: %s holds generator and generator_ema; loading generator (name the entry with --entry, or use --backbone: self-forcing runs generator_ema)", G.Checkpoint))
		}
	}
	G.Entry = entry
	return nil
}

// resolveLoRA checks --lora before any work: its adapters are read
// (weights.OpenLoRA: names, shapes, the rank and alpha the file states)
// and held against the backbone. A backbone that takes no LoRA
// (self-forcing, causal-forcing) refuses one, and LongLive one of another
// rank than its own (256: its authors' loader refuses those, and its
// alpha 256 would scale a rank-64 adapter by 4), unless the alpha is
// given explicitly (--lora-alpha, generate.lora_alpha): then the scale
// alpha/rank is the user's. The alpha used is the one given, else the
// file's (".alpha" tensors, adapter_config.json, its metadata), else the
// preset's, else the rank (scale 1); it is recorded in G.LoRAAlpha. A
// given alpha the file contradicts is refused.
func resolveLoRA(gc *config.GenerateConfig, given bool) error {
	G := &gc.Generate
	model := G.Model
	if G.LoRA == "" {
		return nil
	}
	if _, err := os.Stat(G.LoRA); err != nil {
		return fmt.Errorf("--lora: %w", err)
	}
	shell := &wan.Model{Cfg: model, Blocks: make([]wan.Block, model.Layers)}
	var targets []string
	for _, e := range shell.Expected() {
		if len(e.Shape) == 2 && strings.HasSuffix(e.Name, ".weight") {
			targets = append(targets, e.Name)
		}
	}
	f, err := weights.OpenLoRA(G.LoRA, targets)
	if err != nil {
		return err
	}
	defer f.Close()
	ranks := fmt.Sprint(f.Ranks())
	if r := f.Rank(); r > 0 {
		ranks = strconv.Itoa(r)
	}
	p, preset := G.Backbone.Preset()
	switch {
	case preset && !p.NeedsLoRA && !given:
		return fmt.Errorf("--lora %s: --backbone %s takes no LoRA (its authors merge none); to merge these rank-%s adapters anyway, give their alpha with --lora-alpha (the scale is alpha/rank)", G.LoRA, G.Backbone, ranks)
	case preset && p.NeedsLoRA && f.Rank() != p.LoRARank && !given:
		return fmt.Errorf("--lora %s has rank-%s adapters; --backbone %s's are rank %d with alpha %g (its authors' loader refuses other ranks, and alpha %g would scale these by %s); to merge them anyway, give their alpha with --lora-alpha (the scale is alpha/rank)",
			G.LoRA, ranks, G.Backbone, p.LoRARank, p.LoRAAlpha, p.LoRAAlpha, scaleOf(p.LoRAAlpha, f.Ranks()))
	case given && f.Alpha > 0 && f.Alpha != G.LoRAAlpha:
		return fmt.Errorf("--lora-alpha (generate.lora_alpha) is %g, but --lora %s says alpha %g (its %s)", G.LoRAAlpha, G.LoRA, f.Alpha, f.AlphaFrom)
	case !given && f.Alpha > 0:
		G.LoRAAlpha = f.Alpha
	}
	if G.LoRAAlpha == 0 && len(f.Ranks()) > 1 {
		return fmt.Errorf("--lora %s has adapters of ranks %v and states no alpha: give it with --lora-alpha (alpha = the rank needs one rank)", G.LoRA, f.Ranks())
	}
	// Everything wan.Load checks before it reads the factors: shapes
	// against the model, every block Linear adapted.
	if _, err := wan.CheckLoRA(G.LoRA, model, G.LoRAAlpha); err != nil {
		return fmt.Errorf("--lora: %w", err)
	}
	return nil
}

// scaleOf writes alpha/r for each rank.
func scaleOf(alpha float64, ranks []int) string {
	var s []string
	for _, r := range ranks {
		s = append(s, strconv.FormatFloat(alpha/float64(r), 'g', 4, 64))
	}
	return strings.Join(s, ", ")
}

// checkTextFiles checks the text inputs: the prompts file, the --text
// files, and the text encoder's and tokenizer's files (found in their
// folders now: generate.CheckText reads the tensors and the tokenizer
// before any work).
func checkTextFiles(G *config.GenerateSection) error {
	if G.PromptsFile != "" {
		if _, err := os.Stat(G.PromptsFile); err != nil {
			return fmt.Errorf("--prompts: %w", err)
		}
	}
	for _, ts := range G.Texts {
		if _, err := os.Stat(ts.Path); err != nil {
			return fmt.Errorf("--text: %w", err)
		}
	}
	for _, f := range []struct{ flag, path string }{{"--text-encoder", G.TextEncoder}, {"--tokenizer", G.Tokenizer}} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			return fmt.Errorf("%s: %w", f.flag, err)
		}
	}
	if G.TextEncoder != "" {
		if _, err := weights.Files(G.TextEncoder, weights.TextEncoder); err != nil {
			return err
		}
	}
	if G.Tokenizer != "" {
		if _, err := weights.TokenizerFile(G.Tokenizer); err != nil {
			return err
		}
	}
	return nil
}

// checkVAEFile checks the VAE file (found in its folder).
func checkVAEFile(G *config.GenerateSection) error {
	if G.VAE == "" {
		return nil
	}
	if _, err := os.Stat(G.VAE); err != nil {
		return fmt.Errorf("--vae: %w", err)
	}
	_, err := weights.Files(G.VAE, weights.VAE)
	return err
}
