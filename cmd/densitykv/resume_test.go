package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/device"
	"github.com/densitykv/densitykv/golden"
	"github.com/densitykv/densitykv/ragae/aetest"
	"github.com/densitykv/densitykv/rollout"
	"github.com/densitykv/densitykv/runfolder"
	"github.com/densitykv/densitykv/runfolder/runfoldertest"
)

// genResumeArgs is a generate command line on the tiny golden model that
// records its stream next to the run folder.
func genResumeArgs(t *testing.T, dir, name, text string, blocks int, extra ...string) []string {
	g := golden.Wan(t)
	a := []string{"generate", "--arch", "tiny", "--checkpoint", filepath.Join(g, "weights.safetensors"),
		"--text", text, "--latent-height", "6", "--latent-width", "8", "--blocks", fmt.Sprint(blocks),
		"--out", dir, "--name", name, "--quiet", "--record-stream", filepath.Join(dir, name+".dkvs")}
	return append(a, extra...)
}

// tinyText writes the golden rollout's text context to a file of its own.
func tinyText(t *testing.T, dir string) string {
	g := golden.Wan(t)
	s, err := checkpoint.OpenSafetensors(filepath.Join(g, "rollout_native.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, shape, err := s.Float32("context")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "text.safetensors")
	if err := checkpoint.WriteSafetensorsFile(p, []checkpoint.WriteTensor{{Name: "context", Shape: shape, Data: ctx}}, nil); err != nil {
		t.Fatal(err)
	}
	return p
}

// stopAfterBlocks runs args, cancelling the context once n blocks are done
// (Ctrl-C during block n−1: the run stops after it).
func stopAfterBlocks(t *testing.T, n int, args []string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := 0
	genHook = func() {
		done++
		if done == n {
			cancel()
		}
	}
	code, _, errs := run(t, ctx, args...)
	genHook = nil
	if code != exitInterrupted || !strings.Contains(errs, fmt.Sprintf("with %d of", n)) || !strings.Contains(errs, "--resume") {
		t.Fatalf("stopped generate: exit %d: %s", code, errs)
	}
}

// Wall-clock fields: the only bytes of the run folder that may differ
// between two runs of the same configuration.
var (
	timingLog      = regexp.MustCompile(`"(update_seconds|attend_seconds)":[-+0-9.eE]+`)
	timingManifest = regexp.MustCompile(`"(seconds|created)": ("[^"]*"|[-+0-9.eE]+)`)
	timingSummary  = regexp.MustCompile(`"(elapsed_seconds|update_seconds)": [-+0-9.eE]+`)
	// The device a run started on (generation.json): the bits are the
	// same on every device.
	deviceRecord = regexp.MustCompile(`"device": "[^"]*"`)
)

// runFiles reads every file of a run folder (but state/, the resume
// checkpoint) with its wall-clock fields and device blanked and its own
// name replaced by RUN.
func runFiles(t *testing.T, dir, name string) map[string][]byte {
	t.Helper()
	rd := filepath.Join(dir, name)
	out := runfoldertest.Files(t, rd, func(rel string, b []byte) ([]byte, error) {
		switch rel {
		case runfolder.FileSummary:
			b = timingSummary.ReplaceAll(b, []byte(`"$1": 0`))
			return bytes.ReplaceAll(b, []byte(rd), []byte("RUN")), nil
		case runfolder.FileConfig:
			return blankConfig(b, func(gc *config.GenerateConfig) {
				gc.Run.Name, gc.Generate.RecordStream, gc.Generate.Device = "RUN", "RUN.dkvs", device.CPU
			})
		case runfolder.FileGeneration:
			return deviceRecord.ReplaceAll(b, []byte(`"device": "DEVICE"`)), nil
		}
		return blankTimings(rel, b), nil
	})
	rec, err := os.ReadFile(filepath.Join(dir, name+".dkvs"))
	switch {
	case err == nil:
		out["(record stream)"] = rec
	case !os.IsNotExist(err):
		t.Fatal(err)
	}
	return out
}

// blankTimings blanks the wall-clock fields of a memory log or a latents
// manifest (rel names the file); other files are returned as they are.
func blankTimings(rel string, b []byte) []byte {
	switch rel {
	case runfolder.FileLog:
		return timingLog.ReplaceAll(b, []byte(`"$1":0`))
	case rollout.ManifestFile:
		return timingManifest.ReplaceAll(b, []byte(`"$1": 0`))
	}
	return b
}

// blankConfig rewrites a config.resolved.yaml with set applied (the places
// two compared runs differ in).
func blankConfig(b []byte, set func(*config.GenerateConfig)) ([]byte, error) {
	var gc config.GenerateConfig
	if err := yaml.Unmarshal(b, &gc); err != nil {
		return nil, err
	}
	set(&gc)
	return config.MarshalGenerate(gc)
}

// sameRunFiles compares two run folders file by file, byte for byte (after
// runFiles' blanking of wall-clock fields).
func sameRunFiles(t *testing.T, dir, want, got string) {
	t.Helper()
	sameRunFilesStream(t, dir, want, got, true)
}

// sameRunFilesStream is sameRunFiles of two runs that recorded a stream
// (beside the folder, compared too) or, when !stream, did not.
func sameRunFilesStream(t *testing.T, dir, want, got string, stream bool) {
	t.Helper()
	a, b := runFiles(t, dir, want), runFiles(t, dir, got)
	var names []string
	for f := range a {
		names = append(names, f)
	}
	for f := range b {
		if _, ok := a[f]; !ok {
			t.Errorf("%s/%s is not in the uninterrupted run", got, f)
		}
	}
	sort.Strings(names)
	for _, f := range names {
		y, ok := b[f]
		switch {
		case !ok:
			t.Errorf("resumed run lacks %s", f)
		case !bytes.Equal(a[f], y):
			t.Errorf("%s differs after resume (%d vs %d bytes)", f, len(a[f]), len(y))
		}
	}
	for _, f := range []string{runfolder.FileLog, rollout.ManifestFile, "latents/block_00000.safetensors", "attention_trace.json", "(record stream)",
		runfolder.FileTraceLayers, runfolder.FileProvenance, runfolder.FileLineage} {
		dkv := f == runfolder.FileProvenance || f == runfolder.FileLineage
		if _, ok := a[f]; !ok && (!dkv || strings.Contains(want, "densitykv")) && (stream || f != "(record stream)") {
			t.Errorf("compared folders lack %s", f)
		}
	}
}

// TestGenerateResumeIsIdentical stops generate after 5 of 7 blocks and
// resumes it from the checkpoint: no completed block is computed again
// (the rollout starts at block 5), and every file of the run folder — latent
// shards, manifest, memory log, attention trace, provenance, admissions,
// storage, summary, previews, plots — and the recorded stream equal an
// uninterrupted run's byte for byte, wall-clock fields aside.
func TestGenerateResumeIsIdentical(t *testing.T) {
	dir := t.TempDir()
	text := tinyText(t, dir)
	// LongLive-RAG with the authors' autoencoder: its descriptors of the
	// frames before the stop come from the snapshot (block 6 retrieves
	// frame 1).
	aePath := filepath.Join(dir, "ae_latent_mem.pt")
	if err := aetest.Write(aePath, aetest.Config{InChannels: 16, SpatialH: 60, SpatialW: 104, LatentDim: 24, HiddenDims: []int{8, 16}}, 5); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		policy string
		extra  []string
		name   string
	}{
		{"native", nil, ""},
		{"densitykv", []string{"--capacity", "24", "--sigma", "4", "--ordering", "max", "--snapshot-every", "2"}, ""},
		{"deep-forcing", nil, ""},
		{"longlive-rag", []string{"--snapshot-every", "5"}, ""}, // the stop falls on a periodic checkpoint
		{"longlive-rag", []string{"--rag-ae", aePath}, "longlive-rag-ae"},
	} {
		name := cmp.Or(c.name, c.policy)
		t.Run(name, func(t *testing.T) {
			extra := append([]string{"--policy", c.policy}, c.extra...)
			if code, _, errs := run(t, context.Background(), genResumeArgs(t, dir, name+"-full", text, 7, extra...)...); code != 0 {
				t.Fatalf("full run: %s", errs)
			}
			stop := name + "-stop"
			stopAfterBlocks(t, 5, genResumeArgs(t, dir, stop, text, 7, extra...))
			cp, err := runfolder.ReadGenerateCheckpoint(filepath.Join(dir, stop))
			if err != nil {
				t.Fatal(err)
			}
			snaps, _ := filepath.Glob(filepath.Join(dir, stop, runfolder.DirState, "policy-*.snap"))
			if cp.NextBlock != 5 || len(snaps) != 1 || filepath.Base(snaps[0]) != cp.Snapshot || cp.Snapshot != runfolder.SnapshotName(0, c.policy, 5) {
				t.Fatalf("checkpoint at block %d with snapshot %q; state holds %v", cp.NextBlock, cp.Snapshot, snaps)
			}
			// The resumed run computes only blocks 5 and 6.
			blocks := 0
			genHook = func() { blocks++ }
			code, _, errs := run(t, context.Background(), "generate", "--out", dir, "--name", stop, "--resume")
			genHook = nil
			if code != 0 {
				t.Fatalf("resume: exit %d: %s", code, errs)
			}
			if blocks != 2 || !strings.Contains(errs, "continuing at block 5 of 7") {
				t.Fatalf("resume computed %d blocks, want 2; stderr %q", blocks, errs)
			}
			sameRunFiles(t, dir, name+"-full", stop)
			snaps, _ = filepath.Glob(filepath.Join(dir, stop, runfolder.DirState, "policy-*.snap"))
			if len(snaps) != 0 {
				t.Errorf("complete run keeps snapshots %v", snaps)
			}
			code, _, errs = run(t, context.Background(), "generate", "--out", dir, "--name", stop, "--resume")
			if code != exitUsage || !strings.Contains(errs, "already complete") {
				t.Fatalf("resume of a complete run: exit %d %q", code, errs)
			}
		})
	}
}

// crash is the panic value of a simulated crash.
type crash struct{}

// TestGenerateResumeAfterCrash: a run that dies without saving (after a
// periodic checkpoint at block 4, with block 4 already in the manifest, the
// memory log, the previews, the trace and the recorded stream) resumes from
// that checkpoint, cuts every file back to it, and ends identical to an
// uninterrupted run.
func TestGenerateResumeAfterCrash(t *testing.T) {
	dir := t.TempDir()
	text := tinyText(t, dir)
	extra := []string{"--policy", "densitykv", "--capacity", "24", "--sigma", "4", "--ordering", "max", "--snapshot-every", "2"}
	if code, _, errs := run(t, context.Background(), genResumeArgs(t, dir, "full", text, 6, extra...)...); code != 0 {
		t.Fatalf("full run: %s", errs)
	}
	done := 0
	genHook = func() {
		done++
		if done == 5 {
			panic(crash{})
		}
	}
	func() {
		defer func() {
			if r := recover(); r != (crash{}) {
				t.Fatalf("recovered %v, want the simulated crash", r)
			}
		}()
		run(t, context.Background(), genResumeArgs(t, dir, "crash", text, 6, extra...)...)
	}()
	genHook = nil
	man, err := rollout.ReadManifest(filepath.Join(dir, "crash"))
	if err != nil || len(man.Shards) != 5 {
		t.Fatalf("the crashed run's manifest lists %d shards (%v), want 5", len(man.Shards), err)
	}
	// Resumed and stopped at once: the folder is cut back to the checkpoint.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if code, _, errs := run(t, ctx, "generate", "--out", dir, "--name", "crash", "--resume", "--quiet"); code != exitInterrupted {
		t.Fatalf("resume stopped before its first block: exit %d: %s", code, errs)
	}
	man, _ = rollout.ReadManifest(filepath.Join(dir, "crash"))
	lines, _ := runfolder.ReadLog(filepath.Join(dir, "crash", runfolder.FileLog))
	_, errShard := os.Stat(filepath.Join(dir, "crash", "latents", "block_00004.safetensors"))
	_, errFrame := os.Stat(filepath.Join(dir, "crash", "latent_preview", "frame_00012.png"))
	if len(man.Shards) != 4 || len(lines) != 4*2 || errShard == nil || errFrame == nil {
		t.Fatalf("after the crash, the checkpoint is at block 4, but the folder has %d shards, %d log lines, shard 4 (%v), frame 12 (%v)",
			len(man.Shards), len(lines), errShard, errFrame)
	}
	blocks := 0
	genHook = func() { blocks++ }
	code, _, errs := run(t, context.Background(), "generate", "--out", dir, "--name", "crash", "--resume")
	genHook = nil
	if code != 0 || blocks != 2 {
		t.Fatalf("resume: exit %d, %d blocks computed (want 2 from the block-4 checkpoint): %s", code, blocks, errs)
	}
	sameRunFiles(t, dir, "full", "crash")
}

