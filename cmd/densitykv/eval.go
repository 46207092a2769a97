package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/eval"
)

func init() { register(newEvalCmd) }

// evalFlags are the evaluation settings besides the run configuration.
type evalFlags struct {
	groups         []string
	queries        int
	topK           int
	coverageSample int
	horizons       []float64
	evalLayers     []int
	force, quiet   bool
	json           bool
}

func newEvalCmd() *cobra.Command {
	var ef evalFlags
	var cf *configFlags
	cmd := &cobra.Command{
		Use:   "eval",
		Short: "Compare every memory policy at matched capacity: attention fidelity, coverage, paper sweeps (a few minutes)",
		Long: `eval runs the matched-capacity evaluation (package eval) on one
KV stream (the built-in synthetic one by default, or a recorded stream file):
the baselines (Native, Infinity-RoPE, Deep Forcing, LongLive-RAG, FIFO,
uniform stride, DensityKV), the parameter sweeps (τ, M, σ, p, scaled to the
stream), the policy ablations, mean vs max ordering and the descriptor
geometry, all against the FullHistory reference on the same stream.

Per policy, layer, head and horizon it measures the attention output error
of sampled queries versus FullHistory, the attention mass FullHistory puts on
history the policy dropped, the top-k recall of the most-attended history
tokens, the coverage radius of the history by the retained keys (exact over
every history key unless --coverage-sample is given; ÷√d_k it bounds the
worst-case logit discrepancy), per-frame coverage, bytes and update time.
These are attention-level measurements, not video quality.

It writes tables (Markdown and CSV, best bold, second underlined, average
rank with midranks for ties), per-cell and per-block CSVs and plots (PNG and
SVG; --plots=false skips them) into --out/--name (runs/eval by default), and
prints the tables.
Memory and stream flags are those of simulate; the default is the demo's
reduced scale with 1 layer and 30 s.

Memory grows linearly with the stream and nothing is paged to disk: the
FullHistory reference keeps the K/V of every token of every layer (and
LongLive-RAG its pool of every frame), and eval keeps every history key of
the measured layers for the exact coverage radius. The default peaks at
about 1.1 GB resident; a paper-scale layout (30 layers × 12 heads × 128, 1,560
tokens per frame) needs gigabytes per second of video, so shorten --seconds
or reduce --layers/--heads for long streams (see docs/EVAL.md).`,
		Example: `  densitykv eval
  densitykv eval --groups baselines,policy --seconds 60
  densitykv eval --stream file --stream-file rollout.dkvs --rag-descriptor key-mean`,
		Args:        cobra.NoArgs,
		Annotations: interruptible("stopping after the current layer; a stopped eval writes no tables"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runEval(cmd, cf, ef)
		},
	}
	f := cmd.Flags()
	cf = bindConfigFlags(f, config.EvalConfig())
	// eval keeps no snapshots (it cannot resume) and runs every layer from
	// the first (choose measured layers with --eval-layers).
	for _, name := range evalIgnoredFlags {
		if err := f.MarkHidden(name); err != nil {
			panic(err)
		}
	}
	f.StringSliceVar(&ef.groups, "groups", nil, "tables to run, comma-separated (default all): "+strings.Join(eval.Groups(), ", "))
	f.IntVar(&ef.queries, "queries", 64, "query tokens sampled per block for the fidelity metrics")
	f.IntVar(&ef.topK, "top-k", 16, "most-attended history tokens per query for the recall")
	f.IntVar(&ef.coverageSample, "coverage-sample", 0, "measure the coverage radius on this many evenly spaced history keys per layer and head (0 = all, exact; a sample can underestimate the max)")
	f.Float64SliceVar(&ef.horizons, "horizons", nil, "report horizons in seconds (default: a quarter, half and all of the stream)")
	f.IntSliceVar(&ef.evalLayers, "eval-layers", nil, "layers to measure (default all; every policy still runs every layer)")
	f.BoolVar(&ef.force, "force", false, "overwrite an existing eval folder of the same name")
	f.BoolVar(&ef.quiet, "quiet", false, "no progress lines and no tables on stdout")
	f.BoolVar(&ef.json, "json", false, "print a JSON summary (files, run time, skipped variants) instead of the tables")
	return cmd
}

// runEval turns the flags into an eval.Job, runs it, and prints its
// progress and tables (or a JSON summary).
func runEval(cmd *cobra.Command, cf *configFlags, ef evalFlags) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	if cf.fs.Changed("policy") {
		return usagef("eval runs the whole suite; choose tables with --groups instead of --policy")
	}
	for _, name := range evalIgnoredFlags {
		if cf.fs.Changed(name) {
			return usagef("--%s does not apply to eval (no snapshots or resume; measured layers are chosen with --eval-layers)", name)
		}
	}
	cfg, err := cf.resolve(config.EvalConfig())
	if err != nil {
		return err
	}
	if !cf.fs.Changed("sigma") && !cf.keys.Set["memory.bank.sigma"] {
		// The paper's calibration σ = √(d_k/2) for whatever head dimension
		// the stream has (5.66 at the default d = 64).
		cfg.Memory.Bank.Sigma = eval.ScaledSigma(cfg.Memory.Layout.HeadDim)
	}
	quiet := ef.quiet || ef.json
	var prog *progress
	job := eval.Job{Config: cfg, ConfigFile: cf.file, Groups: ef.groups, Queries: ef.queries, TopK: ef.topK,
		CoverageSample: ef.coverageSample, Horizons: ef.horizons, Layers: ef.evalLayers, Force: ef.force,
		Start: func(p eval.Plan) {
			if !quiet {
				l := cfg.Memory.Layout
				fmt.Fprintf(stdout, "eval: %d variants on %d blocks (%d×%d tokens/frame, %d layers × %d heads, d=%d, M=%d); folder %s\n",
					p.Variants, p.Blocks, l.Height, l.Width, l.Layers, l.Heads, l.HeadDim, cfg.Memory.Capacity, p.Dir)
			}
			prog = newProgress(stderr, "eval", p.Blocks, 0, quiet)
		},
		Progress: func(int, int) { prog.add(1) },
	}
	out, err := job.Run(cmd.Context())
	if prog != nil {
		prog.finish()
	}
	if err != nil {
		return err
	}
	res := out.Result
	if ef.json {
		return printJSON(stdout, struct {
			Dir      string   `json:"dir"`
			Blocks   int      `json:"blocks"`
			Horizons []int    `json:"horizon_blocks"`
			Variants int      `json:"variants"`
			Skipped  []string `json:"skipped,omitempty"`
			Seconds  float64  `json:"seconds"`
			Files    []string `json:"files"`
		}{out.Dir, res.Blocks, res.Horizons, len(res.Variants), res.Skipped, res.Seconds, out.Files})
	}
	if !quiet {
		fmt.Fprintln(stdout, res.Markdown())
		fmt.Fprintf(stdout, "Attention-level measurements, not video quality. Files in %s (tables.md, CSVs, plots).\n", out.Dir)
	}
	return nil
}

// evalIgnoredFlags are run flags shared with simulate that eval does not
// use: hidden from its help and rejected when given.
var evalIgnoredFlags = []string{"snapshot-every", "first-layer"}
