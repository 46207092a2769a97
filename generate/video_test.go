package generate

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/runfolder"
	"github.com/densitykv/densitykv/video"
)

// TestResumeOlderCheckpointVideo: a run stopped after 2 of 4 blocks whose
// checkpoint records no lossless copies of its video segments (a
// checkpoint of an earlier version, which kept none) resumes with the
// copies made again from the latents, and its video.mp4 and horizon (3
// blocks: encoded after the resume) have the bytes of an uninterrupted
// run's.
func TestResumeOlderCheckpointVideo(t *testing.T) {
	mustFF(t)
	dir := t.TempDir()
	prompt := config.PromptSpec{Text: "a heron lands on a lake"}
	full := tinyPipeline(t, dir, "full", prompt)
	full.Generate.Horizons = []float64{2.25}
	if _, err := Generate(context.Background(), full, false, false, runfolder.Hooks{}); err != nil {
		t.Fatal(err)
	}
	gc := tinyPipeline(t, dir, "stop", prompt)
	gc.Generate.Horizons = []float64{2.25}
	gc.Run.SnapshotEvery = 1
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := Generate(ctx, gc, false, false, runfolder.Hooks{Block: func(b int, _ []runfolder.LogLine) {
		if b == 1 {
			cancel()
		}
	}}); !errors.Is(err, runfolder.ErrInterrupted) {
		t.Fatalf("stopped run: %v", err)
	}
	rd := filepath.Join(dir, "stop")
	gs, err := runfolder.ReadGenerateCheckpoint(rd)
	if err != nil || gs.NextBlock != 2 || len(gs.LosslessSHA256) != 2 {
		t.Fatalf("checkpoint at block %d with %d lossless copies (%v)", gs.NextBlock, len(gs.LosslessSHA256), err)
	}
	gs.LosslessSHA256 = nil
	if err := runfolder.WriteGenerateCheckpoint(filepath.Join(rd, runfolder.DirState, runfolder.FileCheckpoint), gs); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(rd, runfolder.DirState, runfolder.DirVideoState)); err != nil {
		t.Fatal(err)
	}
	var infos []string
	if _, err := Generate(context.Background(), gc, true, false, runfolder.Hooks{Info: func(m string) { infos = append(infos, m) }}); err != nil {
		t.Fatalf("resume: %v (%q)", err, infos)
	}
	for _, name := range []string{video.FileVideo, config.HorizonName(2.25)} {
		a, _ := os.ReadFile(filepath.Join(dir, "full", name))
		b, _ := os.ReadFile(filepath.Join(rd, name))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s: %d bytes after resume, uninterrupted %d, equal %v", name, len(b), len(a), bytes.Equal(a, b))
		}
	}
	if _, err := os.Stat(filepath.Join(rd, runfolder.DirState, runfolder.DirVideoState)); !os.IsNotExist(err) {
		t.Fatalf("the lossless copies are kept after the run is complete: %v", err)
	}
}
