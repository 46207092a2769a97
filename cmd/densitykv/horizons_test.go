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

// TestHorizonsArePrefixes: --horizons writes video_<S>s.mp4, each one
// continuous encode (exactly 16 fps) of the first 1 + 4·(latent frames − 1)
// frames of the rollout (0.75 s: 1 block, 3 latent frames, 9 frames; 1.5 s:
// 21, the whole 2-block video, so the bytes of video.mp4), also for a run
// stopped before a horizon and resumed, and decode makes the same files
// again; a horizon past the run, or without --vae, is refused.
func TestHorizonsArePrefixes(t *testing.T) {
	ff, fp := ffTools(t)
	dir := t.TempDir()
	args := pipelineArgs(t, dir, "h", "--blocks", "2", "--horizons", "0.75,1.5", "--quiet", "--snapshot-every", "1")
	stopAfterBlocks(t, 1, args)
	if code, _, errs := run(t, context.Background(), "generate", "--out", dir, "--name", "h", "--resume", "--quiet"); code != 0 {
		t.Fatalf("resume: exit %d: %s", code, errs)
	}
	names := []string{video.FileVideo, "video_0.75s.mp4", "video_1.5s.mp4"}
	check := func(when string) map[string][]byte {
		files := map[string][]byte{}
		for _, name := range names {
			files[name], _ = os.ReadFile(filepath.Join(dir, "h", name))
		}
		full, n, err := video.ReadFrames(ff, filepath.Join(dir, "h", video.FileVideo), 64, 48)
		if err != nil || n != config.VideoFrames(6) {
			t.Fatalf("%s: video.mp4: %d frames, %v", when, n, err)
		}
		if len(files[names[0]]) == 0 || !bytes.Equal(files["video_1.5s.mp4"], files[names[0]]) {
			t.Fatalf("%s: video_1.5s.mp4, the whole rollout, differs from video.mp4", when)
		}
		info, err := video.Probe(fp, filepath.Join(dir, "h", "video_0.75s.mp4"))
		if err != nil || info.Frames != 9 || info.NbFrames != 9 || info.AvgFrameRate != "16/1" || info.Duration != "0.562500" {
			t.Fatalf("%s: video_0.75s.mp4: %+v, want 9 frames at exactly 16 fps (%v)", when, info, err)
		}
		// Its frames are the first 9 of video.mp4, encoded on their own.
		got, _, err := video.ReadFrames(ff, filepath.Join(dir, "h", "video_0.75s.mp4"), 64, 48)
		if err != nil {
			t.Fatal(err)
		}
		fb := 64 * 48 * 3
		for i := 0; i < 9; i++ {
			own := meanAbsDiff(got[i*fb:(i+1)*fb], full[i*fb:(i+1)*fb])
			for j := 0; j < n; j++ {
				if d := meanAbsDiff(got[i*fb:(i+1)*fb], full[j*fb:(j+1)*fb]); j != i && d <= own {
					t.Fatalf("%s: video_0.75s.mp4 frame %d is as near to frame %d of video.mp4 (%.2f levels) as to its own (%.2f)", when, i, j, d, own)
				}
			}
		}
		return files
	}
	resumed := check("resumed run")
	os.Remove(filepath.Join(dir, "h", "video_0.75s.mp4"))
	if code, _, errs := run(t, context.Background(), "decode", "--quiet", filepath.Join(dir, "h")); code != 0 {
		t.Fatalf("decode: exit %d: %s", code, errs)
	}
	decoded := check("decode")
	for _, name := range names {
		if !bytes.Equal(decoded[name], resumed[name]) {
			t.Errorf("decode made %s with other bytes than the run", name)
		}
	}
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

// meanAbsDiff is the mean absolute difference of two frames, in levels.
func meanAbsDiff(a, b []byte) float64 {
	var sum int
	for k, v := range a {
		d := int(v) - int(b[k])
		sum += max(d, -d)
	}
	return float64(sum) / float64(len(a))
}
