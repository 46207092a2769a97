package generate

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
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/record"
	"github.com/densitykv/densitykv/rollout"
	"github.com/densitykv/densitykv/runfolder"
	"github.com/densitykv/densitykv/video"
)

// genRun is one generate run into its folder, with its inputs checked,
// its prompts encoded and its backbone loaded (Generate, GenerateBatch).
// Its steps, in data-flow order (generateRun): prepare (the generator and
// the policy, checked against the model), folder (made, or checked on
// resume), policy (its snapshot loaded on resume, traced, recorded),
// openSinks, rollout, finish.
//
// Crash consistency. Every block's outputs and the state to resume from
// are made consistent by this order, here and nowhere else:
//
//  1. each sink writes block b (blockSink.block), the latent shards are
//     written by the rollout's writer;
//  2. at a checkpoint (every run.snapshot_every blocks, and when stopped)
//     each sink stages: it syncs what it wrote and records its size, hash
//     or state in the GenerateState (the policy snapshot and per-layer
//     trace too, as new files named by the block);
//  3. the checkpoint (state/checkpoint.json) is written atomically: the
//     commit point. A crash before it leaves the previous checkpoint, whose
//     sizes and hashes --resume cuts every file back to or checks; only
//     after it are the older snapshots and traces removed;
//  4. trace.json, a copy of state, is rewritten after each block and commit.
//
// A complete run stages (not committing), ends every sink, writes its
// result files (artifacts, summary, figures, video.mp4), and commits last:
// the final checkpoint is the run's last write, so that a failure before it
// leaves the previous checkpoint to --resume from. A stopped run commits a
// checkpoint to resume from first and returns ErrInterrupted.
type genRun struct {
	ctx                         context.Context
	gc                          config.GenerateConfig
	g                           config.GenerateSection
	in                          *genInputs
	embeds                      []*Embedding
	gs                          *runfolder.GenerateState
	st                          *runfolder.RunState
	hooks                       runfolder.Hooks
	resume, force, overwriteOwn bool
	dir, stateDir, cpPath       string

	// banks are DensityKV's banks on the run's device (policyOptions),
	// freed when the run ends.
	banks []*bank.Bank

	gen      *rollout.Generator
	pol      memory.Policy
	run      memory.Policy // the policy the rollout calls: pol, traced, recorded
	ro       rollout.RunOptions
	prov     Provenance
	mode     string // the video: "" (latents only), "png" or "mp4"
	ffmpeg   string
	idOffset int64 // provenance ids less this (the authors' ids)

	sinks   []blockSink // every sink, in the order opened
	trace   *traceSink
	memlog  *memoryLogSink
	vs      *VideoStream // nil without a VAE
	hv      *horizonVideos
	latents *rollout.Writer
	// snapAt is the block of the checkpoint with a snapshot on disk (−1:
	// none yet), so that a stop right after one does not save it again.
	snapAt       int
	stopForDrift context.CancelFunc
	driftStop    string // why --stop-on-drift stopped the run
	began        time.Time
}

// generateRun is one run into its folder with the models in in; a new run
// claims its folder as a generate run (Claim with force and overwriteOwn).
func generateRun(ctx context.Context, gc config.GenerateConfig, in *genInputs, embeds []*Embedding, gs *runfolder.GenerateState, resume, force, overwriteOwn bool, hooks runfolder.Hooks) (*runfolder.Result, error) {
	dir := filepath.Join(gc.Run.Out, gc.Run.Name)
	r := &genRun{gc: gc, g: gc.Generate, in: in, embeds: embeds, gs: gs, st: &gs.RunState, hooks: hooks,
		resume: resume, force: force, overwriteOwn: overwriteOwn,
		dir: dir, stateDir: filepath.Join(dir, runfolder.DirState), cpPath: filepath.Join(dir, runfolder.DirState, runfolder.FileCheckpoint)}
	// A --stop-on-drift rule that trips stops the rollout as Ctrl-C does.
	r.ctx, r.stopForDrift = context.WithCancel(ctx)
	defer r.stopForDrift()
	defer r.close()
	for _, step := range []func() error{r.prepare, r.folder, r.policy, r.openSinks} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	interrupted, err := r.rollout()
	if err != nil {
		return nil, err
	}
	return r.finish(interrupted)
}

