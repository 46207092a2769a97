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
	"github.com/densitykv/densitykv/internal/atomicfile"
	"github.com/densitykv/densitykv/internal/filehash"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/pipeline"
	"github.com/densitykv/densitykv/ragae"
	"github.com/densitykv/densitykv/record"
	"github.com/densitykv/densitykv/rollout"
	"github.com/densitykv/densitykv/vae"
	"github.com/densitykv/densitykv/video"
	"github.com/densitykv/densitykv/wan"
)

// Generate makes a video with the Wan model of gc and its memory policy
// in the run folder <out>/<name> (with generate.prompts_file, one run
// folder per prompt: GenerateBatch). The stages, in order:
//
//  1. every input is checked before any work: the backbone's tensors
//     (names, shapes, dtypes; pipeline.CheckBackbone), the text files, the
//     VAE (loaded) and ffmpeg, the tokenizer and the text encoder's tensors;
//  2. the prompts are encoded (package pipeline: tokenizer, umT5, the
//     embedding cache), and the encoder is released;
//  3. the backbone is loaded and the run folder made;
//  4. the rollout (package rollout's generate path) streams every finished
//     block into the folder: latent shards and manifest, the memory log, the
//     DensityKV provenance and admissions, the attention trace
//     (record.AttentionTracer), the latent preview, and with a VAE the block
//     decoded into its video segment (pipeline.VideoStream);
//  5. summary.json, the figures, latent_preview.mp4 and video.mp4 (the
//     segments joined) at the end.
//
// Errors in an input are *UserError (the backbone's or a text file's wrap
// a *rollout.InputError). With resume it continues a stopped run from its
// checkpoint without computing the completed blocks again, after checking
// that the configuration, inputs, latents, video segments and snapshot are
// those of the checkpoint; the video decoder is warmed up on the latents
// before the block it continues at (pipeline.VideoStream.Resume). When ctx
// is cancelled it stops after the current block, saves a checkpoint, joins
// the finished segments into video.mp4 and returns the partial result with
// ErrInterrupted.
func Generate(ctx context.Context, gc config.GenerateConfig, resume, force bool, hooks Hooks) (*Result, error) {
	if gc.Generate.PromptsFile != "" {
		return GenerateBatch(ctx, gc, resume, force, hooks)
	}
	g := gc.Generate
	dir := filepath.Join(gc.Run.Out, gc.Run.Name)
	gs := &GenerateState{}
	if err := CheckGenerateOutputs(gc); err != nil {
		return nil, err
	}
	if resume {
		if err := CheckOwner(dir, "generate"); err != nil {
			return nil, err
		}
		if err := atomicfile.CleanTemps(dir); err != nil {
			return nil, fmt.Errorf("--resume: %w", err)
		}
		saved, err := resumeState(dir, filepath.Join(dir, DirState, FileCheckpoint), gc, hooks)
		if err != nil {
			return nil, err
		}
		gs = saved
	}
	// A resumed run reads its prompts' embeddings from its folder: the
	// text encoder is not needed.
	in, err := checkGenerateInputs(g, hooks, !resume)
	if err != nil {
		return nil, err
	}
	defer in.close()
	var embeds []*pipeline.Embedding
	if resume {
		embeds, err = readRunEmbeddings(dir, g)
	} else {
		embeds, err = encodePrompts(in, g, g.Prompts, false, hooks)
	}
	if err != nil {
		return nil, err
	}
	if err := in.loadBackbone(g, hooks); err != nil {
		return nil, err
	}
	return generateRun(ctx, gc, in, embeds, gs, resume, force, false, hooks)
}

// genInputs are a generate run's checked inputs and, once loaded, its
// models.
type genInputs struct {
	text   *pipeline.TextInputs // nil without prompts
	vae    *vae.Model           // nil without --vae
	ffmpeg string               // "" = PNG frames (with a VAE)
	wan    *wan.Model
	sched  *rollout.Schedule // the denoising schedule (first: block 0's when it differs)
	first  *rollout.Schedule
	noise  *rollout.NoiseFile // --noise, checked against the run; nil = the seed's draws
}

// close releases the noise file.
func (in *genInputs) close() {
	if in.noise != nil {
		in.noise.Close()
	}
}

