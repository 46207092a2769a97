package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/densitykv/densitykv/memory"
)

func init() { register(newSimulateCmd) }

// runFlags are the flags shared by demo and simulate besides the config.
type runFlags struct {
	json, resume, force, quiet bool
	updates                    string
}

func (rf *runFlags) bind(cmd *cobra.Command, updatesDefault string) {
	f := cmd.Flags()
	f.BoolVar(&rf.json, "json", false, "print the summary as JSON on stdout (progress still goes to stderr)")
	f.BoolVar(&rf.resume, "resume", false, "continue the stopped run in --out/--name from its last checkpoint, with its saved config")
	f.BoolVar(&rf.force, "force", false, "overwrite an existing run folder of the same name")
	f.BoolVar(&rf.quiet, "quiet", false, "no progress bar or progress lines")
	f.StringVar(&rf.updates, "updates", updatesDefault, "per-update lines to print: all (every policy), densitykv (the bank updates), none")
}

func newSimulateCmd() *cobra.Command {
	var rf runFlags
	var cf *configFlags
	cmd := &cobra.Command{
		Use:   "simulate",
		Short: "Run memory policies over a KV stream at any scale, from YAML and/or flags",
		Long: `simulate drives the memory policies over the built-in synthetic video-like
KV stream (or a recorded stream file) block by block, exactly as a backbone's
clean pass would, and writes a run folder <out>/<name>/:

  config.resolved.yaml  the configuration with every default filled in
  memory_log.jsonl      one line per policy, block and layer: occupancy per
                        head, offered/admitted, evictions (mandatory and
                        capacity), attention tokens by part, bytes, timings
  provenance.csv        the final DensityKV banks: source frame and token,
                        admission update and block, density, baseline
  admissions.json       admission counts behind the montage figure
  storage.json          live persistent bytes of each policy after each block
  summary.json          totals per policy
  plots/                PNG and SVG figures

Defaults are the paper's scale (Wan2.1-1.3B layout: 30×52 tokens per frame,
30 layers, 12 heads, d=128, M=9,360, 60 s at 4 latent frames/s). A YAML file
(--config) overrides the defaults and flags override the file. Ctrl-C stops
after the current block and leaves a checkpoint; --resume continues it with
identical results.`,
		Example: `  densitykv simulate --seconds 30 --layers 2 --policy densitykv,fifo
  densitykv simulate --config runs/demo/config.resolved.yaml --name demo-tau3 --tau 3
  densitykv simulate --ordering max --baselines refresh --name max-refresh
  densitykv simulate --name long --resume`,
		Args:        cobra.NoArgs,
		Annotations: interruptible("stopping after the current block"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSimulateCommand(cmd, "simulate", cf, rf, DefaultConfig())
		},
	}
	cf = bindConfigFlags(cmd.Flags(), DefaultConfig())
	rf.bind(cmd, "all")
	return cmd
}