// close closes every sink opened and frees the device banks.
func (r *genRun) close() {
	for _, s := range r.sinks {
		s.close()
	}
	for _, b := range r.banks {
		if f, ok := b.Passes().(interface{ Free() }); ok {
			f.Free()
		}
	}
	r.banks = nil
}

// policyOptions builds DensityKV's banks on the run's Vulkan device
// (gpu.NewBank: the Soft-Riesz passes and the banks' states there), and
// on the CPU without one. A variant the device cannot run is recorded in
// *refused (the policy's build then fails): no silent fallback to the CPU.
func (r *genRun) policyOptions(refused *error) memory.Options {
	nb := r.in.device.BankFactory()
	if nb == nil {
		return memory.Options{}
	}
	return memory.Options{NewBank: func(c bank.Config) (*bank.Bank, error) {
		b, err := nb(c)
		if err != nil {
			*refused = err
			return nil, err
		}
		r.banks = append(r.banks, b)
		return b, nil
	}}
}

// prepare makes the generator of the prompt schedule and the policy, and
// checks them against the model.
func (r *genRun) prepare() error {
	g, gc := r.g, r.gc
	gen, err := rollout.NewGeneratorFor(r.in.wan, r.in.sched, schedule(g, r.embeds))
	if err != nil {
		return &runfolder.UserError{Err: err}
	}
	gen.FirstSchedule, gen.Update = r.in.first, g.Schedule.Update
	texts := g.Texts // checkTextProjections names a --text file by its place among the prompts
	if len(g.Prompts) > 0 {
		texts = nil // prompts mixed in: the generator's labels name them
	}
	if err := checkTextProjections(gen, texts); err != nil {
		return err
	}
	if _, err := g.Model.Memory(gc.Memory, g.LatentHeight, g.LatentWidth, g.BlockFrames()); err != nil {
		return userf("%s: %w", runfolder.FileConfig, err)
	}
	var refused error
	if r.pol, err = memory.NewWith(gc.Policies[0], gc.Memory, r.policyOptions(&refused)); err != nil {
		if refused != nil {
			return userf("generate.device %s: this DensityKV bank variant has no device path (%v); --device cpu runs it",
				g.Device, strings.TrimPrefix(refused.Error(), "gpu: NewBank: "))
		}
		return err
	}
	r.gen, r.run = gen, r.pol
	if err := setRAGAE(r.pol, gc); err != nil {
		return &runfolder.UserError{Err: err}
	}
	return nil
}

// folder makes the run folder of a new run, or reads a resumed one's
// provenance and checks that its video can go on as it began.
func (r *genRun) folder() error {
	r.ffmpeg = r.in.ffmpeg
	if r.in.vae != nil {
		r.mode = "png"
		if r.ffmpeg != "" {
			r.mode = "mp4"
		}
	}
	var err error
	if !r.resume {
		// Every input is checked: now the run folder.
		if r.prov, err = newGenerateFolder(r.dir, r.force, r.overwriteOwn, r.gc, r.gs, r.embeds, r.in.text, r.in.device.Label()); err != nil {
			return err
		}
		r.gs.Video = r.mode
	} else {
		if err := runfolder.ReadJSON(filepath.Join(r.dir, runfolder.FileGeneration), &r.prov); errors.Is(err, os.ErrNotExist) && len(r.g.Prompts) == 0 {
			r.prov = provenance(r.gc, r.gs.Inputs, nil, nil, "") // a run folder from before generation.json
		} else if err != nil {
			return fmt.Errorf("--resume: %w", err)
		}
		switch {
		case r.gs.Video == "mp4" && r.mode != "mp4":
			return userf("--resume: %s writes its video as mp4 segments, and ffmpeg is not on PATH now; %s", r.dir, video.InstallHint)
		case r.gs.Video == "png" && r.mode == "mp4":
			r.hooks.Infof("resume: the run began without ffmpeg; it goes on writing PNG frames (densitykv decode %s makes video.mp4 afterwards)", r.dir)
			r.ffmpeg = ""
		}
	}
	return os.MkdirAll(r.stateDir, 0o755)
}

