package generate

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/video"
)

// horizonVideos writes a run's shorter videos (generate.horizons) as
// exact prefixes of its one rollout: the horizon of s seconds is one
// continuous encode of the decoded frames of the first
// config.HorizonBlocks(s) blocks (video.Folder.Encode, from the segments'
// lossless copies), written as soon as its last block is decoded. 30 s of
// 3-frame blocks is 40 blocks, 120 latent frames, 477 video frames
// (1 + 4·(120 − 1); 29.8 s at 16 fps).
type horizonVideos struct {
	folder  *video.Folder
	fpb     int // latent frames per block
	seconds []float64
	blocks  []int
}

func newHorizonVideos(f *video.Folder, g config.GenerateSection) *horizonVideos {
	h := &horizonVideos{folder: f, seconds: g.Horizons, fpb: g.BlockFrames()}
	for _, s := range g.Horizons {
		h.blocks = append(h.blocks, config.HorizonBlocks(s, h.fpb))
	}
	return h
}

// path is horizon k's file.
func (h *horizonVideos) path(k int) string {
	return filepath.Join(h.folder.Dir(), config.HorizonName(h.seconds[k]))
}

// start prepares the folder for a run continuing at block start (0: a new
// run): the horizons of completed blocks are written when missing, later
// ones removed (a stopped run may have none of them yet).
func (h *horizonVideos) start(start int) error {
	for k, b := range h.blocks {
		if b > start || !h.folder.MP4() {
			if err := os.Remove(h.path(k)); err != nil && !os.IsNotExist(err) {
				return err
			}
			continue
		}
		if _, err := os.Stat(h.path(k)); err != nil {
			if err := h.write(k); err != nil {
				return err
			}
		}
	}
	return nil
}

// block is called once block b's segment is finished.
func (h *horizonVideos) block(b int) error {
	for k, n := range h.blocks {
		if n == b+1 {
			if err := h.write(k); err != nil {
				return err
			}
		}
	}
	return nil
}

func (h *horizonVideos) write(k int) error {
	if !h.folder.MP4() {
		return nil // PNG frames: the horizon is the first frames of frames/
	}
	_, n, err := h.folder.Encode(h.blocks[k], config.HorizonName(h.seconds[k]))
	if err != nil {
		return fmt.Errorf("horizon %g s: %w", h.seconds[k], err)
	}
	if want := config.VideoFrames(h.blocks[k] * h.fpb); n != want {
		os.Remove(h.path(k))
		return fmt.Errorf("horizon %g s: %s has %d frames, want %d", h.seconds[k], h.path(k), n, want)
	}
	return nil
}

// files are the horizons' videos that exist after block done−1.
func (h *horizonVideos) files(done int) []string {
	var out []string
	for k, b := range h.blocks {
		if b <= done && h.folder.MP4() {
			out = append(out, h.path(k))
		}
	}
	return out
}

// describe says what each horizon holds, for messages.
func (h *horizonVideos) describe() string {
	s := ""
	for k, b := range h.blocks {
		latent := b * h.fpb
		if k > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s: %d blocks, %d latent frames, %d frames", config.HorizonName(h.seconds[k]), b, latent, config.VideoFrames(latent))
	}
	return s
}
