package main

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gonum.org/v1/plot/vg"
	"gopkg.in/yaml.v3"

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/plots"
	"github.com/densitykv/densitykv/rollout"
	"github.com/densitykv/densitykv/synth"
	"github.com/densitykv/densitykv/wan"
)

func init() { register(newGenerateCmd) }

// GenerateSection is the generate-specific part of a generate run's
// config.resolved.yaml (the rest is the simulate Config: run, stream,
// policies, memory).
type GenerateSection struct {
	Checkpoint string     `yaml:"checkpoint"`
	Entry      string     `yaml:"entry"`
	LoRA       string     `yaml:"lora"`
	LoRAAlpha  float64    `yaml:"lora_alpha"`
	Arch       string     `yaml:"arch"` // 1.3b or tiny
	Model      wan.Config `yaml:"model"`
	Texts      []TextSpec `yaml:"texts"`
	// LatentHeight and LatentWidth are the VAE latent size (60×104 for
	// 480×832 video); tokens are 2×2 patches of it.
	LatentHeight int `yaml:"latent_height"`
	LatentWidth  int `yaml:"latent_width"`
	Blocks       int `yaml:"blocks"`
	// TraceStep is the denoising step whose attention is traced (3 = the
	// 4th pass); -1 disables the trace.
	TraceStep int  `yaml:"trace_step"`
	Preview   bool `yaml:"preview"`
	// RecordStream, when set, records the clean passes' q/k/v of every layer
	// into a stream file (package synth's format) that simulate and eval
	// replay with --stream file.
	RecordStream string `yaml:"record_stream"`
}

// TextSpec is one prompt: a text-encoder output file used from FromBlock on.
type TextSpec struct {
	Path      string `yaml:"path"`
	Tensor    string `yaml:"tensor"`
	FromBlock int    `yaml:"from_block"`
}

// generateConfig is config.resolved.yaml of a generate run.
type generateConfig struct {
	Config   `yaml:",inline"`
	Generate GenerateSection `yaml:"generate"`
}

// archs are the model architectures generate knows.
var archs = map[string]func() wan.Config{"1.3b": wan.DefaultConfig, "tiny": wan.TinyConfig}

// generateDefaults is a generate run's configuration before the --config
// file and the flags: the 1.3B model at 480×832, 5 s, DensityKV with the
// paper's memory settings (the layout follows the model and latent size).
func generateDefaults() generateConfig {
	return generateConfig{
		Config: Config{Run: RunConfig{Out: "runs", Name: "generate", Plots: true, SnapshotEvery: 10}, Stream: StreamConfig{Kind: "wan", FPS: 4},
			Policies: []string{memory.NameDensityKV}, Memory: layoutFreeDefaults(memory.DefaultLayout())},
		Generate: GenerateSection{Arch: "1.3b", LatentHeight: 60, LatentWidth: 104, TraceStep: 3, Preview: true},
	}
}

