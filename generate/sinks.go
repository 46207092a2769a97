package generate

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/internal/filehash"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/record"
	"github.com/densitykv/densitykv/rollout"
	"github.com/densitykv/densitykv/runfolder"
)

// A blockSink is one thing a generate run's finished blocks feed (a file
// of the run folder, or a part of the state its checkpoint records). The
// run (genRun) calls block for every finished block, stage before each
// checkpoint commit, end once after the rollout and close on the way out,
// each in the order the sinks were opened. Each writes only its own files
// and its own fields of the checkpoint, so their order carries no
// crash-consistency guarantee (genRun states that order); a sink that reads
// another's output is opened after it (horizons and drift, which reads the
// decoded frames, after the video). Adding an output is a type with these
// methods (sinkBase has empty ones), opened and appended to genRun.sinks in
// genRun.openSinks: nothing else changes.
type blockSink interface {
	// block writes block b's output: latents are its clean latents
	// [F][C][H][W], bl its rollout log.
	block(b int, latents []float32, bl rollout.BlockLog) error
	// stage makes what block wrote durable (synced) and records in gs what
	// --resume needs to continue it: a size to cut back to, a hash, a
	// state. withSnap: the checkpoint is one to resume from (with the
	// policy's snapshot), not the final one of a complete run.
	stage(gs *runfolder.GenerateState, withSnap bool) error
	// end is called once after the rollout, after the last stage: complete
	// is false when the run was stopped.
	end(complete bool) error
	// close releases the sink's files (on every way out).
	close()
}

// sinkBase has a blockSink's methods, doing nothing.
type sinkBase struct{}

func (sinkBase) block(int, []float32, rollout.BlockLog) error { return nil }
func (sinkBase) stage(*runfolder.GenerateState, bool) error   { return nil }
func (sinkBase) end(bool) error                               { return nil }
func (sinkBase) close()                                       {}

// memoryLogSink writes the memory log (log.jsonl): a block's lines,
// recorded in the run's state (totals, bytes, admissions), synced every
// block so that the log can be watched while the run goes.
type memoryLogSink struct {
	sinkBase
	w     *runfolder.LogWriter
	gc    config.GenerateConfig
	pol   memory.Policy
	st    *runfolder.RunState
	lines []runfolder.LogLine // the last block's, for Hooks.Block
}

func openMemoryLog(dir string, gc config.GenerateConfig, pol memory.Policy, st *runfolder.RunState) (*memoryLogSink, error) {
	w, err := runfolder.OpenLog(filepath.Join(dir, runfolder.FileLog), st.LogBytes)
	if err != nil {
		return nil, fmt.Errorf("memory log: %w", err)
	}
	return &memoryLogSink{w: w, gc: gc, pol: pol, st: st}, nil
}

func (s *memoryLogSink) block(b int, _ []float32, bl rollout.BlockLog) error {
	s.lines = generateLines(s.gc, s.pol, s.st, b, bl)
	for _, ln := range s.lines {
		if err := s.w.Write(ln); err != nil {
			return err
		}
	}
	_, err := s.w.Sync()
	return err
}

func (s *memoryLogSink) stage(gs *runfolder.GenerateState, _ bool) error {
	n, err := s.w.Sync()
	if err != nil {
		return fmt.Errorf("memory log: %w", err)
	}
	gs.LogBytes = n
	return nil
}

func (s *memoryLogSink) close() { s.w.Close() }

// lineageSink writes lineage.jsonl: the DensityKV provenance events of
// the chosen layers and heads, and at the end of a complete run the
// entries still held.
type lineageSink struct {
	sinkBase
	lg *lineage
	w  *runfolder.LogWriter
}

// openLineage opens lineage.jsonl (cut back to the checkpoint's size),
// with its header when new; nil, nil when the run records no lineage
// (not DensityKV, or no layers or heads chosen).
func openLineage(dir string, gc config.GenerateConfig, pol memory.Policy, gs *runfolder.GenerateState, idOffset int64) (*lineageSink, error) {
	dk, ok := pol.(*memory.DensityKV)
	if !ok {
		return nil, nil
	}
	g := gc.Generate
	layers, err := config.ParseIndexList(g.LineageLayers, "generate.lineage_layers", gc.Memory.Layout.Layers)
	if err != nil {
		return nil, userf("%w", err)
	}
	heads, err := config.ParseIndexList(g.LineageHeads, "generate.lineage_heads", gc.Memory.Layout.Heads)
	if err != nil {
		return nil, userf("%w", err)
	}
	if len(layers) == 0 || len(heads) == 0 {
		return nil, nil
	}
	s := &lineageSink{lg: newLineage(dk, layers, heads, idOffset)}
	if s.w, err = runfolder.OpenLog(filepath.Join(dir, runfolder.FileLineage), gs.LineageBytes); err != nil {
		return nil, fmt.Errorf("lineage: %w", err)
	}
	if gs.LineageBytes == 0 {
		if err := s.w.Write(s.lg.header(gc.Memory.Bank.Tau)); err != nil {
			s.w.Close()
			return nil, fmt.Errorf("lineage: %w", err)
		}
	}
	return s, nil
}

