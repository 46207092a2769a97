package runfolder

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"time"

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/eval"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/ragae"
	"github.com/densitykv/densitykv/rollout"
	"github.com/densitykv/densitykv/synth"
)

// Generate rolls out the Wan model of gc with its memory policy into the
// run folder <out>/<name> through package rollout's generate path: latent
// shards and manifest, the memory log, the DensityKV provenance and
// admissions, the attention trace (eval.AttentionTracer) and the latent
// preview frames as every block finishes, the recorded stream, then
// summary.json, the figures and preview.mp4 (with ffmpeg). Every input is
// checked before the folder is made (errors in the checkpoint or the texts
// are *rollout.InputError inside a *UserError). With resume it continues
// a stopped run from its checkpoint without computing the completed blocks
// again, after checking that the configuration, inputs, latents and
// snapshot are those of the checkpoint. When ctx is cancelled it stops
// after the current block, saves a checkpoint and returns the partial
// result with ErrInterrupted.
func Generate(ctx context.Context, gc config.GenerateConfig, resume, force bool, hooks Hooks) (*Result, error) {
	g := gc.Generate
	dir := filepath.Join(gc.Run.Out, gc.Run.Name)
	stateDir := filepath.Join(dir, DirState)
	cpPath := filepath.Join(stateDir, FileCheckpoint)
	gs := &GenerateState{}
	if resume {
		saved, err := resumeState(dir, cpPath, gc)
		if err != nil {
			return nil, err
		}
		gs = saved
	}
	prompts := make([]rollout.PromptText, len(g.Texts))
	for i, ts := range g.Texts {
		prompts[i] = rollout.PromptText{FromBlock: ts.FromBlock, Text: rollout.TextFile{Path: ts.Path, Tensor: ts.Tensor}}
	}
	F := g.BlockFrames()
	gen, err := rollout.NewGeneratorWith(rollout.ModelOptions{Checkpoint: g.Checkpoint, Entry: g.Entry, LoRA: g.LoRA, LoRAAlpha: g.LoRAAlpha, Model: g.Model, Precision: g.Precision}, prompts, g.Schedule.Options())
	if err != nil {
		return nil, &UserError{err}
	}
	if _, err := g.Model.Memory(gc.Memory, g.LatentHeight, g.LatentWidth, F); err != nil {
		return nil, userf("%s: %w", FileConfig, err)
	}
	pol, err := memory.New(gc.Policies[0], gc.Memory)
	if err != nil {
		return nil, err
	}
	if err := setRAGAE(pol, gc); err != nil {
		return nil, &UserError{err}
	}
	if !resume {
		// Every input is checked: now the run folder.
		if err := newGenerateFolder(dir, force, gc, gs); err != nil {
			return nil, err
		}
	}
	st := &gs.RunState
	start := st.NextBlock
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		return nil, err
	}
	snap, ok := pol.(memory.Snapshotter)
	if !ok {
		return nil, fmt.Errorf("policy %s cannot be snapshotted for --resume", gc.Policies[0])
	}
	if resume {
		if err := loadSnapshotSum(filepath.Join(stateDir, gs.Snapshot), gs.SnapshotSHA256, snap); err != nil {
			return nil, fmt.Errorf("--resume: policy %s: %w", gc.Policies[0], err)
		}
	}
	// The policy the rollout calls: pol, traced, recorded.
	frames := g.Blocks * F
	var tr *eval.AttentionTracer
	var run memory.Policy = pol
	if g.TraceStep >= 0 {
		tr = eval.NewAttentionTracer(pol, g.TraceStep, frames)
		layers, err := config.ParseIndexList(g.TraceLayers, "generate.trace_layers", gc.Memory.Layout.Layers)
		if err != nil {
			return nil, userf("%w", err)
		}
		if len(layers) > 0 {
			tr.TraceLayers(layers)
		}
		if resume {
			if len(gs.TraceMass) != len(tr.Mass) {
				return nil, fmt.Errorf("--resume: %s: attention trace of %d values, want %d", cpPath, len(gs.TraceMass), len(tr.Mass))
			}
			copy(tr.Mass, gs.TraceMass)
			if len(layers) > 0 {
				lt, err := ReadTraceLayers(filepath.Join(dir, FileTraceLayers))
				if err == nil {
					err = tr.SetLayers(lt)
				}
				if err != nil {
					return nil, fmt.Errorf("--resume: per-layer attention trace: %w", err)
				}
			}
		}
		run = tr
	}
	var rec *streamRecord
	if g.RecordStream != "" {
		rec, err = newStreamRecord(g.RecordStream, recordHeader(pol, g), resume, gs.RecordBytes, gs.RecordSHA256, start)
		if err != nil {
			return nil, fmt.Errorf("--record-stream: %w", err)
		}
		defer rec.finish()
		sr, err := synth.NewRecorder(run, rec.sw)
		if err != nil {
			return nil, fmt.Errorf("--record-stream: %w", err)
		}
		run = recorded{sr, pol}
	}
	ro := rollout.RunOptions{Blocks: g.Blocks, FramesPerBlock: F, Height: g.LatentHeight, Width: g.LatentWidth,
		Seed: uint64(gc.Run.Seed), Start: start, Stop: ctx}
	if g.Recache == config.RecacheLongLive {
		rc, ok := pol.(memory.Recacher)
		if !ok {
			return nil, userf("--recache longlive: policy %s has no recache", gc.Policies[0])
		}
		ro.Recacher = rc
	}
	var idOffset int64 // provenance ids less this (the authors' ids)
	if g.SourceIDs == config.SourceAuthors {
		idOffset = int64(gc.Memory.SinkFrames * gc.Memory.Layout.TokensPerFrame())
	}
	var lg *lineage
	var lgw *LogWriter
	if dk, ok := pol.(*memory.DensityKV); ok {
		layers, err := config.ParseIndexList(g.LineageLayers, "generate.lineage_layers", gc.Memory.Layout.Layers)
		if err != nil {
			return nil, userf("%w", err)
		}
		heads, err := config.ParseIndexList(g.LineageHeads, "generate.lineage_heads", gc.Memory.Layout.Heads)
		if err != nil {
			return nil, userf("%w", err)
		}
		if len(layers) > 0 && len(heads) > 0 {
			lg = newLineage(dk, layers, heads, idOffset)
			if lgw, err = OpenLog(filepath.Join(dir, FileLineage), gs.LineageBytes); err != nil {
				return nil, fmt.Errorf("lineage: %w", err)
			}
			defer lgw.Close()
			if gs.LineageBytes == 0 {
				if err := lgw.Write(lg.header(gc.Memory.Bank.Tau)); err != nil {
					return nil, fmt.Errorf("lineage: %w", err)
				}
			}
		}
	}
	w, err := openLatents(dir, resume, start, F, gs, gen.Manifest(pol, ro, map[string]string{"checkpoint": g.Checkpoint, "lora": g.LoRA}))
	if err != nil {
		return nil, err
	}
	logw, err := OpenLog(filepath.Join(dir, FileLog), st.LogBytes)
	if err != nil {
		return nil, fmt.Errorf("memory log: %w", err)
	}
	defer logw.Close()
	if resume {
		hooks.info("resume: continuing at block %d of %d from the checkpoint in %s", start, g.Blocks, stateDir)
	}
	if hooks.Start != nil {
		hooks.Start(start, g.Blocks)
	}
	began := time.Now()
	writeTrace := func() error {
		if tr == nil {
			return nil
		}
		return WriteJSON(filepath.Join(dir, FileTrace), tr.File(gc.Policies[0]))
	}
	// The per-layer trace (large: 8·H·F² bytes a layer) is written with
	// each checkpoint and at the end.
	writeTraceLayers := func() error {
		if tr == nil || len(tr.LayerIndex) == 0 {
			return nil
		}
		return writeTraceLayers(filepath.Join(dir, FileTraceLayers), tr.Layers(), g.TraceStep)
	}
	// snapAt is the block of the checkpoint with a snapshot on disk (−1:
	// none yet), so that a stop right after one does not save it again.
	snapAt := -1
	if resume {
		snapAt = start
	}
	// checkpoint commits the run's state after block st.NextBlock−1; with
	// withSnap it saves the policy snapshot to continue from (not needed once
	// the run is complete).
	checkpoint := func(withSnap bool) error {
		n, err := logw.Sync()
		if err != nil {
			return fmt.Errorf("memory log: %w", err)
		}
		st.LogBytes = n
		if lgw != nil {
			if gs.LineageBytes, err = lgw.Sync(); err != nil {
				return fmt.Errorf("lineage: %w", err)
			}
		}
		gs.RecordBytes, gs.RecordSHA256 = -1, ""
		if rec != nil {
			if gs.RecordBytes, err = rec.sync(); err != nil {
				return fmt.Errorf("--record-stream: %w", err)
			}
			gs.RecordSHA256 = rec.sum()
		}
		gs.Snapshot, gs.SnapshotSHA256, st.Snapshots = "", "", withSnap
		if withSnap {
			gs.Snapshot = SnapshotName(0, gc.Policies[0], st.NextBlock)
			if gs.SnapshotSHA256, err = saveSnapshotSum(filepath.Join(stateDir, gs.Snapshot), snap); err != nil {
				return fmt.Errorf("checkpoint: policy %s: %w", gc.Policies[0], err)
			}
		}
		gs.Shards = gs.Shards[:0]
		for _, sh := range w.Manifest().Shards {
			gs.Shards = append(gs.Shards, sh.SHA256)
		}
		gs.TraceMass = nil
		if tr != nil {
			gs.TraceMass = tr.Mass
		}
		if err := writeTraceLayers(); err != nil {
			return err
		}
		if err := writeGenCheckpoint(cpPath, gs); err != nil {
			return err
		}
		snapAt = -1
		if withSnap {
			snapAt = st.NextBlock
		}
		old, _ := filepath.Glob(filepath.Join(stateDir, "policy-*.snap"))
		for _, f := range old {
			if filepath.Base(f) != gs.Snapshot {
				os.Remove(f)
			}
		}
		return writeTrace()
	}
	stopping := false
	ro.Writer = w
	ro.Progress = func(p rollout.Progress) {
		if !stopping && ctx.Err() != nil {
			stopping = true
			hooks.info("\ngenerate: stopping after block %d to save a resume checkpoint", p.Block)
		}
	}
	ro.BlockDone = func(b int, latents []float32, bl rollout.BlockLog) error {
		lines := generateLines(gc, pol, st, b, bl)
		st.NextBlock = b + 1
		for _, ln := range lines {
			if err := logw.Write(ln); err != nil {
				return err
			}
		}
		if lg != nil {
			evs, err := lg.events(b, lg.pol.LastDecisions(), bl.Offered)
			if err != nil {
				return err
			}
			for _, ev := range evs {
				if err := lgw.Write(ev); err != nil {
					return fmt.Errorf("lineage: %w", err)
				}
			}
		}
		if g.Preview {
			if err := writePreview(dir, b, latents, g.Model.OutDim, g.LatentHeight, g.LatentWidth); err != nil {
				return err
			}
		}
		if every := gc.Run.SnapshotEvery; every > 0 && st.NextBlock%every == 0 && st.NextBlock < g.Blocks {
			if err := checkpoint(true); err != nil {
				return err
			}
		} else if _, err := logw.Sync(); err != nil {
			return err
		} else if err := writeTrace(); err != nil {
			return err
		}
		if hooks.Block != nil {
			hooks.Block(b, lines)
		}
		return nil
	}
	err = gen.Run(run, ro)
	interrupted := err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err())
	if err != nil && !interrupted {
		return nil, err
	}
	if interrupted && snapAt == st.NextBlock {
		// Stopped right after a checkpoint: it stands.
		if err := writeTrace(); err != nil {
			return nil, err
		}
	} else if err := checkpoint(interrupted); err != nil {
		return nil, err
	}
	if err := writeTraceLayers(); err != nil {
		return nil, err
	}
	if rec != nil {
		if err := rec.finish(); err != nil {
			return nil, fmt.Errorf("--record-stream: %w", err)
		}
	}
	if lg != nil && !interrupted {
		for _, f := range lg.finals() {
			if err := lgw.Write(f); err != nil {
				return nil, fmt.Errorf("lineage: %w", err)
			}
		}
		if _, err := lgw.Sync(); err != nil {
			return nil, fmt.Errorf("lineage: %w", err)
		}
	}
	if err := writeArtifactsIDs(dir, gc.Config, []memory.Policy{pol}, st, idOffset); err != nil {
		return nil, err
	}
	res := &Result{Summary: newSummary("generate", dir, gc.Config, st, interrupted, time.Since(began), 0), Interrupted: interrupted}
	if !interrupted {
		pngs, err := Render(dir)
		if err != nil {
			return nil, fmt.Errorf("plots: %w", err)
		}
		res.Summary.Plots = pngs
	}
	if g.Preview && !interrupted {
		res.Preview = "latent preview PNGs in " + filepath.Join(dir, DirPreview) + " (3 latent channels as RGB; no VAE decoder in this project)"
		if mp4, err := previewVideo(dir); err == nil {
			res.Preview += "; " + mp4
		} else {
			res.Preview += "; no mp4: " + err.Error()
		}
	}
	if err := WriteJSON(filepath.Join(dir, FileSummary), res.Summary); err != nil {
		return nil, err
	}
	if interrupted {
		return res, ErrInterrupted
	}
	return res, nil
}

