package main

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/bench"
	"github.com/densitykv/densitykv/device"
	"github.com/densitykv/densitykv/gpu"
	"github.com/densitykv/densitykv/internal/vocab"
)

func init() { register(newBenchCmd) }

// bankBenchJSON is the --json output of `densitykv bench bank`: the bench
// package's result (snake_case fields, update_seconds_median among them)
// plus the run's settings.
type bankBenchJSON struct {
	Benchmark  string               `json:"benchmark"`
	Ordering   string               `json:"ordering"`
	GOMAXPROCS int                  `json:"gomaxprocs"`
	Kernels    []bench.KernelChoice `json:"kernels"`
	bench.BankResult
}

func newBenchCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Benchmarks: the DensityKV bank update (default) and the Wan backbone",
		Long: `bench measures steady-state performance. With no subcommand it runs
"bench bank". Timings are wall-clock on this machine; other load skews them,
so the reports also give CPU time.

Every benchmark says which matrix kernel ran for each precision (fp32 and
bf16) and why the start-up selection chose it; --kernel NAME forces one
(gemm's names: amx, amx-i, avx512bf16, avx512, avx2, go, and the Go emulations
emu-avx512bf16, emu-amx; "fp32:NAME" or "bf16:NAME" for one precision
only). The results are the same bits whichever kernel runs.`,
		Args: cobra.NoArgs,
	}
	var kernel string
	cmd.PersistentFlags().StringVar(&kernel, "kernel", "", "force this matrix kernel (NAME, fp32:NAME or bf16:NAME; the error lists the kernels this machine runs)")
	bankCmd := newBenchBankCmd()
	cmd.Annotations = bankCmd.Annotations
	cmd.AddCommand(bankCmd)
	for _, c := range benchSubcommands {
		cmd.AddCommand(c())
	}
	// `densitykv bench` alone runs the bank benchmark with its flags.
	cmd.Flags().AddFlagSet(bankCmd.Flags())
	cmd.RunE = bankCmd.RunE
	// Every benchmark, also those other files add, runs with --kernel.
	for _, c := range append(cmd.Commands(), cmd) {
		if run := c.RunE; run != nil {
			c.RunE = func(c *cobra.Command, args []string) error {
				restore, err := bench.ForceKernel(kernel)
				if err != nil {
					return usagef("--kernel: %v", err)
				}
				defer restore()
				return run(c, args)
			}
		}
	}
	return cmd
}

// benchSubcommands are extra `bench` subcommands registered by other files
// (e.g. the backbone benchmark).
var benchSubcommands []func() *cobra.Command