func newGenerateCmd() *cobra.Command {
	var g GenerateSection
	var rf runFlags
	var texts []string
	var textTensor, policy string
	var seconds float64
	var seed uint64
	var snapEvery int
	var out, name string
	var cf *configFlags
	def := generateDefaults()
	cmd := &cobra.Command{
		Use:   "generate",
		Short: "Roll out the Wan backbone from a checkpoint and text embeddings with any memory policy",
		Long: `generate runs the streaming block rollout (3 latent frames per block, 4
denoising steps at warped timesteps, then a clean t=0 pass whose K/V the
memory policy keeps) of a Wan2.1-style causal DiT loaded from a checkpoint
(.safetensors or PyTorch .pt: generator / generator_ema / model entries;
LongLive LoRA adapters with --lora), conditioned on text-encoder outputs read
from tensor files (--text; PATH@BLOCK switches the prompt at a block).

The run folder <out>/<name>/ gets latents/block_NNNNN.safetensors and
manifest.json (streamed per block), memory_log.jsonl, summary.json,
admissions.json and provenance.csv (DensityKV), attention_trace.json (the
attention mass from each query frame to each source frame on the 4th
denoising pass), and plots/. There is no VAE decoder in this project: with
--preview it writes PNG frames of a latent preview (3 latent channels as
RGB) under preview/, and preview.mp4 when ffmpeg is installed. These are not
decoded video frames.

The memory flags are simulate's (budget, every bank parameter and variant,
Deep Forcing and LongLive-RAG). --config reads a YAML file in the format of
a generate run's config.resolved.yaml (run, policies, memory, generate);
flags override it. The layout (memory.layout) follows the model and the
latent size, and the stream (kind wan, 4 latent frames/s) the block count.

Ctrl-C stops after the current block and saves a resume checkpoint (also
saved every --snapshot-every blocks); --resume continues from it without
computing the completed blocks again, with results identical to an
uninterrupted run.`,
		Example: `  densitykv generate --checkpoint wan_causal.pt --text prompt.safetensors --seconds 30 --policy densitykv
  densitykv generate --arch tiny --checkpoint weights.safetensors --text ctx.safetensors --text-tensor context \
      --latent-height 6 --latent-width 8 --blocks 8 --policy densitykv --capacity 24 --ordering max
  densitykv generate --config runs/generate/config.resolved.yaml --name again --tau 3`,
		Args:        cobra.NoArgs,
		Annotations: interruptible("stopping after the current forward call"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			var gc generateConfig
			if rf.resume {
				var bad []string
				f.Visit(func(fl *pflag.Flag) {
					if !strings.Contains(" out name resume json quiet ", " "+fl.Name+" ") {
						bad = append(bad, "--"+fl.Name)
					}
				})
				if len(bad) > 0 {
					return usagef("--resume continues a run with its saved %s; drop %v", fileConfig, bad)
				}
				dir := filepath.Join(out, name)
				if err := loadYAMLFile(filepath.Join(dir, fileConfig), &gc); err != nil {
					return usagef("--resume: %w", err)
				}
			} else {
				var err error
				if gc, err = resolveGenerate(f, cf, g, generateFlags{texts: texts, textTensor: textTensor, policy: policy,
					seconds: seconds, seed: seed, out: out, name: name, snapEvery: snapEvery}); err != nil {
					return err
				}
			}
			return runGenerate(cmd, gc, rf)
		},
	}
	f := cmd.Flags()
	dg := def.Generate
	f.StringVar(&g.Checkpoint, "checkpoint", dg.Checkpoint, "generator checkpoint (.safetensors or PyTorch .pt) (generate.checkpoint)")
	f.StringVar(&g.Entry, "entry", dg.Entry, "PyTorch checkpoint entry (default: generator, generator_ema, model) (generate.entry)")
	f.StringVar(&g.LoRA, "lora", dg.LoRA, "LongLive LoRA checkpoint (generator_lora entry), merged into the weights (generate.lora)")
	f.Float64Var(&g.LoRAAlpha, "lora-alpha", dg.LoRAAlpha, "LoRA alpha (0 = the rank) (generate.lora_alpha)")
	f.StringVar(&g.Arch, "arch", dg.Arch, "model architecture: 1.3b (Wan2.1-T2V-1.3B) or tiny (the golden test model) (generate.arch)")
	f.StringSliceVar(&texts, "text", nil, "text-encoder output tensor file; PATH@BLOCK (an integer after the last @) switches to it at BLOCK (repeatable) (generate.texts)")
	f.StringVar(&textTensor, "text-tensor", "", "tensor name inside the text files (default: context, or the only tensor)")
	f.IntVar(&g.LatentHeight, "latent-height", dg.LatentHeight, "latent height (60 for 480×832 video) (generate.latent_height)")
	f.IntVar(&g.LatentWidth, "latent-width", dg.LatentWidth, "latent width (104 for 480×832 video) (generate.latent_width)")
	f.Float64Var(&seconds, "seconds", 5, "video length at 4 latent frames/s, rounded up to 3-frame blocks (stream.seconds)")
	f.IntVar(&g.Blocks, "blocks", 0, "number of 3-frame blocks, instead of --seconds (generate.blocks)")
	f.Uint64Var(&seed, "seed", 0, "noise seed (run.seed)")
	f.StringVar(&policy, "policy", def.Policies[0], "memory policy: "+strings.Join(memory.Names(), ", ")+" (policies)")
	f.IntVar(&g.TraceStep, "trace-step", dg.TraceStep, "denoising step whose attention is traced (3 = 4th pass), -1 = off (generate.trace_step)")
	f.BoolVar(&g.Preview, "preview", dg.Preview, "write PNG frames of a latent preview, and preview.mp4 with ffmpeg (generate.preview)")
	f.StringVar(&g.RecordStream, "record-stream", dg.RecordStream, "record the clean passes' q/k/v into this stream file, replayed with simulate/eval --stream file (generate.record_stream)")
	f.IntVar(&snapEvery, "snapshot-every", def.Run.SnapshotEvery, "save a resume checkpoint (policy snapshot) every N blocks, 0 = only when stopped with Ctrl-C (run.snapshot_every)")
	f.StringVar(&out, "out", def.Run.Out, "parent folder of run folders (run.out)")
	f.StringVar(&name, "name", def.Run.Name, "run folder name (run.name)")
	cf = &configFlags{fs: f}
	f.StringVar(&cf.file, "config", "", "YAML config in the format of a generate config.resolved.yaml (flags given on the command line override it)")
	cf.bindMemoryFlags(def.Config)
	f.BoolVar(&rf.json, "json", false, "print the summary as JSON")
	f.BoolVar(&rf.resume, "resume", false, "continue the stopped run --out/--name with its saved config")
	f.BoolVar(&rf.force, "force", false, "overwrite an existing run folder")
	f.BoolVar(&rf.quiet, "quiet", false, "no progress output")
	return cmd
}

// parseTextSpec parses one --text value: PATH, or PATH@BLOCK to switch to
// that prompt at block BLOCK. Only the text after the last '@' can be the
// block, and only when it is an integer, so a path that contains '@'
// ("runs/v@2/ctx.safetensors") is taken whole; a negative or out-of-range
// block, or an empty path before it, is an error.
func parseTextSpec(arg, tensor string) (TextSpec, error) {
	ts := TextSpec{Path: arg, Tensor: tensor}
	i := strings.LastIndex(arg, "@")
	if i < 0 {
		return ts, nil
	}
	b, err := strconv.Atoi(arg[i+1:])
	switch {
	case errors.Is(err, strconv.ErrRange):
		return ts, fmt.Errorf("--text %q: block %s after @ is out of range", arg, arg[i+1:])
	case err != nil:
		return ts, nil // not PATH@BLOCK: the '@' belongs to the path
	case b < 0:
		return ts, fmt.Errorf("--text %q: the block after @ must be non-negative", arg)
	case i == 0:
		return ts, fmt.Errorf("--text %q: no file before @%d", arg, b)
	}
	ts.Path, ts.FromBlock = arg[:i], b
	return ts, nil
}

