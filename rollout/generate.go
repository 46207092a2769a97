package rollout

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sort"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/wan"
)

// The generate path: a Generator is a loaded model with its prompt schedule
// embedded (NewGeneratorFor); Run rolls it out with any memory policy and
// hands each finished block to the caller (Options.BlockDone: latent
// shards, previews, logs). The densitykv command wires it for a run folder
// with resume (package runfolder).

// TextSource is one prompt's text conditioning: the text encoder's output
// for it. TextFile reads one from a tensor file; TextValues holds one
// already computed (by a text encoder in the same process, for instance).
type TextSource interface {
	// Embedding returns the encoder output [L][D] (row-major), L and D.
	Embedding() (values []float32, rows, dim int, err error)
	// Label names the prompt in logs and the manifest.
	Label() string
}

// TextFile is a TextSource read from a tensor file with LoadText.
type TextFile struct {
	Path   string // .safetensors or PyTorch zip
	Tensor string // tensor name ("" = "context", or the file's only tensor)
}

// Embedding reads the file (LoadText).
func (t TextFile) Embedding() ([]float32, int, int, error) { return LoadText(t.Path, t.Tensor) }

// Label is the file's base name.
func (t TextFile) Label() string { return filepath.Base(t.Path) }

// TextValues is a TextSource of values already in memory.
type TextValues struct {
	Name      string
	Values    []float32 // [Rows][Dim]
	Rows, Dim int
}

// Embedding returns the values.
func (t TextValues) Embedding() ([]float32, int, int, error) {
	if t.Rows <= 0 || t.Dim <= 0 || len(t.Values) != t.Rows*t.Dim {
		return nil, 0, 0, fmt.Errorf("rollout: text %s: %d values for %d×%d", t.Name, len(t.Values), t.Rows, t.Dim)
	}
	return t.Values, t.Rows, t.Dim, nil
}

// Label is the name.
func (t TextValues) Label() string { return t.Name }

// PromptText is one entry of a prompt schedule before it is embedded: Text
// is used from block FromBlock on (until the next entry).
type PromptText struct {
	FromBlock int
	Text      TextSource
}

// TextTensorError reports a text file without the tensor asked for
// (Tensor), or with several tensors and none asked for (Tensor == "").
type TextTensorError struct {
	Path, Tensor string
	Have         []string // the file's tensors
}

func (e *TextTensorError) Error() string {
	if e.Tensor == "" {
		return fmt.Sprintf("rollout: text embeddings %s: %d tensors (%v); name the one to use", e.Path, len(e.Have), e.Have)
	}
	return fmt.Sprintf("rollout: text embeddings %s: no tensor %q (have %v)", e.Path, e.Tensor, e.Have)
}

// LoadText reads a text-encoder output from a tensor file (.safetensors or
// PyTorch zip): tensor name (looked up as checkpoint.NormalizeKey(name);
// empty = "context", or the file's only tensor) of shape [L][D] or
// [1][L][D]. It returns the values, L and D. A missing or ambiguous tensor
// is a *TextTensorError.
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
			return nil, 0, 0, &TextTensorError{Path: path, Have: sd.Names()}
		}
	}
	t, ok := sd[checkpoint.NormalizeKey(name)]
	if !ok {
		return nil, 0, 0, &TextTensorError{Path: path, Tensor: name, Have: sd.Names()}
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

// InputError reports a generation input that cannot be used: the model
// checkpoint (Prompt < 0) or the text of prompt Prompt.
type InputError struct {
	Prompt int
	Name   string // the checkpoint file, or the prompt's label
	Err    error
}

func (e *InputError) Error() string {
	if e.Prompt < 0 {
		return fmt.Sprintf("rollout: generate: checkpoint %s: %v", e.Name, e.Err)
	}
	return fmt.Sprintf("rollout: generate: text %s: %v", e.Name, e.Err)
}

func (e *InputError) Unwrap() error { return e.Err }

// Generator is a model with its prompt schedule embedded, ready to roll
// out with any memory policy (Run).
type Generator struct {
	Model    *wan.Model
	Prompts  []Prompt // sorted by FromBlock; the first starts at block 0
	Schedule *Schedule
	// FirstSchedule is block 0's schedule when it differs (nil otherwise);
	// Update is the denoising update.
	FirstSchedule *Schedule
	Update        Update
}

// NewGeneratorFor embeds the prompts for model m with schedule sch (an
// InputError's Prompt is the index in prompts).
func NewGeneratorFor(m *wan.Model, sch *Schedule, prompts []PromptText) (*Generator, error) {
	order := make([]int, len(prompts))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return prompts[order[i]].FromBlock < prompts[order[j]].FromBlock })
	g := &Generator{Model: m, Schedule: sch}
	for _, i := range order {
		pt := prompts[i]
		label := pt.Text.Label()
		v, rows, dim, err := pt.Text.Embedding()
		if err != nil {
			return nil, &InputError{Prompt: i, Name: label, Err: err}
		}
		if dim != m.Cfg.TextDim {
			return nil, &InputError{Prompt: i, Name: label, Err: fmt.Errorf("width %d, the model needs %d", dim, m.Cfg.TextDim)}
		}
		txt, err := m.EmbedText(v, rows)
		if err != nil {
			return nil, &InputError{Prompt: i, Name: label, Err: err}
		}
		g.Prompts = append(g.Prompts, Prompt{FromBlock: pt.FromBlock, Text: txt, Name: label})
	}
	return g, nil
}