// checkGenerateInputs checks every input file of g without reading the
// big ones whole: the backbone's tensors, the text files, the VAE (loaded:
// it is small), ffmpeg, and with text the tokenizer and the encoder's
// tensors.
func checkGenerateInputs(g config.GenerateSection, hooks Hooks, text bool) (*genInputs, error) {
	in := &genInputs{}
	if err := pipeline.CheckBackbone(g.Checkpoint, g.Entry, g.Model); err != nil {
		return nil, &UserError{&rollout.InputError{Prompt: -1, Name: g.Checkpoint, Err: err}}
	}
	for i, ts := range g.Texts {
		if _, rows, dim, err := rollout.LoadText(ts.Path, ts.Tensor); err != nil {
			return nil, &UserError{&rollout.InputError{Prompt: i, Name: ts.Path, Err: err}}
		} else if dim != g.Model.TextDim || rows > g.Model.TextLen {
			return nil, &UserError{&rollout.InputError{Prompt: i, Name: ts.Path,
				Err: fmt.Errorf("text embeddings [%d, %d], the model needs at most %d rows of %d", rows, dim, g.Model.TextLen, g.Model.TextDim)}}
		}
	}
	if g.VAE != "" {
		m, err := pipeline.LoadVAE(g.VAE, g.VAEMean, g.VAEStd, g.Model.OutDim)
		if err != nil {
			return nil, userf("--vae %s: %w", g.VAE, err)
		}
		hooks.info("VAE: %s", m.Loaded)
		in.vae = m
		if in.ffmpeg, err = video.LookFFmpeg(); err != nil {
			hooks.warn("warning: ffmpeg is not on PATH: the video will be PNG frames in %s/ (%s; then `densitykv decode` writes video.mp4)", video.DirFrames, video.InstallHint)
		}
	}
	if text && (len(g.Prompts) > 0 || g.PromptsFile != "") {
		ti, err := pipeline.CheckText(pipeline.TextOptions{Encoder: g.TextEncoder, Tokenizer: g.Tokenizer, TextLen: g.Model.TextLen})
		if err != nil {
			return nil, userf("--text-encoder/--tokenizer: %w", err)
		}
		if ti.Encoder.Dim != g.Model.TextDim {
			return nil, userf("--text-encoder %s: its output has %d values per token, the %s DiT reads %d", g.TextEncoder, ti.Encoder.Dim, g.Arch, g.Model.TextDim)
		}
		in.text = ti
	}
	if g.Noise != "" {
		sch, first, err := g.Schedule.Options().Build()
		if err != nil {
			return nil, userf("generate.schedule: %w", err)
		}
		l := rollout.NewNoiseLayout(g.Blocks, g.BlockFrames(), g.Model.OutDim, g.LatentHeight, g.LatentWidth, sch, first, g.Schedule.Update)
		if in.noise, err = rollout.OpenNoise(g.Noise, l); err != nil {
			return nil, userf("--noise: %w", err)
		}
	}
	return in, nil
}

// encodePrompts encodes the prompts' texts (the cache first), warning
// about truncated prompts and reporting progress as stage "encode"; with
// discard the embeddings' values stay in the cache only.
func encodePrompts(in *genInputs, g config.GenerateSection, prompts []config.PromptSpec, discard bool, hooks Hooks) ([]*pipeline.Embedding, error) {
	if len(prompts) == 0 {
		return nil, nil
	}
	texts := make([]string, len(prompts))
	for i, p := range prompts {
		texts[i] = p.Text
	}
	o := pipeline.TextOptions{Encoder: g.TextEncoder, Tokenizer: g.Tokenizer, TextLen: g.Model.TextLen, CacheDir: g.TextCache, Discard: discard, Precision: g.Precision,
		Warn:    func(msg string) { hooks.warn("%s", msg) },
		Loading: loadProgress(hooks, "load text encoder (MiB)"),
		Loaded:  func(desc string) { hooks.info("text encoder: %s", desc) },
		Progress: func(done, total int) {
			if hooks.Progress != nil {
				hooks.Progress("encode", done, total)
			}
		}}
	began := time.Now()
	embeds, err := pipeline.EncodePrompts(o, in.text, texts)
	if err != nil {
		return nil, userf("text: %w", err)
	}
	cached := 0
	for _, e := range embeds {
		if e.Cached {
			cached++
		}
	}
	hooks.info("text: %d prompts (%d from the cache %s) in %.1f s", len(prompts), cached, g.TextCache, time.Since(began).Seconds())
	return embeds, nil
}

