package config

import (
	"os"
	"strings"
	"testing"
)

// TestVideoEncode: generate.video (--fps, --crf) defaults to the authors'
// 16 fps and crf 18, is read from YAML (a file without it, as a run folder
// of an earlier version, keeps the defaults), is recorded in the resolved
// configuration, and out-of-range values are refused naming flag and key.
func TestVideoEncode(t *testing.T) {
	if v := GenerateDefaults().Generate.Video; v != (VideoEncode{FPS: 16, CRF: 18}) {
		t.Fatalf("defaults %+v", v)
	}
	for _, c := range []struct {
		yaml string
		want VideoEncode
	}{
		{"generate: {video: {fps: 24}}\n", VideoEncode{24, 18}},
		{"generate: {video: {crf: 0}}\n", VideoEncode{16, 0}},
		{"generate: {blocks: 3}\n", VideoEncode{16, 18}},
	} {
		gc := GenerateDefaults()
		if _, err := Decode([]byte(c.yaml), &gc, true); err != nil || gc.Generate.Video != c.want {
			t.Errorf("%q: %+v (%v), want %+v", c.yaml, gc.Generate.Video, err, c.want)
		}
	}
	dir := t.TempDir()
	ckpt := dir + "/w.safetensors"
	os.WriteFile(ckpt, []byte("x"), 0o644)
	text := dir + "/t.safetensors"
	os.WriteFile(text, []byte("x"), 0o644)
	base := func(v VideoEncode) GenerateConfig {
		gc := GenerateDefaults()
		g := &gc.Generate
		g.Arch, g.Checkpoint, g.LatentHeight, g.LatentWidth, g.Blocks, g.Texts = "tiny", ckpt, 6, 8, 4, []TextSpec{{Path: text}}
		g.Video = v
		gc.Run.Out = dir
		return gc
	}
	for _, c := range []struct {
		v    VideoEncode
		want string
	}{
		{VideoEncode{0, 18}, "--fps (generate.video.fps) is 0, want 1..240"},
		{VideoEncode{241, 18}, "--fps (generate.video.fps) is 241"},
		{VideoEncode{16, -1}, "--crf (generate.video.crf) is -1, want 0..51"},
		{VideoEncode{16, 52}, "--crf (generate.video.crf) is 52"},
	} {
		gc := base(c.v)
		if err := gc.Resolve(NewKeys(), "test"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.v, err, c.want)
		}
	}
	gc := base(VideoEncode{240, 0})
	if err := gc.Resolve(NewKeys(), "test"); err != nil {
		t.Fatal(err)
	}
	y, err := MarshalGenerate(gc)
	if err != nil || !strings.Contains(string(y), "\n  video:\n    fps: 240\n    crf: 0\n") {
		t.Fatalf("resolved configuration (%v):\n%s", err, y)
	}
}

// TestVideoDisk: the video's disk estimate is zero without a VAE; its
// lossless copies are about the raw frames (an upper bound: 1.1 × 3 bytes
// a pixel, 1,917 frames of 480×832 for 120 s) and grow with the length, the
// mp4s with a lower crf and with every horizon.
func TestVideoDisk(t *testing.T) {
	g := GenerateDefaults().Generate
	g.Blocks = HorizonBlocks(120, 3)
	if d := g.VideoDisk(); d != (VideoDisk{}) {
		t.Fatalf("without a VAE: %+v", d)
	}
	g.VAE = "vae.pth"
	d := g.VideoDisk()
	raw := int64(1917) * 480 * 832 * 3
	if d.Lossless < raw || d.Lossless > raw*12/10 || d.MP4 <= 0 || d.MP4 > d.Lossless/2 || d.Total() != d.Lossless+d.MP4 {
		t.Fatalf("120 s at 480×832: %+v (raw frames %d bytes)", d, raw)
	}
	half := g
	half.Blocks /= 2
	if h := half.VideoDisk(); 2*h.Lossless < d.Lossless*99/100 || h.Lossless >= d.Lossless {
		t.Errorf("60 s: %+v, 120 s %+v", h, d)
	}
	better := g
	better.Video.CRF = 12
	if b := better.VideoDisk(); b.MP4 <= d.MP4 || b.Lossless != d.Lossless {
		t.Errorf("crf 12: %+v, crf 18 %+v", b, d)
	}
	hz := g
	hz.Horizons = []float64{30, 60}
	if h := hz.VideoDisk(); h.MP4 <= d.MP4 || h.Lossless != d.Lossless {
		t.Errorf("with horizons: %+v, without %+v", h, d)
	}
}
