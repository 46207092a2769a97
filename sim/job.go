package sim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/internal/atomicfile"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/runfolder"
	"github.com/densitykv/densitykv/runinput"
)

// Job is a simulate (or demo) run: Config's policies over its stream,
// driven block by block in lockstep (Run), into the run folder Dir, which
// must exist with the run's config.resolved.yaml (runfolder.Prepare). It
// writes the memory log as it goes, the provenance, admissions and storage
// files and summary.json at the end, and the figures when Config.Run.Plots
// is set.
type Job struct {
	// Command is what summary.json names the run by: simulate or demo.
	Command string
	// Config is the resolved run configuration.
	Config config.Config
	// Dir is the run folder.
	Dir string
	// Resume continues the run from its checkpoint (policy snapshots, or
	// replaying the blocks when a policy cannot be snapshotted) with
	// results identical to an uninterrupted run.
	Resume bool
	// Hooks report the run's progress.
	Hooks runfolder.Hooks
}

// Run runs the job: the policies made (or restored), the stream opened,
// the blocks driven with a checkpoint every Config.Run.SnapshotEvery, the
// result files written, then summary.json, and the final checkpoint last,
// the commit point. When ctx is cancelled it finishes the current block,
// saves a checkpoint and returns the partial result with
// runfolder.ErrInterrupted.
func (j *Job) Run(ctx context.Context) (*runfolder.Result, error) {
	start := time.Now()
	st, interrupted, replayed, err := j.simulate(ctx)
	if err != nil && !interrupted {
		return nil, err
	}
	// "Complete" is recorded last: the final checkpoint follows the
	// result files, the figures and summary.json, each written atomically
	// and synced. A failure before it leaves the previous checkpoint, which
	// --resume continues from.
	res := &runfolder.Result{Summary: runfolder.NewSummary(j.Command, j.Dir, j.Config, st, interrupted, time.Since(start), replayed), Interrupted: interrupted}
	if !interrupted && j.Config.Run.Plots {
		pngs, err := runfolder.Render(j.Dir)
		if err != nil {
			return nil, fmt.Errorf("plots: %w", err)
		}
		res.Summary.Plots = pngs
	}
	if err := runfolder.WriteJSON(filepath.Join(j.Dir, runfolder.FileSummary), res.Summary); err != nil {
		return nil, err
	}
	if interrupted {
		return res, runfolder.ErrInterrupted
	}
	if err := commitComplete(j.Dir, st); err != nil {
		return nil, err
	}
	return res, nil
}

// commitComplete writes the final checkpoint of a simulate run (st at its
// last block, no snapshots) once every result file is durable, and then
// removes the snapshots of the earlier checkpoints.
func commitComplete(dir string, st *runfolder.RunState) error {
	stateDir := filepath.Join(dir, runfolder.DirState)
	st.Snapshots = false
	if err := runfolder.WriteSimulateCheckpoint(filepath.Join(stateDir, runfolder.FileCheckpoint), st); err != nil {
		return err
	}
	old, _ := filepath.Glob(filepath.Join(stateDir, "policy-*.snap"))
	for _, f := range old {
		os.Remove(f)
	}
	return nil
}

// newSimulateRun makes a simulate run's policies and its state before
// block 0.
func newSimulateRun(cfg config.Config) ([]memory.Policy, *runfolder.RunState, error) {
	pols := make([]memory.Policy, len(cfg.Policies))
	for i, name := range cfg.Policies {
		p, err := memory.New(name, cfg.Memory)
		if err != nil {
			return nil, nil, fmt.Errorf("policy %s: %w", name, err)
		}
		pols[i] = p
	}
	st := &runfolder.RunState{Adm: runfolder.NewAdmissions(cfg)}
	for _, n := range cfg.Policies {
		st.Totals = append(st.Totals, &runfolder.PolicyTotals{Policy: n})
	}
	st.Bytes = make([][]int64, len(pols))
	return pols, st, nil
}

