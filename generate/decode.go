package generate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/device"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/gpu"
	"github.com/densitykv/densitykv/internal/filehash"
	"github.com/densitykv/densitykv/rollout"
	"github.com/densitykv/densitykv/runfolder"
	"github.com/densitykv/densitykv/video"
)

// DecodeOptions configures Decode.
type DecodeOptions struct {
	// VAE is the VAE checkpoint ("" = the run's generate.vae).
	VAE string
	// Mean and Std are the latent statistics (nil = the run's, else
	// Wan2.1's).
	Mean, Std []float32
	// Precision is the decoder's precision (nil = the run's
	// generate.precision).
	Precision *gemm.Precision
	// FPS and CRF are the mp4 encode's frame rate and x264 constant rate
	// factor (nil = the run's generate.video).
	FPS, CRF *int
	// Device is where the decoder computes (cpu, vulkan, vulkan:N, auto;
	// exact mode: the same frames and video bytes on every device).
	Device device.Spec
}

// DecodeResult is what Decode made.
type DecodeResult struct {
	Dir          string  `json:"run_dir"`
	Blocks       int     `json:"blocks"`
	LatentFrames int     `json:"latent_frames"`
	Frames       int     `json:"frames"`
	Width        int     `json:"width"`
	Height       int     `json:"height"`
	Video        string  `json:"video,omitempty"`      // video.mp4
	FPS          int     `json:"fps"`                  // its frame rate
	CRF          int     `json:"crf"`                  // its x264 constant rate factor
	FramesDir    string  `json:"frames_dir,omitempty"` // PNG frames (no ffmpeg)
	Seconds      float64 `json:"elapsed_seconds"`
	Interrupted  bool    `json:"interrupted,omitempty"`
}

// Decode makes a generate run folder's video again from its saved
// latents (manifest.json, latents/): every completed block through the
// streaming VAE decoder into its segment and its lossless copy (in
// state/decode-video/, removed at the end), then video.mp4 and the
// horizons, each one continuous encode of the copies (or PNG frames
// without ffmpeg), with the run's metadata (generation.json) and, unless
// o says otherwise, its frame rate and crf. The video files the folder
// had are replaced, once the latent shards and the configuration are
// checked against what the folder recorded (checkLatents,
// checkConfigRecord: a file changed since is refused, nothing replaced).
// hooks.Progress reports stage
// "decode" per block. When ctx is cancelled it stops after the current
// block, joins what is decoded and returns ErrInterrupted.
func Decode(ctx context.Context, dir string, o DecodeOptions, hooks runfolder.Hooks) (*DecodeResult, error) {
	man, err := rollout.ReadManifest(dir)
	if err != nil {
		return nil, userf("decode: %s is not a generate run folder with latents: %w", dir, err)
	}
	// What the folder recorded, checked before anything is read or
	// replaced: the configuration and every latent shard.
	st, err := runfolder.ReadCheckpointState(dir)
	if err == nil {
		err = runfolder.CheckConfigRecord(dir, st)
	}
	if err == nil {
		err = checkLatents(dir, man, st)
	}
	if err != nil {
		return nil, fmt.Errorf("decode: %w; nothing was decoded, the folder's video files are as they were", err)
	}
	gc := config.GenerateDefaults() // keys a run folder written before they existed keep the values that run used
	if err := runfolder.LoadConfig(dir, &gc); err != nil {
		return nil, userf("decode: %w", err)
	}
	if o.VAE == "" {
		o.VAE = gc.Generate.VAE
	}
	if o.VAE == "" {
		return nil, userf("decode: --vae is required (the run %s was made without one)", dir)
	}
	if o.Mean == nil && o.Std == nil {
		o.Mean, o.Std = gc.Generate.VAEMean, gc.Generate.VAEStd
	}
	prec := gc.Generate.Precision.Prec // the VAE has no fast mode: bf16-fast decodes in exact bf16
	if o.Precision != nil {
		prec = *o.Precision
	}
	enc := gc.Generate.Video
	if o.FPS != nil {
		enc.FPS = *o.FPS
	}
	if o.CRF != nil {
		enc.CRF = *o.CRF
	}
	if err := enc.Check(); err != nil {
		return nil, userf("decode: %w", err)
	}
	if len(man.Shards) == 0 {
		return nil, userf("decode: %s has no finished block", dir)
	}
	m, err := LoadVAE(o.VAE, o.Mean, o.Std, man.Channels)
	if err != nil {
		return nil, userf("--vae %s: %w", o.VAE, err)
	}
	dev, err := gpu.Open(o.Device)
	if err != nil {
		return nil, &runfolder.UserError{Err: fmt.Errorf("--device: %w", err)}
	}
	defer dev.Close()
	if be := dev.Compute(); be != nil {
		v, err := estimateVAENeed(m, man.Height, man.Width, prec)
		if err == nil {
			err = checkVAEMemory(v, deviceNeed{}, dev.Choice.Device)
		}
		if err != nil {
			return nil, &runfolder.UserError{Err: fmt.Errorf("--device %s: %w; nothing was decoded, the folder's video files are as they were", o.Device, err)}
		}
		m.UseBackend(be)
		defer m.UseBackend(nil)
		hooks.Infof("device: the VAE on %s, exact mode (the CPU's bits)", dev.Label())
	}
	var prov Provenance
	if err := runfolder.ReadJSON(filepath.Join(dir, runfolder.FileGeneration), &prov); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("decode: %w", err)
	}
	ff, err := video.LookFFmpeg()
	if err != nil {
		hooks.Warnf("warning: ffmpeg is not on PATH: the video will be PNG frames in %s (%s)", filepath.Join(dir, video.DirFrames), video.InstallHint)
	}
	// Only the files the decode writes are replaced.
	os.RemoveAll(filepath.Join(dir, video.DirSegments))
	os.RemoveAll(filepath.Join(dir, video.DirFrames))
	vs, err := NewVideoStream(m, VideoOptions{Dir: dir, FFmpeg: ff, Tags: prov.Tags(), FPS: enc.FPS, CRF: enc.CRF,
		Lossless: filepath.Join(dir, runfolder.DirState, runfolder.DirDecodeState), Mean: o.Mean, Std: o.Std, Precision: prec})
	if err != nil {
		return nil, err
	}
	defer vs.Folder().RemoveLossless() // needed only until the videos are encoded
	if err := vs.Folder().Truncate(0, 0); err != nil {
		return nil, err
	}
	hv := newHorizonVideos(vs.Folder(), gc.Generate)
	if err := hv.start(0); err != nil {
		return nil, err
	}
	F := man.FramesPerBlock
	sc := m.Cfg.SpatialScale()
	res := &DecodeResult{Dir: dir, Width: sc * man.Width, Height: sc * man.Height, FPS: enc.FPS, CRF: enc.CRF}
	began := time.Now()
	for b := range man.Shards {
		if ctx.Err() != nil {
			res.Interrupted = true
			break
		}
		z, err := rollout.ReadBlock(dir, man, b)
		if err != nil {
			return nil, fmt.Errorf("decode: block %d: %w", b, err)
		}
		if err := vs.Block(b, z, F, man.Channels, man.Height, man.Width); err != nil {
			return nil, err
		}
		if err := hv.block(b); err != nil {
			return nil, err
		}
		if hooks.Progress != nil {
			hooks.Progress("decode", b+1, len(man.Shards))
		}
	}
	res.Blocks, res.LatentFrames, res.Frames = vs.Blocks(), vs.Blocks()*F, vs.PixelFrames()
	if vs.Blocks() > 0 {
		if vs.Folder().MP4() {
			if res.Video, err = vs.Finish(); err != nil {
				return nil, err
			}
		} else {
			res.FramesDir = filepath.Join(dir, video.DirFrames)
		}
	}
	res.Seconds = time.Since(began).Seconds()
	if res.Interrupted {
		return res, runfolder.ErrInterrupted
	}
	return res, nil
}

