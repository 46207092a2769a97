package main

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/rollout"
	"github.com/densitykv/densitykv/runfolder"
)

func init() { register(newGenerateCmd) }

func newGenerateCmd() *cobra.Command {
	var g config.GenerateSection
	var rf runFlags
	var texts []string
	var textTensor, policy, precision string
	var seconds float64
	var seed uint64
	var snapEvery int
	var out, name string
	var cf *configFlags
	def := config.GenerateDefaults()
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
			var gc config.GenerateConfig
			if rf.resume {
				var bad []string
				f.Visit(func(fl *pflag.Flag) {
					if !strings.Contains(" out name resume json quiet ", " "+fl.Name+" ") {
						bad = append(bad, "--"+fl.Name)
					}
				})
				if len(bad) > 0 {
					return usagef("--resume continues a run with its saved %s; drop %v", runfolder.FileConfig, bad)
				}
				if err := runfolder.LoadConfig(filepath.Join(out, name), &gc); err != nil {
					return usagef("--resume: %w", err)
				}
			} else {
				var err error
				if gc, err = resolveGenerate(f, cf, g, generateFlags{texts: texts, textTensor: textTensor, policy: policy, precision: precision,
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
	f.StringVar(&precision, "precision", "", "model precision: fp32 or bf16 (default: bf16 for --arch 1.3b, fp32 for tiny) (generate.precision)")
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

// generateFlags are generate's flags that are not GenerateSection fields.
type generateFlags struct {
	texts              []string
	textTensor, policy string
	precision          string
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
// hold their values), validated (config.GenerateConfig.Resolve; every
// input file is read later, before the run folder is created).
func resolveGenerate(f *pflag.FlagSet, cf *configFlags, g config.GenerateSection, gf generateFlags) (config.GenerateConfig, error) {
	gc := config.GenerateDefaults()
	if err := cf.load(gc.Config, &gc.Config, &gc); err != nil {
		return gc, err
	}
	file := func(key string) bool { return cf.keys.Set[key] }
	G := &gc.Generate
	setIf(f, "checkpoint", &G.Checkpoint, g.Checkpoint)
	setIf(f, "entry", &G.Entry, g.Entry)
	setIf(f, "lora", &G.LoRA, g.LoRA)
	setIf(f, "lora-alpha", &G.LoRAAlpha, g.LoRAAlpha)
	setIf(f, "arch", &G.Arch, g.Arch)
	if f.Changed("precision") {
		if err := G.Precision.UnmarshalText([]byte(gf.precision)); err != nil {
			return gc, usagef("--precision: %v", err)
		}
		cf.keys.Set["generate.precision"] = true // given: Resolve keeps it
	}
	setIf(f, "latent-height", &G.LatentHeight, g.LatentHeight)
	setIf(f, "latent-width", &G.LatentWidth, g.LatentWidth)
	setIf(f, "trace-step", &G.TraceStep, g.TraceStep)
	setIf(f, "preview", &G.Preview, g.Preview)
	setIf(f, "record-stream", &G.RecordStream, g.RecordStream)
	setIf(f, "out", &gc.Run.Out, gf.out)
	setIf(f, "name", &gc.Run.Name, gf.name)
	setIf(f, "snapshot-every", &gc.Run.SnapshotEvery, gf.snapEvery)
	if f.Changed("seed") {
		if gf.seed > math.MaxInt64 {
			return gc, usagef("--seed is %d, want at most %d", gf.seed, int64(math.MaxInt64))
		}
		gc.Run.Seed = int64(gf.seed)
	}
	if f.Changed("policy") {
		gc.Policies = []string{gf.policy}
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
			ts, err := config.ParseTextSpec(t, gf.textTensor)
			if err != nil {
				return gc, usageError{err}
			}
			G.Texts = append(G.Texts, ts)
		}
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
	if err := gc.Resolve(cf.keys, cf.file); err != nil {
		return gc, usageError{err}
	}
	return gc, nil
}

// runGenerate runs a rollout into its run folder or, with --resume,
// continues a stopped one (runfolder.Generate), and reports.
func runGenerate(cmd *cobra.Command, gc config.GenerateConfig, rf runFlags) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	g := gc.Generate
	updates := stdout
	if rf.json {
		updates = nil
	}
	var prog *progress
	hooks := runfolder.Hooks{
		Start: func(first, total int) {
			if !rf.json && !rf.quiet {
				l := gc.Memory.Layout
				frames := g.Blocks * config.FramesPerBlock
				fmt.Fprintf(stdout, "generate: %s model, %d blocks (%d latent frames, %.4g s), latent %d×%d (%d×%d tokens), policy %s, M=%d\n",
					g.Arch, g.Blocks, frames, float64(frames)/4, g.LatentHeight, g.LatentWidth, l.Height, l.Width, gc.Policies[0], gc.Memory.Capacity)
			}
			prog = newProgress(stderr, "generate", total, first, rf.quiet)
		},
		Block: func(b int, lines []runfolder.LogLine) {
			prog.add(1)
			printUpdates(updates, "all", gc.Config, b, lines, prog)
			if genHook != nil {
				genHook()
			}
		},
		Info: func(msg string) {
			if !rf.quiet {
				fmt.Fprintln(stderr, msg)
			}
		},
		Warn: func(msg string) { fmt.Fprintln(stderr, msg) },
	}
	res, err := runfolder.Generate(cmd.Context(), gc, rf.resume, rf.force, hooks)
	if prog != nil {
		prog.finish()
	}
	if err != nil && !errors.Is(err, runfolder.ErrInterrupted) {
		return inputError(err, g)
	}
	if rf.json {
		if err := printJSON(stdout, res.Summary); err != nil {
			return err
		}
	} else {
		printSummary(stdout, res.Summary)
		fmt.Fprintf(stdout, "latents: %s (manifest.json, latents/)\n", res.Summary.RunDir)
		if res.Preview != "" {
			fmt.Fprintln(stdout, res.Preview)
		}
	}
	if res.Interrupted {
		return fmt.Errorf("%w with %d of %d blocks done; continue with: densitykv generate --out %s --name %s --resume",
			errInterrupted, res.Summary.CompletedBlocks, g.Blocks, gc.Run.Out, gc.Run.Name)
	}
	return nil
}

// inputError names the flag of a checkpoint or text that the rollout could
// not use (rollout.InputError), as a usage error.
func inputError(err error, g config.GenerateSection) error {
	var ie *rollout.InputError
	if !errors.As(err, &ie) {
		return err
	}
	if ie.Prompt < 0 {
		return usagef("--checkpoint %s: %w", g.Checkpoint, ie.Err)
	}
	path := g.Texts[ie.Prompt].Path
	var te *rollout.TextTensorError
	switch {
	case errors.As(ie.Err, &te) && te.Tensor != "":
		return usagef("--text %s: no tensor %q (--text-tensor)", path, te.Tensor)
	case errors.As(ie.Err, &te):
		return usagef("--text %s: %d tensors; name one with --text-tensor", path, len(te.Have))
	}
	return usagef("--text %s: %w", path, ie.Err)
}

// genHook, when set (tests), runs after every finished block of generate.
var genHook func()