func (s *lineageSink) block(b int, _ []float32, bl rollout.BlockLog) error {
	evs, err := s.lg.events(b, s.lg.pol.LastDecisions(), bl.Offered)
	if err != nil {
		return err
	}
	for _, ev := range evs {
		if err := s.w.Write(ev); err != nil {
			return fmt.Errorf("lineage: %w", err)
		}
	}
	return nil
}

func (s *lineageSink) stage(gs *runfolder.GenerateState, _ bool) error {
	n, err := s.w.Sync()
	if err != nil {
		return fmt.Errorf("lineage: %w", err)
	}
	gs.LineageBytes = n
	return nil
}

func (s *lineageSink) end(complete bool) error {
	if !complete {
		return nil
	}
	for _, f := range s.lg.finals() {
		if err := s.w.Write(f); err != nil {
			return fmt.Errorf("lineage: %w", err)
		}
	}
	if _, err := s.w.Sync(); err != nil {
		return fmt.Errorf("lineage: %w", err)
	}
	return nil
}

func (s *lineageSink) close() { s.w.Close() }

// previewSink writes a block's latent preview PNGs (generate.preview).
type previewSink struct {
	sinkBase
	dir     string
	C, H, W int
}

func (s previewSink) block(b int, latents []float32, _ rollout.BlockLog) error {
	return writePreview(s.dir, b, latents, s.C, s.H, s.W)
}

// videoSink decodes a block into its video segment (VideoStream)
// and, for mp4, records the hashes of the segment and its lossless copy in
// the run's state as soon as they are written (a resume checks them).
type videoSink struct {
	sinkBase
	vs         *VideoStream
	gs         *runfolder.GenerateState
	F, C, H, W int
}

func (s *videoSink) block(b int, latents []float32, _ rollout.BlockLog) error {
	if err := s.vs.Block(b, latents, s.F, s.C, s.H, s.W); err != nil {
		return err
	}
	if !s.vs.Folder().MP4() {
		return nil
	}
	sum, err := filehash.File(s.vs.Folder().SegmentPath(b))
	if err != nil {
		return err
	}
	s.gs.SegmentsSHA256 = append(s.gs.SegmentsSHA256[:b], sum.SHA256)
	if sum, err = filehash.File(s.vs.Folder().LosslessPath(b)); err != nil {
		return err
	}
	s.gs.LosslessSHA256 = append(s.gs.LosslessSHA256[:b], sum.SHA256)
	return nil
}

// horizonSink writes each shorter video (generate.horizons) once its last
// block's segment is written (fed after the videoSink).
type horizonSink struct {
	sinkBase
	hv *horizonVideos
}

func (s horizonSink) block(b int, _ []float32, _ rollout.BlockLog) error { return s.hv.block(b) }

// driftSink writes drift.jsonl (nil monitor: a run resumed from before
// the monitor, which records no drift state) and stops the run when a
// --stop-on-drift rule trips before its last block.
type driftSink struct {
	sinkBase
	dm     *driftMonitor
	blocks int
	hooks  runfolder.Hooks
	stop   func(why string)
}

func (s *driftSink) block(b int, latents []float32, _ rollout.BlockLog) error {
	if s.dm == nil {
		return nil
	}
	rec, r, err := s.dm.block(b, latents)
	if err != nil {
		return err
	}
	if r != nil && b+1 < s.blocks {
		why := tripMessage(b, *r, rec)
		s.hooks.Infof("\ngenerate: --stop-on-drift: %s", why)
		s.stop(why)
	} else if r != nil {
		s.hooks.Infof("\ngenerate: --stop-on-drift: %s, the last block: the run completes", tripMessage(b, *r, rec))
	}
	return nil
}

func (s *driftSink) stage(gs *runfolder.GenerateState, _ bool) error { return s.dm.stage(gs) }
func (s *driftSink) close()                                          { s.dm.close() }

// recordSink is the --record-stream file (nil: none), fed by the
// recorder the rollout calls; it is finished when the rollout ends.
type recordSink struct {
	sinkBase
	rec *streamRecord
}