// policy loads the policy's snapshot on resume and wraps it in the
// attention tracer and the --record-stream recorder when asked for.
func (r *genRun) policy() error {
	gc, g, policy := r.gc, r.g, r.gc.Policies[0]
	snap, ok := r.pol.(memory.Snapshotter)
	if !ok {
		return fmt.Errorf("policy %s cannot be snapshotted for --resume", policy)
	}
	if r.resume {
		if err := runfolder.LoadSnapshotSum(filepath.Join(r.stateDir, r.gs.Snapshot), r.gs.SnapshotSHA256, snap); err != nil {
			return fmt.Errorf("--resume: policy %s: %w", policy, err)
		}
	}
	r.sinks = append(r.sinks, snapshotSink{snap: snap, policy: policy, stateDir: r.stateDir})
	r.trace = &traceSink{policy: policy, step: g.TraceStep, dir: r.dir, stateDir: r.stateDir}
	r.sinks = append(r.sinks, r.trace)
	if g.TraceStep >= 0 {
		if err := r.traced(); err != nil {
			return err
		}
	}
	var rec *streamRecord
	if g.RecordStream != "" {
		h, err := recordHeader(r.pol, gc.Memory, g)
		if err == nil {
			rec, err = newStreamRecord(g.RecordStream, h, r.resume, r.gs.RecordBytes, r.gs.RecordSHA256, r.st.NextBlock)
		}
		if err != nil {
			return fmt.Errorf("--record-stream: %w", err)
		}
		r.sinks = append(r.sinks, recordSink{rec: rec})
		sr, err := record.NewRecorder(r.run, rec.sw)
		if err != nil {
			return fmt.Errorf("--record-stream: %w", err)
		}
		r.run = recorded{sr, r.pol}
		return nil
	}
	r.sinks = append(r.sinks, recordSink{})
	return nil
}

// traced wraps the policy in the attention tracer, with its mass and
// per-layer trace from the checkpoint on resume.
func (r *genRun) traced() error {
	gc, g, gs := r.gc, r.g, r.gs
	tr := record.NewAttentionTracer(r.pol, g.TraceStep, g.Blocks*g.BlockFrames())
	layers, err := config.ParseIndexList(g.TraceLayers, "generate.trace_layers", gc.Memory.Layout.Layers)
	if err != nil {
		return userf("%w", err)
	}
	if len(layers) > 0 {
		tr.TraceLayers(layers)
	}
	if r.resume {
		if len(gs.TraceMass) != len(tr.Mass) {
			return fmt.Errorf("--resume: %s: attention trace of %d values, want %d", r.cpPath, len(gs.TraceMass), len(tr.Mass))
		}
		copy(tr.Mass, gs.TraceMass)
		if len(layers) > 0 {
			path, sum := filepath.Join(r.dir, runfolder.FileTraceLayers), ""
			if gs.TraceLayers != "" {
				path, sum = filepath.Join(r.stateDir, gs.TraceLayers), gs.TraceLayersSHA256
			}
			lt, err := runfolder.ReadTraceLayersSum(path, sum)
			if err == nil {
				err = tr.SetLayers(lt)
			}
			if err != nil {
				return fmt.Errorf("--resume: per-layer attention trace: %w", err)
			}
		}
	}
	r.trace.tr, r.run = tr, tr
	return nil
}

