package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/generate"
	"github.com/densitykv/densitykv/golden"
	"github.com/densitykv/densitykv/runfolder"
)

// noiseArgs is a 2-block generate command line on the tiny golden model
// with the golden VAE (video.mp4), seed and extra appended.
func noiseArgs(t *testing.T, dir, name, text string, seed string, extra ...string) []string {
	a := []string{"generate", "--arch", "tiny", "--checkpoint", filepath.Join(golden.Wan(t), "weights.safetensors"), "--text", text,
		"--vae", filepath.Join(golden.PipelineVAE(t), "weights.pth"), "--latent-height", "6", "--latent-width", "8", "--blocks", "2",
		"--trace-step", "-1", "--out", dir, "--name", name, "--quiet", "--seed", seed}
	return append(a, extra...)
}

// h264 returns the video stream of an mp4, copied out without decoding
// (the container's metadata, which records the run's seed and input
// files, left behind).
func h264(t *testing.T, ff, mp4 string) []byte {
	t.Helper()
	out, err := exec.Command(ff, "-v", "error", "-i", mp4, "-map", "0:v", "-c", "copy", "-f", "h264", "-").Output()
	if err != nil || len(out) == 0 {
		t.Fatalf("ffmpeg %s: %v (%d bytes)", mp4, err, len(out))
	}
	return out
}

// runLatents reads a run folder's latent shards, in block order.
func runLatents(t *testing.T, dir string) [][]byte {
	t.Helper()
	fs, _ := filepath.Glob(filepath.Join(dir, "latents", "block_*.safetensors"))
	if len(fs) != 2 {
		t.Fatalf("%s: %d latent shards, want 2", dir, len(fs))
	}
	var out [][]byte
	for _, f := range fs {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// TestGenerateNoiseReplay: a run with --seed 2 replaying the --save-noise
// file of a --seed 1 run is that run byte for byte — its latent shards and
// its video stream —, while --seed 2 on its own is not; the replay records
// the noise file as an input. A resumed run with --noise and --save-noise
// writes the latents and noise file of an uninterrupted one, reading the
// noise file where it moved to (--resume --noise FILE).
func TestGenerateNoiseReplay(t *testing.T) {
	ff, _ := ffTools(t)
	dir := t.TempDir()
	text := tinyText(t, dir)
	n1, n2 := filepath.Join(dir, "n1.safetensors"), filepath.Join(dir, "n2.safetensors")
	for _, c := range []struct {
		name string
		args []string
	}{
		{"s1", noiseArgs(t, dir, "s1", text, "1", "--save-noise", n1)},
		{"s2", noiseArgs(t, dir, "s2", text, "2")},
		{"replay", noiseArgs(t, dir, "replay", text, "2", "--noise", n1, "--save-noise", n2)},
	} {
		if code, _, errs := run(t, context.Background(), c.args...); code != 0 {
			t.Fatalf("%s: exit %d: %s", c.name, code, errs)
		}
	}
	lat := func(n string) [][]byte { return runLatents(t, filepath.Join(dir, n)) }
	vid := func(n string) []byte { return h264(t, ff, filepath.Join(dir, n, "video.mp4")) }
	s1, s2, rp := lat("s1"), lat("s2"), lat("replay")
	for b := range s1 {
		if !bytes.Equal(s1[b], rp[b]) {
			t.Errorf("block %d: the replay's latent shard differs from the seed-1 run's", b)
		}
		if bytes.Equal(s1[b], s2[b]) {
			t.Errorf("block %d: seeds 1 and 2 give the same latents: the check would not see a replay that ignores --noise", b)
		}
	}
	if v1, v2, vr := vid("s1"), vid("s2"), vid("replay"); !bytes.Equal(v1, vr) || bytes.Equal(v1, v2) {
		t.Errorf("video streams: replay equal to seed 1 %v (want true), seed 2 equal to seed 1 %v (want false)", bytes.Equal(v1, vr), bytes.Equal(v1, v2))
	}
	var prov generate.Provenance
	if err := runfolder.ReadJSON(filepath.Join(dir, "replay", runfolder.FileGeneration), &prov); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range prov.Files {
		found = found || f.Role == "noise" && f.Path == n1
	}
	if !found {
		t.Errorf("generation.json of the replay does not record the noise file: %+v", prov.Files)
	}

	// Stopped after block 1 and resumed: the latents and --save-noise file
	// of the uninterrupted replay.
	args := noiseArgs(t, dir, "stop", text, "2", "--noise", n1, "--save-noise", filepath.Join(dir, "n3.safetensors"))
	stopAfterBlocks(t, 1, args)
	if _, err := os.Stat(filepath.Join(dir, "n3.safetensors")); err == nil {
		t.Error("a stopped run wrote --save-noise")
	}
	// The noise file moved: resume names the flag that gives its new
	// place, and takes it.
	moved := filepath.Join(dir, "moved.safetensors")
	if err := os.Rename(n1, moved); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := run(t, context.Background(), "generate", "--out", dir, "--name", "stop", "--resume", "--quiet"); code != exitUsage || !strings.Contains(errs, "--resume --noise FILE") {
		t.Fatalf("resume without the moved noise file: exit %d: %s", code, errs)
	}
	if code, _, errs := run(t, context.Background(), "generate", "--out", dir, "--name", "stop", "--resume", "--quiet", "--noise", moved); code != 0 {
		t.Fatalf("resume: exit %d: %s", code, errs)
	}
	st := lat("stop")
	for b := range s1 {
		if !bytes.Equal(s1[b], st[b]) {
			t.Errorf("block %d: the resumed replay's latent shard differs", b)
		}
	}
	a, _ := os.ReadFile(n2)
	b, _ := os.ReadFile(filepath.Join(dir, "n3.safetensors"))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Errorf("--save-noise after a resume: %d bytes, differs from the uninterrupted run's %d", len(b), len(a))
	}
}

// TestGenerateNoiseRefusals: a noise file that does not fit the run, and
// --save-noise onto an input, are refused before the run folder exists.
func TestGenerateNoiseRefusals(t *testing.T) {
	dir := t.TempDir()
	text := tinyText(t, dir)
	n := filepath.Join(dir, "n.safetensors")
	base := func(name string, extra ...string) []string {
		return append([]string{"generate", "--arch", "tiny", "--checkpoint", filepath.Join(golden.Wan(t), "weights.safetensors"), "--text", text,
			"--latent-height", "6", "--latent-width", "8", "--blocks", "1", "--trace-step", "-1", "--preview=false", "--out", dir, "--name", name, "--quiet"}, extra...)
	}
	if code, _, errs := run(t, context.Background(), base("one", "--save-noise", n)...); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--blocks", "2", "--noise", n}, "initial holds 3 frames, the run needs 6"},
		{[]string{"--steps", "1000,750,500", "--noise", n}, "2 draws per block"},
		{[]string{"--latent-width", "4", "--noise", n}, "the run's latent frames are [C, H, W]"},
		{[]string{"--noise", filepath.Join(dir, "none.safetensors")}, "none.safetensors"},
		{[]string{"--noise", n, "--save-noise", n}, "--save-noise " + n},
		{[]string{"--save-noise", filepath.Join(dir, "bad", runfolder.FileLog)}, "the run writes it"},
	} {
		code, _, errs := run(t, context.Background(), base("bad", c.args...)...)
		if code != exitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, %q (want %q)", c.args, code, errs, c.want)
		}
		if _, err := os.Stat(filepath.Join(dir, "bad")); err == nil {
			t.Errorf("%v: the run folder was made", c.args)
			os.RemoveAll(filepath.Join(dir, "bad"))
		}
	}
}