// runSimulateCommand resolves the configuration, prepares the run folder,
// runs, renders and reports. Shared by simulate and demo.
func runSimulateCommand(cmd *cobra.Command, command string, cf *configFlags, rf runFlags, base Config) error {
	if !slices.Contains([]string{"all", "densitykv", "none"}, rf.updates) {
		return usagef("--updates is %q, want all, densitykv or none", rf.updates)
	}
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	if base.Run.Name == "" {
		base.Run.Name = command
	}
	var cfg Config
	var dir string
	if rf.resume {
		out, name := base.Run.Out, base.Run.Name
		if cf.fs.Changed("out") {
			out, _ = cf.fs.GetString("out")
		}
		if cf.fs.Changed("name") {
			name, _ = cf.fs.GetString("name")
		}
		var bad []string
		cf.fs.Visit(func(f *pflag.Flag) {
			if f.Name != "out" && f.Name != "name" && f.Name != "resume" && f.Name != "json" && f.Name != "quiet" && f.Name != "updates" && f.Name != "plots" {
				bad = append(bad, "--"+f.Name)
			}
		})
		if len(bad) > 0 {
			return usagef("--resume continues a run with its saved %s; drop %v (start a new run with --name to change it)", fileConfig, bad)
		}
		dir = filepath.Join(out, name)
		c, err := loadRunConfig(dir)
		if err != nil {
			return usagef("--resume: %w", err)
		}
		if cfg, err = c.Resolve(); err != nil {
			return fmt.Errorf("--resume: %s: %w", filepath.Join(dir, fileConfig), err)
		}
		if cf.fs.Changed("plots") {
			cfg.Run.Plots, _ = cf.fs.GetBool("plots")
		}
	} else {
		var err error
		if cfg, err = cf.resolve(base); err != nil {
			return err
		}
		if cfg.Blocks() == 0 {
			return usagef("stream.seconds (--seconds) %g gives no block at %g frames/s", cfg.Stream.Seconds, cfg.Stream.FPS)
		}
		dir = filepath.Join(cfg.Run.Out, cfg.Run.Name)
		if err := prepareRunDir(dir, rf.force); err != nil {
			return err
		}
		y, err := MarshalConfig(cfg)
		if err != nil {
			return err
		}
		if err := writeFileAtomic(filepath.Join(dir, fileConfig), y); err != nil {
			return err
		}
	}
	if cfg.Blocks() == 0 {
		return usagef("stream.seconds (--seconds) %g gives no block at %g frames/s", cfg.Stream.Seconds, cfg.Stream.FPS)
	}
	if !rf.json && !rf.quiet {
		l := cfg.Memory.Layout
		fmt.Fprintf(stdout, "%s: %d blocks (%d latent frames, %.4g s at %g frames/s), %d×%d tokens/frame, %d layers × %d heads, d=%d, M=%d per head\n",
			command, cfg.Blocks(), cfg.Frames(), float64(cfg.Frames())/cfg.Stream.FPS, cfg.Stream.FPS, l.Height, l.Width, l.Layers, l.Heads, l.HeadDim, cfg.Memory.Capacity)
		fmt.Fprintf(stdout, "policies: %v; run folder: %s\n", cfg.Policies, dir)
	}
	warnMemory(stderr, cfg)
	o := simOptions{stdout: stdout, stderr: stderr, updates: rf.updates, quiet: rf.quiet, resume: rf.resume}
	if rf.json {
		o.stdout = nil
	}
	res, runErr := runSimulation(cmd.Context(), cfg, dir, o)
	if runErr != nil && !errors.Is(runErr, errInterrupted) {
		return runErr
	}
	sum := newSummary(command, dir, cfg, res)
	if !res.Interrupted && cfg.Run.Plots {
		pngs, err := renderRun(dir)
		if err != nil {
			return fmt.Errorf("plots: %w", err)
		}
		sum.Plots = pngs
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
	}
	if res.Interrupted {
		return fmt.Errorf("%w with %d of %d blocks done; continue with: densitykv %s --out %s --name %s --resume",
			errInterrupted, res.State.NextBlock, cfg.Blocks(), command, cfg.Run.Out, cfg.Run.Name)
	}
	return nil
}