// openSinks sets the rollout's options and opens the outputs a finished
// block feeds (each continuing from the checkpoint on resume).
func (r *genRun) openSinks() error {
	gc, g, gs := r.gc, r.g, r.gs
	F, start := g.BlockFrames(), r.st.NextBlock
	r.ro = rollout.RunOptions{Blocks: g.Blocks, FramesPerBlock: F, Height: g.LatentHeight, Width: g.LatentWidth,
		Seed: uint64(gc.Run.Seed), Start: start, Stop: r.ctx}
	if r.in.noise != nil {
		r.ro.Noise = r.in.noise
	}
	if g.Recache == config.RecacheLongLive {
		rc, ok := r.pol.(memory.Recacher)
		if !ok {
			return userf("--recache longlive: policy %s has no recache", gc.Policies[0])
		}
		r.ro.Recacher = rc
	}
	if g.SourceIDs == config.SourceAuthors {
		r.idOffset = int64(gc.Memory.SinkFrames * gc.Memory.Layout.TokensPerFrame())
	}
	lg, err := openLineage(r.dir, gc, r.pol, gs, r.idOffset)
	if err != nil {
		return err
	}
	if lg != nil {
		r.sinks = append(r.sinks, lg)
	}
	man := r.gen.Manifest(r.pol, r.ro, map[string]string{"checkpoint": g.Checkpoint, "lora": g.LoRA})
	if r.latents, err = openLatents(r.dir, r.resume, start, F, gs, man); err != nil {
		return err
	}
	r.sinks = append(r.sinks, shardSink{w: r.latents})
	C, H, W := g.Model.OutDim, g.LatentHeight, g.LatentWidth
	if g.Preview {
		r.sinks = append(r.sinks, previewSink{dir: r.dir, C: C, H: H, W: W})
	}
	if r.in.vae != nil {
		if r.vs, err = openVideo(r.dir, r.in.vae, r.ffmpeg, g, gs, r.prov, r.resume, start, r.latents.Manifest(), r.hooks); err != nil {
			return err
		}
		r.sinks = append(r.sinks, &videoSink{vs: r.vs, gs: gs, F: F, C: C, H: H, W: W})
		if r.hv = newHorizonVideos(r.vs.Folder(), g); len(g.Horizons) > 0 {
			if err := r.hv.start(start); err != nil {
				return err
			}
			r.hooks.Infof("horizons: %s", r.hv.describe())
		}
		r.sinks = append(r.sinks, horizonSink{hv: r.hv})
	}
	dm, err := openDrift(r.dir, gs, r.resume, start, g.StopOnDrift, r.hooks)
	if err != nil {
		return err
	}
	r.sinks = append(r.sinks, &driftSink{dm: dm, blocks: g.Blocks, hooks: r.hooks, stop: func(why string) {
		r.driftStop = why
		r.stopForDrift()
	}})
	if r.vs != nil && dm != nil {
		r.vs.OnFrame(dm.frame)
	}
	if r.memlog, err = openMemoryLog(r.dir, gc, r.pol, r.st); err != nil {
		return err
	}
	r.sinks = append(r.sinks, r.memlog)
	return nil
}

// rollout runs the blocks from the checkpoint's on, feeding each finished
// block to the sinks (blockDone), then stages (and when stopped commits)
// the run's state and ends the sinks. interrupted: stopped by ctx or by
// --stop-on-drift.
func (r *genRun) rollout() (interrupted bool, err error) {
	g, start := r.g, r.st.NextBlock
	if r.resume {
		r.hooks.Infof("resume: continuing at block %d of %d from the checkpoint in %s", start, g.Blocks, r.stateDir)
	}
	if r.hooks.Start != nil {
		r.hooks.Start(start, g.Blocks)
	}
	r.began = time.Now()
	r.snapAt = -1
	if r.resume {
		r.snapAt = start
	}
	stopping := false
	r.ro.Writer = r.latents
	r.ro.Progress = func(p rollout.Progress) {
		if !stopping && r.ctx.Err() != nil {
			stopping = true
			r.hooks.Infof("\ngenerate: stopping after block %d to save a resume checkpoint", p.Block)
		}
	}
	r.ro.BlockDone = r.blockDone
	err = r.gen.Run(r.run, r.ro)
	interrupted = err != nil && r.ctx.Err() != nil && errors.Is(err, r.ctx.Err())
	if err != nil && !interrupted {
		return false, deviceFault(err, r.gc, r.snapAt)
	}
	switch {
	case interrupted && r.snapAt == r.st.NextBlock:
		// Stopped right after a checkpoint: it stands.
		err = r.trace.writeFile()
	case interrupted:
		err = r.checkpoint(true)
	default:
		// Complete: the final checkpoint is the last write (finish), after
		// every result file; a failure before it leaves the previous
		// checkpoint to --resume from.
		if err = r.stage(false); err == nil {
			err = r.trace.writeFile()
		}
	}
	for _, s := range r.sinks {
		if err != nil {
			break
		}
		err = s.end(!interrupted)
	}
	return interrupted, err
}

// blockDone feeds finished block b to every sink, then commits a
// checkpoint when one is due.
func (r *genRun) blockDone(b int, latents []float32, bl rollout.BlockLog) error {
	for _, s := range r.sinks {
		if err := s.block(b, latents, bl); err != nil {
			return err
		}
	}
	r.st.NextBlock = b + 1
	if every := r.gc.Run.SnapshotEvery; every > 0 && r.st.NextBlock%every == 0 && r.st.NextBlock < r.g.Blocks {
		if err := r.checkpoint(true); err != nil {
			return err
		}
	} else if err := r.trace.writeFile(); err != nil {
		return err
	}
	if r.hooks.Block != nil {
		r.hooks.Block(b, r.memlog.lines)
	}
	return nil
}

