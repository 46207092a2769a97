package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/densitykv/densitykv/bench"
	"github.com/densitykv/densitykv/device"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/rollout"
)

func init() { benchSubcommands = append(benchSubcommands, newBenchWanCmd) }

func newBenchWanCmd() *cobra.Command {
	var jsonOut, tinyOnly, quiet bool
	var calls int
	var precisions []string
	dev := device.CPU
	cmd := &cobra.Command{
		Use:   "wan",
		Short: "Time the Wan backbone: the tiny golden model and Wan2.1-1.3B at 480×832 (random weights)",
		Long: `bench wan times forward calls of the causal Wan2.1 backbone with random
weights: the tiny golden configuration as a real 8-block rollout (median of
the blocks after the 12-frame cache is full), and Wan2.1-T2V-1.3B at 480×832
(4,680 tokens per block) with one layer run against the steady-state
12-frame context (18,720 keys, held per layer in float32 like the native
cache) and extrapolated to 30 layers and 5 calls per block, because a full
1.3B block takes a long time on a 2-core machine. The peak heap is measured
with the layers run; the full-model figure adds each missing layer's
parameters, 12-frame K/V cache and text K/V. The output states what is
measured and what is extrapolated.

--device vulkan (a build with -tags vulkan) runs the models on a Vulkan
device in exact mode (the CPU's bits); the memory policy stays on the
host, so every layer reads its q, k, v back and sends its context. The
result names the device and the mode; the CPU kernels' peak does not
apply there. --precision bf16-fast runs bf16 in fast mode: the linears on
the GPU's tensor cores (VK_NV_cooperative_matrix; not the CPU's bits),
refused on the CPU and on a device without a usable cooperative matrix.

Each model runs at every precision of --precision (fp32 and bf16 by
default): bf16 keeps the weights packed as bfloat16 (half the memory on
AVX512_BF16 and AMX kernels) and rounds the matrix and attention inputs to
bfloat16. Each result gives the matrix products' GFLOP/s per wall second
and per CPU-second, the kernel they ran on, and the fraction of that
kernel's own peak, measured in process just before the run.`,
		Example: `  densitykv bench wan --tiny
  densitykv bench wan --calls 1 --precision bf16 --json
  densitykv bench wan --kernel bf16:avx512
  densitykv bench wan --device vulkan --precision bf16 --calls 2
  densitykv bench wan --device vulkan --precision bf16,bf16-fast --calls 2`,
		Args:        cobra.NoArgs,
		Annotations: interruptible("stopping after the current forward call"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if calls < 1 {
				return usagef("--calls is %d, want >= 1", calls)
			}
			precs, err := parsePrecisions(precisions)
			if err != nil {
				return err
			}
			gprecs := make([]gemm.Precision, len(precs))
			for i, p := range precs {
				gprecs[i] = p.Prec
			}
			benches := bench.StandardWan(calls, gprecs...) // precs[i % len(precs)] for benches[i]
			if tinyOnly {
				benches = benches[:len(precs)]
			}
			cd, err := openDevice(dev)
			if err != nil {
				return err
			}
			defer cd.Close()
			for _, p := range precs { // bf16-fast refused up front, before any run
				if _, err := backendFor(cd, p); err != nil {
					return err
				}
			}
			w := cmd.OutOrStdout()
			if !jsonOut {
				if cd.Backend != nil {
					fmt.Fprintf(w, "device %s (exact mode; bf16-fast: fast mode)\n", cd.Label())
				} else {
					fmt.Fprint(w, bench.KernelLines(bench.Kernels()))
				}
			}
			var out []bench.WanResult
			for i, b := range benches {
				p := precs[i%len(precs)]
				if !jsonOut {
					fmt.Fprintf(w, "running %s at %v ...\n", b.Name, p)
				}
				total := b.Calls
				if b.Blocks > 0 {
					total = b.Blocks * (len(rollout.DefaultSchedule().Timesteps) + 1)
				}
				prog := newProgress(cmd.ErrOrStderr(), "bench wan "+b.Name+" "+p.String()+" (forward calls)", total, 0, quiet)
				done := 0
				b.Progress = func(d, _ int) { done = d; prog.add(1) }
				b.Context = cmd.Context()
				if cd.Backend != nil {
					if b.Backend, err = backendFor(cd, p); err != nil {
						return err
					}
					b.Device = cd.Label()
				}
				r, err := bench.RunWan(b)
				prog.finish()
				if err != nil && cmd.Context().Err() != nil {
					return fmt.Errorf("%w: bench wan stopped in %s at %v after %d of %d forward calls; its result is not printed", errInterrupted, b.Name, p, done, total)
				}
				if err != nil {
					return fmt.Errorf("bench wan: %s: %w", b.Name, err)
				}
				out = append(out, r)
				if !jsonOut {
					fmt.Fprintln(w, r.String())
				}
			}
			if jsonOut {
				return printJSON(w, out)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print a JSON array, one object per model")
	cmd.Flags().BoolVar(&tinyOnly, "tiny", false, "only the tiny golden model (seconds)")
	cmd.Flags().IntVar(&calls, "calls", 2, "forward calls timed for the 1.3B model")
	cmd.Flags().StringSliceVar(&precisions, "precision", []string{"fp32", "bf16"}, "model precisions to run, each in turn: fp32, bf16, bf16-fast ("+fastUsage+")")
	cmd.Flags().BoolVar(&quiet, "quiet", false, "no progress bar or progress lines (on stderr)")
	cmd.Flags().Var(&dev, "device", deviceUsage)
	return cmd
}
