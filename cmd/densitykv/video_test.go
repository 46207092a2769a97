package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/runfolder"
	"github.com/densitykv/densitykv/video"
)

// TestGenerateVideoSettings: --fps 24 --crf 30 reach the run: the resolved
// configuration records them (generate.video), video.mp4 and the segments
// are at exactly 24 fps (45 frames for 1.875 s), and the header says so;
// decode re-encodes at the run's settings by default (the run's bytes) and
// at its own --fps/--crf; out-of-range values are usage errors naming the
// flag; --resume refuses them; the dry run of a list reports them; a run
// whose video may not fit the free disk is warned about.
func TestGenerateVideoSettings(t *testing.T) {
	_, fp := ffTools(t)
	dir := t.TempDir()
	code, out, errs := run(t, context.Background(), pipelineArgs(t, dir, "v", "--fps", "24", "--crf", "30")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "video: 45 frames at 24 fps, crf 30;") || !strings.Contains(out, "(45 frames at 24 fps, one encode") {
		t.Fatalf("output lacks the video's settings:\n%s", out)
	}
	var gc config.GenerateConfig
	if err := runfolder.LoadConfig(filepath.Join(dir, "v"), &gc); err != nil || gc.Generate.Video != (config.VideoEncode{FPS: 24, CRF: 30}) {
		t.Fatalf("recorded generate.video %+v (%v)", gc.Generate.Video, err)
	}
	mp4 := filepath.Join(dir, "v", video.FileVideo)
	probe := func(p string, fps, frames int, dur string) {
		t.Helper()
		rate := []string{"", "8/1", "", "24/1"}[fps/8]
		info, err := video.Probe(fp, p)
		if err != nil || info.FrameRate != rate || info.AvgFrameRate != rate || info.NbFrames != frames || info.Duration != dur {
			t.Fatalf("%s: %+v (%v), want %d frames at exactly %s for %s s", p, info, err, frames, rate, dur)
		}
	}
	probe(mp4, 24, 45, "1.875000")
	probe(filepath.Join(dir, "v", video.DirSegments, "segment_00001.mp4"), 24, 12, "0.500000")
	made, _ := os.ReadFile(mp4)
	// decode: the run's settings, then its own.
	if code, out, errs := run(t, context.Background(), "decode", "--quiet", filepath.Join(dir, "v")); code != 0 || !strings.Contains(out, "(24 fps, crf 30)") {
		t.Fatalf("decode: exit %d: %s%s", code, out, errs)
	}
	if again, _ := os.ReadFile(mp4); !bytes.Equal(again, made) {
		t.Fatal("decode at the run's settings made other bytes than the run")
	}
	if code, _, errs := run(t, context.Background(), "decode", "--quiet", "--fps", "8", "--crf", "18", filepath.Join(dir, "v")); code != 0 {
		t.Fatalf("decode --fps 8 --crf 18: exit %d: %s", code, errs)
	}
	probe(mp4, 8, 45, "5.625000")
	if st, err := os.Stat(mp4); err != nil || st.Size() <= int64(len(made)) {
		t.Fatalf("crf 18 gave %v bytes, crf 30 %d (%v)", st.Size(), len(made), err)
	}
	if _, err := os.Stat(filepath.Join(dir, "v", runfolder.DirState, runfolder.DirDecodeState)); !os.IsNotExist(err) {
		t.Fatalf("decode left its lossless copies: %v", err)
	}
	// Out of range.
	for _, c := range []struct {
		args []string
		want string
	}{
		{pipelineArgs(t, dir, "bad", "--fps", "0"), "--fps (generate.video.fps) is 0"},
		{pipelineArgs(t, dir, "bad", "--crf", "52"), "--crf (generate.video.crf) is 52"},
		{[]string{"decode", "--crf", "60", filepath.Join(dir, "v")}, "--crf (generate.video.crf) is 60"},
		{[]string{"decode", "--fps", "1000", filepath.Join(dir, "v")}, "--fps (generate.video.fps) is 1000"},
		{[]string{"generate", "--out", dir, "--name", "v", "--resume", "--crf", "18"}, "drop [--crf]"},
	} {
		code, _, errs := run(t, context.Background(), c.args...)
		if code != exitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d: %s, want %q", c.args, code, errs, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "bad")); err == nil {
		t.Fatal("a refused run made its folder")
	}
	// A list's dry run.
	prompts := filepath.Join(dir, "prompts.txt")
	os.WriteFile(prompts, []byte("a heron\na crane\n"), 0o644)
	list := pipelineArgs(t, dir, "list", "--prompts", prompts, "--dry-run", "--fps", "12", "--crf", "23")
	for i := range list {
		if list[i] == "--prompt" {
			list = append(list[:i], list[i+2:]...) // the list's prompts instead
			break
		}
	}
	if code, out, errs := run(t, context.Background(), list...); code != 0 || !strings.Contains(out, "45 frames at 12 fps, crf 23") {
		t.Fatalf("list dry run %v: exit %d: %s%s", list, code, out, errs)
	}
	// Too little disk: a warning, the run goes on.
	defer func(m func(string) (int64, int64)) { machine = m }(machine)
	machine = func(string) (int64, int64) { return 1 << 40, 1000 }
	code, _, errs = run(t, context.Background(), pipelineArgs(t, dir, "small", "--blocks", "1", "--quiet")...)
	if code != 0 || !strings.Contains(errs, "warning: the video may need about") || !strings.Contains(errs, "1000 B is free") {
		t.Fatalf("exit %d: %s", code, errs)
	}
}