// resumeState reads and checks a generate run's checkpoint: the
// configuration it was saved with, its block, its snapshot, the input
// files' fingerprints.
func resumeState(dir, cpPath string, gc config.GenerateConfig) (*GenerateState, error) {
	g := gc.Generate
	gs, err := readGenCheckpoint(cpPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil, userf("--resume: %s has no checkpoint (%s); start the run again without --resume", dir, filepath.Join(DirState, FileCheckpoint))
	}
	if err != nil {
		return nil, fmt.Errorf("--resume: %w", err)
	}
	y, err := os.ReadFile(filepath.Join(dir, FileConfig))
	if err != nil {
		return nil, fmt.Errorf("--resume: %w", err)
	}
	if sum := sha256Hex(y); sum != gs.ConfigSHA256 {
		return nil, fmt.Errorf("--resume: %s changed since the checkpoint (SHA-256 %.12s…, was %.12s…); resume needs the configuration the run started with",
			filepath.Join(dir, FileConfig), sum, gs.ConfigSHA256)
	}
	if gs.NextBlock < 0 || gs.NextBlock > g.Blocks || len(gs.Shards) != gs.NextBlock || gs.Adm == nil ||
		len(gs.Totals) != 1 || len(gs.Bytes) != 1 || len(gs.Bytes[0]) != gs.NextBlock {
		return nil, fmt.Errorf("--resume: %s: checkpoint at block %d (%d shards) does not fit the run's %d blocks and policy %s", cpPath, gs.NextBlock, len(gs.Shards), g.Blocks, gc.Policies[0])
	}
	if gs.NextBlock == g.Blocks {
		return nil, userf("--resume: %s is already complete (%d blocks); densitykv trace %s re-renders its plots", dir, g.Blocks, dir)
	}
	if gs.Snapshot == "" || !gs.Snapshots {
		return nil, fmt.Errorf("--resume: %s names no policy snapshot", cpPath)
	}
	inputs, err := generateInputs(g)
	if err != nil {
		return nil, fmt.Errorf("--resume: %w", err)
	}
	if err := checkInputs(gs.Inputs, inputs); err != nil {
		return nil, fmt.Errorf("--resume: %w", err)
	}
	return gs, nil
}