func newBenchBankCmd() *cobra.Command {
	var bc bench.BankOptions
	var jsonOut, quiet bool
	var ordering string
	dev := device.CPU
	cmd := &cobra.Command{
		Use:   "bank",
		Short: "Time full-layer bank updates at paper scale (H=12, N=4,680, M=9,360, d=128)",
		Long: `bench bank fills a bank to capacity with a video-like key stream, then times
--repeats steady-state updates of --candidates keys per head (Algorithm 1 with
the default variants), and --repeats standalone fused interaction passes.
It prints the median update time, interaction pairs/s, effective GFLOP/s
(counting 2·N·M·d per pass) and the peak extra memory.

The bank's keys are bfloat16 (the paper's payload), so their dot products
are gemm's bfloat16 product: on CPUs with AVX512_BF16 or AMX a kernel with
bfloat16 instructions runs it, whose results equal the float32-instruction
kernels' bit for bit; the pass is then also timed on the fastest of those
and the speed-up printed. --float32-kernel turns the bfloat16-instruction
kernel off for the whole run.

--device vulkan (a build with -tags vulkan) runs the updates' Soft-Riesz
passes on a Vulkan device in exact mode (gpu.NewBank: the same decisions
and snapshots as the CPU; the bank's keys and values stay on the device,
the decisions on the host); the standalone passes stay the CPU's.`,
		Example: `  densitykv bench
  densitykv bench bank --heads 2 --candidates 1024 --capacity 2048 --dim 64 --json`,
		Args:        cobra.NoArgs,
		Annotations: interruptible("stopping after the current update or pass"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, f := range []struct {
				name string
				v    int
			}{{"heads", bc.Heads}, {"candidates", bc.Candidates}, {"capacity", bc.Capacity}, {"dim", bc.Dim}, {"repeats", bc.Repeats}} {
				if f.v < 1 {
					return usagef("--%s is %d, want >= 1", f.name, f.v)
				}
			}
			if bc.Workers < 0 {
				return usagef("--workers is %d, want >= 0", bc.Workers)
			}
			var ord bank.Ordering
			if err := ord.UnmarshalText([]byte(ordering)); err != nil {
				return usagef("--ordering is %q, want %s", ordering, vocab.Or(ord.Names()))
			}
			cfg := bank.DefaultConfig()
			cfg.Ordering = ord
			bc.Config = &cfg
			cd, err := openDevice(dev)
			if err != nil {
				return err
			}
			defer cd.Close()
			if cd.Backend != nil {
				d := cd.Backend.Device()
				bc.NewBank = func(c bank.Config) (*bank.Bank, error) { return gpu.NewBank(d, c) }
				bc.Device = cd.Label()
			}
			w := cmd.OutOrStdout()
			if !jsonOut {
				fmt.Fprintf(w, "bank update benchmark: H=%d N=%d M=%d d=%d ordering=%s, %d repeats, GOMAXPROCS=%d\n",
					bc.Heads, bc.Candidates, bc.Capacity, bc.Dim, ordering, bc.Repeats, runtime.GOMAXPROCS(0))
				fmt.Fprint(w, bench.KernelLines(bench.Kernels()))
				if bc.NewBank != nil {
					fmt.Fprintf(w, "updates on %s (exact mode)\n", bc.Device)
				}
			}
			steps := bc.Steps() // fill, warm-up, timed updates, timed passes (and float32 passes)
			prog := newProgress(cmd.ErrOrStderr(), "bench bank", steps, 0, quiet)
			done := 0
			bc.Progress = func(d, _ int) { done = d; prog.add(1) }
			bc.Context = cmd.Context()
			r, err := bench.RunBank(bc)
			prog.finish()
			if err != nil && cmd.Context().Err() != nil {
				f32 := ""
				if n := steps - 2 - 2*bc.Repeats; n > 0 {
					f32 = fmt.Sprintf(", %d float32 passes", n)
				}
				return fmt.Errorf("%w: bench bank stopped after %d of %d steps (fill, warm-up, %d updates, %d passes%s); nothing measured",
					errInterrupted, done, steps, bc.Repeats, bc.Repeats, f32)
			}
			if err != nil {
				return err
			}
			out := bankBenchJSON{Benchmark: "bank-update", Ordering: ordering, GOMAXPROCS: runtime.GOMAXPROCS(0), Kernels: bench.Kernels(), BankResult: r}
			if jsonOut {
				return printJSON(w, out)
			}
			fmt.Fprintf(w, "update (full layer, steady state): median %.3f s  [%s]\n", r.UpdateSecondsMedian, secondsList(r.UpdateSeconds))
			fmt.Fprintf(w, "  process CPU time per update: median %.3f s (÷ busy cores ≈ uncontended wall time)\n", r.UpdateCPUSecondsMedian)
			fmt.Fprintf(w, "  steps (mean): validate %.3f  score %.3f  scan %.3f  evict %.3f  commit %.3f s\n",
				r.Steps.Validate.Seconds(), r.Steps.Score.Seconds(), r.Steps.Scan.Seconds(), r.Steps.Evict.Seconds(), r.Steps.Commit.Seconds())
			fmt.Fprintf(w, "  r* per update: %v; update-equivalent %.1f GFLOP/s\n", r.Accepted, r.UpdateGFLOPS)
			fmt.Fprintf(w, "interaction pass (N×M×H): median %.3f s, %.3g pairs/s, %.1f GFLOP/s effective (2·N·M·d per pass), %.1f GFLOP/s per busy core; AVX-512 kernels: %v\n",
				r.PassSecondsMedian, r.PairsPerSecond, r.PassGFLOPS, r.PassGFLOPSPerCore, r.SIMD)
			switch {
			case r.BF16:
				fmt.Fprintf(w, "  bfloat16 dot products (AVX512_BF16, bit-identical to float32): float32 kernel %.3f s, %.1f GFLOP/s; bf16 speed-up ×%.2f\n",
					r.PassFloat32SecondsMedian, r.PassFloat32GFLOPS, r.BF16Speedup)
			case bc.Float32Kernel:
				fmt.Fprintln(w, "  float32 dot products (--float32-kernel)")
			default:
				fmt.Fprintln(w, "  float32 dot products (no AVX512_BF16 kernel in this build or on this CPU)")
			}
			fmt.Fprintf(w, "memory: bank %s persistent, peak extra workspace %s\n", humanBytes(r.BankBytes), humanBytes(r.PeakExtraBytes))
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&bc.Heads, "heads", 12, "attention heads H")
	f.IntVar(&bc.Candidates, "candidates", 4680, "candidates N per update (one block)")
	f.IntVar(&bc.Capacity, "capacity", 9360, "bank capacity M per head")
	f.IntVar(&bc.Dim, "dim", 128, "key/value dimension d")
	f.IntVar(&bc.Repeats, "repeats", 5, "timed updates and passes")
	f.IntVar(&bc.Workers, "workers", 0, "parallel heads, 0 = GOMAXPROCS")
	f.Uint64Var(&bc.Seed, "seed", 0, "seed of the video-like key stream")
	f.BoolVar(&bc.Float32Kernel, "float32-kernel", false, "use the float32 dot-product kernel even where the bfloat16 one is available (same results)")
	f.StringVar(&ordering, "ordering", "mean", "candidate ordering: mean, max, source")
	f.BoolVar(&jsonOut, "json", false, "print a JSON object (with update_seconds_median)")
	f.BoolVar(&quiet, "quiet", false, "no progress bar or progress lines (on stderr)")
	f.Var(&dev, "device", deviceUsage)
	return cmd
}

func secondsList(x []float64) string {
	s := make([]string, len(x))
	for i, v := range x {
		s[i] = fmt.Sprintf("%.3f", v)
	}
	return strings.Join(s, " ")
}
