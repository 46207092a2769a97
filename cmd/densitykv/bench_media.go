package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

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

func newBenchVAECmd() *cobra.Command {
	var o bench.VAEOptions
	var jsonOut, tiny, quiet bool
	cmd := &cobra.Command{
		Use:   "vae",
		Short: "Time the streaming Wan VAE decoder at 480×832 (random weights): per latent frame and per block",
		Long: `bench vae builds the Wan2.1 VAE decoder with random weights (73 M
parameters) and decodes a stream of random latents at --latent-height ×
--latent-width (60×104: 480×832 video): latent frame 0 (1 pixel frame), then
--frames steady-state latent frames (4 pixel frames each), one at a time as
generate does. It prints the seconds per latent frame and per block of 3
(extrapolated from the frames timed, and labelled so, when fewer than 3),
GFLOP/s of the convolutions and attention (wall, and per CPU-second, steadier
on a shared machine), the decoder's state (feature caches and working
frames) and the process's peak resident memory. A real-size latent frame
takes minutes on two cores.`,
		Example: `  densitykv bench vae
  densitykv bench vae --frames 3 --json
  densitykv bench vae --tiny`,
		Args:        cobra.NoArgs,
		Annotations: interruptible("stopping after the current latent frame"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Height < 1 || o.Width < 1 || o.Frames < 1 {
				return usagef("--latent-height, --latent-width and --frames must be >= 1")
			}
			o.Name, o.Config = "wan2.1-vae", vae.DefaultConfig()
			if tiny {
				o.Name, o.Config = "tiny (pipeline golden config)", vae.TinyConfig(16)
				if !cmd.Flags().Changed("latent-height") {
					o.Height, o.Width = 6, 8
				}
			}
			prog := newProgress(cmd.ErrOrStderr(), "bench vae (latent frames)", 1+o.Frames, 0, quiet)
			o.Progress = func(d, _ int) { prog.add(d - prog.done) }
			o.Context = cmd.Context()
			r, err := bench.RunVAE(o)
			prog.finish()
			if err != nil && cmd.Context().Err() != nil {
				return fmt.Errorf("%w: %v; nothing measured", errInterrupted, err)
			}
			if err != nil {
				return err
			}
			if jsonOut {
				return printJSON(cmd.OutOrStdout(), r)
			}
			fmt.Fprintln(cmd.OutOrStdout(), r.String())
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Height, "latent-height", 60, "latent height (60 for 480×832 video)")
	f.IntVar(&o.Width, "latent-width", 104, "latent width (104 for 480×832 video)")
	f.IntVar(&o.Frames, "frames", 1, "steady-state latent frames timed after frame 0")
	f.Uint64Var(&o.Seed, "seed", 1, "seed of the random weights and latents")
	f.BoolVar(&tiny, "tiny", false, "the tiny golden configuration on 6×8 latents (seconds)")
	f.BoolVar(&jsonOut, "json", false, "print a JSON object")
	f.BoolVar(&quiet, "quiet", false, "no progress output")
	return cmd
}

func newBenchTextCmd() *cobra.Command {
	var o bench.TextOptions
	var jsonOut, tiny, quiet bool
	cmd := &cobra.Command{
		Use:   "text",
		Short: "Time the umT5-XXL text encoder per prompt (random bf16 weights)",
		Long: `bench text builds Wan2.1's umT5-XXL text encoder with random bfloat16
weights (5.7 B parameters, 11.4 GB: check the free memory first, or use
--layers) and times --prompts prompts of --tokens tokens (EOS included; the
pads up to 512 are not computed, as Wan's output keeps only the prompt's
rows). It prints seconds per prompt, GFLOP/s (wall, and per CPU-second), and
the peak resident memory. With --layers N < 24 only N layers are built and
run, and the time per prompt and the memory are extrapolated to 24 layers
(labelled so).`,
		Example: `  densitykv bench text
  densitykv bench text --layers 2 --tokens 512 --json
  densitykv bench text --tiny`,
		Args:        cobra.NoArgs,
		Annotations: interruptible("stopping after the current prompt"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Tokens < 1 || o.Prompts < 1 || o.LayersRun < 0 {
				return usagef("--tokens and --prompts must be >= 1, --layers >= 0")
			}
			o.Name, o.Config = "umt5-xxl encoder", t5.UMT5XXL()
			if tiny {
				o.Name, o.Config = "tiny (golden config)", tinyT5()
			}
			prog := newProgress(cmd.ErrOrStderr(), "bench text (prompts)", o.Prompts, 0, quiet)
			o.Progress = func(d, _ int) { prog.add(d - prog.done) }
			o.Context = cmd.Context()
			r, err := bench.RunText(o)
			prog.finish()
			if err != nil && cmd.Context().Err() != nil {
				return fmt.Errorf("%w: %v; nothing measured", errInterrupted, err)
			}
			if err != nil {
				return err
			}
			if jsonOut {
				return printJSON(cmd.OutOrStdout(), r)
			}
			fmt.Fprintln(cmd.OutOrStdout(), r.String())
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Tokens, "tokens", 128, "tokens per prompt, EOS included (at most 512 in Wan)")
	f.IntVar(&o.Prompts, "prompts", 3, "prompts timed")
	f.IntVar(&o.LayersRun, "layers", 0, "layers built and run, 0 = all 24 (fewer: extrapolated)")
	f.Uint64Var(&o.Seed, "seed", 1, "seed of the random weights and tokens")
	f.BoolVar(&tiny, "tiny", false, "the tiny golden configuration (milliseconds)")
	f.BoolVar(&jsonOut, "json", false, "print a JSON object")
	f.BoolVar(&quiet, "quiet", false, "no progress output")
	return cmd
}

func newBenchPipelineCmd() *cobra.Command {
	var o bench.PipelineOptions
	var layers string
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
	f.Uint64Var(&o.Seed, "seed", 1, "seed of the random weights")
	f.BoolVar(&tiny, "tiny", false, "the tiny golden models (seconds)")
	f.BoolVar(&jsonOut, "json", false, "print a JSON object")
	return cmd
}
