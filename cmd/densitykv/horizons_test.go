package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/video"
)

// TestHorizonsArePrefixes: --horizons writes video_<S>s.mp4 whose decoded
// frames are exactly the first 1 + 4·(latent frames − 1) frames of
// video.mp4 (0.75 s: 1 block, 3 latent frames, 9 frames; 1.5 s: 21, the
// whole 2-block video), also
// for a run stopped before a horizon and resumed; a horizon past the run,
// or without --vae, is refused.
func TestHorizonsArePrefixes(t *testing.T) {
	ff, _ := ffTools(t)
	dir := t.TempDir()
	args := pipelineArgs(t, dir, "h", "--blocks", "2", "--horizons", "0.75,1.5", "--quiet", "--snapshot-every", "1")
	stopAfterBlocks(t, 1, args)
	if code, _, errs := run(t, context.Background(), "generate", "--out", dir, "--name", "h", "--resume", "--quiet"); code != 0 {
		t.Fatalf("resume: exit %d: %s", code, errs)
	}
	check := func(when string) {
		full, n, err := video.ReadFrames(ff, filepath.Join(dir, "h", video.FileVideo), 64, 48)
		if err != nil || n != config.VideoFrames(6) {
			t.Fatalf("%s: video.mp4: %d frames, %v", when, n, err)
		}
		for _, c := range []struct {
			name   string
			frames int
		}{{"video_0.75s.mp4", 9}, {"video_1.5s.mp4", 21}} {
			got, n, err := video.ReadFrames(ff, filepath.Join(dir, "h", c.name), 64, 48)
			if err != nil || n != c.frames || !bytes.Equal(got, full[:len(got)]) {
				t.Fatalf("%s: %s: %d frames (want %d), a prefix of video.mp4: %v (%v)", when, c.name, n, c.frames, err == nil && bytes.Equal(got, full[:len(got)]), err)
			}
		}
	}
	check("resumed run")
	os.Remove(filepath.Join(dir, "h", "video_0.75s.mp4"))
	if code, _, errs := run(t, context.Background(), "decode", "--quiet", filepath.Join(dir, "h")); code != 0 {
		t.Fatalf("decode: exit %d: %s", code, errs)
	}
	check("decode")
	if config.VideoFrames(config.HorizonBlocks(30, 3)*3) != 477 || config.VideoFrames(config.HorizonBlocks(120, 3)*3) != 1917 || config.HorizonName(1.5) != "video_1.5s.mp4" {
		t.Fatal("30 s is 40 blocks, 120 latent frames, 477 frames; 120 s 1,917")
	}
	for _, c := range []struct {
		extra []string
		want  string
	}{
		{[]string{"--blocks", "1", "--horizons", "1.5"}, "needs 2 blocks"},
		{[]string{"--horizons", "1.5,0.75"}, "increasing order"},
		{[]string{"--horizons", "0"}, "not a positive"},
	} {
		code, _, errs := run(t, context.Background(), pipelineArgs(t, dir, "bad", c.extra...)...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d: %s", c.extra, code, errs)
		}
	}
}