// embeddingName is prompt i's embedding's path in the run folder.
func embeddingName(i int) string {
	return filepath.Join(DirText, fmt.Sprintf("prompt_%02d.safetensors", i))
}

// embeddingPath is the run folder's copy of prompt i's embedding.
func embeddingPath(dir string, i int) string { return filepath.Join(dir, embeddingName(i)) }

// readRunEmbeddings reads a resumed run's prompt embeddings from its
// folder (their fingerprints are checked with the other inputs).
func readRunEmbeddings(dir string, g config.GenerateSection) ([]*pipeline.Embedding, error) {
	var out []*pipeline.Embedding
	for i, p := range g.Prompts {
		e, err := pipeline.ReadEmbedding(embeddingPath(dir, i))
		if err != nil {
			return nil, fmt.Errorf("--resume: %w", err)
		}
		if e.Prompt != p.Text {
			return nil, fmt.Errorf("--resume: %s holds the embedding of %q, the run's prompt %d is %q", embeddingPath(dir, i), e.Prompt, i, p.Text)
		}
		out = append(out, e)
	}
	return out, nil
}

// loadBackbone loads the DiT (after the text encoder is gone), reporting
// the bytes read as stage "load DiT (MiB)" and what was read (the
// checkpoint's layout, the LoRA merged).
func (in *genInputs) loadBackbone(g config.GenerateSection, hooks Hooks) error {
	sch, first, err := g.Schedule.Options().Build()
	if err != nil {
		return userf("generate.schedule: %w", err)
	}
	m, err := wan.Load(g.Checkpoint, g.Model, wan.LoadOptions{Entry: g.Entry, LoRA: g.LoRA, LoRAAlpha: g.LoRAAlpha, Precision: g.Precision,
		Progress: loadProgress(hooks, "load DiT (MiB)")})
	if err != nil {
		return &UserError{&rollout.InputError{Prompt: -1, Name: g.Checkpoint, Err: err}}
	}
	hooks.info("DiT: %s, %s", m.Loaded.Source, m.Precision)
	if m.Loaded.LoRA != "" {
		hooks.info("lora: merged %s", m.Loaded.LoRA)
	}
	in.wan, in.sched, in.first = m, sch, first
	return nil
}

// loadProgress reports a model's loading as hooks' stage (MiB read of the
// total), or nil without a Progress hook.
func loadProgress(hooks Hooks, stage string) func(done, total int64) {
	if hooks.Progress == nil {
		return nil
	}
	last := -1
	return func(done, total int64) {
		d, n := int(done>>20), int((total+1<<20-1)>>20)
		if done >= total {
			d = n
		}
		if d != last {
			last = d
			hooks.Progress(stage, d, n)
		}
	}
}

// schedule returns the run's prompt schedule for the rollout: the text
// files, then the prompts (indices as in config.GenerateSection.PromptSchedule).
func schedule(g config.GenerateSection, embeds []*pipeline.Embedding) []rollout.PromptText {
	var out []rollout.PromptText
	for _, ts := range g.Texts {
		out = append(out, rollout.PromptText{FromBlock: ts.FromBlock, Text: rollout.TextFile{Path: ts.Path, Tensor: ts.Tensor}})
	}
	for i, p := range g.Prompts {
		out = append(out, rollout.PromptText{FromBlock: p.FromBlock, Text: embeds[i].Text(fmt.Sprintf("prompt %d: %q", i, p.Text))})
	}
	return out
}