// newGenerateFolder prepares the run folder of a new generate run: its
// configuration, and in gs its fingerprint, the inputs' and the empty
// state.
func newGenerateFolder(dir string, force bool, gc config.GenerateConfig, gs *GenerateState) error {
	if err := Prepare(dir, force); err != nil {
		return err
	}
	for _, d := range []string{rollout.ManifestFile, rollout.LatentDir, DirPreview, "preview.mp4", FileTrace, FileLineage, FileTraceLayers} {
		os.RemoveAll(filepath.Join(dir, d))
	}
	y, err := config.MarshalGenerate(gc)
	if err != nil {
		return err
	}
	if err := WriteFile(filepath.Join(dir, FileConfig), y); err != nil {
		return err
	}
	gs.ConfigSHA256 = sha256Hex(y)
	if gs.Inputs, err = generateInputs(gc.Generate); err != nil {
		return err
	}
	gs.RunState = RunState{Adm: NewAdmissions(gc.Config), Totals: []*PolicyTotals{{Policy: gc.Policies[0]}}, Bytes: make([][]int64, 1)}
	return nil
}

// openLatents opens the latent shards' writer: a new one with man, or on
// resume the folder's, after the cheap check of the completed blocks
// (their shards exist with the checksums of the manifest and of the
// checkpoint, and the manifest describes this rollout).
func openLatents(dir string, resume bool, start, framesPerBlock int, gs *GenerateState, man rollout.Manifest) (*rollout.Writer, error) {
	if !resume {
		return rollout.NewWriter(dir, man)
	}
	w, err := rollout.ResumeWriter(dir, start)
	if err != nil {
		return nil, fmt.Errorf("--resume: %w", err)
	}
	have := w.Manifest()
	for b, sh := range have.Shards {
		if sh.SHA256 != gs.Shards[b] {
			return nil, fmt.Errorf("--resume: latents of completed block %d: %s records SHA-256 %.12s…, the checkpoint %.12s…", b, rollout.ManifestFile, sh.SHA256, gs.Shards[b])
		}
	}
	cmp := have
	cmp.Version, cmp.Created, cmp.Shards, cmp.Complete = 0, "", nil, false
	if !reflect.DeepEqual(cmp, man) {
		return nil, fmt.Errorf("--resume: %s describes another rollout (%+v, want %+v)", filepath.Join(dir, rollout.ManifestFile), cmp, man)
	}
	// Preview frames of blocks after the checkpoint are written again.
	old, _ := filepath.Glob(filepath.Join(dir, DirPreview, "frame_*.png"))
	for _, f := range old {
		var fr int
		if _, err := fmt.Sscanf(filepath.Base(f), "frame_%d.png", &fr); err == nil && fr >= start*framesPerBlock {
			os.Remove(f)
		}
	}
	os.Remove(filepath.Join(dir, "preview.mp4"))
	return w, nil
}