func (s recordSink) stage(gs *runfolder.GenerateState, _ bool) error {
	gs.RecordBytes, gs.RecordSHA256 = -1, ""
	if s.rec == nil {
		return nil
	}
	n, err := s.rec.sync()
	if err != nil {
		return fmt.Errorf("--record-stream: %w", err)
	}
	gs.RecordBytes, gs.RecordSHA256 = n, s.rec.sum()
	return nil
}

func (s recordSink) end(bool) error {
	if s.rec == nil {
		return nil
	}
	if err := s.rec.finish(); err != nil {
		return fmt.Errorf("--record-stream: %w", err)
	}
	return nil
}

func (s recordSink) close() {
	if s.rec != nil {
		s.rec.finish()
	}
}

// snapshotSink saves the policy's snapshot with a checkpoint to resume
// from, named by the checkpoint's block.
type snapshotSink struct {
	sinkBase
	snap     memory.Snapshotter
	policy   string
	stateDir string
}

func (s snapshotSink) stage(gs *runfolder.GenerateState, withSnap bool) error {
	gs.Snapshot, gs.SnapshotSHA256, gs.Snapshots = "", "", withSnap
	if !withSnap {
		return nil
	}
	gs.Snapshot = runfolder.SnapshotName(0, s.policy, gs.NextBlock)
	sum, err := runfolder.SaveSnapshotSum(filepath.Join(s.stateDir, gs.Snapshot), s.snap)
	if err != nil {
		return fmt.Errorf("checkpoint: policy %s: %w", s.policy, err)
	}
	gs.SnapshotSHA256 = sum
	return nil
}

// shardSink records the latent shards' hashes (the rollout's writer
// writes and syncs the shards themselves).
type shardSink struct {
	sinkBase
	w *rollout.Writer
}

func (s shardSink) stage(gs *runfolder.GenerateState, _ bool) error {
	gs.Shards = gs.Shards[:0]
	for _, sh := range s.w.Manifest().Shards {
		gs.Shards = append(gs.Shards, sh.SHA256)
	}
	return nil
}

// traceSink is the attention trace (record.AttentionTracer, nil: none),
// fed by the tracer the rollout calls: its mass is state, and the
// per-layer trace (large: 8·H·F² bytes a layer) is saved with each
// checkpoint to resume from and written to the run folder at the end.
type traceSink struct {
	sinkBase
	tr            *record.AttentionTracer
	policy        string
	step          int
	dir, stateDir string
}

// writeFile writes trace.json from the mass so far.
func (s *traceSink) writeFile() error {
	if s.tr == nil {
		return nil
	}
	return runfolder.WriteJSON(filepath.Join(s.dir, runfolder.FileTrace), s.tr.File(s.policy))
}

func (s *traceSink) stage(gs *runfolder.GenerateState, withSnap bool) error {
	gs.TraceMass = nil
	if s.tr != nil {
		gs.TraceMass = s.tr.Mass
	}
	// The per-layer trace is state: saved beside the snapshot under the
	// checkpoint's block (the run folder's copy is written at the end
	// and when stopped), so that a crash between two checkpoints cannot
	// pair one checkpoint with another's trace.
	gs.TraceLayers, gs.TraceLayersSHA256 = "", ""
	if !withSnap || s.tr == nil || len(s.tr.LayerIndex) == 0 {
		return nil
	}
	gs.TraceLayers = runfolder.TraceLayersName(gs.NextBlock)
	sum, err := runfolder.WriteTraceLayersSum(filepath.Join(s.stateDir, gs.TraceLayers), s.tr.Layers(), s.step)
	gs.TraceLayersSHA256 = sum
	return err
}

func (s *traceSink) end(bool) error {
	if s.tr == nil || len(s.tr.LayerIndex) == 0 {
		return nil
	}
	return runfolder.WriteTraceLayers(filepath.Join(s.dir, runfolder.FileTraceLayers), s.tr.Layers(), s.step)
}

// removeStale removes the snapshots and per-layer traces in stateDir that
// the checkpoint gs does not name.
func removeStale(stateDir string, gs *runfolder.GenerateState) {
	old, _ := filepath.Glob(filepath.Join(stateDir, "policy-*.snap"))
	traces, _ := filepath.Glob(filepath.Join(stateDir, "trace-layers-b*.safetensors"))
	for _, f := range append(old, traces...) {
		if b := filepath.Base(f); b != gs.Snapshot && b != gs.TraceLayers {
			os.Remove(f)
		}
	}
}
