package runinput

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/wan"
)

// writeLoRA writes adapters of rank r for every block Linear of the tiny
// DiT in the naming of prefix/suffixes, with ".alpha" tensors when alpha
// is set, and returns the file.
func writeLoRA(t *testing.T, dir, name string, r int, alpha float32, kohya bool) string {
	t.Helper()
	m := &wan.Model{Cfg: wan.TinyConfig(), Blocks: make([]wan.Block, 2)}
	var ts []checkpoint.WriteTensor
	for _, e := range m.Expected() {
		mod, ok := strings.CutSuffix(e.Name, ".weight")
		if !ok || len(e.Shape) != 2 || !strings.HasPrefix(mod, "blocks.") {
			continue
		}
		a, b := ".lora_A.weight", ".lora_B.weight"
		key := "base_model.model." + mod
		if kohya {
			a, b = ".lora_down.weight", ".lora_up.weight"
			key = "lora_unet_" + strings.ReplaceAll(mod, ".", "_")
		}
		ts = append(ts, checkpoint.WriteTensor{Name: key + a, Shape: []int{r, e.Shape[1]}, Data: make([]float32, r*e.Shape[1])},
			checkpoint.WriteTensor{Name: key + b, Shape: []int{e.Shape[0], r}, Data: make([]float32, r*e.Shape[0])})
		if alpha != 0 {
			ts = append(ts, checkpoint.WriteTensor{Name: key + ".alpha", Shape: []int{}, Data: []float32{alpha}})
		}
	}
	p := filepath.Join(dir, name)
	if err := checkpoint.WriteSafetensorsFile(p, ts, nil); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestResolveLoRA checks --lora against the backbone before any work:
// LongLive takes rank 256 at alpha 256 and refuses another rank (the
// rank-64 LoRA merged at 4× its scale) unless the alpha is given; a
// backbone without a LoRA refuses one unless asked; the file's alpha is
// used and recorded, and a given alpha it contradicts is refused.
func TestResolveLoRA(t *testing.T) {
	dir := t.TempDir()
	r256 := writeLoRA(t, dir, "r256.safetensors", 256, 0, false)
	r64 := writeLoRA(t, dir, "r64.safetensors", 64, 0, false)
	kohya := writeLoRA(t, dir, "kohya.safetensors", 4, 8, true)
	peft := filepath.Join(dir, "peft")
	os.MkdirAll(peft, 0o755)
	os.Rename(writeLoRA(t, dir, "p.safetensors", 4, 0, false), filepath.Join(peft, "adapter_model.safetensors"))
	b, _ := json.Marshal(map[string]any{"r": 4, "lora_alpha": 2, "peft_type": "LORA"})
	os.WriteFile(filepath.Join(peft, "adapter_config.json"), b, 0o644)
	for _, c := range []struct {
		name      string
		backbone  config.Backbone
		lora      string
		alpha     float64
		given     bool
		says      string // "" accepted
		wantAlpha float64
	}{
		{"longlive rank 256", config.BackboneLongLive, r256, 256, false, "", 256},
		{"longlive rank 64", config.BackboneLongLive, r64, 256, false, "rank-64 adapters; --backbone longlive's are rank 256 with alpha 256 (its authors' loader refuses other ranks, and alpha 256 would scale these by 4)", 0},
		{"longlive rank 64 asked", config.BackboneLongLive, r64, 64, true, "", 64},
		{"self-forcing", config.BackboneSelfForcing, r256, 0, false, "--backbone self-forcing takes no LoRA", 0},
		{"self-forcing asked", config.BackboneSelfForcing, r256, 128, true, "", 128},
		{"none: the file's alpha", config.BackboneNone, kohya, 0, false, "", 8},
		{"none: adapter_config.json", config.BackboneNone, peft, 0, false, "", 2},
		{"given alpha against the file's", config.BackboneNone, kohya, 16, true, "--lora-alpha (generate.lora_alpha) is 16, but --lora " + kohya + " says alpha 8 (its .alpha tensors)", 0},
		{"not a LoRA", config.BackboneNone, filepath.Join(dir, "peft", "adapter_config.json"), 0, false, "--lora", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			gc := config.GenerateConfig{}
			gc.Generate.Backbone, gc.Generate.LoRA, gc.Generate.LoRAAlpha = c.backbone, c.lora, c.alpha
			gc.Generate.Model = wan.TinyConfig()
			err := resolveLoRA(&gc, c.given)
			switch {
			case c.says == "" && err != nil:
				t.Fatal(err)
			case c.says == "" && gc.Generate.LoRAAlpha != c.wantAlpha:
				t.Fatalf("alpha %v, want %v", gc.Generate.LoRAAlpha, c.wantAlpha)
			case c.says != "" && (err == nil || !strings.Contains(err.Error(), c.says)):
				t.Fatalf("error %v, want %q", err, c.says)
			}
		})
	}
	// A block Linear without an adapter is refused here, before any work
	// (not when the DiT is loaded, after the text encoder).
	partial := writeLoRA(t, dir, "partial.safetensors", 4, 0, false)
	psd, err := checkpoint.LoadFile(partial, checkpoint.TorchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var pts []checkpoint.WriteTensor
	for _, n := range psd.Names() {
		if !strings.Contains(n, "blocks.1.cross_attn.k.") {
			pts = append(pts, checkpoint.WriteTensor{Name: n, Shape: psd[n].Shape, Data: psd[n].Data})
		}
	}
	checkpoint.WriteSafetensorsFile(partial, pts, nil)
	pc := config.GenerateConfig{}
	pc.Generate.LoRA, pc.Generate.Model = partial, wan.TinyConfig()
	if err := resolveLoRA(&pc, false); err == nil || !strings.Contains(err.Error(), "1 block Linear layers have no adapter: blocks.1.cross_attn.k.weight") {
		t.Fatalf("a missing adapter: %v", err)
	}
	// Mixed ranks need an alpha.
	mixed := writeLoRA(t, dir, "mixed.safetensors", 4, 0, false)
	sd, err := checkpoint.LoadFile(mixed, checkpoint.TorchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ts []checkpoint.WriteTensor
	for _, n := range sd.Names() {
		w := sd[n]
		if strings.HasPrefix(n, "base_model.model.blocks.1.ffn.2.") {
			r := 8
			if strings.Contains(n, "lora_A") {
				w = &checkpoint.Tensor{Shape: []int{r, w.Shape[1]}, Data: make([]float32, r*w.Shape[1])}
			} else {
				w = &checkpoint.Tensor{Shape: []int{w.Shape[0], r}, Data: make([]float32, r*w.Shape[0])}
			}
		}
		ts = append(ts, checkpoint.WriteTensor{Name: n, Shape: w.Shape, Data: w.Data})
	}
	checkpoint.WriteSafetensorsFile(mixed, ts, nil)
	gc := config.GenerateConfig{}
	gc.Generate.LoRA, gc.Generate.Model = mixed, wan.TinyConfig()
	if err := resolveLoRA(&gc, false); err == nil || !strings.Contains(err.Error(), fmt.Sprint([]int{4, 8})) {
		t.Fatalf("mixed ranks without an alpha: %v", err)
	}
}

// TestResolveGenerateFiles: the input stage names the input file that is
// missing (config.GenerateConfig.Resolve reads none), and resolves the
// entry of a checkpoint that is there.
func TestResolveGenerateFiles(t *testing.T) {
	dir := t.TempDir()
	ckpt := writeLoRA(t, dir, "w.safetensors", 4, 0, false) // any safetensors file
	file := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	text, enc, tok := file("t.safetensors"), file("enc.pth"), file("spiece.model")
	base := func() config.GenerateConfig {
		gc := config.GenerateDefaults()
		g := &gc.Generate
		g.Arch, g.Checkpoint, g.LatentHeight, g.LatentWidth, g.Blocks = "tiny", ckpt, 6, 8, 4
		g.TextEncoder, g.Tokenizer, g.Prompts = enc, tok, []config.PromptSpec{{Text: "a"}}
		gc.Run.Out = dir
		return gc
	}
	none := filepath.Join(dir, "none")
	for _, c := range []struct {
		name string
		mod  func(*config.GenerateSection)
		want string
	}{
		{"checkpoint missing", func(g *config.GenerateSection) { g.Checkpoint = none }, "--checkpoint: stat " + none},
		{"tokenizer missing", func(g *config.GenerateSection) { g.Tokenizer = none }, "--tokenizer: stat " + none},
		{"text encoder missing", func(g *config.GenerateSection) { g.TextEncoder = none }, "--text-encoder: stat " + none},
		{"text missing", func(g *config.GenerateSection) {
			g.Prompts, g.Texts = nil, []config.TextSpec{{Path: none}}
		}, "--text: stat " + none},
		{"prompts file missing", func(g *config.GenerateSection) { g.Prompts, g.PromptsFile = nil, none }, "--prompts: stat " + none},
		{"vae missing", func(g *config.GenerateSection) { g.VAE = none + ".pth" }, "--vae: stat " + none},
		{"lora missing", func(g *config.GenerateSection) { g.LoRA = none }, "--lora: stat " + none},
		{"model folder", func(g *config.GenerateSection) { g.ModelDir = dir }, "--model " + dir + ": not a diffusers model folder"},
		{"all there", func(g *config.GenerateSection) { g.Texts = []config.TextSpec{{Path: text, FromBlock: 1}} }, ""},
	} {
		gc := base()
		c.mod(&gc.Generate)
		err := ResolveGenerate(&gc, config.NewKeys(), "test")
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want mention of %q", c.name, err, c.want)
		}
		// The configuration itself resolves: the missing file is the input
		// stage's to find.
		data := base()
		c.mod(&data.Generate)
		if err := data.Resolve(config.NewKeys(), "test"); err != nil {
			t.Errorf("%s: config.GenerateConfig.Resolve: %v", c.name, err)
		}
	}
}
