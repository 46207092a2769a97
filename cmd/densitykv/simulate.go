package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/internal/atomicfile"
	"github.com/densitykv/densitykv/internal/sysmem"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/runfolder"
	"github.com/densitykv/densitykv/runinput"
	"github.com/densitykv/densitykv/sim"
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
	f.BoolVar(&rf.force, "force", false, "overwrite an existing run folder of the same name, and run even when the estimate says the run does not fit this machine's memory or disk")
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
			return runSimulateCommand(cmd, "simulate", cf, rf, config.DefaultConfig())
		},
	}
	cf = bindConfigFlags(cmd.Flags(), config.DefaultConfig())
	rf.bind(cmd, "all")
	return cmd
}

// runSimulateCommand resolves the configuration, prepares the run folder,
// runs it (sim.Job), and reports. Shared by simulate and demo.
func runSimulateCommand(cmd *cobra.Command, command string, cf *configFlags, rf runFlags, base config.Config) error {
	if !slices.Contains([]string{"all", "densitykv", "none"}, rf.updates) {
		return usagef("--updates is %q, want all, densitykv or none", rf.updates)
	}
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	if base.Run.Name == "" {
		base.Run.Name = command
	}
	var cfg config.Config
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
			if f.Name != "out" && f.Name != "name" && f.Name != "resume" && f.Name != "json" && f.Name != "quiet" && f.Name != "updates" && f.Name != "plots" && f.Name != "force" {
				bad = append(bad, "--"+f.Name)
			}
		})
		if len(bad) > 0 {
			return usagef("--resume continues a run with its saved %s; drop %v (start a new run with --name to change it)", runfolder.FileConfig, bad)
		}
		if err := checkRunName(name); err != nil {
			return err
		}
		dir = filepath.Join(out, name)
		if err := runfolder.CheckOwner(dir, command); err != nil {
			return err
		}
		var c config.Config
		if err := runfolder.LoadConfig(dir, &c); err != nil {
			return resumeLoadError(dir, err)
		}
		var err error
		if cfg, err = runinput.Resolve(c); err != nil {
			return fmt.Errorf("--resume: %s: %w", filepath.Join(dir, runfolder.FileConfig), err)
		}
		if cf.fs.Changed("plots") {
			cfg.Run.Plots, _ = cf.fs.GetBool("plots")
		}
		if err := checkFit(cmd, command, cfg, dir, true); err != nil {
			return err
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
		if err := runfolder.CheckSimulateOutputs(cfg, atomicfile.Input{Role: "--config", Path: cf.file}); err != nil {
			return err
		}
		if err := checkFit(cmd, command, cfg, dir, false); err != nil {
			return err
		}
		if err := runfolder.Claim(dir, command, rf.force, command == "demo"); err != nil {
			return err
		}
		y, err := config.Marshal(cfg)
		if err != nil {
			return err
		}
		if err := runfolder.WriteFile(filepath.Join(dir, runfolder.FileConfig), y); err != nil {
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
	updates := stdout
	if rf.json {
		updates = nil
	}
	var prog *progress
	hooks := runfolder.Hooks{
		Start: func(first, total int) { prog = newProgress(stderr, "simulate", total, first, rf.quiet) },
		Block: func(b int, lines []runfolder.LogLine) {
			if lines != nil {
				printUpdates(updates, rf.updates, cfg, b, lines, prog)
				if afterBlockHook != nil {
					afterBlockHook(b)
				}
			}
			prog.add(1)
		},
		Info: func(msg string) {
			if !rf.quiet {
				fmt.Fprintln(stderr, msg)
			}
		},
		Warn: func(msg string) { fmt.Fprintln(stderr, msg) },
	}
	res, runErr := (&sim.Job{Command: command, Config: cfg, Dir: dir, Resume: rf.resume, Hooks: hooks}).Run(cmd.Context())
	if prog != nil {
		prog.finish()
	}
	if runErr != nil && !errors.Is(runErr, runfolder.ErrInterrupted) {
		return runErr
	}
	if rf.json {
		if err := printJSON(stdout, res.Summary); err != nil {
			return err
		}
	} else {
		printSummary(stdout, res.Summary)
	}
	if res.Interrupted {
		return fmt.Errorf("%w with %d of %d blocks done; continue with: densitykv %s --out %s --name %s --resume",
			errInterrupted, res.Summary.CompletedBlocks, cfg.Blocks(), command, cfg.Run.Out, cfg.Run.Name)
	}
	return nil
}

// resumeLoadError is the usage error of --resume on a folder whose
// configuration cannot be read: a missing one (the run stopped or was
// killed before it wrote it) says to start again.
func resumeLoadError(dir string, err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return usagef("--resume: %s has no %s: the run stopped before it wrote one; start it again without --resume", dir, runfolder.FileConfig)
	}
	return usagef("--resume: %w", err)
}

