package eval

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/internal/atomicfile"
	"github.com/densitykv/densitykv/runfolder"
	"github.com/densitykv/densitykv/runinput"
)

// Job is an eval run (densitykv eval): the whole suite (Suite) on one run
// configuration's KV stream, against FullHistory, written into the eval
// folder Config.Run.Out/Config.Run.Name: config.yaml, the tables, the
// figures, and summary.json last, the commit point (a folder without it is
// an eval that was stopped or killed, run again in place).
type Job struct {
	// Config is the resolved run configuration (config.EvalConfig with
	// the file and flags applied: config.Config.Resolve, runinput.Resolve).
	Config config.Config
	// ConfigFile is the --config file Config was read from ("" for none):
	// an input the folder must not overwrite.
	ConfigFile string
	// Groups are the tables to run (nil: every group, Groups()).
	Groups []string
	// Queries, TopK and CoverageSample are Options': the query tokens
	// sampled per block (> 0), the most-attended history tokens of the
	// recall (> 0), and the coverage sample (0 = every history key).
	Queries, TopK, CoverageSample int
	// Horizons are the report horizons in seconds (nil: a quarter, half
	// and all of the stream); each must fall within the stream.
	Horizons []float64
	// Layers are the measured layers (nil: all; every policy still runs
	// every layer).
	Layers []int
	// Force overwrites a complete eval folder of the same name.
	Force bool
	// Start, when set, is called once the inputs are checked and the folder
	// is taken, just before the suite runs.
	Start func(Plan)
	// Progress, when set, is called after every block.
	Progress func(done, total int)
}

// Plan is what a Job runs once its inputs are checked: Variants policy
// configurations on Blocks blocks, into folder Dir.
type Plan struct {
	Dir      string
	Variants int
	Blocks   int
}

// Outcome is a complete Job: its folder, the evaluation, and the files
// summary.json lists (config.yaml, the tables, the figures).
type Outcome struct {
	Dir    string
	Result *Result
	Files  []string
}

// jobSummary is an eval folder's summary.json, written after every other
// file: the eval is complete.
type jobSummary struct {
	Command  string   `json:"command"`
	Complete bool     `json:"complete"`
	Blocks   int      `json:"blocks"`
	Files    []string `json:"files"`
}

// Bounds of a Job's own size-like settings (the configuration's are
// config's).
const (
	maxJobCount    = 1 << 20
	maxJobHorizons = 1024
)

// jobInputs are a Job's checked inputs: its folder, the open stream and
// its length, the variants, and the horizons in blocks.
type jobInputs struct {
	dir      string
	src      runinput.Stream
	blocks   int
	variants []Variant
	horizons []int
}

// Run runs the job: its inputs checked and the stream opened, the folder
// taken, the suite evaluated, then the tables, figures and summary written
// (the summary last). A bad input is a *runfolder.UserError, returned
// before anything is written; a cancelled ctx stops the suite between
// layers, writes no table and returns an error wrapping
// runfolder.ErrInterrupted.
func (j *Job) Run(ctx context.Context) (*Outcome, error) {
	in, err := j.inputs()
	if err != nil {
		return nil, err
	}
	defer in.src.Close()
	if err := j.claim(in); err != nil {
		return nil, err
	}
	res, err := j.evaluate(ctx, in)
	if err != nil {
		return nil, err
	}
	return j.write(in.dir, res)
}

// userf is an error in the job's settings (a usage error of the command).
func userf(format string, a ...any) error {
	return &runfolder.UserError{Err: fmt.Errorf(format, a...)}
}

// inputs checks the job's settings and folder, opens the stream, and
// builds the variants and horizons; nothing is written.
func (j *Job) inputs() (*jobInputs, error) {
	if err := j.checkSettings(); err != nil {
		return nil, err
	}
	cfg := j.Config
	if cfg.Stream.Kind == "synthetic" && cfg.Blocks() == 0 {
		return nil, userf("stream.seconds (--seconds) %g gives no block at %g frames/s", cfg.Stream.Seconds, cfg.Stream.FPS)
	}
	in := &jobInputs{dir: filepath.Join(cfg.Run.Out, cfg.Run.Name)}
	if err := j.checkFolder(in.dir); err != nil {
		return nil, err
	}
	src, err := runinput.OpenStream(cfg)
	if err != nil {
		return nil, err
	}
	in.src = src
	if err := j.plan(in); err != nil {
		src.Close()
		return nil, err
	}
	// Everything is checked: now the folder's outputs against the inputs.
	if err := runfolder.CheckSimulateOutputs(cfg, atomicfile.Input{Role: "--config", Path: j.ConfigFile}); err != nil {
		src.Close()
		return nil, err
	}
	return in, nil
}