// generateLines records block b of the rollout in st (totals, bytes by
// block, admissions) and returns its log lines, from the policy's
// statistics with the block's first-call counts of the rollout's log bl.
func generateLines(gc config.GenerateConfig, pol memory.Policy, st *RunState, b int, bl rollout.BlockLog) []LogLine {
	s := statsOf(pol)
	s.Offered, s.Admitted, s.EvictedMandatory, s.EvictedCapacity = bl.Offered, bl.Admitted, bl.EvictedMandatory, bl.EvictedCapacity
	s.UpdateSeconds = bl.UpdateSeconds
	var decs []bank.Decision
	if d, ok := pol.(*memory.DensityKV); ok {
		decs = d.LastDecisions()
		st.Adm.Add(b, decs, bl.Offered)
	}
	tot := st.Totals[0]
	tot.Bytes = pol.Bytes()
	tot.PeakBytes = max(tot.PeakBytes, tot.Bytes)
	tot.UpdateSeconds += s.UpdateSeconds
	st.Bytes[0] = append(st.Bytes[0], tot.Bytes)
	sec := float64((b+1)*gc.Generate.BlockFrames()) / 4
	var lines []LogLine
	tot.OccMin, tot.OccMax = 1<<62, 0
	banks := bankBytes(pol)
	for l := 0; l < gc.Memory.Layout.Layers; l++ {
		ln := LineFor(gc.Policies[0], b, l, sec, s, decs, tot.Bytes, 0)
		ln.Diag = DiagFor(pol, l, decs, ln.Offered)
		if l == 0 {
			ln.Recached = bl.Recached
		}
		if banks != nil {
			ln.BankBytes = banks[l]
		}
		tot.Admitted += int64(ln.AdmittedTotal)
		tot.EvictedMandatory += int64(ln.EvictedMandatory)
		tot.EvictedCapacity += int64(ln.EvictedCapacity)
		tot.OccMin, tot.OccMax = min(tot.OccMin, ln.OccMin), max(tot.OccMax, ln.OccMax)
		if l == 0 {
			tot.Tokens = ln.Tokens.Sink + ln.Tokens.Memory + ln.Tokens.Local
		}
		lines = append(lines, ln)
	}
	return lines
}

