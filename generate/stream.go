package generate

import (
	"fmt"
	"math"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/vae"
	"github.com/densitykv/densitykv/video"
)

// VideoOptions configures a VideoStream.
type VideoOptions struct {
	Dir string // the video's folder (segments/, frames/, video.mp4)
	// FFmpeg is the ffmpeg executable (video.LookFFmpeg); empty writes PNG
	// frames.
	FFmpeg string
	Tags   []video.Tag
	// FPS and CRF are the mp4 encode's frame rate and x264 constant rate
	// factor (video.Options); Lossless is the folder of the segments'
	// lossless copies (default: inside Dir).
	FPS, CRF int
	Lossless string
	// Mean and Std de-normalise the latents (nil = Wan2.1's statistics).
	Mean, Std []float32
	// Precision is the decoder's (vae.Options.Precision): generate's
	// --precision.
	Precision gemm.Precision
}

// VideoStream decodes a rollout's blocks as they finish (the streaming
// VAE decoder, its feature caches carried from block to block) into one
// video segment per block: the video grows while the rollout runs, and a
// stop loses no finished block.
type VideoStream struct {
	m      *vae.Model
	dec    *vae.Decoder
	folder *video.Folder
	blocks int // blocks decoded (the next one expected)
	pixels int // pixel frames written
	rgb    []byte
	broken error
	// onFrame sees every pixel frame Block writes (OnFrame).
	onFrame func(rgb []byte, h, w int) error
}

// OnFrame makes Block call fn with every pixel frame of a block as it is
// written: rgb24 bytes [h][w][3] (ffmpeg's, the video's values), valid
// during the call. An error from fn fails the block as a write error
// does. Frames decoded by Resume's warm-up are not passed.
func (s *VideoStream) OnFrame(fn func(rgb []byte, h, w int) error) { s.onFrame = fn }

// NewVideoStream starts a video decoded by m into o.Dir.
func NewVideoStream(m *vae.Model, o VideoOptions) (*VideoStream, error) {
	dec, err := m.NewDecoder(vae.Options{Mean: o.Mean, Std: o.Std, Precision: o.Precision})
	if err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}
	f, err := video.Open(o.Dir, video.Options{FFmpeg: o.FFmpeg, Tags: o.Tags, FPS: o.FPS, CRF: o.CRF, Lossless: o.Lossless})
	if err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}
	return &VideoStream{m: m, dec: dec, folder: f}, nil
}

// Folder is the video folder.
func (s *VideoStream) Folder() *video.Folder { return s.folder }

// Blocks returns the number of blocks in the video so far.
func (s *VideoStream) Blocks() int { return s.blocks }

// PixelFrames returns the number of frames in the video so far.
func (s *VideoStream) PixelFrames() int { return s.pixels }

// FLOPs returns the decoder's floating-point operations so far.
func (s *VideoStream) FLOPs() int64 { return s.dec.FLOPs() }

// Bytes returns the decoder's frame buffers (its feature caches and
// working frames).
func (s *VideoStream) Bytes() int64 { return s.dec.Bytes() }

// Block decodes block b's latents z [t][c][h][w] (frame-major, as the
// rollout hands them out) into segment b of the video: its pixel frames
// are piped to the encoder as the decoder makes them. Blocks come in order.
// An error leaves the stream unusable (the decoder has consumed part of
// the block); a run that stops there continues with Resume.
func (s *VideoStream) Block(b int, z []float32, t, c, h, w int) error {
	if s.broken != nil {
		return fmt.Errorf("generate: video: block %d after an earlier failure: %w", b, s.broken)
	}
	if b != s.blocks {
		return fmt.Errorf("generate: video: block %d decoded after %d blocks, want block %d", b, s.blocks, s.blocks)
	}
	sc := s.m.Cfg.SpatialScale()
	seg, err := s.folder.Begin(b, s.pixels, sc*w, sc*h)
	if err != nil {
		return err
	}
	n := 3 * sc * w * sc * h
	before := s.dec.LatentFrames()
	if len(s.rgb) != n {
		s.rgb = make([]byte, n)
	}
	err = s.dec.DecodeFunc(z, t, c, h, w, func(_ int, rgb []float32) error {
		vae.RGB24(s.rgb, rgb, sc*h, sc*w)
		if s.onFrame != nil {
			if err := s.onFrame(s.rgb, sc*h, sc*w); err != nil {
				return err
			}
		}
		return seg.WriteFrame(s.rgb)
	})
	if err == nil {
		err = seg.Close()
	} else {
		seg.Abort()
	}
	if err != nil {
		if s.dec.LatentFrames() != before {
			s.broken = err // the decoder consumed (part of) the block
		}
		return fmt.Errorf("generate: video: block %d: %w", b, err)
	}
	s.pixels += seg.Frames()
	s.blocks++
	return nil
}

