package generate

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/densitykv/densitykv/golden"
	"github.com/densitykv/densitykv/vae"
	"github.com/densitykv/densitykv/video"
)

func pipelineVAE(t *testing.T) *vae.Model {
	t.Helper()
	m, err := vae.Load(filepath.Join(golden.PipelineVAE(t), "weights.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// randomLatents returns n latent frames [n][16][lh][lw] of N(0,1) values.
func randomLatents(n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	z := make([]float32, n*lc*lh*lw)
	for i := range z {
		z[i] = float32(r.NormFloat64())
	}
	return z
}

// The latent size of these tests: the decoder's time structure, which they
// test, does not depend on it, and 2×2 latents (16×16 pixels) keep the
// pure-Go build's decodes cheap.
const lc, lh, lw, fpb = 16, 2, 2, 3

// ph, pw are the pixel sizes.
const ph, pw = 8 * lh, 8 * lw

func blockOf(z []float32, b int) []float32 {
	n := fpb * lc * lh * lw
	return z[b*n : (b+1)*n]
}

// decodeFrom decodes latent frames [from, len) with a fresh decoder and
// returns the float32 pixels of the frames of latent frames [keep, len).
func decodeFrom(t *testing.T, m *vae.Model, z []float32, from, keep int) []float32 {
	t.Helper()
	dec, err := m.NewDecoder(vae.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := lc * lh * lw
	var out []float32
	for k := from; k < len(z)/n; k++ {
		err := dec.DecodeFunc(z[k*n:(k+1)*n], 1, lc, lh, lw, func(_ int, px []float32) error {
			if k >= keep {
				out = append(out, px...)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestWarmupFrames: the decoder's state after latent frame k depends on
// the WarmupFrames frames before it and no others: a decoder started
// WarmupFrames frames before k makes the same pixels from k on as one
// that decoded the whole stream, bit for bit, and one started 2 frames
// later does not (so the bound is nearly tight and the test can tell).
func TestWarmupFrames(t *testing.T) {
	m := pipelineVAE(t)
	R := WarmupFrames(m)
	if R != 39 {
		t.Fatalf("WarmupFrames = %d, want 39 (37.5 frames of causal context, rounded up, and the first-frame rule)", R)
	}
	const total, k = 42, 41
	z := randomLatents(total, 5)
	full := decodeFrom(t, m, z, 0, k)
	if got := decodeFrom(t, m, z, k-R, k); !slices.Equal(got, full) {
		t.Fatal("a decoder warmed up on WarmupFrames frames differs from the whole stream")
	}
	if got := decodeFrom(t, m, z, k-R+2, k); slices.Equal(got, full) {
		t.Fatal("a decoder warmed up on 2 frames fewer is still identical: the test cannot tell")
	}
}

// TestVideoStreamResume: a video stopped after block 17 of 20 and resumed
// (segments kept, the decoder warmed up on the blocks before) has the
// frames of an uninterrupted one, in mp4 and in PNG mode.
func TestVideoStreamResume(t *testing.T) {
	m := pipelineVAE(t)
	const blocks, stop = 16, 14 // the warm-up starts at block 1
	z := randomLatents(blocks*fpb, 9)
	ff, err := video.LookFFmpeg()
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"png", "mp4"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "mp4" {
				// The mp4 path: fewer blocks, the warm-up from 0.
				z := z[:4*fpb*lc*lh*lw]
				runResume(t, m, z, 4, 2, ff, nil)
				return
			}
			runResume(t, m, z, blocks, stop, "", nil)
		})
	}
}

// TestVideoStreamRemakesLossless: a video stopped after block 14 of 16
// whose segments' lossless copies of blocks 2 and 13 are lost is resumed
// with them made again from the latents (the decoder then starts at block
// 0, early enough for block 2), and its video.mp4 has the bytes of an
// uninterrupted one.
func TestVideoStreamRemakesLossless(t *testing.T) {
	ff, err := video.LookFFmpeg()
	if err != nil {
		t.Fatal(err)
	}
	runResume(t, pipelineVAE(t), randomLatents(16*fpb, 9), 16, 14, ff, []int{2, 13})
}

// runResume decodes blocks blocks of z into a video, and again stopped
// after block stop and resumed, with the lossless copies of blocks lose
// removed before it resumes; it compares the two videos: their PNG frames
// (ff empty), or their video.mp4 bytes.
func runResume(t *testing.T, m *vae.Model, z []float32, blocks, stop int, ff string, lose []int) {
	dir := t.TempDir()
	full, stopped := filepath.Join(dir, "full"), filepath.Join(dir, "stopped")
	run := func(out string, from, to int, resume bool) *VideoStream {
		s, err := NewVideoStream(m, VideoOptions{Dir: out, FFmpeg: ff, FPS: video.DefaultFPS, CRF: video.DefaultCRF})
		if err != nil {
			t.Fatal(err)
		}
		if resume {
			warm := 0
			err := s.Resume(from, fpb, lc, lh, lw, func(b int) ([]float32, error) { return blockOf(z, b), nil }, func(d, n int) { warm = n })
			if err != nil {
				t.Fatal(err)
			}
			warmFrom := func(b int) int { return max(0, b*fpb-WarmupFrames(m)) / fpb }
			first := warmFrom(from)
			for _, b := range lose {
				first = min(first, warmFrom(b))
			}
			if want := from - first; warm != want && from > 0 {
				t.Fatalf("warm-up decoded %d blocks, want %d", warm, want)
			}
		}
		for b := from; b < to; b++ {
			if err := s.Block(b, blockOf(z, b), fpb, lc, lh, lw); err != nil {
				t.Fatal(err)
			}
		}
		return s
	}
	a := run(full, 0, blocks, false)
	run(stopped, 0, stop, false)
	// A half-written segment or frame of the block being decoded at the stop.
	os.WriteFile(filepath.Join(stopped, video.DirSegments, "segment_00099.partial.mp4"), []byte("x"), 0o644)
	for _, b := range lose {
		if err := os.Remove(filepath.Join(stopped, video.DirLossless, fmt.Sprintf("segment_%05d.mkv", b))); err != nil {
			t.Fatal(err)
		}
	}
	b := run(stopped, stop, blocks, true)
	if a.PixelFrames() != 1+4*(blocks*fpb-1) || b.PixelFrames() != a.PixelFrames() {
		t.Fatalf("%d and %d pixel frames, want %d", a.PixelFrames(), b.PixelFrames(), 1+4*(blocks*fpb-1))
	}
	if ff == "" {
		for i := 0; i < a.PixelFrames(); i++ {
			x, _ := os.ReadFile(a.Folder().FramePath(i))
			y, _ := os.ReadFile(b.Folder().FramePath(i))
			if len(x) == 0 || !bytes.Equal(x, y) {
				t.Fatalf("frame %d differs after resume", i)
			}
		}
		if _, err := os.Stat(b.Folder().FramePath(a.PixelFrames())); err == nil {
			t.Fatal("extra frame after resume")
		}
		return
	}
	va, err := a.Finish()
	if err != nil {
		t.Fatal(err)
	}
	vb, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	fa, na, err := video.ReadFrames(ff, va, pw, ph)
	if err != nil {
		t.Fatal(err)
	}
	fb, nb, err := video.ReadFrames(ff, vb, pw, ph)
	if err != nil || na != a.PixelFrames() || nb != na || !bytes.Equal(fa, fb) {
		t.Fatalf("resumed video: %d frames, uninterrupted %d, equal %v (%v)", nb, na, bytes.Equal(fa, fb), err)
	}
	x, _ := os.ReadFile(va)
	y, _ := os.ReadFile(vb)
	if len(x) == 0 || !bytes.Equal(x, y) {
		t.Fatalf("resumed video.mp4: %d bytes, uninterrupted %d, equal %v", len(y), len(x), bytes.Equal(x, y))
	}
	// The copies made again hold the uninterrupted run's frames.
	for _, k := range lose {
		x, nx, err := video.ReadFrames(ff, a.Folder().LosslessPath(k), pw, ph)
		y, ny, err2 := video.ReadFrames(ff, b.Folder().LosslessPath(k), pw, ph)
		if err != nil || err2 != nil || nx == 0 || nx != ny || !bytes.Equal(x, y) {
			t.Fatalf("lossless copy of block %d made again: %d frames, uninterrupted %d, equal %v (%v, %v)", k, ny, nx, bytes.Equal(x, y), err, err2)
		}
	}
	ents, _ := os.ReadDir(filepath.Join(stopped, video.DirSegments))
	if len(ents) != blocks+1 { // the segments and list.txt
		t.Fatalf("%d files in segments/ after resume, want %d", len(ents), blocks+1)
	}
}