// recorded forwards a synth.Recorder and reports the wrapped policy's
// statistics (the rollout logs them).
type recorded struct {
	*synth.Recorder
	stats memory.Policy
}

// LastStats reports the wrapped policy's statistics.
func (r recorded) LastStats() memory.Stats { return statsOf(r.stats) }

// setRAGAE gives LongLive-RAG the authors' autoencoder (generate.rag_ae)
// when its descriptor is ae.
func setRAGAE(pol memory.Policy, gc config.GenerateConfig) error {
	rag, ok := pol.(*memory.LongLiveRAG)
	if !ok || gc.Memory.LongLiveRAG.Descriptor != memory.RAGAE {
		return nil
	}
	g := gc.Generate
	if g.RAGAE == "" {
		return fmt.Errorf("memory.longlive_rag.descriptor ae needs generate.rag_ae (--rag-ae FILE)")
	}
	ae, err := ragae.Load(g.RAGAE)
	if err != nil {
		return fmt.Errorf("--rag-ae: %w", err)
	}
	d, err := ae.ForLatent(gc.Memory.LongLiveRAG.LatentChannels, g.LatentHeight, g.LatentWidth)
	if err != nil {
		return fmt.Errorf("--rag-ae: %w", err)
	}
	return rag.SetDescriber(d)
}
