package rollout

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/wan"
)

// LoadText reads a text-encoder output from a tensor file (.safetensors or
// PyTorch zip): tensor name (empty = the file's only tensor, or "context")
// of shape [L][D] or [1][L][D]. It returns the values and L.
func LoadText(path, name string) ([]float32, int, int, error) {
	sd, err := checkpoint.LoadFile(path, checkpoint.TorchOptions{})
	if err != nil {
		return nil, 0, 0, fmt.Errorf("rollout: text embeddings: %w", err)
	}
	if name == "" {
		if _, ok := sd["context"]; ok {
			name = "context"
		} else if len(sd) == 1 {
			name = sd.Names()[0]
		} else {
			return nil, 0, 0, fmt.Errorf("rollout: text embeddings %s: %d tensors (%v); name the one to use", path, len(sd), sd.Names())
		}
	}
	t, ok := sd[checkpoint.NormalizeKey(name)]
	if !ok {
		return nil, 0, 0, fmt.Errorf("rollout: text embeddings %s: no tensor %q (have %v)", path, name, sd.Names())
	}
	sh := t.Shape
	if len(sh) == 3 && sh[0] == 1 {
		sh = sh[1:]
	}
	if len(sh) != 2 {
		return nil, 0, 0, fmt.Errorf("rollout: text embeddings %s: tensor %q has shape %v, want [L, D] or [1, L, D]", path, name, t.Shape)
	}
	return t.Data, sh[0], sh[1], nil
}

// TextInput is one prompt of a generation's prompt schedule.
type TextInput struct {
	FromBlock int    // first block using this prompt
	Path      string // tensor file with the text-encoder output
	Tensor    string // tensor name inside it (see LoadText)
}

// GenerateOptions is everything `densitykv generate` needs.
type GenerateOptions struct {
	Checkpoint string     // .safetensors or .pt (generator / generator_ema / model.)
	Entry      string     // PyTorch entry override ("" = automatic)
	LoRA       string     // optional LongLive LoRA checkpoint (generator_lora)
	LoRAAlpha  float64    // 0 = the rank
	Model      wan.Config // zero value = wan.DefaultConfig()
	Texts      []TextInput
	Policy     string        // memory policy name (memory.Names)
	Memory     memory.Config // Layout and (when 0) RoPETheta are filled in from the model (wan.Config.Memory)
	// Height and Width are the latent size (0 = 60×104, 480×832 video).
	Height, Width  int
	Blocks         int
	FramesPerBlock int    // 0 = 3
	Seed           uint64 // seeded noise
	Steps          []int  // nil = DefaultSteps
	Shift          float64
	OutDir         string
	Progress       func(Progress)
	Context        context.Context
}

// Generate loads the checkpoint and text embeddings, builds the memory
// policy and streams a rollout into o.OutDir: manifest.json, latents/
// block_NNNNN.safetensors and memory_log.jsonl. It returns the final
// manifest.
func Generate(o GenerateOptions) (Manifest, error) {
	cfg := o.Model
	if cfg == (wan.Config{}) {
		cfg = wan.DefaultConfig()
	}
	if o.Height == 0 && o.Width == 0 {
		o.Height, o.Width = 60, 104
	}
	if o.FramesPerBlock == 0 {
		o.FramesPerBlock = 3
	}
	if o.Steps == nil {
		o.Steps = DefaultSteps
	}
	if o.Shift == 0 {
		o.Shift = 5
	}
	if o.OutDir == "" || len(o.Texts) == 0 || o.Blocks <= 0 {
		return Manifest{}, fmt.Errorf("rollout: generate: need an output folder (%q), at least one text (%d) and blocks > 0 (%d)", o.OutDir, len(o.Texts), o.Blocks)
	}
	sch, err := NewSchedule(o.Steps, o.Shift, 1000)
	if err != nil {
		return Manifest{}, err
	}
	mc, err := cfg.Memory(o.Memory, o.Height, o.Width, o.FramesPerBlock)
	if err != nil {
		return Manifest{}, fmt.Errorf("rollout: generate: %w", err)
	}
	pol, err := memory.New(o.Policy, mc)
	if err != nil {
		return Manifest{}, fmt.Errorf("rollout: generate: %w", err)
	}
	m, err := wan.Load(o.Checkpoint, cfg, wan.LoadOptions{Entry: o.Entry, LoRA: o.LoRA, LoRAAlpha: o.LoRAAlpha})
	if err != nil {
		return Manifest{}, fmt.Errorf("rollout: generate: %w", err)
	}
	texts := append([]TextInput(nil), o.Texts...)
	sort.SliceStable(texts, func(i, j int) bool { return texts[i].FromBlock < texts[j].FromBlock })
	var prompts []Prompt
	for _, ti := range texts {
		v, rows, dim, err := LoadText(ti.Path, ti.Tensor)
		if err != nil {
			return Manifest{}, err
		}
		if dim != cfg.TextDim {
			return Manifest{}, fmt.Errorf("rollout: generate: text %s has width %d, the model needs %d", ti.Path, dim, cfg.TextDim)
		}
		txt, err := m.EmbedText(v, rows)
		if err != nil {
			return Manifest{}, fmt.Errorf("rollout: generate: text %s: %w", ti.Path, err)
		}
		prompts = append(prompts, Prompt{FromBlock: ti.FromBlock, Text: txt, Name: filepath.Base(ti.Path)})
	}
	seed := o.Seed
	w, err := NewWriter(o.OutDir, Manifest{Policy: pol.Name(), Channels: cfg.OutDim, Height: o.Height, Width: o.Width,
		FramesPerBlock: o.FramesPerBlock, BlocksPlanned: o.Blocks, Timesteps: sch.Timesteps, Sigmas: sch.Sigmas, Seed: &seed,
		Extra: map[string]string{"checkpoint": o.Checkpoint, "lora": o.LoRA, "started": time.Now().UTC().Format(time.RFC3339)}})
	if err != nil {
		return Manifest{}, err
	}
	logf, err := os.Create(filepath.Join(o.OutDir, "memory_log.jsonl"))
	if err != nil {
		return Manifest{}, fmt.Errorf("rollout: generate: %w", err)
	}
	defer logf.Close()
	err = Run(m, pol, Options{Blocks: o.Blocks, FramesPerBlock: o.FramesPerBlock, Height: o.Height, Width: o.Width,
		Schedule: sch, Noise: Seeded{Seed: seed, StepsPerBlock: len(sch.Timesteps) - 1}, Prompts: prompts,
		Writer: w, MemLog: logf, Progress: o.Progress, Context: o.Context})
	if err != nil {
		return w.Manifest(), err
	}
	return w.Manifest(), logf.Close()
}