// stage has every sink sync its files and record its state in gs.
func (r *genRun) stage(withSnap bool) error {
	for _, s := range r.sinks {
		if err := s.stage(r.gs, withSnap); err != nil {
			return err
		}
	}
	return nil
}

// commit writes the checkpoint staged, the commit point, and then removes
// the snapshots and per-layer traces it does not name.
func (r *genRun) commit(withSnap bool) error {
	if err := runfolder.WriteGenerateCheckpoint(r.cpPath, r.gs); err != nil {
		return err
	}
	r.snapAt = -1
	if withSnap {
		r.snapAt = r.st.NextBlock
	}
	removeStale(r.stateDir, r.gs)
	return nil
}

// checkpoint commits the run's state after block NextBlock−1; with
// withSnap it saves the policy snapshot to continue from (not needed once
// the run is complete).
func (r *genRun) checkpoint(withSnap bool) error {
	if err := r.stage(withSnap); err != nil {
		return err
	}
	if err := r.commit(withSnap); err != nil {
		return err
	}
	return r.trace.writeFile()
}

// finish writes the run's result files (the saved noise, artifacts,
// summary, figures, previews, video.mp4) and, for a complete run, the
// final checkpoint last.
func (r *genRun) finish(interrupted bool) (*runfolder.Result, error) {
	gc, g, dir, st := r.gc, r.g, r.dir, r.st
	if g.SaveNoise != "" && !interrupted {
		// Made again from the noise source (addressed by frame and draw),
		// so a resumed run writes the file an uninterrupted one does.
		src, err := noiseSource(gc, r.in.noise)
		if err == nil {
			err = rollout.SaveNoise(g.SaveNoise, r.gen.Noise(r.ro), r.gen.NoiseLayout(r.ro), src)
		}
		if err != nil {
			return nil, fmt.Errorf("--save-noise: %w", err)
		}
	}
	if err := runfolder.WriteArtifactsIDs(dir, gc.Config, []memory.Policy{r.pol}, st, r.idOffset); err != nil {
		return nil, err
	}
	res := &runfolder.Result{Summary: runfolder.NewSummary("generate", dir, gc.Config, st, interrupted, time.Since(r.began), 0), Interrupted: interrupted}
	if g.SaveNoise != "" && !interrupted {
		res.Summary.Files = append(res.Summary.Files, g.SaveNoise)
	}
	if !interrupted {
		pngs, err := runfolder.Render(dir)
		if err != nil {
			return nil, fmt.Errorf("plots: %w", err)
		}
		res.Summary.Plots = pngs
	}
	if g.Preview && !interrupted {
		res.Preview = "latent preview PNGs in " + filepath.Join(dir, runfolder.DirPreview) + " (3 latent channels as RGB, not decoded video)"
		if mp4, err := previewVideo(dir); err == nil {
			res.Preview += "; " + mp4
		} else {
			res.Preview += "; no mp4: " + err.Error()
		}
	}
	if r.vs != nil {
		var err error
		if res.Video, err = finishVideo(r.vs, st.NextBlock); err != nil {
			return nil, err
		}
		if r.vs.Folder().MP4() && st.NextBlock > 0 {
			res.Summary.Files = append(res.Summary.Files, r.vs.Folder().VideoPath())
		}
		res.Summary.Files = append(res.Summary.Files, r.hv.files(st.NextBlock)...)
	}
	if err := runfolder.WriteJSON(filepath.Join(dir, runfolder.FileSummary), res.Summary); err != nil {
		return nil, err
	}
	if interrupted && r.driftStop != "" {
		return res, &driftStopError{r.driftStop}
	}
	if interrupted {
		return res, runfolder.ErrInterrupted
	}
	if err := r.commit(false); err != nil {
		return nil, err
	}
	if r.vs != nil && r.vs.Folder().MP4() {
		// Complete: the videos are encoded for good, and the lossless
		// copies they were encoded from are no longer needed.
		if err := r.vs.Folder().RemoveLossless(); err != nil {
			r.hooks.Warnf("warning: %v (the lossless copies of the video segments are not needed any more)", err)
		}
	}
	return res, nil
}
