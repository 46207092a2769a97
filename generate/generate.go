package generate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"time"

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/gpu"
	"github.com/densitykv/densitykv/internal/atomicfile"
	"github.com/densitykv/densitykv/internal/filehash"
	"github.com/densitykv/densitykv/internal/finite"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/ragae"
	"github.com/densitykv/densitykv/record"
	"github.com/densitykv/densitykv/rollout"
	"github.com/densitykv/densitykv/runfolder"
	"github.com/densitykv/densitykv/vae"
	"github.com/densitykv/densitykv/video"
	"github.com/densitykv/densitykv/wan"
)

// Generate makes a video with the Wan model of gc and its memory policy
// in the run folder <out>/<name> (with generate.prompts_file, one run
// folder per prompt: GenerateBatch). The stages, in order:
//
//  1. every input is checked before any work: the backbone's tensors
//     (names, shapes, dtypes; CheckBackbone), the text files, the
//     VAE (loaded) and ffmpeg, the tokenizer and the text encoder's tensors;
//  2. the prompts are encoded (package generate: tokenizer, umT5, the
//     embedding cache), and the encoder is released;
//  3. the backbone is loaded and the run folder made;
//  4. the rollout (package rollout's generate path) streams every finished
//     block into the folder, each output a blockSink: latent shards and
//     manifest, the memory log, the DensityKV provenance and admissions, the
//     attention trace (record.AttentionTracer), the latent preview, the
//     drift records, and with a VAE the block decoded into its video
//     segment (VideoStream) and the horizons;
//  5. summary.json, the figures, latent_preview.mp4 and video.mp4 (the
//     segments joined) at the end.
//
// Steps 3 to 5 are genRun's, which states the order of writes and
// checkpoints that a crash or a stop at any point can be resumed from.
//
// Errors in an input are *UserError (the backbone's or a text file's wrap
// a *rollout.InputError). With resume it continues a stopped run from its
// checkpoint without computing the completed blocks again, after checking
// that the configuration, inputs, latents, video segments and snapshot are
// those of the checkpoint; the video decoder is warmed up on the latents
// before the block it continues at (VideoStream.Resume). When ctx
// is cancelled it stops after the current block, saves a checkpoint, joins
// the finished segments into video.mp4 and returns the partial result with
// ErrInterrupted.
func Generate(ctx context.Context, gc config.GenerateConfig, resume, force bool, hooks runfolder.Hooks) (*runfolder.Result, error) {
	if gc.Generate.PromptsFile != "" {
		return GenerateBatch(ctx, gc, resume, force, hooks)
	}
	g := gc.Generate
	dir := filepath.Join(gc.Run.Out, gc.Run.Name)
	gs := &runfolder.GenerateState{}
	if err := runfolder.CheckGenerateOutputs(gc); err != nil {
		return nil, err
	}
	if resume {
		if err := runfolder.CheckOwner(dir, "generate"); err != nil {
			return nil, err
		}
		if err := atomicfile.CleanTemps(dir); err != nil {
			return nil, fmt.Errorf("--resume: %w", err)
		}
		saved, err := resumeState(dir, filepath.Join(dir, runfolder.DirState, runfolder.FileCheckpoint), gc, hooks)
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
	var embeds []*Embedding
	if resume {
		embeds, err = readRunEmbeddings(dir, g)
	} else {
		embeds, err = encodePrompts(in, g, g.Prompts, false, hooks)
	}
	if err != nil {
		return nil, err
	}
	if err := in.loadBackbone(g, gc.Config.Memory, gc.Policies[0], hooks); err != nil {
		return nil, err
	}
	return generateRun(ctx, gc, in, embeds, gs, resume, force, false, hooks)
}

// genInputs are a generate run's checked inputs and, once loaded, its
// models.
type genInputs struct {
	text   *TextInputs // nil without prompts
	vae    *vae.Model  // nil without --vae
	ffmpeg string      // "" = PNG frames (with a VAE)
	wan    *wan.Model
	device *gpu.Opened       // where the DiT computes (generate.device)
	sched  *rollout.Schedule // the denoising schedule (first: block 0's when it differs)
	first  *rollout.Schedule
	noise  *rollout.NoiseFile // --noise, checked against the run; nil = the seed's draws
}

// close releases the noise file and the device.
func (in *genInputs) close() {
	if in.noise != nil {
		in.noise.Close()
	}
	in.device.Close()
}

// checkGenerateInputs checks every input file of g without reading the
// big ones whole: the backbone's tensors, the text files, the VAE (loaded:
// it is small), ffmpeg, and with text the tokenizer and the encoder's
// tensors.
func checkGenerateInputs(g config.GenerateSection, hooks runfolder.Hooks, text bool) (*genInputs, error) {
	in := &genInputs{}
	if err := CheckBackbone(g.Checkpoint, g.Entry, g.Model); err != nil {
		return nil, &runfolder.UserError{Err: &rollout.InputError{Prompt: -1, Name: g.Checkpoint, Err: err}}
	}
	for i, ts := range g.Texts {
		if _, rows, dim, err := rollout.LoadText(ts.Path, ts.Tensor); err != nil {
			return nil, &runfolder.UserError{Err: &rollout.InputError{Prompt: i, Name: ts.Path, Err: err}}
		} else if dim != g.Model.TextDim || rows > g.Model.TextLen {
			return nil, &runfolder.UserError{Err: &rollout.InputError{Prompt: i, Name: ts.Path,
				Err: fmt.Errorf("text embeddings [%d, %d], the model needs at most %d rows of %d", rows, dim, g.Model.TextLen, g.Model.TextDim)}}

		}
	}
	if g.VAE != "" {
		m, err := LoadVAE(g.VAE, g.VAEMean, g.VAEStd, g.Model.OutDim)
		if err != nil {
			return nil, userf("--vae %s: %w", g.VAE, err)
		}
		hooks.Infof("VAE: %s", m.Loaded)
		in.vae = m
		if in.ffmpeg, err = video.LookFFmpeg(); err != nil {
			hooks.Warnf("warning: ffmpeg is not on PATH: the video will be PNG frames in %s/ (%s; then `densitykv decode` writes video.mp4)", video.DirFrames, video.InstallHint)
		}
	}
	if text && (len(g.Prompts) > 0 || g.PromptsFile != "") {
		ti, err := CheckText(TextOptions{Encoder: g.TextEncoder, Tokenizer: g.Tokenizer, TextLen: g.Model.TextLen})
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
func encodePrompts(in *genInputs, g config.GenerateSection, prompts []config.PromptSpec, discard bool, hooks runfolder.Hooks) ([]*Embedding, error) {
	if len(prompts) == 0 {
		return nil, nil
	}
	texts := make([]string, len(prompts))
	for i, p := range prompts {
		texts[i] = p.Text
	}
	if err := in.openDevice(g); err != nil {
		return nil, err
	}
	o := TextOptions{Encoder: g.TextEncoder, Tokenizer: g.Tokenizer, TextLen: g.Model.TextLen, CacheDir: g.TextCache, Discard: discard, Precision: g.Precision,
		Backend: in.device.Compute(), DeviceMemory: int64(in.device.Choice.Device.DeviceLocalBytes()),
		Warn:    func(msg string) { hooks.Warnf("%s", msg) },
		Loading: loadProgress(hooks, "load text encoder (MiB)"),
		Loaded:  func(desc string) { hooks.Infof("text encoder: %s", desc) },
		Progress: func(done, total int) {
			if hooks.Progress != nil {
				hooks.Progress("encode", done, total)
			}
		}}
	began := time.Now()
	embeds, err := EncodePrompts(o, in.text, texts)
	if err != nil {
		return nil, userf("text: %w", err)
	}
	cached := 0
	for _, e := range embeds {
		if e.Cached {
			cached++
		}
	}
	hooks.Infof("text: %d prompts (%d from the cache %s) in %.1f s", len(prompts), cached, g.TextCache, time.Since(began).Seconds())
	return embeds, nil
}

// readRunEmbeddings reads a resumed run's prompt embeddings from its
// folder (their fingerprints are checked with the other inputs).
func readRunEmbeddings(dir string, g config.GenerateSection) ([]*Embedding, error) {
	var out []*Embedding
	for i, p := range g.Prompts {
		e, err := ReadEmbedding(runfolder.EmbeddingPath(dir, i))
		if err != nil {
			return nil, fmt.Errorf("--resume: %w", err)
		}
		if e.Prompt != p.Text {
			return nil, fmt.Errorf("--resume: %s holds the embedding of %q, the run's prompt %d is %q", runfolder.EmbeddingPath(dir, i), e.Prompt, i, p.Text)
		}
		out = append(out, e)
	}
	return out, nil
}

// loadBackbone loads the DiT (after the text encoder is gone), reporting
// the bytes read as stage "load DiT (MiB)" and what was read (the
// checkpoint's layout, the LoRA merged).
func (in *genInputs) loadBackbone(g config.GenerateSection, mem memory.Config, policy string, hooks runfolder.Hooks) error {
	sch, first, err := g.Schedule.Options().Build()
	if err != nil {
		return userf("generate.schedule: %w", err)
	}
	m, err := wan.Load(g.Checkpoint, g.Model, wan.LoadOptions{Entry: g.Entry, LoRA: g.LoRA, LoRAAlpha: g.LoRAAlpha, Precision: g.Precision.Prec,
		Progress: loadProgress(hooks, "load DiT (MiB)")})
	if err != nil {
		return &runfolder.UserError{Err: &rollout.InputError{Prompt: -1, Name: g.Checkpoint, Err: err}}
	}
	hooks.Infof("DiT: %s, %s", m.Loaded.Source, m.Precision)
	if m.Loaded.LoRA != "" {
		hooks.Infof("lora: merged %s", m.Loaded.LoRA)
	}
	if err := in.openDevice(g); err != nil {
		return err
	}
	dev := in.device
	if be := dev.Compute(); be != nil {
		c := m.Cfg
		per := int64(4)
		if m.Precision == gemm.BF16 {
			per = 2
		}
		largest := per * int64(max(c.Dim*c.FFNDim, c.TextDim*c.Dim, 6*c.Dim*c.Dim))
		shape := ditShape{Dim: c.Dim, FFNDim: c.FFNDim, TextLen: c.TextLen, Layers: c.Layers, PatchH: c.Patch[1], PatchW: c.Patch[2], PatchLen: c.PatchLen(), OutLen: c.OutLen()}
		need := estimateDeviceNeed(shape, m.WeightBytes(), largest, g, mem, policy)
		if err := checkDeviceMemory(need, dev.Choice.Device); err != nil {
			return &runfolder.UserError{Err: fmt.Errorf("generate.device %s: %w", g.Device, err)}
		}
		if in.vae != nil { // it decodes each block with the DiT's buffers still on the device
			v, err := estimateVAENeed(in.vae, g.LatentHeight, g.LatentWidth, g.Precision.Prec)
			if err == nil {
				err = checkVAEMemory(v, need, dev.Choice.Device)
			}
			if err != nil {
				return &runfolder.UserError{Err: fmt.Errorf("generate.device %s: %w", g.Device, err)}
			}
		}
		m.UseBackend(be)
		if in.vae != nil {
			in.vae.UseBackend(be)
		}
		where := "the memory policy on the CPU (its context sent layer by layer)"
		if memory.Plans(policy) {
			where = "every layer's attention history kept there (sent once per block), the memory policy's decisions on the CPU"
		}
		if policy == memory.NameDensityKV {
			where = "every layer's attention history and DensityKV's banks (their states and Soft-Riesz passes) there too, the rest of the memory policy on the CPU"
		}
		mode := "exact mode (the CPU's bits)"
		if dev.Mode() == compute.Fast {
			mode = "fast mode (bf16-fast: the DiT's and the text encoder's linears on tensor cores, not the CPU's bits; the rest exact)"
		}
		hooks.Infof("device: the text encoder, the DiT and the VAE on %s, %s; %s", dev.Label(), mode, where)
	}
	in.wan, in.sched, in.first = m, sch, first
	return nil
}

// openDevice opens the run's device (generate.device) once, for the text
// encoder and the DiT.
func (in *genInputs) openDevice(g config.GenerateSection) error {
	if in.device != nil {
		return nil
	}
	dev, err := gpu.OpenFor(g.Device, g.Precision) // bf16-fast: refused on the CPU and without tensor cores
	if err != nil {
		return &runfolder.UserError{Err: fmt.Errorf("generate.device: %w", err)}
	}
	in.device = dev
	return nil
}

// loadProgress reports a model's loading as hooks' stage (MiB read of the
// total), or nil without a Progress hook.
func loadProgress(hooks runfolder.Hooks, stage string) func(done, total int64) {
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
func schedule(g config.GenerateSection, embeds []*Embedding) []rollout.PromptText {
	var out []rollout.PromptText
	for _, ts := range g.Texts {
		out = append(out, rollout.PromptText{FromBlock: ts.FromBlock, Text: rollout.TextFile{Path: ts.Path, Tensor: ts.Tensor}})
	}
	for i, p := range g.Prompts {
		out = append(out, rollout.PromptText{FromBlock: p.FromBlock, Text: embeds[i].Text(fmt.Sprintf("prompt %d: %q", i, p.Text))})
	}
	return out
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
func openVideo(dir string, m *vae.Model, ffmpeg string, g config.GenerateSection, gs *runfolder.GenerateState, prov Provenance, resume bool, start int, man rollout.Manifest, hooks runfolder.Hooks) (*VideoStream, error) {
	vs, err := NewVideoStream(m, VideoOptions{Dir: dir, FFmpeg: ffmpeg, Tags: prov.Tags(), FPS: g.Video.FPS, CRF: g.Video.CRF,
		Lossless: filepath.Join(dir, runfolder.DirState, runfolder.DirVideoState), Mean: g.VAEMean, Std: g.VAEStd, Precision: g.Precision.Prec})
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
			hooks.Infof("resume: %d of the %d lossless copies of the video segments in %s are missing, damaged or unrecorded; they are made again from the latents",
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
func finishVideo(vs *VideoStream, blocks int) (string, error) {
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
func resumeState(dir, cpPath string, gc config.GenerateConfig, hooks runfolder.Hooks) (*runfolder.GenerateState, error) {
	g := gc.Generate
	gs, err := runfolder.ReadGenerateCheckpointFile(cpPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil, userf("--resume: %s has no checkpoint (%s); start the run again without --resume", dir, filepath.Join(runfolder.DirState, runfolder.FileCheckpoint))
	}
	if err != nil {
		return nil, fmt.Errorf("--resume: %w", err)
	}
	y, err := runfolder.ReadRecord(filepath.Join(dir, runfolder.FileConfig))
	if err != nil {
		return nil, fmt.Errorf("--resume: %w", err)
	}
	if sum := filehash.Bytes(y); sum != gs.ConfigSHA256 {
		return nil, fmt.Errorf("--resume: %s changed since the checkpoint (SHA-256 %.12s…, was %.12s…); resume needs the configuration the run started with",
			filepath.Join(dir, runfolder.FileConfig), sum, gs.ConfigSHA256)
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
	moved, err := runfolder.CheckInputs(gs.Inputs, inputs)
	if err != nil {
		return nil, fmt.Errorf("--resume: %w", err)
	}
	for _, m := range moved {
		hooks.Infof("resume: %s: the file the run started with, identified by its content", m)
	}
	// The inputs as read now (files of the folder by their path in it).
	gs.Inputs = inputs
	return gs, nil
}

// newGenerateFolder prepares the run folder of a new generate run: its
// configuration, the prompts' embeddings, the provenance, and in gs its
// fingerprint, the inputs' and the empty state.
func newGenerateFolder(dir string, force, overwriteOwn bool, gc config.GenerateConfig, gs *runfolder.GenerateState, embeds []*Embedding, text *TextInputs, device string) (Provenance, error) {
	var prov Provenance
	if err := runfolder.Claim(dir, "generate", force, overwriteOwn); err != nil {
		return prov, err
	}
	for _, d := range []string{rollout.ManifestFile, rollout.LatentDir, runfolder.DirPreview, runfolder.FilePreviewVideo, runfolder.FileTrace, runfolder.FileLineage, runfolder.FileTraceLayers, runfolder.FileGeneration, runfolder.DirText} {
		os.RemoveAll(filepath.Join(dir, d))
	}
	y, err := config.MarshalGenerate(gc)
	if err != nil {
		return prov, err
	}
	if err := runfolder.WriteFile(filepath.Join(dir, runfolder.FileConfig), y); err != nil {
		return prov, err
	}
	gs.ConfigSHA256 = filehash.Bytes(y)
	if len(embeds) > 0 {
		if err := os.MkdirAll(filepath.Join(dir, runfolder.DirText), 0o755); err != nil {
			return prov, err
		}
	}
	for i, e := range embeds {
		if err := e.Write(runfolder.EmbeddingPath(dir, i)); err != nil {
			return prov, err
		}
	}
	if gs.Inputs, err = generateInputs(gc.Generate, dir); err != nil {
		return prov, err
	}
	prov = provenance(gc, gs.Inputs, embeds, text, device)
	if err := runfolder.WriteJSON(filepath.Join(dir, runfolder.FileGeneration), prov); err != nil {
		return prov, err
	}
	gs.RunState = runfolder.RunState{Adm: runfolder.NewAdmissions(gc.Config), Totals: []*runfolder.PolicyTotals{{Policy: gc.Policies[0]}}, Bytes: make([][]int64, 1)}
	return prov, nil
}

// provenance describes a new run: its schedule, seed, policy, backbone and
// the identity of every input file.
func provenance(gc config.GenerateConfig, inputs []runfolder.FileFingerprint, embeds []*Embedding, text *TextInputs, device string) Provenance {
	g := gc.Generate
	p := Provenance{Seed: uint64(gc.Run.Seed), Policy: gc.Policies[0], Backbone: g.Arch, Entry: g.Entry, Precision: g.Precision.String(), Device: device}
	if g.Backbone != config.BackboneNone {
		p.Preset = g.Backbone.String()
	}
	for _, ts := range g.Texts {
		p.Prompts = append(p.Prompts, PromptRecord{FromBlock: ts.FromBlock, File: ts.Path})
	}
	for i, ps := range g.Prompts {
		e := embeds[i]
		p.Prompts = append(p.Prompts, PromptRecord{FromBlock: ps.FromBlock, Text: ps.Text, Cleaned: e.Cleaned, Pieces: e.Pieces,
			Truncated: e.Truncated, File: runfolder.EmbeddingName(i)})
	}
	for _, in := range inputs {
		if in.Role == "embedding" {
			continue
		}
		sum := filehash.Sum{Size: in.Size, SHA256: in.SHA256, Sampled: in.Size > filehash.Whole}
		p.Files = append(p.Files, FileRecord{Role: in.Role, Path: in.Path, Size: in.Size, Sum: sum.String()})
	}
	if text != nil && len(g.Prompts) > 0 {
		p.Files = append(p.Files,
			FileRecord{Role: "text_encoder", Path: g.TextEncoder, Size: text.EncoderSum.Size, Sum: text.EncoderSum.String()},
			FileRecord{Role: "tokenizer", Path: text.TokenizerPath, Size: text.TokenizerSum.Size, Sum: text.TokenizerSum.String()})
	}
	return p
}

// openLatents opens the latent shards' writer: a new one with man, or on
// resume the folder's, after the cheap check of the completed blocks
// (their shards exist with the checksums of the manifest and of the
// checkpoint, and the manifest describes this rollout).
func openLatents(dir string, resume bool, start, framesPerBlock int, gs *runfolder.GenerateState, man rollout.Manifest) (*rollout.Writer, error) {
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
	old, _ := filepath.Glob(filepath.Join(dir, runfolder.DirPreview, "frame_*.png"))
	for _, f := range old {
		var fr int
		if _, err := fmt.Sscanf(filepath.Base(f), "frame_%d.png", &fr); err == nil && fr >= start*framesPerBlock {
			os.Remove(f)
		}
	}
	os.Remove(filepath.Join(dir, runfolder.FilePreviewVideo))
	return w, nil
}

// generateLines records block b of the rollout in st (totals, bytes by
// block, admissions) and returns its log lines, from the policy's
// statistics with the block's first-call counts of the rollout's log bl.
func generateLines(gc config.GenerateConfig, pol memory.Policy, st *runfolder.RunState, b int, bl rollout.BlockLog) []runfolder.LogLine {
	s := runfolder.StatsOf(pol)
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
	var lines []runfolder.LogLine
	tot.OccMin, tot.OccMax = 1<<62, 0
	banks := runfolder.BankBytes(pol)
	for l := 0; l < gc.Memory.Layout.Layers; l++ {
		ln := runfolder.LineFor(gc.Policies[0], b, l, sec, s, decs, tot.Bytes, 0)
		ln.Diag = runfolder.DiagFor(pol, l, decs, ln.Offered)
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
func (r recorded) LastStats() memory.Stats { return runfolder.StatsOf(r.stats) }

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

// checkTextProjections checks that every prompt's text embedding and the
// cross-attention keys and values every layer projects from it are finite:
// text values near float32's limit (3e38) pass the input check but
// overflow to ±Inf or NaN in these products, which would fail mid-run.
// The error names the text file, its tensor, the layer and the position.
func checkTextProjections(gen *rollout.Generator, texts []config.TextSpec) error {
	for i, p := range gen.Prompts {
		t := p.Text
		name := p.Name
		if i < len(texts) {
			name = "--text " + texts[i].Path
			if texts[i].Tensor != "" {
				name += fmt.Sprintf(" (tensor %q)", texts[i].Tensor)
			}
		}
		check := func(what string, v []float32) error {
			if j := finite.First(v); j >= 0 {
				d := gen.Model.Cfg.Dim
				return userf("%s: the text embedding overflows float32 in %s: %v at row %d column %d (the text values are too large for the model; check the text encoder's output)",
					name, what, v[j], j/d, j%d)
			}
			return nil
		}
		if err := check("the text embedding projection", t.Embed); err != nil {
			return err
		}
		for l := range t.K {
			if err := check(fmt.Sprintf("layer %d's cross-attention keys", l), t.K[l]); err != nil {
				return err
			}
			if err := check(fmt.Sprintf("layer %d's cross-attention values", l), t.V[l]); err != nil {
				return err
			}
		}
	}
	return nil
}

// inputFlags are the flags that name a generate run's input files by
// role: --resume takes them to read an input from another place (its
// content checked against the checkpoint's fingerprint).
var inputFlags = map[string]string{"checkpoint": "--checkpoint", "lora": "--lora", "text": "--text", "vae": "--vae", "rag-ae": "--rag-ae", "noise": "--noise"}

// generateInputs fingerprints the files a generate run in dir reads: the
// checkpoint, LoRA, text files, the prompts' embeddings saved in dir
// (recorded by their path in the folder), the VAE, LongLive-RAG's
// autoencoder and the --noise file. (The text encoder
// and tokenizer are not read again on resume: the embeddings made with
// them are.)
func generateInputs(g config.GenerateSection, dir string) ([]runfolder.FileFingerprint, error) {
	type in struct{ role, path, rel string }
	ins := []in{{"checkpoint", g.Checkpoint, ""}}
	if g.LoRA != "" {
		ins = append(ins, in{"lora", g.LoRA, ""})
	}
	for _, t := range g.Texts {
		ins = append(ins, in{"text", t.Path, ""})
	}
	for i := range g.Prompts {
		ins = append(ins, in{"embedding", runfolder.EmbeddingPath(dir, i), runfolder.EmbeddingName(i)})
	}
	if g.VAE != "" {
		ins = append(ins, in{"vae", g.VAE, ""})
	}
	if g.RAGAE != "" {
		ins = append(ins, in{"rag-ae", g.RAGAE, ""})
	}
	if g.Noise != "" {
		ins = append(ins, in{"noise", g.Noise, ""})
	}
	var out []runfolder.FileFingerprint
	for _, i := range ins {
		fp, err := runfolder.Fingerprint(i.role, i.path)
		if err != nil && i.rel == "" && errors.Is(err, os.ErrNotExist) {
			return nil, &movedInput{role: i.role, err: err}
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", i.role, err)
		}
		if i.rel != "" {
			fp.Path = i.rel
		}
		out = append(out, fp)
	}
	return out, nil
}

// movedInput is the error of an input file outside the run folder that
// is not where the configuration says: moved since the run began, its
// new place is given to --resume by its flag.
type movedInput struct {
	role string
	err  error
}

func (e *movedInput) Error() string {
	return fmt.Sprintf("%s: %v (if it moved since the run began, give its new place: --resume %s FILE; it is checked to be the same file by its content)", e.role, e.err, inputFlags[e.role])
}

func (e *movedInput) Unwrap() error { return e.err }

// userf is a runfolder.UserError: a mistake in the command's input.
func userf(format string, a ...any) error {
	return &runfolder.UserError{Err: fmt.Errorf(format, a...)}
}