// checkSettings checks the job's own settings and what of the
// configuration does not apply to an eval.
func (j *Job) checkSettings() error {
	if j.Queries <= 0 || j.TopK <= 0 || j.CoverageSample < 0 {
		return userf("--queries %d and --top-k %d must be positive, --coverage-sample %d not negative", j.Queries, j.TopK, j.CoverageSample)
	}
	if j.Queries > maxJobCount || j.TopK > maxJobCount || j.CoverageSample > maxJobCount {
		return userf("--queries %d, --top-k %d and --coverage-sample %d must each be at most %d", j.Queries, j.TopK, j.CoverageSample, maxJobCount)
	}
	if len(j.Horizons) > maxJobHorizons || len(j.Layers) > config.MaxDim {
		return userf("--horizons lists %d values and --eval-layers %d, want at most %d horizons", len(j.Horizons), len(j.Layers), maxJobHorizons)
	}
	if fl := j.Config.Stream.FirstLayer; fl != 0 {
		return userf("stream.first_layer %d does not apply to eval (it runs layers 0…layers−1; measure a subset with --eval-layers)", fl)
	}
	return nil
}

// checkFolder refuses a complete eval folder without Force. A complete
// eval (its summary.json, written last) or one from before run folders
// recorded their command needs Force; an eval stopped or killed before its
// summary is run again in place.
func (j *Job) checkFolder(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "tables.md")); err != nil || j.Force {
		return nil
	}
	owner, _ := runfolder.ReadOwner(dir)
	if _, err := os.Stat(filepath.Join(dir, runfolder.FileSummary)); err == nil || owner == "" {
		return userf("eval folder %s already exists; overwrite it with --force or pick another --name", dir)
	}
	return nil
}

// plan sets the stream's length, the variants of the chosen groups and
// the horizons in blocks.
func (j *Job) plan(in *jobInputs) error {
	cfg := j.Config
	in.blocks = in.src.Blocks()
	if cfg.Stream.Kind == "synthetic" {
		in.blocks = cfg.Blocks()
	}
	if in.blocks <= 0 {
		return userf("stream %s has no known length; eval needs the block count in the stream header", cfg.Stream.Path)
	}
	vs, err := Suite(SuiteConfig{Base: cfg.Memory, Groups: j.Groups})
	if err != nil {
		return &runfolder.UserError{Err: err}
	}
	in.variants = vs
	fpb := cfg.Memory.Layout.FramesPerBlock
	for _, s := range j.Horizons {
		fb := math.Ceil(s*cfg.Stream.FPS/float64(fpb) - 1e-9)
		if !(fb >= 1 && fb <= float64(in.blocks)) {
			span := float64(in.blocks*fpb) / cfg.Stream.FPS
			return userf("--horizons %g s is not within the stream: want a number of seconds in (0, %g] (blocks 1…%d)", s, span, in.blocks)
		}
		in.horizons = append(in.horizons, int(fb))
	}
	return nil
}

// claim takes the folder and writes its config.yaml; an earlier
// summary.json goes first, so that the folder reads as incomplete until
// this run's summary.
func (j *Job) claim(in *jobInputs) error {
	if err := runfolder.Claim(in.dir, "eval", j.Force, true); err != nil {
		return err
	}
	os.Remove(filepath.Join(in.dir, runfolder.FileSummary))
	y, err := config.Marshal(j.Config)
	if err != nil {
		return err
	}
	return runfolder.WriteFile(filepath.Join(in.dir, runfolder.FileConfig), y)
}

// evaluate runs the suite on the stream (Run), reporting Start and
// Progress.
func (j *Job) evaluate(ctx context.Context, in *jobInputs) (*Result, error) {
	cfg := j.Config
	if j.Start != nil {
		j.Start(Plan{Dir: in.dir, Variants: len(in.variants), Blocks: in.blocks})
	}
	done := 0
	opt := Options{Base: cfg.Memory, Queries: j.Queries, TopK: j.TopK, CoverageSample: j.CoverageSample,
		Horizons: in.horizons, Layers: j.Layers, Seed: uint64(cfg.Run.Seed), Context: ctx,
		Progress: func(d, total int) {
			done = d
			if j.Progress != nil {
				j.Progress(d, total)
			}
		}}
	res, err := Run(in.src, in.variants, opt)
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("%w: eval stopped after %d of %d blocks; a stopped eval writes no tables (run it again to evaluate)", runfolder.ErrInterrupted, done, in.blocks)
	}
	return res, err
}

// write writes the tables, the figures (Config.Run.Plots) and, once every
// one is durable, summary.json: the commit point.
func (j *Job) write(dir string, res *Result) (*Outcome, error) {
	files, err := res.WriteTables(dir)
	if err != nil {
		return nil, err
	}
	if j.Config.Run.Plots {
		pf, err := res.WritePlots(dir)
		if err != nil {
			return nil, err
		}
		files = append(files, pf...)
	}
	files = append([]string{filepath.Join(dir, runfolder.FileConfig)}, files...)
	if err := runfolder.WriteJSON(filepath.Join(dir, runfolder.FileSummary), jobSummary{Command: "eval", Complete: true, Blocks: res.Blocks, Files: files}); err != nil {
		return nil, err
	}
	return &Outcome{Dir: dir, Result: res, Files: files}, nil
}