// TestGenerateResumeRefusesMismatch: a damaged or foreign checkpoint,
// snapshot or latent shard, an edited configuration and a changed text file
// each stop --resume with an error naming the fault; the intact folder then
// resumes.
func TestGenerateResumeRefusesMismatch(t *testing.T) {
	dir := t.TempDir()
	text := tinyText(t, dir)
	args := genResumeArgs(t, dir, "r", text, 4, "--policy", "densitykv", "--capacity", "24", "--sigma", "4", "--ordering", "max", "--preview=false")
	stopAfterBlocks(t, 2, args)
	rd := filepath.Join(dir, "r")
	pristine := filepath.Join(dir, "pristine")
	copyTree(t, rd, pristine)
	rec, _ := os.ReadFile(filepath.Join(dir, "r.dkvs"))
	textData, _ := os.ReadFile(text)
	restore := func() {
		os.RemoveAll(rd)
		copyTree(t, pristine, rd)
		os.WriteFile(filepath.Join(dir, "r.dkvs"), rec, 0o644)
		os.WriteFile(text, textData, 0o644)
	}
	edit := func(path, old, new string) {
		b, err := os.ReadFile(path)
		if err != nil || !bytes.Contains(b, []byte(old)) {
			t.Fatalf("%s has no %q (%v)", path, old, err)
		}
		os.WriteFile(path, bytes.Replace(b, []byte(old), []byte(new), 1), 0o644)
	}
	flip := func(path string, at int) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if at < 0 {
			at += len(b)
		}
		b[at] ^= 0x10
		os.WriteFile(path, b, 0o644)
	}
	cpPath := filepath.Join(rd, runfolder.DirState, runfolder.FileCheckpoint)
	snap := filepath.Join(rd, runfolder.DirState, runfolder.SnapshotName(0, "densitykv", 2))
	for _, c := range []struct {
		name   string
		damage func()
		want   []string
	}{
		{"checkpoint state", func() { edit(cpPath, `"next_block": 2`, `"next_block": 1`) }, []string{runfolder.FileCheckpoint, "damaged", "SHA-256"}},
		{"checkpoint version", func() { edit(cpPath, `"version": 1`, `"version": 9`) }, []string{runfolder.FileCheckpoint, "version 9"}},
		{"checkpoint missing", func() { os.Remove(cpPath) }, []string{"no checkpoint"}},
		{"snapshot", func() { flip(snap, -5) }, []string{snap, "SHA-256"}},
		{"snapshot missing", func() { os.Remove(snap) }, []string{snap}},
		{"config", func() { edit(filepath.Join(rd, runfolder.FileConfig), "tau: 2", "tau: 3") }, []string{runfolder.FileConfig, "changed since the checkpoint"}},
		{"text", func() { flip(text, -1) }, []string{"text " + text, "changed since the checkpoint"}},
		{"latents", func() { flip(filepath.Join(rd, "latents", "block_00001.safetensors"), -1) }, []string{"completed block 1", "SHA-256"}},
		{"latents missing", func() { os.Remove(filepath.Join(rd, "latents", "block_00000.safetensors")) }, []string{"completed block 0"}},
		{"record stream", func() { os.WriteFile(filepath.Join(dir, "r.dkvs"), rec[:100], 0o644) }, []string{"--record-stream", "fewer than"}},
		{"record stream content", func() { flip(filepath.Join(dir, "r.dkvs"), len(rec)/2) }, []string{"--record-stream", "r.dkvs", "SHA-256", "changed or damaged"}},
	} {
		restore()
		c.damage()
		code, _, errs := run(t, context.Background(), "generate", "--out", dir, "--name", "r", "--resume")
		if code == 0 {
			t.Errorf("%s: resume accepted the damage", c.name)
			continue
		}
		t.Logf("%s: exit %d: %s", c.name, code, strings.TrimSpace(errs))
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%s: exit %d, error %q lacks %q", c.name, code, strings.TrimSpace(errs), w)
			}
		}
	}
	restore()
	if code, _, errs := run(t, context.Background(), "generate", "--out", dir, "--name", "r", "--resume", "--quiet"); code != 0 {
		t.Fatalf("intact folder: exit %d: %s", code, errs)
	}
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		t.Fatal(err)
	}
}
