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

// Simulate runs cfg's policies over its stream (package sim drives them,
// block by block) into the run folder dir, which must exist with the run's
// config.resolved.yaml (Prepare). It writes the memory log as it goes, the
// provenance, admissions and storage files and summary.json at the end,
// and the figures when cfg.Run.Plots is set. With resume it continues the
// run from its checkpoint (policy snapshots, or replaying the blocks when
// a policy cannot be snapshotted) with results identical to an
// uninterrupted run. When ctx is cancelled it finishes the current block,
// saves a checkpoint and returns the partial result with ErrInterrupted.
func Simulate(ctx context.Context, command string, cfg config.Config, dir string, resume bool, hooks runfolder.Hooks) (*runfolder.Result, error) {
	start := time.Now()
	st, interrupted, replayed, err := simulate(ctx, cfg, dir, resume, hooks)
	if err != nil && !interrupted {
		return nil, err
	}
	// "Complete" is recorded last: the final checkpoint follows the
	// result files, the figures and summary.json, each written atomically
	// and synced. A failure before it leaves the previous checkpoint, which
	// --resume continues from.
	res := &runfolder.Result{Summary: runfolder.NewSummary(command, dir, cfg, st, interrupted, time.Since(start), replayed), Interrupted: interrupted}
	if !interrupted && cfg.Run.Plots {
		pngs, err := runfolder.Render(dir)
		if err != nil {
			return nil, fmt.Errorf("plots: %w", err)
		}
		res.Summary.Plots = pngs
	}
	if err := runfolder.WriteJSON(filepath.Join(dir, runfolder.FileSummary), res.Summary); err != nil {
		return nil, err
	}
	if interrupted {
		return res, runfolder.ErrInterrupted
	}
	if err := commitComplete(dir, st); err != nil {
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

// simulate is Simulate's run; st is nil when it stopped before restoring a
// state.
func simulate(ctx context.Context, cfg config.Config, dir string, resume bool, hooks runfolder.Hooks) (st *runfolder.RunState, interrupted bool, replayed int, err error) {
	L := cfg.Memory.Layout.Layers
	blocks := cfg.Blocks()
	pols, st, err := newSimulateRun(cfg)
	if err != nil {
		return nil, false, 0, err
	}

	stateDir := filepath.Join(dir, runfolder.DirState)
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return nil, false, 0, err
	}
	// The unbounded policies keep their frames in state/ (memory.Archiver),
	// removed once the run is complete.
	var archived []memory.Archiver
	for i, p := range pols {
		if a, ok := p.(memory.Archiver); ok && (cfg.Policies[i] == memory.NameFullHistory || cfg.Policies[i] == memory.NameLongLiveRAG) {
			if err := a.UseArchive(filepath.Join(stateDir, runfolder.ArchiveName(i, cfg.Policies[i]))); err != nil {
				return nil, false, 0, fmt.Errorf("policy %s: %w", cfg.Policies[i], err)
			}
			archived = append(archived, a)
		}
	}
	complete := false
	defer func() {
		for _, a := range archived {
			if cerr := a.CloseArchive(complete); cerr != nil && err == nil {
				err = cerr
			}
		}
	}()
	replayTo := 0
	if resume {
		if replayTo, err = resumeSimulate(cfg, dir, pols, st); err != nil {
			return nil, false, 0, err
		}
	}
	logw, err := runfolder.OpenLog(filepath.Join(dir, runfolder.FileLog), st.LogBytes)
	if err != nil {
		return nil, false, 0, fmt.Errorf("memory log: %w", err)
	}
	defer logw.Close()

	stream, err := runinput.OpenStream(cfg)
	if err != nil {
		return nil, false, 0, err
	}
	defer stream.Close()
	canSnap := true
	for _, p := range pols {
		if _, ok := p.(memory.Snapshotter); !ok {
			canSnap = false
		}
	}
	// Skip blocks already covered by restored snapshots.
	for b := 0; b < st.NextBlock; b++ {
		if _, err := stream.NextBlock(); err != nil {
			return nil, false, 0, fmt.Errorf("stream: skip to block %d: %w", st.NextBlock, err)
		}
	}
	if replayTo > 0 {
		hooks.Infof("resume: policies cannot be snapshotted; recomputing blocks 0..%d (not logged again)", replayTo-1)
	}
	if hooks.Start != nil {
		hooks.Start(st.NextBlock, blocks)
	}

	checkpoint := func(snaps bool) error {
		return checkpointSimulate(cfg, stateDir, logw, pols, st, snaps && canSnap)
	}
	attend := make([][]float64, len(pols)) // [policy][layer] of the block
	for i := range attend {
		attend[i] = make([]float64, L)
	}
	offered := make([]int, L)
	bytes := make([]int64, len(pols))
	first := st.NextBlock
	sum, runErr := Run(stream, pols, Options{
		MaxBlocks: blocks - first, FirstBlock: first, Context: ctx,
		OnLayer: func(r LayerRecord) error {
			attend[r.Policy][r.Layer] = r.AttendSeconds
			return nil
		},
		OnBlock: func(r BlockRecord) error {
			bytes[r.Policy] = r.Bytes
			return nil
		},
		EndBlock: func(b int) error {
			lines := blockLines(cfg, pols, st, b, attend, bytes, offered)
			replaying := b < replayTo
			if !replaying {
				for _, ln := range lines {
					if err := logw.Write(ln); err != nil {
						return fmt.Errorf("memory log: %w", err)
					}
				}
			}
			st.NextBlock = b + 1
			if replaying {
				lines = nil
			}
			if hooks.Block != nil {
				hooks.Block(b, lines)
			}
			if !replaying && cfg.Run.SnapshotEvery > 0 && st.NextBlock%cfg.Run.SnapshotEvery == 0 && st.NextBlock < blocks {
				return checkpoint(true)
			}
			return nil
		},
	})
	if runErr != nil && ctx.Err() != nil && errors.Is(runErr, ctx.Err()) {
		if st.NextBlock < replayTo {
			// The saved checkpoint is still valid: nothing was logged.
			return st, true, replayTo, nil
		}
		if err := checkpoint(true); err != nil {
			return nil, false, 0, err
		}
		if err := runfolder.WriteArtifacts(dir, cfg, pols, st); err != nil {
			return nil, false, 0, err
		}
		return st, true, replayTo, nil
	}
	if runErr != nil {
		return nil, false, 0, runErr
	}
	if done := first + sum.Blocks; done < blocks {
		hooks.Warnf("stream ended after %d blocks (config asked for %d)", done, blocks)
	}
	// The log is durable and its size noted; the final checkpoint is
	// Simulate's last write (commitComplete).
	n, err := logw.Sync()
	if err != nil {
		return nil, false, 0, fmt.Errorf("memory log: %w", err)
	}
	st.LogBytes = n
	if err := runfolder.WriteArtifacts(dir, cfg, pols, st); err != nil {
		return nil, false, 0, err
	}
	complete = true
	return st, false, replayTo, nil
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