// checkLatents checks the latent shards manifest.json lists before they
// are read: each is the block's file (latents/block_NNNNN.safetensors)
// with the SHA-256 the manifest records, and the checkpoint (st, when the
// folder has one) records the same SHA-256 for the blocks it covers.
// The error names the shard and what mismatched.
func checkLatents(dir string, man rollout.Manifest, st *runfolder.GenerateState) error {
	manPath := filepath.Join(dir, rollout.ManifestFile)
	if st != nil && len(st.Shards) > len(man.Shards) {
		return fmt.Errorf("%s lists %d latent shards, fewer than the %d of the run's checkpoint (%s)", manPath, len(man.Shards), len(st.Shards), filepath.Join(runfolder.DirState, runfolder.FileCheckpoint))
	}
	F := man.FramesPerBlock
	for b, sh := range man.Shards {
		want := fmt.Sprintf("%s/block_%05d.safetensors", rollout.LatentDir, b)
		if sh.Block != b || filepath.ToSlash(sh.File) != want || sh.Frames != [2]int{b * F, (b + 1) * F} {
			return fmt.Errorf("%s: shard %d is block %d in %s, want block %d in %s", manPath, b, sh.Block, sh.File, b, want)
		}
		path := filepath.Join(dir, filepath.FromSlash(want))
		if st != nil && b < len(st.Shards) && st.Shards[b] != sh.SHA256 {
			return fmt.Errorf("latent shard %s (block %d): %s records SHA-256 %.12s…, the run's checkpoint %.12s…", path, b, rollout.ManifestFile, sh.SHA256, st.Shards[b])
		}
		if sh.SHA256 == "" {
			continue // a manifest from before shards were hashed
		}
		sum, err := filehash.WholeFile(path)
		if err != nil {
			return fmt.Errorf("latent shard of block %d: %w", b, err)
		}
		if sum != sh.SHA256 {
			return fmt.Errorf("latent shard %s (block %d) has SHA-256 %.12s…, the run recorded %.12s… (%s): the file was changed or damaged since the run wrote it",
				path, b, sum, sh.SHA256, rollout.ManifestFile)
		}
	}
	return nil
}
