package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/densitykv/densitykv/bench"
	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/device"
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

// parsePrecisions reads a --precision list (fp32, bf16, bf16-fast).
func parsePrecisions(list []string) ([]compute.Precision, error) {
	precs, err := compute.ParsePrecisions(list)
	if err != nil {
		return nil, usagef("--precision: %v", err)
	}
	return precs, nil
}

func newBenchVAECmd() *cobra.Command {
	var o bench.VAEOptions
	dev := device.CPU
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
precision of --precision (the harness bench.RunVAE, as bench wan's).
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
			for _, p := range precisions {
				if err := refuseFast(p, "the VAE decoder"); err != nil {
					return err
				}
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
			cd, err := openDevice(dev)
			if err != nil {
				return err
			}
			defer cd.Close()
			o.Backend, o.Device = cd.Compute(), cd.Label()
			o.Context = cmd.Context()
			return benchPrecisions(cmd, precs, "bench vae", "blocks", o.Blocks, quiet, jsonOut, func(p compute.Precision, progress func(done, total int)) (bench.VAEResult, error) {
				o.Precision, o.Progress = p.Prec, progress
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
	f.Var(&dev, "device", deviceUsage)
	f.BoolVar(&jsonOut, "json", false, "print a JSON object (kernels, one result per precision)")
	f.BoolVar(&quiet, "quiet", false, "no progress output")
	return cmd
}

func newBenchTextCmd() *cobra.Command {
	var o bench.TextOptions
	dev := device.CPU
	var precisions []string
	var jsonOut, tiny, quiet bool
	cmd := &cobra.Command{
		Use:   "text",
		Short: "Time the umT5-XXL text encoder per prompt (random bf16 weights), at fp32 and bf16 compute",
		Long: `bench text builds Wan2.1's umT5-XXL text encoder with random bfloat16
weights and times --prompts prompts of --tokens tokens (EOS included) at each
precision of --precision (the harness bench.RunText, as bench
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
			cd, err := openDevice(dev)
			if err != nil {
				return err
			}
			defer cd.Close()
			o.Device = cd.Label()
			for _, p := range precs { // bf16-fast refused up front, before any run
				if _, err := backendFor(cd, p); err != nil {
					return err
				}
			}
			o.Context = cmd.Context()
			return benchPrecisions(cmd, precs, "bench text", "prompts", o.Prompts, quiet, jsonOut, func(p compute.Precision, progress func(done, total int)) (bench.TextResult, error) {
				o.Precision, o.Progress = p.Prec, progress
				var err error
				if o.Backend, err = backendFor(cd, p); err != nil {
					return bench.TextResult{}, err
				}
				return bench.RunText(o)
			})
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Tokens, "tokens", 512, "tokens per prompt, EOS included (Wan's text_len is 512)")
	f.IntVar(&o.Prompts, "prompts", 3, "prompts timed")
	f.IntVar(&o.LayersRun, "layers", 1, "layers built and run, 0 = all 24 (fewer: extrapolated)")
	f.StringSliceVar(&precisions, "precision", []string{"bf16"}, "model precisions to run, each in turn: fp32, bf16, bf16-fast ("+fastUsage+")")
	f.Uint64Var(&o.Seed, "seed", 1, "seed of the random weights and tokens")
	f.BoolVar(&tiny, "tiny", false, "the tiny golden configuration (milliseconds)")
	f.Var(&dev, "device", deviceUsage)
	f.BoolVar(&jsonOut, "json", false, "print a JSON object (kernels, one result per precision)")
	f.BoolVar(&quiet, "quiet", false, "no progress output")
	return cmd
}

func newBenchPipelineCmd() *cobra.Command {
	var o bench.PipelineOptions
	dev := device.CPU
	var layers, precision string
	var jsonOut, tiny, quiet bool
	cmd := &cobra.Command{
		Use:   "pipeline",
		Short: "Time and memory of one real-size generate block (umT5-XXL, Wan2.1-1.3B, DensityKV, VAE; random weights)",
		Long: `bench pipeline measures a generate run at real size with random weights of
the real shapes, stage by stage as generate runs them: the text stage
(umT5-XXL built in bfloat16, one prompt encoded, the encoder released),
then the generation stage: the Wan2.1-1.3B DiT (all 30 layers), the memory
policy (paper settings) and the VAE decoder, alive together; warm-up
blocks at --warm-steps denoising steps bring the memory to its steady
state (sink and window full, the DensityKV bank full from block 3), then
one whole 480×832 block is measured as a run makes it: 5 calls × 30
layers (4 denoising steps and the clean pass) with the bank update, and
the VAE decode of its 3 latent frames. Each stage and step reports wall
time, CPU time and peak RSS; the block's total gives the cost of a video
(a 30 s video is 40 such blocks: that figure is an extrapolation from the
one measured block and says so). --layers 1,2 runs shallower models and
extrapolates the memory to 30 layers instead (quicker; no block time).
It needs about 13 GB free for the text stage and takes 15–30 minutes on
two cores (--skip-text saves a few). --device vulkan (a build with -tags
vulkan) runs the text encoder, the DiT, the VAE and the DensityKV banks'
passes on a Vulkan device in exact mode; the policy's decisions and the
attention context stay on the host, and the RSS figures are the host's.`,
		Example: `  densitykv bench pipeline
  densitykv bench pipeline --skip-text --json
  densitykv bench pipeline --tiny
  densitykv bench pipeline --device vulkan --skip-text`,
		Args:        cobra.NoArgs,
		Annotations: interruptible("stopping after the current stage step"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Text, o.Model, o.VAE = t5.UMT5XXL(), wan.DefaultConfig(), vae.DefaultConfig()
			if !cmd.Flags().Changed("latent-height") && tiny {
				o.Height, o.Width = 6, 8
			}
			if tiny {
				o.Text, o.Model, o.VAE = tinyT5(), wan.TinyConfig(), vae.TinyConfig(16)
				o.TextTokens = min(o.TextTokens, o.Model.TextLen)
			}
			if layers != "" {
				for _, s := range strings.Split(layers, ",") {
					n, err := strconv.Atoi(strings.TrimSpace(s))
					if err != nil || n < 1 || n > o.Model.Layers {
						return usagef("--layers %q: want increasing layer counts from 1 to %d like 1,2", layers, o.Model.Layers)
					}
					if k := len(o.Layers); k > 0 && n <= o.Layers[k-1] {
						return usagef("--layers %q: want increasing layer counts like 1,2", layers)
					}
					o.Layers = append(o.Layers, n)
				}
			}
			if o.Blocks < 1 || o.Blocks > 64 || o.WarmSteps < 1 || o.WarmSteps > 4 || o.VAEFrames < 1 || o.VAEFrames > 3 {
				return usagef("--blocks %d (1..64), --warm-steps %d (1..4) and --vae-frames %d (1..3) out of range", o.Blocks, o.WarmSteps, o.VAEFrames)
			}
			arch := "1.3b"
			if tiny {
				arch = "tiny"
			}
			o.Precision = config.DefaultPrecision(arch)
			if cmd.Flags().Changed("precision") {
				if err := refuseFast(precision, "bench pipeline (exact mode only for now: its VAE has no fast kernels)"); err != nil {
					return err
				}
				if err := o.Precision.UnmarshalText([]byte(strings.TrimSpace(precision))); err != nil {
					return usagef("--precision: %v", err)
				}
			}
			w := cmd.ErrOrStderr()
			var prog *progress
			o.Stage = func(name string) {
				if prog != nil {
					prog.finish()
				}
				if !quiet {
					fmt.Fprintf(w, "bench pipeline: %s ...\n", name)
				}
				prog = nil
			}
			o.Progress = func(done, total int) {
				if prog == nil {
					prog = newProgress(w, "layer calls", total, 0, quiet)
				}
				prog.add(done - prog.done)
			}
			cd, err := openDevice(dev)
			if err != nil {
				return err
			}
			defer cd.Close()
			o.Backend, o.Device, o.NewBank = cd.Compute(), cd.Label(), cd.BankFactory()
			o.Context = cmd.Context()
			r, err := bench.RunPipeline(o)
			if prog != nil {
				prog.finish()
			}
			if err != nil && cmd.Context().Err() != nil {
				return fmt.Errorf("%w: %v", errInterrupted, err)
			}
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			kernels := bench.Kernels()
			if jsonOut {
				return printJSON(out, struct {
					Kernels []bench.KernelChoice `json:"kernels"`
					bench.PipelineResult
				}{kernels, r})
			}
			fmt.Fprint(out, bench.KernelLines(kernels))
			if o.Backend != nil {
				fmt.Fprintf(out, "models on %s (exact mode); the memory policy on the host\n", o.Device)
			}
			fmt.Fprint(out, pipelineReport(r))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&layers, "layers", "", "DiT depths run, increasing (default: the whole model, measured); with a smaller last depth the memory is extrapolated from the last two")
	f.IntVar(&o.Blocks, "blocks", 4, "rollout blocks: the last is measured, the ones before are the warm-up (the DensityKV bank is full from block 3)")
	f.IntVar(&o.WarmSteps, "warm-steps", 1, "denoising steps of each warm-up block (the memory's state does not depend on them)")
	f.StringVar(&o.Policy, "policy", "densitykv", "memory policy (paper settings)")
	f.IntVar(&o.TextTokens, "tokens", 128, "prompt tokens")
	f.BoolVar(&o.SkipText, "skip-text", false, "leave out the text stage (it needs 11.5 GB)")
	f.IntVar(&o.Height, "latent-height", 60, "latent height")
	f.IntVar(&o.Width, "latent-width", 104, "latent width")
	f.IntVar(&o.VAEFrames, "vae-frames", 3, "latent frames of the measured block the VAE decodes")
	f.StringVar(&precision, "precision", "", "the models' precision, fp32 or bf16 (default as generate: bf16 at real size, fp32 with --tiny)")
	f.Uint64Var(&o.Seed, "seed", 1, "seed of the random weights")
	f.BoolVar(&tiny, "tiny", false, "the tiny golden models (seconds)")
	f.Var(&dev, "device", deviceUsage)
	f.BoolVar(&jsonOut, "json", false, "print a JSON object")
	f.BoolVar(&quiet, "quiet", false, "no progress output")
	return cmd
}

// pipelineReport is bench pipeline's text output: a line per stage and
// step (wall, CPU, memory), the generation stage at full depth, and the
// measured block's cost.
func pipelineReport(r bench.PipelineResult) string {
	var b strings.Builder
	gib := func(n int64) float64 { return float64(n) / (1 << 30) }
	for _, s := range r.Stages {
		fmt.Fprintf(&b, "%-34s %8.1f s wall %8.1f s CPU  live heap %6.2f GiB  peak RSS %6.2f GiB  peak heap %6.2f GiB\n",
			s.Name, s.Seconds, s.CPUSeconds, gib(s.Live), gib(s.PeakRSS), gib(s.PeakHeap))
		for _, st := range s.Steps {
			extra := ""
			if st.Calls > 0 {
				extra = fmt.Sprintf("  %d layer calls (%.2f s each), bank update %.1f s", st.Calls, (st.Seconds-st.BankSeconds)/float64(st.Calls), st.BankSeconds)
			}
			if st.VAEFrames > 0 {
				extra = fmt.Sprintf("  %d latent → %d video frames", st.VAEFrames, st.VideoFrames)
			}
			fmt.Fprintf(&b, "  %-58s %8.1f s wall %8.1f s CPU  peak RSS %6.2f GiB%s\n", st.Name, st.Seconds, st.CPUSeconds, gib(st.PeakRSS), extra)
		}
	}
	how := "measured"
	if r.Extrapolated {
		how = fmt.Sprintf("extrapolated from the depths measured; per layer %.3f GiB live, %.3f GiB RSS", gib(r.PerLayerLive), gib(r.PerLayerRSS))
	}
	fmt.Fprintf(&b, "generation at %d layers (%s): live heap %.2f GiB, peak RSS %.2f GiB, peak heap %.2f GiB\n",
		r.Layers, how, gib(r.GenLive), gib(r.GenPeakRSS), gib(r.GenPeakHeap))
	fmt.Fprintf(&b, "run (text stage, then generation; the encoder is released in between): live heap %.2f GiB, peak RSS %.2f GiB (RSS adds the collector's slack)\n", gib(r.Live), gib(r.PeakRSS))
	if k := r.Block; k != nil {
		fmt.Fprintf(&b, "one block (measured, %d threads): %.1f s wall, %.1f s CPU = DiT %.1f s + bank update %.1f s + VAE %.1f s; %d video frames (%.2f s of video at 16 fps)\n",
			r.Threads, k.Seconds, k.CPUSeconds, k.DiTSeconds, k.BankSeconds, k.VAESeconds, k.VideoFrames, k.VideoSeconds)
		fmt.Fprintf(&b, "a 30 s video (extrapolated: 40 blocks like this one): %.1f hours; %.0f s of compute per second of video\n", k.Video30sSecond/3600, k.SecondsPerSec)
	}
	return b.String()
}

// benchPrecisions runs a model benchmark at each precision in turn: the
// kernel lines first, a progress bar per run (label, precision and unit;
// total steps), then each result, or with --json one object
// {"kernels": …, "results": [one per precision]}. An interrupt stops after
// the current step and prints no partial result.
func benchPrecisions[R fmt.Stringer](cmd *cobra.Command, precs []compute.Precision, label, unit string, total int, quiet, jsonOut bool,
	run func(p compute.Precision, progress func(done, total int)) (R, error)) error {
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
