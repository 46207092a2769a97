package generate

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/densitykv/densitykv/runfolder"
)

// The latent preview of a generate run (--preview): each finished block's
// latents drawn as images (three latent channels as RGB) under
// latent_preview/, assembled into latent_preview.mp4 when ffmpeg is
// installed. It is not the video: that is the VAE's (video.mp4, --vae).

// writePreview writes one PNG per latent frame: channels 0..2 mapped to RGB
// (each scaled by its ±3σ range), upscaled 4× with nearest neighbours.
func writePreview(dir string, b int, latents []float32, C, H, W int) error {
	pd := filepath.Join(dir, runfolder.DirPreview)
	if err := os.MkdirAll(pd, 0o755); err != nil {
		return err
	}
	const up = 4
	F := len(latents) / (C * H * W)
	for f := 0; f < F; f++ {
		img := image.NewRGBA(image.Rect(0, 0, W*up, H*up))
		var ch [3][]float32
		for c := 0; c < 3; c++ {
			cc := min(c, C-1)
			ch[c] = latents[(f*C+cc)*H*W : (f*C+cc+1)*H*W]
		}
		for y := 0; y < H*up; y++ {
			for x := 0; x < W*up; x++ {
				i := (y/up)*W + x/up
				px := func(v float32) uint8 {
					t := (float64(v)/3 + 1) / 2
					return uint8(math.Round(255 * math.Max(0, math.Min(1, t))))
				}
				img.Set(x, y, color.RGBA{px(ch[0][i]), px(ch[1][i]), px(ch[2][i]), 255})
			}
		}
		var buf bytes.Buffer
		if err := png.Encode(&buf, img); err != nil {
			return err
		}
		if err := runfolder.WriteFile(filepath.Join(pd, fmt.Sprintf("frame_%05d.png", b*F+f)), buf.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

// previewVideo assembles latent_preview/frame_*.png into latent_preview.mp4 with ffmpeg
// (4 frames/s), or says why it cannot.
func previewVideo(dir string) (string, error) {
	ff, err := exec.LookPath("ffmpeg")
	if err != nil {
		return "", errors.New("ffmpeg is not installed")
	}
	out := filepath.Join(dir, runfolder.FilePreviewVideo)
	c := exec.Command(ff, "-y", "-loglevel", "error", "-framerate", "4", "-i", filepath.Join(dir, runfolder.DirPreview, "frame_%05d.png"),
		"-c:v", "libx264", "-pix_fmt", "yuv420p", "-vf", "scale=trunc(iw/2)*2:trunc(ih/2)*2", out)
	if msg, err := c.CombinedOutput(); err != nil {
		return "", fmt.Errorf("ffmpeg failed: %v: %s", err, bytes.TrimSpace(msg))
	}
	return "latent preview video " + out, nil
}