// prepareRunDir creates dir for a new run. An existing run folder is
// refused unless force is set (then the run's own files are removed first),
// or unless it holds nothing: no checkpoint and no logged block (a run that
// failed or stopped before its first block), which is reused.
func prepareRunDir(dir string, force bool) error {
	if _, err := os.Stat(filepath.Join(dir, fileConfig)); err == nil {
		checkpointed, logged := runProgress(dir)
		switch {
		case force:
		case checkpointed:
			return usagef("run folder %s already exists; continue it with --resume, overwrite it with --force, or pick another --name", dir)
		case logged:
			return usagef("run folder %s already exists with logged blocks but no checkpoint to continue from; overwrite it with --force or pick another --name", dir)
		}
		for _, f := range []string{fileConfig, fileLog, fileSummary, fileProvenance, fileAdmissions, fileStorageRun, dirPlots, dirState} {
			if err := os.RemoveAll(filepath.Join(dir, f)); err != nil {
				return err
			}
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("run folder: %w", err)
	}
	return nil
}

// runProgress reports whether a run folder has a checkpoint to continue
// from and whether its memory log holds any block.
func runProgress(dir string) (checkpointed, logged bool) {
	_, err := os.Stat(filepath.Join(dir, dirState, fileCheckpoint))
	st, lerr := os.Stat(filepath.Join(dir, fileLog))
	return err == nil, lerr == nil && st.Size() > 0
}

// summary is summary.json.
type summary struct {
	Command         string          `json:"command"`
	RunDir          string          `json:"run_dir"`
	Complete        bool            `json:"complete"`
	Blocks          int             `json:"blocks"`
	CompletedBlocks int             `json:"completed_blocks"`
	Frames          int             `json:"frames"`
	VideoSeconds    float64         `json:"video_seconds"`
	FPS             float64         `json:"fps"`
	Layout          memory.Layout   `json:"layout"`
	Capacity        int             `json:"capacity"`
	Policies        []*policyTotals `json:"policies"`
	ElapsedSeconds  float64         `json:"elapsed_seconds"`
	ReplayedBlocks  int             `json:"replayed_blocks,omitempty"`
	Plots           []string        `json:"plots,omitempty"`
	Files           []string        `json:"files"`
}

func newSummary(command, dir string, cfg Config, res *simResult) *summary {
	s := &summary{Command: command, RunDir: dir, Complete: !res.Interrupted, Blocks: cfg.Blocks(),
		Frames: cfg.Frames(), FPS: cfg.Stream.FPS, Layout: cfg.Memory.Layout, Capacity: cfg.Memory.Capacity,
		ElapsedSeconds: res.Elapsed.Seconds(), ReplayedBlocks: res.Replayed}
	if res.State != nil {
		s.CompletedBlocks = res.State.NextBlock
		s.Policies = res.State.Totals
	}
	s.VideoSeconds = float64(s.CompletedBlocks*cfg.Memory.Layout.FramesPerBlock) / cfg.Stream.FPS
	for _, f := range []string{fileConfig, fileLog, fileProvenance, fileAdmissions, fileStorageRun, fileSummary} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil || f == fileSummary {
			s.Files = append(s.Files, filepath.Join(dir, f))
		}
	}
	return s
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printSummary(w io.Writer, s *summary) {
	state := "complete"
	if !s.Complete {
		state = fmt.Sprintf("stopped with %d of %d blocks done", s.CompletedBlocks, s.Blocks)
	}
	fmt.Fprintf(w, "\n%s %s: %d blocks, %.4g s of video in %.1f s wall\n", s.Command, state, s.CompletedBlocks, s.VideoSeconds, s.ElapsedSeconds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "policy\tadmitted\tevicted mandatory\tevicted capacity\toccupancy/head\tkeys/query\tbytes final\tbytes peak\tupdate s\t")
	for _, p := range s.Policies {
		occ := fmt.Sprintf("%d", p.OccMin)
		if p.OccMax != p.OccMin {
			occ = fmt.Sprintf("%d-%d", p.OccMin, p.OccMax)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%d\t%s\t%s\t%.2f\t\n", p.Policy, p.Admitted, p.EvictedMandatory, p.EvictedCapacity, occ, p.Tokens,
			humanBytes(p.Bytes), humanBytes(p.PeakBytes), p.UpdateSeconds)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nrun folder: %s\n", s.RunDir)
	for _, f := range s.Files {
		fmt.Fprintf(w, "  %s\n", f)
	}
	if len(s.Plots) > 0 {
		fmt.Fprintf(w, "plots (PNG, with SVG beside each):\n")
		for _, p := range s.Plots {
			fmt.Fprintf(w, "  %s\n", p)
		}
	}
}

// warnMemory warns when policies that keep every frame (FullHistory,
// LongLive-RAG) will hold more float32 K/V in memory than the machine has.
func warnMemory(w io.Writer, cfg Config) {
	total := totalMemory()
	if total <= 0 {
		return
	}
	l := cfg.Memory.Layout
	perFrame := int64(l.TokensPerFrame()) * int64(l.Layers) * int64(l.Heads) * int64(l.HeadDim) * 2 * 4
	var need int64
	for _, p := range cfg.Policies {
		if p == memory.NameFullHistory || p == memory.NameLongLiveRAG {
			need += int64(cfg.Frames()) * perFrame
		}
	}
	if need > total/2 {
		fmt.Fprintf(w, "warning: full-history / longlive-rag keep every frame: about %s of float32 K/V by the end, this machine has %s of memory\n",
			humanBytes(need), humanBytes(total))
	}
}