// Finish encodes video.mp4 from the segments' lossless copies (one
// continuous encode: video.Folder.Video) and returns its path; without
// ffmpeg it returns "" and video.ErrNoFFmpeg (the frames are PNG files).
func (s *VideoStream) Finish() (string, error) {
	out, n, err := s.folder.Video()
	if err == nil && n != s.pixels {
		err = fmt.Errorf("generate: video: %s has %d frames, the stream %d", out, n, s.pixels)
	}
	return out, err
}

// WarmupFrames is the number of latent frames before a point of a stream
// that decide the decoder's state there: the temporal receptive field of
// its causal convolutions. Each conv of KT taps whose input runs at r
// pixel frames per latent frame looks back (KT−1)/r latent frames, and the
// decoder is a chain of them (no recursion), so the state after latent
// frame k is a function of frames k−WarmupFrames+1..k alone; one frame
// more covers the first-frame rule of a stream started inside the window.
// (39 for Wan2.1's VAE.)
func WarmupFrames(m *vae.Model) int {
	d := &m.Decoder
	back, rate := 0.0, 1.0
	conv := func(c *vae.Conv) {
		if c != nil && c.KT > 1 {
			back += float64(c.KT-1) / rate
		}
	}
	res := func(r *vae.ResidualBlock) {
		conv(&r.Conv2)
		conv(&r.Conv6)
		conv(r.Shortcut)
	}
	conv(&d.Conv1)
	res(&d.Middle0)
	res(&d.Middle2)
	for _, u := range d.Upsamples {
		if u.Res != nil {
			res(u.Res)
		}
		if u.Up != nil && u.Up.TimeConv != nil {
			conv(u.Up.TimeConv)
			rate *= float64(u.Up.TimeConv.Cout / u.Up.TimeConv.Cin) // time_conv doubles the frames
		}
	}
	conv(&d.HeadConv)
	return int(math.Ceil(back)) + 1
}

// Resume prepares the stream to continue a video at block start of
// framesPerBlock latent frames each: the video keeps its segments
// 0..start−1 (or PNG frames) and drops the rest, and the decoder is warmed
// up on the latent frames before the block that decide its state
// (WarmupFrames, read with latents(block) [framesPerBlock][c][h][w]);
// their pixels are discarded. The blocks decoded after it equal an
// uninterrupted stream's bit for bit. A kept segment whose lossless copy
// is missing (video.Folder.HasLossless: lost, or removed as damaged) has
// it written again: the decoder then starts early enough to decode that
// block exactly. progress, when set, is called after each block decoded
// (warm-up and copies).
func (s *VideoStream) Resume(start, framesPerBlock, c, h, w int, latents func(block int) ([]float32, error), progress func(done, total int)) error {
	if s.blocks != 0 || s.dec.LatentFrames() != 0 {
		return fmt.Errorf("generate: video: Resume on a stream already under way")
	}
	if start < 0 || framesPerBlock <= 0 {
		return fmt.Errorf("generate: video: resume at block %d of %d frames", start, framesPerBlock)
	}
	nLat := start * framesPerBlock
	pixels := s.m.Cfg.PixelFrames(0, nLat)
	if err := s.folder.Truncate(start, pixels); err != nil {
		return fmt.Errorf("generate: video: resume at block %d: %w", start, err)
	}
	warmFrom := func(b int) int { return max(0, b*framesPerBlock-WarmupFrames(s.m)) / framesPerBlock }
	from := warmFrom(start)
	missing := make([]bool, start)
	for b := 0; b < start && s.folder.MP4(); b++ {
		if missing[b] = !s.folder.HasLossless(b); missing[b] {
			from = min(from, warmFrom(b))
		}
	}
	sc := s.m.Cfg.SpatialScale()
	for b := from; b < start; b++ {
		z, err := latents(b)
		if err != nil {
			return fmt.Errorf("generate: video: warm-up block %d: %w", b, err)
		}
		keep := func(int, []float32) error { return nil }
		var seg *video.Segment
		if missing[b] {
			if seg, err = s.folder.BeginLossless(b, sc*w, sc*h); err != nil {
				s.dec.Reset()
				return fmt.Errorf("generate: video: block %d: %w", b, err)
			}
			if len(s.rgb) != 3*sc*w*sc*h {
				s.rgb = make([]byte, 3*sc*w*sc*h)
			}
			keep = func(_ int, rgb []float32) error {
				vae.RGB24(s.rgb, rgb, sc*h, sc*w)
				return seg.WriteFrame(s.rgb)
			}
		}
		err = s.dec.DecodeFunc(z, framesPerBlock, c, h, w, keep)
		if seg != nil {
			if err == nil {
				err = seg.Close()
			} else {
				seg.Abort()
			}
		}
		if err != nil {
			s.dec.Reset()
			return fmt.Errorf("generate: video: warm-up block %d: %w", b, err)
		}
		if progress != nil {
			progress(b-from+1, start-from)
		}
	}
	s.blocks, s.pixels = start, pixels
	return nil
}