// checkRunName refuses a --name that is not a plain folder name (an empty
// one would make --out itself the run folder).
func checkRunName(name string) error {
	if strings.TrimSpace(name) == "" || strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
		return usagef("--name (run.name) %q must be a plain folder name", name)
	}
	return nil
}

// afterBlockHook, when set (tests), runs after every logged block of
// simulate and demo.
var afterBlockHook func(block int)

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printSummary(w io.Writer, s *runfolder.Summary) {
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

// checkFit estimates the run's peak memory, disk and time (config.Estimate)
// and refuses, before the run folder is made, a run that does not fit the
// memory available or the free disk of its folder's filesystem, unless
// --force is given; it prints the estimate (not with --json or --quiet)
// and sets the garbage collector's target for the run. A resumed run needs
// only the disk its folder does not hold yet.
func checkFit(cmd *cobra.Command, command string, cfg config.Config, dir string, resume bool) error {
	est := cfg.Estimate(runtime.GOMAXPROCS(0))
	avail, free := machine(dir)
	if resume && free >= 0 {
		free += folderBytes(dir)
	}
	forced, _ := cmd.Flags().GetBool("force")
	forced = forced && cmd.Flags().Changed("force")
	quiet, _ := cmd.Flags().GetBool("quiet")
	js, _ := cmd.Flags().GetBool("json")
	stderr := cmd.ErrOrStderr()
	if err := est.Check(cfg, avail, free); err != nil {
		if !forced {
			return usagef("%s: %v", command, err)
		}
		fmt.Fprintf(stderr, "warning: %v (going on: --force)\n", err)
	}
	if !quiet && !js {
		mem, disk := "unknown", "unknown"
		if avail >= 0 {
			mem = config.Bytes(avail)
		}
		if free >= 0 {
			disk = config.Bytes(free)
		}
		fmt.Fprintf(stderr, "estimate: %s; this machine has %s of memory available and %s of disk free\n", est.Summary(), mem, disk)
	}
	tuneGC(est.GCPercent, est.PeakBytes)
	return nil
}

// machine returns the memory available to a run and the free disk of
// dir's filesystem (−1 where unknown); tests replace it.
var machine = func(dir string) (availMem, freeDisk int64) {
	return sysmem.Read().Available, sysmem.FreeDisk(dir)
}

// folderBytes returns the size of the files under dir (0 if unreadable).
func folderBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// printUpdates prints block b's per-update lines to w (nil: nothing):
// every policy, or with which "densitykv" only the DensityKV bank updates.
func printUpdates(w io.Writer, which string, cfg config.Config, b int, lines []runfolder.LogLine, prog *progress) {
	if which == "none" || w == nil {
		return
	}
	L := cfg.Memory.Layout.Layers
	capacity := cfg.Memory.Capacity
	F := cfg.Memory.Layout.FramesPerBlock
	for i := 0; i < len(lines); i += L {
		ls := lines[i : i+L]
		name := ls[0].Policy
		if which == "densitykv" && name != memory.NameDensityKV {
			continue
		}
		var adm, mand, capv, omin, omax int
		var bankB int64
		omin = 1 << 62
		var flags []string
		upd := -1
		for _, ln := range ls {
			adm += ln.AdmittedTotal
			bankB += ln.BankBytes
			mand += ln.EvictedMandatory
			capv += ln.EvictedCapacity
			omin, omax = min(omin, ln.OccMin), max(omax, ln.OccMax)
			if ln.Update >= 0 {
				upd = ln.Update
			}
			if ln.Flushed {
				flags = appendOnce(flags, "FLUSHED")
			}
			if ln.FloorBlocked {
				flags = appendOnce(flags, "FLOOR-BLOCKED")
			}
			if ln.Infeasible {
				flags = appendOnce(flags, "INFEASIBLE")
			}
		}
		u := "  -"
		if upd >= 0 {
			u = fmt.Sprintf("%3d", upd)
		}
		if prog.bar != nil {
			_ = prog.bar.Clear()
		}
		occ := fmt.Sprintf("%d", omin)
		if omax != omin {
			occ = fmt.Sprintf("%d-%d", omin, omax)
		}
		bytes := "bytes " + humanBytes(ls[0].Bytes)
		if name == memory.NameDensityKV {
			bytes = "bank " + humanBytes(bankB) + " (with sink+window " + humanBytes(ls[0].Bytes) + ")"
		}
		fmt.Fprintf(w, "%-14s block %3d (frames %3d-%3d, %6.2fs) update %s  admitted %7d  evicted %6d mandatory %6d capacity  occupancy %s/%d per head  %s%s\n",
			name, b, b*F, b*F+F-1, ls[0].Second, u, adm, mand, capv, occ, capacity, bytes, flagStr(flags))
	}
}

func appendOnce(s []string, v string) []string {
	if slices.Contains(s, v) {
		return s
	}
	return append(s, v)
}

func flagStr(f []string) string {
	if len(f) == 0 {
		return ""
	}
	return "  [" + strings.Join(f, " ") + "]"
}

// humanBytes formats n with binary units.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.2f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