// resumeSimulate restores a stopped simulate run from its checkpoint in
// dir: st and the policies' snapshots, or (policies that cannot be
// snapshotted) the block to replay the stream to without logging it again
// (replayTo; 0 when restored from snapshots).
func resumeSimulate(cfg config.Config, dir string, pols []memory.Policy, st *runfolder.RunState) (replayTo int, err error) {
	blocks := cfg.Blocks()
	// Temporary files of writes a crash interrupted.
	if err := atomicfile.CleanTemps(dir); err != nil {
		return 0, fmt.Errorf("--resume: %w", err)
	}
	var saved runfolder.RunState
	if err := runfolder.ReadSimulateCheckpointFile(filepath.Join(dir, runfolder.DirState, runfolder.FileCheckpoint), &saved); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			again := "start it again without --resume"
			if _, logged := runfolder.Status(dir); logged {
				again += " and with --force (its log has blocks it cannot continue from)"
			}
			return 0, userf("--resume: %s has no checkpoint (%s): the run stopped before saving one; %s", dir, filepath.Join(runfolder.DirState, runfolder.FileCheckpoint), again)
		}
		return 0, fmt.Errorf("--resume: %w", err)
	}
	if saved.NextBlock > blocks {
		return 0, fmt.Errorf("--resume: checkpoint at block %d beyond the run's %d blocks", saved.NextBlock, blocks)
	}
	if saved.NextBlock == blocks {
		return 0, userf("--resume: %s is already complete (%d blocks); densitykv trace %s re-renders its plots", dir, blocks, dir)
	}
	if saved.Snapshots {
		for i, p := range pols {
			sn, ok := p.(memory.Snapshotter)
			if !ok {
				return 0, fmt.Errorf("--resume: policy %s cannot load the checkpoint's snapshot", cfg.Policies[i])
			}
			if err := runfolder.LoadSnapshot(filepath.Join(dir, runfolder.DirState, runfolder.SnapshotName(i, cfg.Policies[i], saved.NextBlock)), sn); err != nil {
				return 0, fmt.Errorf("--resume: policy %s: %w", cfg.Policies[i], err)
			}
		}
		*st = saved
		if st.Adm == nil {
			st.Adm = runfolder.NewAdmissions(cfg)
		}
	} else {
		replayTo = saved.NextBlock
	}
	st.LogBytes = saved.LogBytes
	return replayTo, nil
}

// checkpointSimulate records a simulate run's completed blocks (the memory
// log synced and its size noted); with snaps it also saves the policies'
// state (not needed once the run is complete).
func checkpointSimulate(cfg config.Config, stateDir string, logw *runfolder.LogWriter, pols []memory.Policy, st *runfolder.RunState, snaps bool) error {
	n, err := logw.Sync()
	if err != nil {
		return fmt.Errorf("memory log: %w", err)
	}
	st.LogBytes = n
	st.Snapshots = snaps
	if snaps {
		for i, p := range pols {
			if err := runfolder.SaveSnapshot(filepath.Join(stateDir, runfolder.SnapshotName(i, cfg.Policies[i], st.NextBlock)), p.(memory.Snapshotter)); err != nil {
				return fmt.Errorf("checkpoint: policy %s: %w", cfg.Policies[i], err)
			}
		}
	}
	// checkpoint.json names the block of its snapshots; it is written
	// last, so a crash in between leaves the previous checkpoint valid.
	if err := runfolder.WriteSimulateCheckpoint(filepath.Join(stateDir, runfolder.FileCheckpoint), st); err != nil {
		return err
	}
	old, _ := filepath.Glob(filepath.Join(stateDir, "policy-*.snap"))
	for _, f := range old {
		if !strings.HasSuffix(f, fmt.Sprintf("-b%06d.snap", st.NextBlock)) || !snaps {
			os.Remove(f)
		}
	}
	return nil
}