// RunOptions is one rollout of a Generator: Options without the model's
// parts (schedule, prompts) and with the noise seeded.
type RunOptions struct {
	Blocks         int
	FramesPerBlock int // 0 = 3
	Height, Width  int // latent size
	Seed           uint64
	// Noise, when set, supplies the draws instead of the seed (a noise
	// file: OpenNoise).
	Noise     Noise
	Writer    *Writer   // optional
	MemLog    io.Writer // optional
	Progress  func(Progress)
	BlockDone func(block int, latents []float32, log BlockLog) error
	Context   context.Context
	Stop      context.Context
	Start     int
	// Recacher, when set, recaches at prompt switches (Options.Recacher).
	Recacher memory.Recacher
}

// options returns the rollout options of o.
func (g *Generator) options(o RunOptions) Options {
	draws := len(g.Schedule.Timesteps) - 1 // re-noise draws of the longest block
	if g.FirstSchedule != nil {
		draws = max(draws, len(g.FirstSchedule.Timesteps)-1)
	}
	var noise Noise = Seeded{Seed: o.Seed, StepsPerBlock: draws}
	if o.Noise != nil {
		noise = o.Noise
	}
	return Options{Blocks: o.Blocks, FramesPerBlock: o.FramesPerBlock, Height: o.Height, Width: o.Width,
		Schedule: g.Schedule, FirstSchedule: g.FirstSchedule, Update: g.Update, Noise: noise, Prompts: g.Prompts,
		Writer: o.Writer, MemLog: o.MemLog, Progress: o.Progress, BlockDone: o.BlockDone, Context: o.Context, Stop: o.Stop, Start: o.Start,
		Recacher: o.Recacher}
}

// Run rolls the generator out with pol (see Run).
func (g *Generator) Run(pol memory.Policy, o RunOptions) error {
	return Run(g.Model, pol, g.options(o))
}

// Noise returns the noise source of rollout o: o.Noise, or the seeded
// draws of o.Seed.
func (g *Generator) Noise(o RunOptions) Noise { return g.options(o).Noise }

// Manifest describes a rollout of the generator with pol for the Writer;
// extra is recorded as is. A rollout with its own noise (o.Noise) records
// no seed.
func (g *Generator) Manifest(pol memory.Policy, o RunOptions, extra map[string]string) Manifest {
	F := o.FramesPerBlock
	if F == 0 {
		F = 3
	}
	seed := o.Seed
	man := Manifest{Policy: pol.Name(), Channels: g.Model.Cfg.OutDim, Height: o.Height, Width: o.Width,
		FramesPerBlock: F, BlocksPlanned: o.Blocks, Timesteps: g.Schedule.Timesteps, Sigmas: g.Schedule.Sigmas, Extra: extra}
	if o.Noise == nil {
		man.Seed = &seed
	}
	if g.FirstSchedule != nil {
		man.FirstTimesteps, man.FirstSigmas = g.FirstSchedule.Timesteps, g.FirstSchedule.Sigmas
	}
	if g.Update != UpdateX0Renoise {
		man.Update = g.Update.String()
	}
	return man
}
