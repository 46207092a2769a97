package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/internal/bench"
	"github.com/densitykv/densitykv/t5"
	"github.com/densitykv/densitykv/vae"
	"github.com/densitykv/densitykv/wan"
)

func init() {
	benchSubcommands = append(benchSubcommands, newBenchVAECmd, newBenchTextCmd, newBenchPipelineCmd)
}

// tinyT5 is the golden tiny umT5's configuration (../shared/golden/t5).
func tinyT5() t5.Config {
	return t5.Config{Vocab: 4000, Dim: 32, DimAttn: 32, DimFFN: 64, Heads: 4, Layers: 2, Buckets: 32, MaxDist: 128, Eps: 1e-6}
}

// parsePrecisions reads a --precision list (fp32, bf16 or both).
func parsePrecisions(list []string) ([]gemm.Precision, error) {
	var precs []gemm.Precision
	for _, s := range list {
		var p gemm.Precision
		if err := p.UnmarshalText([]byte(strings.TrimSpace(s))); err != nil {
			return nil, usagef("--precision: %v", err)
		}
		precs = append(precs, p)
	}
	if len(precs) == 0 {
		return nil, usagef("--precision is empty, want fp32, bf16 or both")
	}
	return precs, nil
}

func newBenchVAECmd() *cobra.Command {
	var o bench.VAEOptions
	var precisions []string
	var jsonOut, tiny, quiet bool
	cmd := &cobra.Command{
		Use:   "vae",
		Short: "Time the streaming Wan VAE decoder at 480×832 (random weights), per block, at fp32 and bf16",
		Long: `bench vae builds the Wan2.1 VAE decoder with random weights (73 M
parameters) and decodes a stream of random latents at --latent-height ×
--latent-width (60×104: 480×832 video) as generate does, --blocks blocks of
--frames-per-block latent frames on one stream (the first block holds the
stream's first frame: 1 + 4·(F−1) pixel frames, the others 4·F), at each
precision of --precision (the harness internal/bench.RunVAE, as bench wan's).
It prints the kernel each precision ran on and why, then per precision the
seconds of each block, a steady 3-frame generation block's wall and CPU
seconds (scaled from the blocks timed, and labelled extrapolated, when
--frames-per-block is not 3), GFLOP/s of the convolutions and attention
(wall and per CPU-second) against the kernel's own peak, the decoder's state
(feature caches and working frames) and the peak heap and resident memory.
A real-size latent frame takes one to two minutes on two cores, so the
defaults time frame 0 and one steady frame at bf16.`,
		Example: `  densitykv bench vae
  densitykv bench vae --precision fp32,bf16 --frames-per-block 3 --json
  densitykv bench vae --tiny`,
		Args:        cobra.NoArgs,
		Annotations: interruptible("stopping after the current block"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Height < 1 || o.Width < 1 || o.FramesPerBlock < 1 || o.Blocks < 1 {
				return usagef("--latent-height, --latent-width, --frames-per-block and --blocks must be >= 1")
			}
			precs, err := parsePrecisions(precisions)
			if err != nil {
				return err
			}
			o.Name, o.Model = "wan2.1-vae", vae.DefaultConfig()
			if tiny {
				o.Name, o.Model = "tiny (pipeline golden config)", vae.TinyConfig(16)
				if !cmd.Flags().Changed("latent-height") {
					o.Height, o.Width = 6, 8
				}
			}
			o.Context = cmd.Context()
			return benchPrecisions(cmd, precs, "bench vae", "blocks", o.Blocks, quiet, jsonOut, func(p gemm.Precision, progress func(done, total int)) (bench.VAEResult, error) {
				o.Precision, o.Progress = p, progress
				return bench.RunVAE(o)
			})
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Height, "latent-height", 60, "latent height (60 for 480×832 video)")
	f.IntVar(&o.Width, "latent-width", 104, "latent width (104 for 480×832 video)")
	f.IntVar(&o.FramesPerBlock, "frames-per-block", 1, "latent frames per timed block (3 = a generation block; fewer are scaled to 3)")
	f.IntVar(&o.Blocks, "blocks", 2, "blocks timed on one stream (the first holds the stream's first frame)")
	f.StringSliceVar(&precisions, "precision", []string{"bf16"}, "model precisions to run, each in turn: fp32, bf16")
	f.Uint64Var(&o.Seed, "seed", 1, "seed of the random weights and latents")
	f.BoolVar(&tiny, "tiny", false, "the tiny golden configuration on 6×8 latents (seconds)")
	f.BoolVar(&jsonOut, "json", false, "print a JSON object (kernels, one result per precision)")
	f.BoolVar(&quiet, "quiet", false, "no progress output")
	return cmd
}

func newBenchTextCmd() *cobra.Command {
	var o bench.TextOptions
	var precisions []string
	var jsonOut, tiny, quiet bool
	cmd := &cobra.Command{
		Use:   "text",
		Short: "Time the umT5-XXL text encoder per prompt (random bf16 weights), at fp32 and bf16 compute",
		Long: `bench text builds Wan2.1's umT5-XXL text encoder with random bfloat16
weights and times --prompts prompts of --tokens tokens (EOS included) at each
precision of --precision (the harness internal/bench.RunText, as bench
wan's). --layers N builds and runs N of the 24 layers (default 1: the full
model's 11.4 GB would crowd a shared 24 GB machine) with a 4,096-row
embedding, and the time per prompt and the memory are extrapolated to the
full model (labelled so). It prints the kernel each precision ran on and
why, the seconds per prompt, GFLOP/s (wall and per CPU-second) against the
kernel's own peak, and the peak heap and resident memory, measured and with
the weights not built added.`,
		Example: `  densitykv bench text
  densitykv bench text --layers 24 --precision fp32,bf16 --json
  densitykv bench text --tiny`,
		Args:        cobra.NoArgs,
		Annotations: interruptible("stopping after the current prompt"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Tokens < 1 || o.Prompts < 1 || o.LayersRun < 0 {
				return usagef("--tokens and --prompts must be >= 1, --layers >= 0")
			}
			precs, err := parsePrecisions(precisions)
			if err != nil {
				return err
			}
			o.Name, o.Model = "umt5-xxl encoder", t5.UMT5XXL()
			if tiny {
				o.Name, o.Model = "tiny (golden config)", tinyT5()
				o.Tokens = min(o.Tokens, 8)
			}
			o.Context = cmd.Context()
			return benchPrecisions(cmd, precs, "bench text", "prompts", o.Prompts, quiet, jsonOut, func(p gemm.Precision, progress func(done, total int)) (bench.TextResult, error) {
				o.Precision, o.Progress = p, progress
				return bench.RunText(o)
			})
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Tokens, "tokens", 512, "tokens per prompt, EOS included (Wan's text_len is 512)")
	f.IntVar(&o.Prompts, "prompts", 3, "prompts timed")
	f.IntVar(&o.LayersRun, "layers", 1, "layers built and run, 0 = all 24 (fewer: extrapolated)")
	f.StringSliceVar(&precisions, "precision", []string{"bf16"}, "model precisions to run, each in turn: fp32, bf16")
	f.Uint64Var(&o.Seed, "seed", 1, "seed of the random weights and tokens")
	f.BoolVar(&tiny, "tiny", false, "the tiny golden configuration (milliseconds)")
	f.BoolVar(&jsonOut, "json", false, "print a JSON object (kernels, one result per precision)")
	f.BoolVar(&quiet, "quiet", false, "no progress output")
	return cmd
}

func newBenchPipelineCmd() *cobra.Command {
	var o bench.PipelineOptions
	var layers, precision string
	var jsonOut, tiny bool
	cmd := &cobra.Command{
		Use:   "pipeline",
		Short: "Peak memory of a real-size generate run (umT5-XXL, Wan2.1-1.3B, VAE; random weights)",
		Long: `bench pipeline measures the resident memory of a generate run at real size
with random weights of the real shapes, stage by stage as generate runs
them: the text stage (umT5-XXL built in bfloat16, one prompt encoded, the
encoder released), then the generation stage: the Wan2.1-1.3B DiT, the
memory policy (paper settings) over --blocks blocks of 480×832 latents and
the VAE decoder decoding the last block's first latent frames, all alive
together. A full-depth 1.3B block takes about 20 minutes here, so the
generation stage runs at --layers depths (1 and 2) and its peak is
extrapolated linearly to 30 layers (each layer holds the same: weights,
policy state, prompt K/V); the output says so. It needs about 13 GB free
for the text stage. It takes 20–30 minutes on two cores.`,
		Example: `  densitykv bench pipeline --json
  densitykv bench pipeline --tiny`,
		Args:        cobra.NoArgs,
		Annotations: interruptible("stopping after the current stage step"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, s := range strings.Split(layers, ",") {
				n, err := strconv.Atoi(strings.TrimSpace(s))
				if err != nil || n < 1 {
					return usagef("--layers %q: want increasing layer counts like 1,2", layers)
				}
				if k := len(o.Layers); k > 0 && n <= o.Layers[k-1] {
					return usagef("--layers %q: want increasing layer counts like 1,2", layers)
				}
				o.Layers = append(o.Layers, n)
			}
			o.Text, o.Model, o.VAE = t5.UMT5XXL(), wan.DefaultConfig(), vae.DefaultConfig()
			if !cmd.Flags().Changed("latent-height") && tiny {
				o.Height, o.Width = 6, 8
			}
			if tiny {
				o.Text, o.Model, o.VAE = tinyT5(), wan.TinyConfig(), vae.TinyConfig(16)
				o.TextTokens = min(o.TextTokens, o.Model.TextLen)
			}
			arch := "1.3b"
			if tiny {
				arch = "tiny"
			}
			o.Precision = config.DefaultPrecision(arch)
			if cmd.Flags().Changed("precision") {
				if err := o.Precision.UnmarshalText([]byte(strings.TrimSpace(precision))); err != nil {
					return usagef("--precision: %v", err)
				}
			}
			w := cmd.ErrOrStderr()
			o.Stage = func(name string) { fmt.Fprintf(w, "bench pipeline: %s ...\n", name) }
			o.Context = cmd.Context()
			r, err := bench.RunPipeline(o)
			if err != nil && cmd.Context().Err() != nil {
				return fmt.Errorf("%w: %v", errInterrupted, err)
			}
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if jsonOut {
				return printJSON(out, r)
			}
			gib := func(b int64) float64 { return float64(b) / (1 << 30) }
			for _, s := range r.Stages {
				fmt.Fprintf(out, "%-32s %7.1f s  live heap %6.2f GiB  peak RSS %6.2f GiB  peak heap %6.2f GiB\n", s.Name, s.Seconds, gib(s.Live), gib(s.PeakRSS), gib(s.PeakHeap))
			}
			how := "measured"
			if r.Extrapolated {
				how = fmt.Sprintf("extrapolated from the depths measured; per layer %.3f GiB live, %.3f GiB RSS", gib(r.PerLayerLive), gib(r.PerLayerRSS))
			}
			fmt.Fprintf(out, "generation at %d layers (%s): live heap %.2f GiB, peak RSS %.2f GiB, peak heap %.2f GiB\n",
				r.Layers, how, gib(r.GenLive), gib(r.GenPeakRSS), gib(r.GenPeakHeap))
			fmt.Fprintf(out, "run (text stage, then generation; the encoder is released in between): live heap %.2f GiB, peak RSS %.2f GiB (RSS adds the collector's slack)\n", gib(r.Live), gib(r.PeakRSS))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&layers, "layers", "1,2", "DiT depths run (increasing); the last two give the per-layer memory")
	f.IntVar(&o.Blocks, "blocks", 5, "rollout blocks (the DensityKV bank is full from block 3)")
	f.StringVar(&o.Policy, "policy", "densitykv", "memory policy (paper settings)")
	f.IntVar(&o.TextTokens, "tokens", 128, "prompt tokens")
	f.BoolVar(&o.SkipText, "skip-text", false, "leave out the text stage (it needs 11.5 GB)")
	f.IntVar(&o.Height, "latent-height", 60, "latent height")
	f.IntVar(&o.Width, "latent-width", 104, "latent width")
	f.IntVar(&o.VAEFrames, "vae-frames", 2, "latent frames the VAE decodes in the last block")
	f.StringVar(&precision, "precision", "", "the models' precision, fp32 or bf16 (default as generate: bf16 at real size, fp32 with --tiny)")
	f.Uint64Var(&o.Seed, "seed", 1, "seed of the random weights")
	f.BoolVar(&tiny, "tiny", false, "the tiny golden models (seconds)")
	f.BoolVar(&jsonOut, "json", false, "print a JSON object")
	return cmd
}

// benchPrecisions runs a model benchmark at each precision in turn: the
// kernel lines first, a progress bar per run (label, precision and unit;
// total steps), then each result, or with --json one object
// {"kernels": …, "results": [one per precision]}. An interrupt stops after
// the current step and prints no partial result.
func benchPrecisions[R fmt.Stringer](cmd *cobra.Command, precs []gemm.Precision, label, unit string, total int, quiet, jsonOut bool,
	run func(p gemm.Precision, progress func(done, total int)) (R, error)) error {
	w := cmd.OutOrStdout()
	out := struct {
		Kernels []bench.KernelChoice `json:"kernels"`
		Results []R                  `json:"results"`
	}{Kernels: bench.Kernels()}
	if !jsonOut {
		fmt.Fprint(w, bench.KernelLines(out.Kernels))
	}
	for _, p := range precs {
		prog := newProgress(cmd.ErrOrStderr(), label+" "+p.String()+" ("+unit+")", total, 0, quiet)
		r, err := run(p, func(d, _ int) { prog.add(d - prog.done) })
		prog.finish()
		if err != nil && cmd.Context().Err() != nil {
			return fmt.Errorf("%w: %v; the %v result is not printed", errInterrupted, err, p)
		}
		if err != nil {
			return err
		}
		out.Results = append(out.Results, r)
		if !jsonOut {
			fmt.Fprintln(w, r.String())
		}
	}
	if jsonOut {
		return printJSON(w, out)
	}
	return nil
}