// generateRun is one run into its folder with the models in in; a new run
// claims its folder as a generate run (Claim with force and overwriteOwn).
func generateRun(ctx context.Context, gc config.GenerateConfig, in *genInputs, embeds []*pipeline.Embedding, gs *GenerateState, resume, force, overwriteOwn bool, hooks Hooks) (*Result, error) {
	g := gc.Generate
	dir := filepath.Join(gc.Run.Out, gc.Run.Name)
	stateDir := filepath.Join(dir, DirState)
	cpPath := filepath.Join(stateDir, FileCheckpoint)
	F := g.BlockFrames()
	// A --stop-on-drift rule that trips stops the rollout as Ctrl-C does.
	ctx, stopForDrift := context.WithCancel(ctx)
	defer stopForDrift()
	driftStop := "" // why --stop-on-drift stopped the run
	gen, err := rollout.NewGeneratorFor(in.wan, in.sched, schedule(g, embeds))
	if err != nil {
		return nil, &UserError{err}
	}
	gen.FirstSchedule, gen.Update = in.first, g.Schedule.Update
	texts := g.Texts // checkTextProjections names a --text file by its place among the prompts
	if len(g.Prompts) > 0 {
		texts = nil // prompts mixed in: the generator's labels name them
	}
	if err := checkTextProjections(gen, texts); err != nil {
		return nil, err
	}
	if _, err := g.Model.Memory(gc.Memory, g.LatentHeight, g.LatentWidth, F); err != nil {
		return nil, userf("%s: %w", FileConfig, err)
	}
	pol, err := memory.New(gc.Policies[0], gc.Memory)
	if err != nil {
		return nil, err
	}
	mode, ffmpeg := "", in.ffmpeg
	if in.vae != nil {
		mode = "png"
		if ffmpeg != "" {
			mode = "mp4"
		}
	}
	var prov pipeline.Provenance
	if err := setRAGAE(pol, gc); err != nil {
		return nil, &UserError{err}
	}
	if !resume {
		// Every input is checked: now the run folder.
		if prov, err = newGenerateFolder(dir, force, overwriteOwn, gc, gs, embeds, in.text); err != nil {
			return nil, err
		}
		gs.Video = mode
	} else {
		if err := ReadJSON(filepath.Join(dir, FileGeneration), &prov); errors.Is(err, os.ErrNotExist) && len(g.Prompts) == 0 {
			prov = provenance(gc, gs.Inputs, nil, nil) // a run folder from before generation.json
		} else if err != nil {
			return nil, fmt.Errorf("--resume: %w", err)
		}
		switch {
		case gs.Video == "mp4" && mode != "mp4":
			return nil, userf("--resume: %s writes its video as mp4 segments, and ffmpeg is not on PATH now; %s", dir, video.InstallHint)
		case gs.Video == "png" && mode == "mp4":
			hooks.info("resume: the run began without ffmpeg; it goes on writing PNG frames (densitykv decode %s makes video.mp4 afterwards)", dir)
			ffmpeg = ""
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
	var tr *record.AttentionTracer
	var run memory.Policy = pol
	if g.TraceStep >= 0 {
		tr = record.NewAttentionTracer(pol, g.TraceStep, frames)
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
				path, sum := filepath.Join(dir, FileTraceLayers), ""
				if gs.TraceLayers != "" {
					path, sum = filepath.Join(stateDir, gs.TraceLayers), gs.TraceLayersSHA256
				}
				lt, err := readTraceLayersSum(path, sum)
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
		h, err := recordHeader(pol, gc.Memory, g)
		if err == nil {
			rec, err = newStreamRecord(g.RecordStream, h, resume, gs.RecordBytes, gs.RecordSHA256, start)
		}
		if err != nil {
			return nil, fmt.Errorf("--record-stream: %w", err)
		}
		defer rec.finish()
		sr, err := record.NewRecorder(run, rec.sw)
		if err != nil {
			return nil, fmt.Errorf("--record-stream: %w", err)
		}
		run = recorded{sr, pol}
	}
	ro := rollout.RunOptions{Blocks: g.Blocks, FramesPerBlock: F, Height: g.LatentHeight, Width: g.LatentWidth,
		Seed: uint64(gc.Run.Seed), Start: start, Stop: ctx}
	if in.noise != nil {
		ro.Noise = in.noise
	}
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
	var vs *pipeline.VideoStream
	var hv *horizonVideos
	if in.vae != nil {
		if vs, err = openVideo(dir, in.vae, ffmpeg, g, gs, prov, resume, start, w.Manifest(), hooks); err != nil {
			return nil, err
		}
		if hv = newHorizonVideos(vs.Folder(), g); len(g.Horizons) > 0 {
			if err := hv.start(start); err != nil {
				return nil, err
			}
			hooks.info("horizons: %s", hv.describe())
		}
	}
	dm, err := openDrift(dir, gs, resume, start, g.StopOnDrift, hooks)
	if err != nil {
		return nil, err
	}
	defer dm.close()
	if vs != nil && dm != nil {
		vs.OnFrame(dm.frame)
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
	// stage makes the files written as they go durable and records their
	// state in gs (the snapshot too, with withSnap); commit then writes
	// the checkpoint, the commit point.
	stage := func(withSnap bool) error {
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
		if err := dm.stage(gs); err != nil {
			return err
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
		// The per-layer trace is state: saved beside the snapshot under the
		// checkpoint's block (the run folder's copy is written at the end
		// and when stopped), so that a crash between two checkpoints
		// cannot pair one checkpoint with another's trace.
		gs.TraceLayers, gs.TraceLayersSHA256 = "", ""
		if withSnap && tr != nil && len(tr.LayerIndex) > 0 {
			gs.TraceLayers = traceLayersName(st.NextBlock)
			if gs.TraceLayersSHA256, err = writeTraceLayersSum(filepath.Join(stateDir, gs.TraceLayers), tr.Layers(), g.TraceStep); err != nil {
				return err
			}
		}
		return nil
	}
	commit := func(withSnap bool) error {
		if err := writeGenCheckpoint(cpPath, gs); err != nil {
			return err
		}
		snapAt = -1
		if withSnap {
			snapAt = st.NextBlock
		}
		old, _ := filepath.Glob(filepath.Join(stateDir, "policy-*.snap"))
		traces, _ := filepath.Glob(filepath.Join(stateDir, "trace-layers-b*.safetensors"))
		for _, f := range append(old, traces...) {
			if b := filepath.Base(f); b != gs.Snapshot && b != gs.TraceLayers {
				os.Remove(f)
			}
		}
		return nil
	}
	checkpoint := func(withSnap bool) error {
		if err := stage(withSnap); err != nil {
			return err
		}
		if err := commit(withSnap); err != nil {
			return err
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
	C, H, W := g.Model.OutDim, g.LatentHeight, g.LatentWidth
	ro.BlockDone = func(b int, latents []float32, bl rollout.BlockLog) error {
		lines := generateLines(gc, pol, st, b, bl)
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
			if err := writePreview(dir, b, latents, C, H, W); err != nil {
				return err
			}
		}
		if vs != nil {
			if err := vs.Block(b, latents, F, C, H, W); err != nil {
				return err
			}
			if vs.Folder().MP4() {
				sum, err := filehash.File(vs.Folder().SegmentPath(b))
				if err != nil {
					return err
				}
				gs.SegmentsSHA256 = append(gs.SegmentsSHA256[:b], sum.SHA256)
				if sum, err = filehash.File(vs.Folder().LosslessPath(b)); err != nil {
					return err
				}
				gs.LosslessSHA256 = append(gs.LosslessSHA256[:b], sum.SHA256)
			}
			if err := hv.block(b); err != nil {
				return err
			}
		}
		if dm != nil {
			rec, r, err := dm.block(b, latents)
			if err != nil {
				return err
			}
			if r != nil && b+1 < g.Blocks {
				driftStop = tripMessage(b, *r, rec)
				hooks.info("\ngenerate: --stop-on-drift: %s", driftStop)
				stopForDrift()
			} else if r != nil {
				hooks.info("\ngenerate: --stop-on-drift: %s, the last block: the run completes", tripMessage(b, *r, rec))
			}
		}
		st.NextBlock = b + 1
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
	switch {
	case interrupted && snapAt == st.NextBlock:
		// Stopped right after a checkpoint: it stands.
		if err := writeTrace(); err != nil {
			return nil, err
		}
	case interrupted:
		if err := checkpoint(true); err != nil {
			return nil, err
		}
	default:
		// Complete: the final checkpoint is the last write (below), after
		// every result file; a failure before it leaves the previous
		// checkpoint to --resume from.
		if err := stage(false); err != nil {
			return nil, err
		}
		if err := writeTrace(); err != nil {
			return nil, err
		}
	}
	if err := writeTraceLayers(); err != nil {
		return nil, err
	}
	if rec != nil {
		if err := rec.finish(); err != nil {
			return nil, fmt.Errorf("--record-stream: %w", err)
		}
	}
	if g.SaveNoise != "" && !interrupted {
		// Made again from the noise source (addressed by frame and draw),
		// so a resumed run writes the file an uninterrupted one does.
		src, err := noiseSource(gc, in.noise)
		if err == nil {
			err = rollout.SaveNoise(g.SaveNoise, gen.Noise(ro), gen.NoiseLayout(ro), src)
		}
		if err != nil {
			return nil, fmt.Errorf("--save-noise: %w", err)
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
	if g.SaveNoise != "" && !interrupted {
		res.Summary.Files = append(res.Summary.Files, g.SaveNoise)
	}
	if !interrupted {
		pngs, err := Render(dir)
		if err != nil {
			return nil, fmt.Errorf("plots: %w", err)
		}
		res.Summary.Plots = pngs
	}
	if g.Preview && !interrupted {
		res.Preview = "latent preview PNGs in " + filepath.Join(dir, DirPreview) + " (3 latent channels as RGB, not decoded video)"
		if mp4, err := previewVideo(dir); err == nil {
			res.Preview += "; " + mp4
		} else {
			res.Preview += "; no mp4: " + err.Error()
		}
	}
	if vs != nil {
		if res.Video, err = finishVideo(vs, st.NextBlock); err != nil {
			return nil, err
		}
		if vs.Folder().MP4() && st.NextBlock > 0 {
			res.Summary.Files = append(res.Summary.Files, vs.Folder().VideoPath())
		}
		res.Summary.Files = append(res.Summary.Files, hv.files(st.NextBlock)...)
	}
	if err := WriteJSON(filepath.Join(dir, FileSummary), res.Summary); err != nil {
		return nil, err
	}
	if interrupted && driftStop != "" {
		return res, &driftStopError{driftStop}
	}
	if interrupted {
		return res, ErrInterrupted
	}
	if err := commit(false); err != nil {
		return nil, err
	}
	if vs != nil && vs.Folder().MP4() {
		// Complete: the videos are encoded for good, and the lossless
		// copies they were encoded from are no longer needed.
		if err := vs.Folder().RemoveLossless(); err != nil {
			hooks.warn("warning: %v (the lossless copies of the video segments are not needed any more)", err)
		}
	}
	return res, nil
}

// noiseSource says where a run's draws come from, for --save-noise's
// metadata: the seed, or the --noise file by its content (SHA-256; not
// its name, which a resume may change: --resume --noise FILE).
func noiseSource(gc config.GenerateConfig, n *rollout.NoiseFile) (string, error) {
	if n == nil {
		return fmt.Sprintf("seed %d", gc.Run.Seed), nil
	}
	s, err := filehash.File(n.Path)
	if err != nil {
		return "", err
	}
	return "noise file " + s.String(), nil
}

// openVideo opens the run's video stream: a new one, or on resume the
// folder's, after checking the segments of the completed blocks against
// the checkpoint and warming the decoder up on the latents before block
// start. The segments' lossless copies (state/video/, from which video.mp4
// and the horizons are encoded) are checked too: one that is missing or
// differs from the checkpoint's, or all of them for a checkpoint that
// records none (an earlier version's), are made again from the latents.
func openVideo(dir string, m *vae.Model, ffmpeg string, g config.GenerateSection, gs *GenerateState, prov pipeline.Provenance, resume bool, start int, man rollout.Manifest, hooks Hooks) (*pipeline.VideoStream, error) {
	vs, err := pipeline.NewVideoStream(m, pipeline.VideoOptions{Dir: dir, FFmpeg: ffmpeg, Tags: prov.Tags(), FPS: g.Video.FPS, CRF: g.Video.CRF,
		Lossless: filepath.Join(dir, DirState, DirVideoState), Mean: g.VAEMean, Std: g.VAEStd, Precision: g.Precision})
	if err != nil {
		return nil, err
	}
	if !resume {
		return vs, vs.Folder().Truncate(0, 0)
	}
	if vs.Folder().MP4() {
		if len(gs.SegmentsSHA256) != start {
			return nil, fmt.Errorf("--resume: the checkpoint lists %d video segments for %d completed blocks", len(gs.SegmentsSHA256), start)
		}
		for b, want := range gs.SegmentsSHA256 {
			p := vs.Folder().SegmentPath(b)
			sum, err := filehash.File(p)
			if err != nil {
				return nil, fmt.Errorf("--resume: video segment of completed block %d: %w (densitykv decode %s makes the video again from the latents)", b, err, dir)
			}
			if sum.SHA256 != want {
				return nil, fmt.Errorf("--resume: video segment %s of completed block %d has SHA-256 %.12s…, the checkpoint records %.12s… (densitykv decode %s makes the video again from the latents)", p, b, sum.SHA256, want, dir)
			}
		}
		remake := 0
		for b := 0; b < start; b++ {
			p := vs.Folder().LosslessPath(b)
			if b < len(gs.LosslessSHA256) && len(gs.LosslessSHA256) == start {
				if sum, err := filehash.File(p); err == nil && sum.SHA256 == gs.LosslessSHA256[b] {
					continue
				}
			}
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("--resume: %w", err)
			}
			remake++
		}
		if remake > 0 {
			hooks.info("resume: %d of the %d lossless copies of the video segments in %s are missing, damaged or unrecorded; they are made again from the latents",
				remake, start, vs.Folder().LosslessDir())
		}
	}
	C, H, W := g.Model.OutDim, g.LatentHeight, g.LatentWidth
	read := func(b int) ([]float32, error) { return rollout.ReadBlock(dir, man, b) }
	progress := func(done, total int) {
		if hooks.Progress != nil {
			hooks.Progress("video warm-up", done, total)
		}
	}
	if err := vs.Resume(start, g.BlockFrames(), C, H, W, read, progress); err != nil {
		return nil, fmt.Errorf("--resume: %w", err)
	}
	if vs.Folder().MP4() {
		gs.LosslessSHA256 = gs.LosslessSHA256[:0]
		for b := 0; b < start; b++ {
			sum, err := filehash.File(vs.Folder().LosslessPath(b))
			if err != nil {
				return nil, fmt.Errorf("--resume: %w", err)
			}
			gs.LosslessSHA256 = append(gs.LosslessSHA256, sum.SHA256)
		}
	}
	return vs, nil
}

// finishVideo encodes video.mp4 from the video's segments (blocks of
// them; one continuous encode of their lossless copies) and says where the
// video is.
func finishVideo(vs *pipeline.VideoStream, blocks int) (string, error) {
	f := vs.Folder()
	if blocks == 0 {
		return "no video yet (no block finished)", nil
	}
	if !f.MP4() {
		return fmt.Sprintf("video: %d PNG frames in %s (ffmpeg is not on PATH: %s, then densitykv decode %s writes video.mp4)",
			vs.PixelFrames(), filepath.Join(f.Dir(), video.DirFrames), video.InstallHint, f.Dir()), nil
	}
	out, err := vs.Finish()
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("video: %s (%d frames at %d fps, one encode; the %d blocks' segments in %s)", out, vs.PixelFrames(), f.FPS(), blocks, filepath.Join(f.Dir(), video.DirSegments)), nil
}

// resumeState reads and checks a generate run's checkpoint: the
// configuration it was saved with, its block, its snapshot, the input
// files' fingerprints.
func resumeState(dir, cpPath string, gc config.GenerateConfig, hooks Hooks) (*GenerateState, error) {
	g := gc.Generate
	gs, err := readGenCheckpoint(cpPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil, userf("--resume: %s has no checkpoint (%s); start the run again without --resume", dir, filepath.Join(DirState, FileCheckpoint))
	}
	if err != nil {
		return nil, fmt.Errorf("--resume: %w", err)
	}
	y, err := readRecord(filepath.Join(dir, FileConfig))
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
	inputs, err := generateInputs(g, dir)
	if err != nil {
		var mi *movedInput
		if errors.As(err, &mi) {
			return nil, userf("--resume: %w", err)
		}
		return nil, fmt.Errorf("--resume: %w", err)
	}
	moved, err := checkInputs(gs.Inputs, inputs)
	if err != nil {
		return nil, fmt.Errorf("--resume: %w", err)
	}
	for _, m := range moved {
		hooks.info("resume: %s: the file the run started with, identified by its content", m)
	}
	// The inputs as read now (files of the folder by their path in it).
	gs.Inputs = inputs
	return gs, nil
}

// newGenerateFolder prepares the run folder of a new generate run: its
// configuration, the prompts' embeddings, the provenance, and in gs its
// fingerprint, the inputs' and the empty state.
func newGenerateFolder(dir string, force, overwriteOwn bool, gc config.GenerateConfig, gs *GenerateState, embeds []*pipeline.Embedding, text *pipeline.TextInputs) (pipeline.Provenance, error) {
	var prov pipeline.Provenance
	if err := Claim(dir, "generate", force, overwriteOwn); err != nil {
		return prov, err
	}
	for _, d := range []string{rollout.ManifestFile, rollout.LatentDir, DirPreview, FilePreviewVideo, FileTrace, FileLineage, FileTraceLayers, FileGeneration, DirText} {
		os.RemoveAll(filepath.Join(dir, d))
	}
	y, err := config.MarshalGenerate(gc)
	if err != nil {
		return prov, err
	}
	if err := WriteFile(filepath.Join(dir, FileConfig), y); err != nil {
		return prov, err
	}
	gs.ConfigSHA256 = sha256Hex(y)
	if len(embeds) > 0 {
		if err := os.MkdirAll(filepath.Join(dir, DirText), 0o755); err != nil {
			return prov, err
		}
	}
	for i, e := range embeds {
		if err := e.Write(embeddingPath(dir, i)); err != nil {
			return prov, err
		}
	}
	if gs.Inputs, err = generateInputs(gc.Generate, dir); err != nil {
		return prov, err
	}
	prov = provenance(gc, gs.Inputs, embeds, text)
	if err := WriteJSON(filepath.Join(dir, FileGeneration), prov); err != nil {
		return prov, err
	}
	gs.RunState = RunState{Adm: NewAdmissions(gc.Config), Totals: []*PolicyTotals{{Policy: gc.Policies[0]}}, Bytes: make([][]int64, 1)}
	return prov, nil
}

// provenance describes a new run: its schedule, seed, policy, backbone and
// the identity of every input file.
func provenance(gc config.GenerateConfig, inputs []FileFingerprint, embeds []*pipeline.Embedding, text *pipeline.TextInputs) pipeline.Provenance {
	g := gc.Generate
	p := pipeline.Provenance{Seed: uint64(gc.Run.Seed), Policy: gc.Policies[0], Backbone: g.Arch, Entry: g.Entry, Precision: g.Precision.String()}
	if g.Backbone != config.BackboneNone {
		p.Preset = g.Backbone.String()
	}
	for _, ts := range g.Texts {
		p.Prompts = append(p.Prompts, pipeline.PromptRecord{FromBlock: ts.FromBlock, File: ts.Path})
	}
	for i, ps := range g.Prompts {
		e := embeds[i]
		p.Prompts = append(p.Prompts, pipeline.PromptRecord{FromBlock: ps.FromBlock, Text: ps.Text, Cleaned: e.Cleaned, Pieces: e.Pieces,
			Truncated: e.Truncated, File: embeddingName(i)})
	}
	for _, in := range inputs {
		if in.Role == "embedding" {
			continue
		}
		sum := filehash.Sum{Size: in.Size, SHA256: in.SHA256, Sampled: in.Size > filehash.Whole}
		p.Files = append(p.Files, pipeline.FileRecord{Role: in.Role, Path: in.Path, Size: in.Size, Sum: sum.String()})
	}
	if text != nil && len(g.Prompts) > 0 {
		p.Files = append(p.Files,
			pipeline.FileRecord{Role: "text_encoder", Path: g.TextEncoder, Size: text.EncoderSum.Size, Sum: text.EncoderSum.String()},
			pipeline.FileRecord{Role: "tokenizer", Path: text.TokenizerPath, Size: text.TokenizerSum.Size, Sum: text.TokenizerSum.String()})
	}
	return p
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
	// The inputs' paths (Extra) are where the run read them when it began:
	// resume identifies the inputs by their content (checkInputs), from
	// wherever they are now, and the manifest keeps those paths.
	cmp := have
	cmp.Version, cmp.Created, cmp.Shards, cmp.Complete, cmp.Extra = 0, "", nil, false, nil
	man.Extra = nil
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
	os.Remove(filepath.Join(dir, FilePreviewVideo))
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

// recorded forwards a record.Recorder and reports the wrapped policy's
// statistics (the rollout logs them).
type recorded struct {
	*record.Recorder
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