// generateFlags are generate's flags that are not GenerateSection fields.
type generateFlags struct {
	texts              []string
	textTensor, policy string
	seconds            float64
	seed               uint64
	out, name          string
	snapEvery          int
}

// setIf sets *dst to v when flag was given on the command line.
func setIf[T any](f *pflag.FlagSet, flag string, dst *T, v T) {
	if f.Changed(flag) {
		*dst = v
	}
}

// resolveGenerate builds a new generate run's configuration: the defaults,
// the --config file, then the flags given on the command line (g and gf
// hold their values), validated (every input file is checked later, before
// the run folder is created).
func resolveGenerate(f *pflag.FlagSet, cf *configFlags, g GenerateSection, gf generateFlags) (generateConfig, error) {
	gc := generateDefaults()
	if err := cf.load(gc.Config, &gc.Config, &gc); err != nil {
		return gc, err
	}
	file := func(key string) bool { return cf.keys.set[key] }
	G := &gc.Generate
	setIf(f, "checkpoint", &G.Checkpoint, g.Checkpoint)
	setIf(f, "entry", &G.Entry, g.Entry)
	setIf(f, "lora", &G.LoRA, g.LoRA)
	setIf(f, "lora-alpha", &G.LoRAAlpha, g.LoRAAlpha)
	setIf(f, "arch", &G.Arch, g.Arch)
	setIf(f, "latent-height", &G.LatentHeight, g.LatentHeight)
	setIf(f, "latent-width", &G.LatentWidth, g.LatentWidth)
	setIf(f, "trace-step", &G.TraceStep, g.TraceStep)
	setIf(f, "preview", &G.Preview, g.Preview)
	setIf(f, "record-stream", &G.RecordStream, g.RecordStream)
	setIf(f, "out", &gc.Run.Out, gf.out)
	setIf(f, "name", &gc.Run.Name, gf.name)
	setIf(f, "snapshot-every", &gc.Run.SnapshotEvery, gf.snapEvery)
	if gc.Run.SnapshotEvery < 0 {
		return gc, usagef("--snapshot-every (run.snapshot_every) is %d, want >= 0", gc.Run.SnapshotEvery)
	}
	if f.Changed("seed") {
		if gf.seed > math.MaxInt64 {
			return gc, usagef("--seed is %d, want at most %d", gf.seed, int64(math.MaxInt64))
		}
		gc.Run.Seed = int64(gf.seed)
	}
	if gc.Run.Seed < 0 {
		return gc, usagef("%s: run.seed is %d, want >= 0", cf.file, gc.Run.Seed)
	}
	if f.Changed("policy") {
		gc.Policies = []string{gf.policy}
	}
	newArch, ok := archs[G.Arch]
	if !ok {
		return gc, usagef("--arch (generate.arch) is %q, want 1.3b or tiny", G.Arch)
	}
	model := newArch()
	if file("generate.model") && G.Model != model {
		return gc, usagef("%s: generate.model differs from the %s architecture (generate.arch); the model follows the architecture, leave generate.model out", cf.file, G.Arch)
	}
	G.Model = model
	if G.Checkpoint == "" {
		return gc, usagef("--checkpoint is required (a .safetensors or .pt file of the causal Wan generator)")
	}
	if _, err := os.Stat(G.Checkpoint); err != nil {
		return gc, usagef("--checkpoint: %w", err)
	}
	if f.Changed("text") || f.Changed("text-tensor") {
		if !f.Changed("text") {
			var paths []string
			for _, t := range G.Texts {
				paths = append(paths, fmt.Sprintf("%s@%d", t.Path, t.FromBlock))
			}
			gf.texts = paths
		}
		G.Texts = nil
		for _, t := range gf.texts {
			ts, err := parseTextSpec(t, gf.textTensor)
			if err != nil {
				return gc, usageError{err}
			}
			G.Texts = append(G.Texts, ts)
		}
	}
	if len(G.Texts) == 0 {
		return gc, usagef("--text is required (a tensor file with the text-encoder output [L, %d])", model.TextDim)
	}
	for i, ts := range G.Texts {
		if _, err := os.Stat(ts.Path); err != nil {
			return gc, usagef("--text: %w", err)
		}
		if i > 0 && ts.FromBlock <= G.Texts[i-1].FromBlock {
			return gc, usagef("--text: prompt %s starts at block %d, not after the previous one's %d", ts.Path, ts.FromBlock, G.Texts[i-1].FromBlock)
		}
	}
	if G.Texts[0].FromBlock != 0 {
		return gc, usagef("--text: the first prompt must start at block 0, got @%d", G.Texts[0].FromBlock)
	}
	if G.LatentHeight <= 0 || G.LatentWidth <= 0 || G.LatentHeight%model.Patch[1] != 0 || G.LatentWidth%model.Patch[2] != 0 {
		return gc, usagef("--latent-height/--latent-width %d×%d must be positive multiples of the %d×%d patch", G.LatentHeight, G.LatentWidth, model.Patch[1], model.Patch[2])
	}
	// The length: --blocks or --seconds, else the file's generate.blocks or
	// stream.seconds, else --seconds' default.
	switch {
	case f.Changed("seconds") && f.Changed("blocks"):
		return gc, usagef("give --seconds or --blocks, not both")
	case f.Changed("blocks"):
		G.Blocks = g.Blocks
	case f.Changed("seconds") || !file("generate.blocks"):
		s := gf.seconds
		if !f.Changed("seconds") && file("stream.seconds") {
			s = gc.Stream.Seconds
		}
		if !(s > 0) || math.IsInf(s, 0) {
			return gc, usagef("--seconds (stream.seconds) is %v, want > 0", s)
		}
		G.Blocks = int(math.Ceil(s*4/3 - 1e-9))
	}
	if G.Blocks <= 0 {
		return gc, usagef("--blocks (generate.blocks) is %d, want > 0", G.Blocks)
	}
	if G.TraceStep < -1 || G.TraceStep >= len(rollout.DefaultSchedule().Timesteps) {
		return gc, usagef("--trace-step (generate.trace_step) is %d, want -1 (off) or 0..%d", G.TraceStep, len(rollout.DefaultSchedule().Timesteps)-1)
	}
	if gc.Run.Name == "" || strings.ContainsAny(gc.Run.Name, `/\`) || gc.Run.Name == "." || gc.Run.Name == ".." {
		return gc, usagef("--name (run.name) %q must be a plain folder name", gc.Run.Name)
	}
	if gc.Run.Out == "" {
		return gc, usagef("--out (run.out) is empty, want a folder")
	}
	if len(gc.Policies) != 1 || !slices.Contains(memory.Names(), gc.Policies[0]) {
		return gc, usagef("--policy (policies) is %q, want one of %s", strings.Join(gc.Policies, ","), strings.Join(memory.Names(), ", "))
	}
	// The stream and the layout follow the model and the block count; a
	// file may carry them (a config.resolved.yaml does) only unchanged.
	stream := StreamConfig{Kind: "wan", Seconds: float64(G.Blocks*3) / 4, FPS: 4}
	if file("stream.kind") && gc.Stream.Kind != stream.Kind || file("stream.fps") && gc.Stream.FPS != stream.FPS {
		return gc, usagef("%s: stream.kind %q at %g frames/s: generate rolls out the Wan model (kind wan, 4 latent frames/s); leave stream out", cf.file, gc.Stream.Kind, gc.Stream.FPS)
	}
	gc.Stream = stream
	m, err := model.Memory(gc.Memory, G.LatentHeight, G.LatentWidth, 3) // layout and RoPE base follow the model
	if err != nil {
		return gc, usageError{fmt.Errorf("config: %w", err)}
	}
	if file("memory.layout") && gc.Memory.Layout != m.Layout {
		return gc, usagef("%s: memory.layout %+v differs from the model's %+v at latent %d×%d; the layout follows --arch and --latent-height/--latent-width, leave it out",
			cf.file, gc.Memory.Layout, m.Layout, G.LatentHeight, G.LatentWidth)
	}
	m.LongLiveRAG.LatentChannels = model.OutDim // the descriptor reads the model's latents
	rm, err := resolveMemory(m, gc.Policies)
	if err != nil {
		return gc, usageError{fmt.Errorf("config: %w", err)}
	}
	gc.Memory = rm
	return gc, nil
}

func loadYAMLFile(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yamlUnmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// loadTextEmbedding reads a text-encoder output [L][D] (or [1][L][D]) from a
// tensor file: the named tensor, else "context", else the only tensor.
func loadTextEmbedding(path, name string) ([]float32, int, int, error) {
	sd, err := checkpoint.LoadFile(path, checkpoint.TorchOptions{})
	if err != nil {
		return nil, 0, 0, fmt.Errorf("--text %s: %w", path, err)
	}
	if name == "" {
		if _, ok := sd["context"]; ok {
			name = "context"
		} else if len(sd) == 1 {
			for n := range sd {
				name = n
			}
		} else {
			return nil, 0, 0, fmt.Errorf("--text %s: %d tensors; name one with --text-tensor", path, len(sd))
		}
	}
	t, ok := sd[name]
	if !ok {
		return nil, 0, 0, fmt.Errorf("--text %s: no tensor %q (--text-tensor)", path, name)
	}
	sh := t.Shape
	if len(sh) == 3 && sh[0] == 1 {
		sh = sh[1:]
	}
	if len(sh) != 2 {
		return nil, 0, 0, fmt.Errorf("--text %s: tensor %q has shape %v, want [L, D] or [1, L, D]", path, name, t.Shape)
	}
	return t.Data, sh[0], sh[1], nil
}

// runGenerate runs a rollout or, with --resume, continues a stopped one
// from its checkpoint (see genstate.go): the policy is restored from its
// snapshot and the rollout starts at the checkpoint's block, so completed
// blocks are not computed again.
func runGenerate(cmd *cobra.Command, gc generateConfig, rf runFlags) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	ctx := cmd.Context()
	g := gc.Generate
	dir := filepath.Join(gc.Run.Out, gc.Run.Name)
	stateDir := filepath.Join(dir, dirState)
	cpPath := filepath.Join(stateDir, fileCheckpoint)
	gs := &genState{}
	if rf.resume {
		saved, err := readGenCheckpoint(cpPath)
		if errors.Is(err, os.ErrNotExist) {
			return usagef("--resume: %s has no checkpoint (%s); start the run again without --resume", dir, filepath.Join(dirState, fileCheckpoint))
		}
		if err != nil {
			return fmt.Errorf("--resume: %w", err)
		}
		gs = saved
		y, err := os.ReadFile(filepath.Join(dir, fileConfig))
		if err != nil {
			return fmt.Errorf("--resume: %w", err)
		}
		if sum := sha256Hex(y); sum != gs.ConfigSHA256 {
			return fmt.Errorf("--resume: %s changed since the checkpoint (SHA-256 %.12s…, was %.12s…); resume needs the configuration the run started with",
				filepath.Join(dir, fileConfig), sum, gs.ConfigSHA256)
		}
		if gs.NextBlock < 0 || gs.NextBlock > g.Blocks || len(gs.Shards) != gs.NextBlock || gs.Adm == nil ||
			len(gs.Totals) != 1 || len(gs.Bytes) != 1 || len(gs.Bytes[0]) != gs.NextBlock {
			return fmt.Errorf("--resume: %s: checkpoint at block %d (%d shards) does not fit the run's %d blocks and policy %s", cpPath, gs.NextBlock, len(gs.Shards), g.Blocks, gc.Policies[0])
		}
		if gs.NextBlock == g.Blocks {
			return usagef("--resume: %s is already complete (%d blocks); densitykv trace %s re-renders its plots", dir, g.Blocks, dir)
		}
		if gs.Snapshot == "" || !gs.Snapshots {
			return fmt.Errorf("--resume: %s names no policy snapshot", cpPath)
		}
		inputs, err := generateInputs(g)
		if err != nil {
			return fmt.Errorf("--resume: %w", err)
		}
		if err := checkInputs(gs.Inputs, inputs); err != nil {
			return fmt.Errorf("--resume: %w", err)
		}
	}
	m, err := wan.Load(g.Checkpoint, g.Model, wan.LoadOptions{Entry: g.Entry, LoRA: g.LoRA, LoRAAlpha: g.LoRAAlpha})
	if err != nil {
		return usageError{fmt.Errorf("--checkpoint %s: %w", g.Checkpoint, err)}
	}
	var prompts []rollout.Prompt
	for _, ts := range g.Texts {
		v, rows, dim, err := loadTextEmbedding(ts.Path, ts.Tensor)
		if err != nil {
			return usageError{err}
		}
		if dim != g.Model.TextDim {
			return usagef("--text %s: width %d, the %s model needs %d", ts.Path, dim, g.Arch, g.Model.TextDim)
		}
		txt, err := m.EmbedText(v, rows)
		if err != nil {
			return usageError{fmt.Errorf("--text %s: %w", ts.Path, err)}
		}
		prompts = append(prompts, rollout.Prompt{FromBlock: ts.FromBlock, Text: txt, Name: filepath.Base(ts.Path)})
	}
	if _, err := g.Model.Memory(gc.Memory, g.LatentHeight, g.LatentWidth, 3); err != nil {
		return usageError{fmt.Errorf("%s: %w", fileConfig, err)}
	}
	pol, err := memory.New(gc.Policies[0], gc.Memory)
	if err != nil {
		return err
	}
	if !rf.resume {
		// Every input is checked: now the run folder.
		if err := prepareRunDir(dir, rf.force); err != nil {
			return err
		}
		for _, d := range []string{rollout.ManifestFile, rollout.LatentDir, "preview", "preview.mp4", "attention_trace.json"} {
			os.RemoveAll(filepath.Join(dir, d))
		}
		y, err := yamlMarshal(gc)
		if err != nil {
			return err
		}
		y = append([]byte("# densitykv generate: resolved configuration\n"), y...)
		if err := writeFileAtomic(filepath.Join(dir, fileConfig), y); err != nil {
			return err
		}
		gs.ConfigSHA256 = sha256Hex(y)
		if gs.Inputs, err = generateInputs(g); err != nil {
			return err
		}
		gs.runState = runState{Adm: newAdmissions(gc.Config), Totals: []*policyTotals{{Policy: gc.Policies[0]}}, Bytes: make([][]int64, 1)}
	}
	st := &gs.runState
	start := st.NextBlock
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return err
	}
	snap, ok := pol.(snapshotter)
	if !ok {
		return fmt.Errorf("policy %s cannot be snapshotted for --resume", gc.Policies[0])
	}
	if rf.resume {
		if err := loadSnapshotSum(filepath.Join(stateDir, gs.Snapshot), gs.SnapshotSHA256, snap); err != nil {
			return fmt.Errorf("--resume: policy %s: %w", gc.Policies[0], err)
		}
	}
	frames := g.Blocks * 3
	var tr *attentionTracer
	var run memory.Policy = pol
	if g.TraceStep >= 0 {
		tr = newAttentionTracer(pol, g.TraceStep, frames)
		if rf.resume {
			if len(gs.TraceMass) != len(tr.Mass) {
				return fmt.Errorf("--resume: %s: attention trace of %d values, want %d", cpPath, len(gs.TraceMass), len(tr.Mass))
			}
			copy(tr.Mass, gs.TraceMass)
		}
		run = tr
	}
	var rec *streamRecord
	if g.RecordStream != "" {
		rec, err = newStreamRecord(g.RecordStream, recordHeader(pol, g), rf.resume, gs.RecordBytes, start)
		if err != nil {
			return fmt.Errorf("--record-stream: %w", err)
		}
		defer rec.finish()
		sr, err := synth.NewRecorder(run, rec.sw)
		if err != nil {
			return fmt.Errorf("--record-stream: %w", err)
		}
		run = recorded{sr, pol}
	}
	sch := rollout.DefaultSchedule()
	seed := uint64(gc.Run.Seed)
	man := rollout.Manifest{Policy: pol.Name(), Channels: g.Model.OutDim, Height: g.LatentHeight, Width: g.LatentWidth,
		FramesPerBlock: 3, BlocksPlanned: g.Blocks, Timesteps: sch.Timesteps, Sigmas: sch.Sigmas, Seed: &seed,
		Extra: map[string]string{"checkpoint": g.Checkpoint, "lora": g.LoRA}}
	var w *rollout.Writer
	if rf.resume {
		// The cheap check of the completed blocks: their shards exist with
		// the checksums of the manifest and of the checkpoint.
		if w, err = rollout.ResumeWriter(dir, start); err != nil {
			return fmt.Errorf("--resume: %w", err)
		}
		have := w.Manifest()
		for b, sh := range have.Shards {
			if sh.SHA256 != gs.Shards[b] {
				return fmt.Errorf("--resume: latents of completed block %d: %s records SHA-256 %.12s…, the checkpoint %.12s…", b, rollout.ManifestFile, sh.SHA256, gs.Shards[b])
			}
		}
		cmp := have
		cmp.Version, cmp.Created, cmp.Shards, cmp.Complete = 0, "", nil, false
		if !reflect.DeepEqual(cmp, man) {
			return fmt.Errorf("--resume: %s describes another rollout (%+v, want %+v)", filepath.Join(dir, rollout.ManifestFile), cmp, man)
		}
		// Preview frames of blocks after the checkpoint are written again.
		old, _ := filepath.Glob(filepath.Join(dir, "preview", "frame_*.png"))
		for _, f := range old {
			var fr int
			if _, err := fmt.Sscanf(filepath.Base(f), "frame_%d.png", &fr); err == nil && fr >= start*3 {
				os.Remove(f)
			}
		}
		os.Remove(filepath.Join(dir, "preview.mp4"))
	} else if w, err = rollout.NewWriter(dir, man); err != nil {
		return err
	}
	logw, err := openLog(filepath.Join(dir, fileLog), st.LogBytes)
	if err != nil {
		return fmt.Errorf("memory log: %w", err)
	}
	defer logw.close()
	if rf.resume && !rf.quiet {
		fmt.Fprintf(stderr, "resume: continuing at block %d of %d from the checkpoint in %s\n", start, g.Blocks, stateDir)
	}
	if !rf.json && !rf.quiet {
		l := gc.Memory.Layout
		fmt.Fprintf(stdout, "generate: %s model, %d blocks (%d latent frames, %.4g s), latent %d×%d (%d×%d tokens), policy %s, M=%d\n",
			g.Arch, g.Blocks, frames, float64(frames)/4, g.LatentHeight, g.LatentWidth, l.Height, l.Width, gc.Policies[0], gc.Memory.Capacity)
	}
	prog := newProgress(stderr, "generate", g.Blocks, start, rf.quiet)
	defer prog.finish()
	began := time.Now()
	writeTrace := func() error {
		if tr == nil {
			return nil
		}
		return writeJSONAtomic(filepath.Join(dir, "attention_trace.json"), traceFile(tr, gc.Policies[0], g.TraceStep))
	}
	// snapAt is the block of the checkpoint with a snapshot on disk (−1:
	// none yet), so that a stop right after one does not save it again.
	snapAt := -1
	if rf.resume {
		snapAt = start
	}
	// checkpoint commits the run's state after block st.NextBlock−1; with
	// withSnap it saves the policy snapshot to continue from (not needed once
	// the run is complete).
	checkpoint := func(withSnap bool) error {
		n, err := logw.sync()
		if err != nil {
			return fmt.Errorf("memory log: %w", err)
		}
		st.LogBytes = n
		gs.RecordBytes = -1
		if rec != nil {
			if gs.RecordBytes, err = rec.sync(); err != nil {
				return fmt.Errorf("--record-stream: %w", err)
			}
		}
		gs.Snapshot, gs.SnapshotSHA256, st.Snapshots = "", "", withSnap
		if withSnap {
			gs.Snapshot = snapshotName(0, gc.Policies[0], st.NextBlock)
			if gs.SnapshotSHA256, err = saveSnapshotSum(filepath.Join(stateDir, gs.Snapshot), snap); err != nil {
				return fmt.Errorf("checkpoint: policy %s: %w", gc.Policies[0], err)
			}
		}
		gs.Shards = gs.Shards[:0]
		for _, sh := range w.Manifest().Shards {
			gs.Shards = append(gs.Shards, sh.SHA256)
		}
		gs.TraceMass = nil
		if tr != nil {
			gs.TraceMass = tr.Mass
		}
		if err := writeGenCheckpoint(cpPath, gs); err != nil {
			return err
		}
		snapAt = -1
		if withSnap {
			snapAt = st.NextBlock
		}
		old, _ := filepath.Glob(filepath.Join(stateDir, "policy-*.snap"))
		for _, f := range old {
			if filepath.Base(f) != gs.Snapshot {
				os.Remove(f)
			}
		}
		return writeTrace()
	}
	var blockErr error
	o := simOptions{stdout: stdout, stderr: stderr, updates: "all", quiet: rf.quiet}
	if rf.json {
		o.stdout = nil
	}
	stopping := false
	err = rollout.Run(m, run, rollout.Options{Blocks: g.Blocks, FramesPerBlock: 3, Height: g.LatentHeight, Width: g.LatentWidth,
		Schedule: sch, Noise: rollout.Seeded{Seed: seed, StepsPerBlock: len(sch.Timesteps) - 1}, Prompts: prompts,
		Writer: w, Start: start, Stop: ctx,
		Progress: func(p rollout.Progress) {
			if !stopping && ctx.Err() != nil {
				stopping = true
				if !rf.quiet {
					fmt.Fprintf(stderr, "\ngenerate: stopping after block %d to save a resume checkpoint\n", p.Block)
				}
			}
		},
		BlockDone: func(b int, latents []float32, bl rollout.BlockLog) {
			if blockErr != nil {
				return
			}
			s := statsOf(pol)
			s.Offered, s.Admitted, s.EvictedMandatory, s.EvictedCapacity = bl.Offered, bl.Admitted, bl.EvictedMandatory, bl.EvictedCapacity
			s.UpdateSeconds = bl.UpdateSeconds
			var decs []bank.Decision
			if d, ok := pol.(*memory.DensityKV); ok {
				decs = d.LastDecisions()
				st.Adm.add(b, decs, bl.Offered)
			}
			tot := st.Totals[0]
			tot.Bytes = pol.Bytes()
			tot.PeakBytes = max(tot.PeakBytes, tot.Bytes)
			tot.UpdateSeconds += s.UpdateSeconds
			st.Bytes[0] = append(st.Bytes[0], tot.Bytes)
			sec := float64((b+1)*3) / 4
			var lines []logLine
			tot.OccMin, tot.OccMax = 1<<62, 0
			banks := bankBytes(pol)
			for l := 0; l < gc.Memory.Layout.Layers; l++ {
				ln := lineFor(gc.Policies[0], b, l, sec, s, decs, tot.Bytes, 0)
				if banks != nil {
					ln.BankBytes = banks[l]
				}
				tot.Admitted += int64(ln.AdmittedTotal)
				tot.EvictedMandatory += int64(ln.EvictedMandatory)
				tot.EvictedCapacity += int64(ln.EvictedCapacity)
				tot.OccMin, tot.OccMax = min(tot.OccMin, ln.OccMin), max(tot.OccMax, ln.OccMax)
				if l == 0 {
					tot.Tokens = ln.Tokens.Sink + ln.Tokens.Memory + ln.Tokens.Local
				}
				lines = append(lines, ln)
			}
			st.NextBlock = b + 1
			prog.add(1)
			for _, ln := range lines {
				if err := logw.write(ln); err != nil {
					blockErr = err
					return
				}
			}
			printUpdates(o, gc.Config, b, lines, prog)
			if g.Preview {
				if err := writePreview(dir, b, latents, g.Model.OutDim, g.LatentHeight, g.LatentWidth); err != nil {
					blockErr = err
					return
				}
			}
			if every := gc.Run.SnapshotEvery; every > 0 && st.NextBlock%every == 0 && st.NextBlock < g.Blocks {
				blockErr = checkpoint(true)
			} else if _, err := logw.sync(); err != nil {
				blockErr = err
			} else {
				blockErr = writeTrace()
			}
			if genHook != nil && blockErr == nil {
				genHook()
			}
		},
	})
	prog.finish()
	if blockErr != nil {
		return blockErr
	}
	interrupted := err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err())
	if err != nil && !interrupted {
		return err
	}
	if interrupted && snapAt == st.NextBlock {
		// Stopped right after a checkpoint: it stands.
		if err := writeTrace(); err != nil {
			return err
		}
	} else if err := checkpoint(interrupted); err != nil {
		return err
	}
	if rec != nil {
		if err := rec.finish(); err != nil {
			return fmt.Errorf("--record-stream: %w", err)
		}
	}
	res := &simResult{Dir: dir, Cfg: gc.Config, State: st, Elapsed: time.Since(began), Interrupted: interrupted}
	if err := writeArtifacts(dir, gc.Config, []memory.Policy{pol}, st); err != nil {
		return err
	}
	sum := newSummary("generate", dir, gc.Config, res)
	if !interrupted {
		pngs, err := renderRun(dir)
		if err != nil {
			return fmt.Errorf("plots: %w", err)
		}
		sum.Plots = pngs
	}
	previewNote := ""
	if g.Preview && !interrupted {
		previewNote = "latent preview PNGs in " + filepath.Join(dir, "preview") + " (3 latent channels as RGB; no VAE decoder in this project)"
		if mp4, err := previewVideo(dir); err == nil {
			previewNote += "; " + mp4
		} else {
			previewNote += "; no mp4: " + err.Error()
		}
	}
	if err := writeJSONAtomic(filepath.Join(dir, fileSummary), sum); err != nil {
		return err
	}
	if rf.json {
		if err := printJSON(stdout, sum); err != nil {
			return err
		}
	} else {
		printSummary(stdout, sum)
		fmt.Fprintf(stdout, "latents: %s (manifest.json, latents/)\n", dir)
		if previewNote != "" {
			fmt.Fprintln(stdout, previewNote)
		}
	}
	if interrupted {
		return fmt.Errorf("%w with %d of %d blocks done; continue with: densitykv generate --out %s --name %s --resume",
			errInterrupted, st.NextBlock, g.Blocks, gc.Run.Out, gc.Run.Name)
	}
	return nil
}

// genHook, when set (tests), runs after every finished block.
var genHook func()

// attentionTraceJSON is attention_trace.json.
type attentionTraceJSON struct {
	Policy string `json:"policy,omitempty"`
	Step   int    `json:"step"`
	Frames int    `json:"frames"`
	// Mass[q][s] is the fraction of query frame q's attention (averaged
	// over layers, heads and its tokens) on source frame s; the last column
	// is memory whose source frame is unknown.
	Mass [][]float64 `json:"mass"`
}

func traceFile(tr *attentionTracer, policy string, step int) attentionTraceJSON {
	F := tr.frames
	out := attentionTraceJSON{Policy: policy, Step: step, Frames: F}
	for q := 0; q < F; q++ {
		row := tr.Mass[q*(F+1) : (q+1)*(F+1)]
		var s float64
		for _, v := range row {
			s += v
		}
		r := make([]float64, F+1)
		if s > 0 {
			for i, v := range row {
				r[i] = v / s
			}
		}
		out.Mass = append(out.Mass, r)
	}
	return out
}

// traceFigure draws the attention trace heat map of attention_trace.json.
func traceFigure(tf attentionTraceJSON) (*plots.Figure, error) {
	hp, err := traceHeat(tf)
	if err != nil {
		return nil, err
	}
	return plots.Heat("attention_trace", 18*vg.Centimeter, 14*vg.Centimeter, hp)
}

// traceHeat is the heat-map panel of traceFigure.
func traceHeat(tf attentionTraceJSON) (plots.HeatPanel, error) {
	F := tf.Frames
	if len(tf.Mass) != F {
		return plots.HeatPanel{}, fmt.Errorf("attention_trace.json: %d rows for %d frames", len(tf.Mass), F)
	}
	z := make([]float64, F*(F+1))
	for q := 0; q < F; q++ {
		if len(tf.Mass[q]) != F+1 {
			return plots.HeatPanel{}, fmt.Errorf("attention_trace.json: row %d has %d values, want %d", q, len(tf.Mass[q]), F+1)
		}
		copy(z[q*(F+1):], tf.Mass[q])
	}
	// The last column (memory whose source frame is unknown) is drawn
	// only when some attention went there.
	const rows = " (layers, heads, tokens summed; rows sum to 1)"
	cols, xl := F, "source frame"+rows
	for q := 0; q < F; q++ {
		if tf.Mass[q][F] > 0 {
			cols, xl = F+1, fmt.Sprintf("source frame, column %d: unknown source", F)+rows
			break
		}
	}
	if cols == F {
		zz := make([]float64, 0, F*F)
		for q := 0; q < F; q++ {
			zz = append(zz, tf.Mass[q][:F]...)
		}
		z = zz
	}
	title := fmt.Sprintf("Attention from each query frame to each source frame (denoising pass %d)", tf.Step+1)
	if tf.Policy != "" {
		title = fmt.Sprintf("%s: attention from each query frame to each source frame, denoising pass %d", tf.Policy, tf.Step+1)
	}
	return plots.HeatPanel{
		Title:  title,
		XLabel: xl, YLabel: "query frame",
		ZLabel: "fraction of the query frame's attention (log)", Grid: plots.Grid{Cols: cols, Rows: F, Z: z}, Log: true, Palette: "magma", ImageY: true,
	}, nil
}

// writePreview writes one PNG per latent frame: channels 0..2 mapped to RGB
// (each scaled by its ±3σ range), upscaled 4× with nearest neighbours.
func writePreview(dir string, b int, latents []float32, C, H, W int) error {
	pd := filepath.Join(dir, "preview")
	if err := os.MkdirAll(pd, 0o755); err != nil {
		return err
	}
	const up = 4
	F := len(latents) / (C * H * W)
	for f := 0; f < F; f++ {
		img := image.NewRGBA(image.Rect(0, 0, W*up, H*up))
		var ch [3][]float32
		for c := 0; c < 3; c++ {
			cc := min(c, C-1)
			ch[c] = latents[(f*C+cc)*H*W : (f*C+cc+1)*H*W]
		}
		for y := 0; y < H*up; y++ {
			for x := 0; x < W*up; x++ {
				i := (y/up)*W + x/up
				px := func(v float32) uint8 {
					t := (float64(v)/3 + 1) / 2
					return uint8(math.Round(255 * math.Max(0, math.Min(1, t))))
				}
				img.Set(x, y, color.RGBA{px(ch[0][i]), px(ch[1][i]), px(ch[2][i]), 255})
			}
		}
		var buf bytes.Buffer
		if err := png.Encode(&buf, img); err != nil {
			return err
		}
		if err := writeFileAtomic(filepath.Join(pd, fmt.Sprintf("frame_%05d.png", b*F+f)), buf.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

// previewVideo assembles preview/frame_*.png into preview.mp4 with ffmpeg
// (4 frames/s), or says why it cannot.
func previewVideo(dir string) (string, error) {
	ff, err := exec.LookPath("ffmpeg")
	if err != nil {
		return "", errors.New("ffmpeg is not installed")
	}
	out := filepath.Join(dir, "preview.mp4")
	c := exec.Command(ff, "-y", "-loglevel", "error", "-framerate", "4", "-i", filepath.Join(dir, "preview", "frame_%05d.png"),
		"-c:v", "libx264", "-pix_fmt", "yuv420p", "-vf", "scale=trunc(iw/2)*2:trunc(ih/2)*2", out)
	if msg, err := c.CombinedOutput(); err != nil {
		return "", fmt.Errorf("ffmpeg failed: %v: %s", err, bytes.TrimSpace(msg))
	}
	return "latent preview video " + out, nil
}

func yamlMarshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// yamlUnmarshal decodes a run folder's YAML (unknown keys ignored; the
// older memory.layout keys are read, see decodeYAML).
func yamlUnmarshal(b []byte, v any) error { _, err := decodeYAML(b, v, false); return err }

// recorded forwards a synth.Recorder and reports the wrapped policy's
// statistics (the rollout logs them).
type recorded struct {
	*synth.Recorder
	stats memory.Policy
}

// LastStats reports the wrapped policy's statistics.
func (r recorded) LastStats() memory.Stats { return statsOf(r.stats) }