// simulate is Run's blocks: st is nil when it stopped before restoring a
// state; replayed is the blocks recomputed without being logged again.
func (j *Job) simulate(ctx context.Context) (st *runfolder.RunState, interrupted bool, replayed int, err error) {
	r := &simRun{cfg: j.Config, dir: j.Dir, hooks: j.Hooks}
	defer func() {
		if cerr := r.close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if err := r.prepare(); err != nil {
		return nil, false, 0, err
	}
	if j.Resume {
		if r.replayTo, err = resumeSimulate(r.cfg, r.dir, r.pols, r.st); err != nil {
			return nil, false, 0, err
		}
	}
	if err := r.open(); err != nil {
		return nil, false, 0, err
	}
	if interrupted, err = r.drive(ctx); err != nil {
		return nil, false, 0, err
	}
	return r.st, interrupted, r.replayTo, nil
}

// simRun is one simulate run's state between its steps.
type simRun struct {
	cfg      config.Config
	dir      string
	hooks    runfolder.Hooks
	pols     []memory.Policy
	st       *runfolder.RunState
	stateDir string
	// archived are the unbounded policies keeping their frames in state/
	// (memory.Archiver), removed once the run is complete.
	archived []memory.Archiver
	complete bool
	replayTo int // the block to replay the stream to without logging it (0: none)
	logw     *runfolder.LogWriter
	stream   runinput.Stream
	opened   bool
}

// prepare makes the policies and the state before block 0, and state/
// with the archives of the unbounded policies.
func (r *simRun) prepare() error {
	var err error
	if r.pols, r.st, err = newSimulateRun(r.cfg); err != nil {
		return err
	}
	r.stateDir = filepath.Join(r.dir, runfolder.DirState)
	if err := os.MkdirAll(r.stateDir, 0o755); err != nil {
		return err
	}
	for i, p := range r.pols {
		if a, ok := p.(memory.Archiver); ok && (r.cfg.Policies[i] == memory.NameFullHistory || r.cfg.Policies[i] == memory.NameLongLiveRAG) {
			if err := a.UseArchive(filepath.Join(r.stateDir, runfolder.ArchiveName(i, r.cfg.Policies[i]))); err != nil {
				return fmt.Errorf("policy %s: %w", r.cfg.Policies[i], err)
			}
			r.archived = append(r.archived, a)
		}
	}
	return nil
}

// open opens the memory log (cut back to the checkpoint's size) and the
// stream, skipped to the first block to compute.
func (r *simRun) open() error {
	var err error
	if r.logw, err = runfolder.OpenLog(filepath.Join(r.dir, runfolder.FileLog), r.st.LogBytes); err != nil {
		return fmt.Errorf("memory log: %w", err)
	}
	if r.stream, err = runinput.OpenStream(r.cfg); err != nil {
		return err
	}
	r.opened = true
	// Skip blocks already covered by restored snapshots.
	for b := 0; b < r.st.NextBlock; b++ {
		if _, err := r.stream.NextBlock(); err != nil {
			return fmt.Errorf("stream: skip to block %d: %w", r.st.NextBlock, err)
		}
	}
	return nil
}

// close closes the stream and the log, and the archives (removed when the
// run is complete).
func (r *simRun) close() error {
	if r.opened {
		r.stream.Close()
	}
	if r.logw != nil {
		r.logw.Close()
	}
	var err error
	for _, a := range r.archived {
		if cerr := a.CloseArchive(r.complete); cerr != nil && err == nil {
			err = cerr
		}
	}
	return err
}

// checkpoint records the completed blocks, with the policies' snapshots
// when snaps is set and every policy can take one.
func (r *simRun) checkpoint(snaps bool) error {
	canSnap := true
	for _, p := range r.pols {
		if _, ok := p.(memory.Snapshotter); !ok {
			canSnap = false
		}
	}
	return checkpointSimulate(r.cfg, r.stateDir, r.logw, r.pols, r.st, snaps && canSnap)
}

// drive runs the blocks left (Run), logging each block's lines (but the
// replayed ones) and checkpointing every SnapshotEvery blocks; stopped by
// ctx, it checkpoints and reports interrupted. Complete, it writes the
// result files.
func (r *simRun) drive(ctx context.Context) (interrupted bool, err error) {
	cfg, st := r.cfg, r.st
	L := cfg.Memory.Layout.Layers
	blocks := cfg.Blocks()
	if r.replayTo > 0 {
		r.hooks.Infof("resume: policies cannot be snapshotted; recomputing blocks 0..%d (not logged again)", r.replayTo-1)
	}
	if r.hooks.Start != nil {
		r.hooks.Start(st.NextBlock, blocks)
	}
	attend := make([][]float64, len(r.pols)) // [policy][layer] of the block
	for i := range attend {
		attend[i] = make([]float64, L)
	}
	offered := make([]int, L)
	bytes := make([]int64, len(r.pols))
	first := st.NextBlock
	sum, runErr := Run(r.stream, r.pols, Options{
		MaxBlocks: blocks - first, FirstBlock: first, Context: ctx,
		OnLayer: func(rec LayerRecord) error {
			attend[rec.Policy][rec.Layer] = rec.AttendSeconds
			return nil
		},
		OnBlock: func(rec BlockRecord) error {
			bytes[rec.Policy] = rec.Bytes
			return nil
		},
		EndBlock: func(b int) error {
			return r.endBlock(b, blockLines(cfg, r.pols, st, b, attend, bytes, offered))
		},
	})
	if runErr != nil && ctx.Err() != nil && errors.Is(runErr, ctx.Err()) {
		return true, r.stopped()
	}
	if runErr != nil {
		return false, runErr
	}
	if done := first + sum.Blocks; done < blocks {
		r.hooks.Warnf("stream ended after %d blocks (config asked for %d)", done, blocks)
	}
	// The log is durable and its size noted; the final checkpoint is
	// Run's last write (commitComplete).
	n, err := r.logw.Sync()
	if err != nil {
		return false, fmt.Errorf("memory log: %w", err)
	}
	st.LogBytes = n
	if err := runfolder.WriteArtifacts(r.dir, cfg, r.pols, st); err != nil {
		return false, err
	}
	r.complete = true
	return false, nil
}

// endBlock logs block b's lines (not a replayed block's), reports them,
// and checkpoints every SnapshotEvery blocks.
func (r *simRun) endBlock(b int, lines []runfolder.LogLine) error {
	replaying := b < r.replayTo
	if !replaying {
		for _, ln := range lines {
			if err := r.logw.Write(ln); err != nil {
				return fmt.Errorf("memory log: %w", err)
			}
		}
	}
	r.st.NextBlock = b + 1
	if replaying {
		lines = nil
	}
	if r.hooks.Block != nil {
		r.hooks.Block(b, lines)
	}
	if every := r.cfg.Run.SnapshotEvery; !replaying && every > 0 && r.st.NextBlock%every == 0 && r.st.NextBlock < r.cfg.Blocks() {
		return r.checkpoint(true)
	}
	return nil
}

// stopped saves a checkpoint and the result files so far of a run ctx
// stopped (a run still replaying keeps its checkpoint: nothing was logged).
func (r *simRun) stopped() error {
	if r.st.NextBlock < r.replayTo {
		return nil
	}
	if err := r.checkpoint(true); err != nil {
		return err
	}
	return runfolder.WriteArtifacts(r.dir, r.cfg, r.pols, r.st)
}

// blockLines records block b of every policy in st (totals, bytes by
// block, admissions) and returns its log lines: from the policies'
// statistics and bank decisions, the layers' Attend times and the live
// bytes after the block. offered is scratch of one entry per layer.
func blockLines(cfg config.Config, pols []memory.Policy, st *runfolder.RunState, b int, attend [][]float64, bytes []int64, offered []int) []runfolder.LogLine {
	L := cfg.Memory.Layout.Layers
	sec := float64((b+1)*cfg.Memory.Layout.FramesPerBlock) / cfg.Stream.FPS
	var lines []runfolder.LogLine
	for i, p := range pols {
		s := runfolder.StatsOf(p)
		var decs []bank.Decision
		if d, ok := p.(*memory.DensityKV); ok {
			decs = d.LastDecisions()
			for l := range offered {
				offered[l] = s.Offered[l]
			}
			st.Adm.Add(b, decs, offered)
		}
		tot := st.Totals[i]
		tot.Bytes = bytes[i]
		tot.PeakBytes = max(tot.PeakBytes, tot.Bytes)
		tot.UpdateSeconds += s.UpdateSeconds
		st.Bytes[i] = append(st.Bytes[i], tot.Bytes)
		tot.OccMin, tot.OccMax = 1<<62, 0
		banks := runfolder.BankBytes(p)
		for l := 0; l < L; l++ {
			ln := runfolder.LineFor(cfg.Policies[i], b, l, sec, s, decs, tot.Bytes, attend[i][l])
			ln.Diag = runfolder.DiagFor(p, l, decs, ln.Offered)
			ln.Layer += cfg.Stream.FirstLayer
			if banks != nil {
				ln.BankBytes = banks[l]
			}
			tot.Admitted += int64(ln.AdmittedTotal)
			tot.EvictedMandatory += int64(ln.EvictedMandatory)
			tot.EvictedCapacity += int64(ln.EvictedCapacity)
			tot.AttendSeconds += ln.AttendSeconds
			tot.OccMin, tot.OccMax = min(tot.OccMin, ln.OccMin), max(tot.OccMax, ln.OccMax)
			if l == 0 {
				tot.Tokens = ln.Tokens.Sink + ln.Tokens.Memory + ln.Tokens.Local
			}
			lines = append(lines, ln)
		}
	}
	return lines
}

// userf is a runfolder.UserError: a mistake in the command's input.
func userf(format string, a ...any) error {
	return &runfolder.UserError{Err: fmt.Errorf(format, a...)}
}
