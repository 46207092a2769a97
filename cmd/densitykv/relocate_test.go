package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/golden"
	"github.com/densitykv/densitykv/rollout"
	"github.com/densitykv/densitykv/runfolder"
	"github.com/densitykv/densitykv/runfolder/runfoldertest"
)

// movedFolderFiles reads every file of the run folder rd (but state/, the
// resume checkpoint) with its wall-clock fields blanked, its own path in
// summary.json replaced by RUN and the places in config.resolved.yaml
// (where the run began: run.out, run.name, the recording) blanked.
func movedFolderFiles(t *testing.T, rd string) map[string][]byte {
	t.Helper()
	return runfoldertest.Files(t, rd, func(rel string, b []byte) ([]byte, error) {
		switch rel {
		case runfolder.FileSummary:
			// Its paths say where the run wrote the files (a prompt of a
			// list finished before the list moved names the old place):
			// compared by name.
			var sum runfolder.Summary
			if err := json.Unmarshal(b, &sum); err != nil {
				return nil, err
			}
			sum.RunDir, sum.ElapsedSeconds = "RUN", 0
			for _, fs := range [][]string{sum.Plots, sum.Files} {
				for i, f := range fs {
					fs[i] = filepath.Base(f)
				}
			}
			for _, p := range sum.Policies {
				p.UpdateSeconds = 0
			}
			return json.Marshal(sum)
		case runfolder.FileConfig:
			return blankConfig(b, func(gc *config.GenerateConfig) {
				gc.Run.Out, gc.Run.Name, gc.Generate.RecordStream = "OUT", "RUN", "RUN.dkvs"
			})
		}
		return blankTimings(rel, b), nil
	})
}

// sameFolder compares two run folders file by file, byte for byte (after
// movedFolderFiles' blanking), and checks that the comparison covered the
// latents, the video and the memory log.
func sameFolder(t *testing.T, want, got string) {
	t.Helper()
	a, b := movedFolderFiles(t, want), movedFolderFiles(t, got)
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
			t.Errorf("%s lacks %s", got, f)
		case !bytes.Equal(a[f], y):
			t.Errorf("%s/%s differs from the uninterrupted run's (%d vs %d bytes)", got, f, len(a[f]), len(y))
		}
	}
	for _, f := range []string{runfolder.FileLog, rollout.ManifestFile, "latents/block_00003.safetensors", "video.mp4", "segments/segment_00003.mp4", "text/prompt_00.safetensors"} {
		if _, ok := a[f]; !ok {
			t.Errorf("compared folders lack %s", f)
		}
	}
}

// crashAfterBlocks runs args and panics (a kill: nothing saved after the
// last periodic checkpoint) once n blocks are done.
func crashAfterBlocks(t *testing.T, n int, args []string) {
	t.Helper()
	done := 0
	genHook = func() {
		done++
		if done == n {
			panic(crash{})
		}
	}
	defer func() {
		genHook = nil
		if r := recover(); r != (crash{}) {
			t.Fatalf("recovered %v, want the simulated crash", r)
		}
	}()
	run(t, context.Background(), args...)
}

// resumeAt resumes the generate run folder rd (--out its parent, --name
// its base) with extra flags, and returns the exit code and stderr.
func resumeAt(t *testing.T, rd string, extra ...string) (int, string) {
	t.Helper()
	a := append([]string{"generate", "--out", filepath.Dir(rd), "--name", filepath.Base(rd), "--resume", "--quiet"}, extra...)
	code, _, errs := run(t, context.Background(), a...)
	return code, errs
}

// TestGenerateResumeRelocated (issue #26): a run folder stopped (Ctrl-C)
// or killed mid-way, then moved (mv) or copied (cp -r) to another folder
// and resumed there, ends with the bytes of an uninterrupted run. The
// prompt's embedding in text/ is the folder's own file: before, its
// path at creation was recorded and the moved folder was refused ("the
// checkpoint's input 1 is embedding a/stop/text/prompt_00.safetensors,
// the configuration's embedding b/moved/text/...").
func TestGenerateResumeRelocated(t *testing.T) {
	ffTools(t)
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "disk2", "runs")
	if err := os.MkdirAll(b, 0o755); err != nil {
		t.Fatal(err)
	}
	extra := []string{"--quiet", "--snapshot-every", "2"}
	if code, _, errs := run(t, context.Background(), pipelineArgs(t, a, "full", extra...)...); code != 0 {
		t.Fatalf("full run: %s", errs)
	}
	stopAfterBlocks(t, 3, pipelineArgs(t, a, "stop", extra...))
	crashAfterBlocks(t, 3, pipelineArgs(t, a, "crash", extra...)) // the checkpoint of block 2 stands
	copyTree(t, filepath.Join(a, "stop"), filepath.Join(b, "copied"))
	for _, m := range [][2]string{{"stop", "moved"}, {"crash", "crashed"}} {
		if err := os.Rename(filepath.Join(a, m[0]), filepath.Join(b, m[1])); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		from int // the checkpoint's block
	}{{"copied", 3}, {"moved", 3}, {"crashed", 2}} {
		t.Run(c.name, func(t *testing.T) {
			rd := filepath.Join(b, c.name)
			blocks := 0
			genHook = func() { blocks++ }
			code, errs := resumeAt(t, rd)
			genHook = nil
			if code != 0 {
				t.Fatalf("resume of %s: exit %d: %s", rd, code, errs)
			}
			if blocks != 4-c.from {
				t.Fatalf("resume computed %d blocks, want %d (from block %d)", blocks, 4-c.from, c.from)
			}
			sameFolder(t, filepath.Join(a, "full"), rd)
		})
	}
	if _, err := os.Stat(filepath.Join(a, "stop")); err == nil {
		t.Error("resume wrote into the folder the run began in")
	}
}

// resealCheckpoint rewrites the state of a run folder's checkpoint with
// edit and seals it again (as a checkpoint of that content would have
// been written).
func resealCheckpoint(t *testing.T, rd string, edit func(state map[string]any)) {
	t.Helper()
	path := filepath.Join(rd, runfolder.DirState, runfolder.FileCheckpoint)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]any
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatal(err)
	}
	st := env["state"].(map[string]any)
	edit(st)
	js, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(js)
	env["sha256"], env["state"] = hex.EncodeToString(sum[:]), json.RawMessage(js)
	out, err := json.MarshalIndent(env, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(out, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestGenerateResumeOlderFolder: a run folder written by the previous
// version records its embedding by the path the run spelled when it
// began (here absolute: <out>/<name>/text/prompt_00.safetensors). It
// resumes where it is and, moved, where it is now: the recorded path
// names the folder's own file, read in the folder. A recorded path of
// another file of the folder is refused.
func TestGenerateResumeOlderFolder(t *testing.T) {
	ffTools(t)
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	extra := []string{"--quiet", "--snapshot-every", "2"}
	if code, _, errs := run(t, context.Background(), pipelineArgs(t, a, "full", extra...)...); code != 0 {
		t.Fatalf("full run: %s", errs)
	}
	stopAfterBlocks(t, 2, pipelineArgs(t, a, "old", extra...))
	old := filepath.Join(a, "old", "text", "prompt_00.safetensors")
	setEmbedding := func(rd, path string) {
		resealCheckpoint(t, rd, func(st map[string]any) {
			n := 0
			for _, in := range st["inputs"].([]any) {
				if m := in.(map[string]any); m["role"] == "embedding" {
					m["path"] = path
					n++
				}
			}
			if n != 1 {
				t.Fatalf("the checkpoint records %d embeddings, want 1", n)
			}
		})
	}
	setEmbedding(filepath.Join(a, "old"), old)
	copyTree(t, filepath.Join(a, "old"), filepath.Join(b, "moved"))
	copyTree(t, filepath.Join(a, "old"), filepath.Join(b, "other"))
	setEmbedding(filepath.Join(b, "other"), filepath.Join(a, "old", "text", "prompt_01.safetensors"))
	if code, errs := resumeAt(t, filepath.Join(b, "other")); code == 0 || !strings.Contains(errs, "prompt_01") {
		t.Fatalf("a checkpoint naming another embedding: exit %d: %s", code, errs)
	}
	for _, rd := range []string{filepath.Join(a, "old"), filepath.Join(b, "moved")} {
		if code, errs := resumeAt(t, rd); code != 0 {
			t.Fatalf("resume of the older folder %s: exit %d: %s", rd, code, errs)
		}
		sameFolder(t, filepath.Join(a, "full"), rd)
	}
	// The checkpoints it writes now record the folder's files in it.
	cp, err := runfolder.ReadGenerateCheckpoint(filepath.Join(b, "moved"))
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range cp.Inputs {
		if in.Role == "embedding" && in.Path != filepath.Join("text", "prompt_00.safetensors") {
			t.Errorf("the resumed run's checkpoint records its embedding as %s, not by its place in the folder", in.Path)
		}
	}
}

// copyFile copies a file (inputs moved to another disk).
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestGenerateResumeMovedInputs: inputs outside the run folder are
// identified by their content. The folder and its inputs (checkpoint,
// VAE, text file, recording) moved to another disk resume with the
// inputs' new places given by their flags, to an uninterrupted run's
// bytes; a missing input is refused with the flag that gives its place,
// a changed input at the recorded path with the existing message, and
// another file at the new place by its content.
func TestGenerateResumeMovedInputs(t *testing.T) {
	ffTools(t)
	root := t.TempDir()
	in1, in2 := filepath.Join(root, "in1"), filepath.Join(root, "in2")
	copyFile(t, filepath.Join(golden.Wan(t), "weights.safetensors"), filepath.Join(in1, "w.safetensors"))
	copyFile(t, filepath.Join(golden.PipelineVAE(t), "weights.pth"), filepath.Join(in1, "vae.pth"))
	text := tinyText(t, in1)
	args := func(name string) []string {
		a := pipelineArgs(t, filepath.Join(root, "a"), name, "--quiet", "--snapshot-every", "2",
			"--text", text+"@2", "--record-stream", filepath.Join(in1, name+".dkvs"))
		for i := range a {
			switch a[i] {
			case "--checkpoint":
				a[i+1] = filepath.Join(in1, "w.safetensors")
			case "--vae":
				a[i+1] = filepath.Join(in1, "vae.pth")
			}
		}
		return a
	}
	if code, _, errs := run(t, context.Background(), args("full")...); code != 0 {
		t.Fatalf("full run: %s", errs)
	}
	stopAfterBlocks(t, 1, args("stop"))
	rd := filepath.Join(root, "a", "stop")
	w := filepath.Join(in1, "w.safetensors")

	// A changed input at the path the run read it from.
	good, _ := os.ReadFile(w)
	bad := bytes.Clone(good)
	bad[len(bad)-2] ^= 0x40
	os.WriteFile(w, bad, 0o644)
	if code, errs := resumeAt(t, rd); code == 0 || !strings.Contains(errs, "checkpoint "+w+" changed since the checkpoint") {
		t.Fatalf("changed checkpoint: exit %d: %s", code, errs)
	}
	os.WriteFile(w, good, 0o644)

	// The folder and the inputs move to another disk.
	if err := os.Rename(in1, in2); err != nil {
		t.Fatal(err)
	}
	moved := filepath.Join(root, "disk2", "stop")
	os.MkdirAll(filepath.Dir(moved), 0o755)
	if err := os.Rename(rd, moved); err != nil {
		t.Fatal(err)
	}
	if code, errs := resumeAt(t, moved, "--record-stream", filepath.Join(in2, "stop.dkvs")); code != exitUsage || !strings.Contains(errs, "--resume --checkpoint FILE") {
		t.Fatalf("inputs moved, the checkpoint's place not given: exit %d: %s", code, errs)
	}
	flags := []string{"--checkpoint", filepath.Join(in2, "w.safetensors"), "--vae", filepath.Join(in2, "vae.pth"),
		"--text", filepath.Join(in2, "text.safetensors@2"), "--record-stream", filepath.Join(in2, "stop.dkvs")}
	// Another file at the new place.
	other := filepath.Join(root, "other.safetensors")
	os.WriteFile(other, bad, 0o644)
	withOther := append(slicesClone(flags[2:]), "--checkpoint", other)
	if code, errs := resumeAt(t, moved, withOther...); code == 0 || !strings.Contains(errs, "checkpoint "+other+" is not the file the run started with") {
		t.Fatalf("another checkpoint file: exit %d: %s", code, errs)
	}
	if code, errs := resumeAt(t, moved, "--text", filepath.Join(in2, "text.safetensors@3")); code != exitUsage || !strings.Contains(errs, "starts at block 2") {
		t.Fatalf("--text at another block: exit %d: %s", code, errs)
	}
	// Every input given at its new place: the run continues.
	code, errs := resumeAt(t, moved, append(flags, "--quiet=false")...)
	if code != 0 {
		t.Fatalf("resume with the inputs' new places: exit %d: %s", code, errs)
	}
	if !strings.Contains(errs, "checkpoint "+filepath.Join(in2, "w.safetensors")+" (was "+w+")") {
		t.Errorf("resume does not say which inputs it read from their new places: %s", errs)
	}
	sameFolder(t, filepath.Join(root, "a", "full"), moved)
	x, _ := os.ReadFile(filepath.Join(in2, "full.dkvs"))
	y, _ := os.ReadFile(filepath.Join(in2, "stop.dkvs"))
	if len(x) == 0 || !bytes.Equal(x, y) {
		t.Errorf("the moved recording differs from the uninterrupted run's (%d vs %d bytes)", len(x), len(y))
	}
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// TestGenerateListRelocated: a prompt list stopped mid-way (one video
// complete, the next stopped with a checkpoint), moved (mv) to another
// folder and continued with --resume, or copied (cp -r) and continued by
// the same command, ends with the videos of an uninterrupted list.
func TestGenerateListRelocated(t *testing.T) {
	ffTools(t)
	root := t.TempDir()
	pf := filepath.Join(root, "prompts.txt")
	os.WriteFile(pf, []byte("a heron lands on a lake\na red panda walks through snow\n"), 0o644)
	a, b := filepath.Join(root, "a"), filepath.Join(root, "disk2")
	args := func(out, name string) []string {
		args := pipelineArgs(t, out, name, "--quiet", "--snapshot-every", "2")
		for i := range args {
			if args[i] == "--prompt" {
				args[i], args[i+1] = "--prompts", pf
			}
		}
		return args
	}
	if code, _, errs := run(t, context.Background(), args(a, "full")...); code != 0 {
		t.Fatalf("full list: %s", errs)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := 0
	genHook = func() {
		if done++; done == 7 { // prompt 0's 4 blocks and 3 of prompt 1's
			cancel()
		}
	}
	code, _, errs := run(t, ctx, args(a, "list")...)
	genHook = nil
	cancel()
	if code != exitInterrupted {
		t.Fatalf("stopped list: exit %d: %s", code, errs)
	}
	if cp, err := runfolder.ReadGenerateCheckpoint(filepath.Join(a, "list", "00001")); err != nil || cp.NextBlock != 3 {
		t.Fatalf("prompt 1 stopped with checkpoint %+v (%v), want block 3", cp, err)
	}
	for _, n := range []string{"copied", "elsewhere", "resumed-elsewhere", "v1", "other"} {
		copyTree(t, filepath.Join(a, "list"), filepath.Join(b, n))
	}
	if err := os.Rename(filepath.Join(a, "list"), filepath.Join(b, "moved")); err != nil {
		t.Fatal(err)
	}
	// The checkpoint at another place (another node's mount point of the
	// same volume): the list identifies it by content.
	w := filepath.Join(root, "mnt2", "w.safetensors")
	copyFile(t, filepath.Join(golden.Wan(t), "weights.safetensors"), w)
	elsewhere := args(b, "elsewhere")
	elsewhere[slices.Index(elsewhere, "--checkpoint")+1] = w
	// A list folder of the previous version: list.json hashed batch.yaml
	// with its paths, and recorded no inputs.
	v1 := filepath.Join(b, "v1")
	var man runfolder.ListManifest
	if err := runfolder.ReadJSON(filepath.Join(v1, runfolder.FileList), &man); err != nil || man.Version != 2 || len(man.Inputs) != 4 {
		t.Fatalf("list.json %+v (%v): want version 2 with the checkpoint, VAE, text encoder and tokenizer", man, err)
	}
	batch, _ := os.ReadFile(filepath.Join(v1, runfolder.FileBatch))
	man.Version, man.Inputs, man.ConfigSHA256 = 1, nil, sha256Hex(batch)
	if err := runfolder.WriteJSON(filepath.Join(v1, runfolder.FileList), man); err != nil {
		t.Fatal(err)
	}
	// Another checkpoint is another list.
	bad := filepath.Join(root, "mnt2", "other.safetensors")
	good, _ := os.ReadFile(w)
	os.WriteFile(bad, append(bytes.Clone(good[:len(good)-1]), good[len(good)-1]^1), 0o644)
	other := args(b, "other")
	other[slices.Index(other, "--checkpoint")+1] = bad
	if code, _, errs := run(t, context.Background(), other...); code != exitUsage || !strings.Contains(errs, "made with other input files") || !strings.Contains(errs, bad) {
		t.Fatalf("a list continued with another checkpoint: exit %d: %s", code, errs)
	}
	for _, c := range []struct {
		name string
		args []string
	}{
		{"moved", []string{"generate", "--out", b, "--name", "moved", "--resume"}},
		{"copied", args(b, "copied")},
		{"elsewhere", elsewhere},
		{"resumed-elsewhere", []string{"generate", "--out", b, "--name", "resumed-elsewhere", "--resume", "--checkpoint", w}},
		{"v1", args(b, "v1")},
	} {
		blocks := 0
		genHook = func() { blocks++ }
		code, out, errs := run(t, context.Background(), c.args...)
		genHook = nil
		if code != 0 || blocks != 1 || !strings.Contains(out, "resumed") {
			t.Fatalf("%s list continued: exit %d, %d blocks computed (want 1)\n%s\n%s", c.name, code, blocks, out, errs)
		}
		for _, p := range []string{"00000", "00001"} {
			sameFolder(t, filepath.Join(a, "full", p), filepath.Join(b, c.name, p))
		}
	}
}

// TestSimulateResumeRelocated: a simulate run stopped mid-way, moved or
// copied to another folder with its archives (full-history,
// longlive-rag: frames in state/), resumes there to an uninterrupted
// run's log and files.
func TestSimulateResumeRelocated(t *testing.T) {
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "disk2")
	pols := []string{"--policy", "longlive-rag,full-history", "--plots=false"} // after tiny's densitykv,fifo,native
	if code, _, errs := run(t, context.Background(), tiny(a, "full", pols...)...); code != 0 {
		t.Fatalf("full run: %s", errs)
	}
	ctx, cancel := context.WithCancel(context.Background())
	afterBlockHook = func(blk int) {
		if blk == 6 {
			cancel()
		}
	}
	code, _, errs := run(t, ctx, tiny(a, "stop", append(pols, "--snapshot-every", "4")...)...)
	afterBlockHook = nil
	cancel()
	if code != exitInterrupted {
		t.Fatalf("stopped run: exit %d: %s", code, errs)
	}
	copyTree(t, filepath.Join(a, "stop"), filepath.Join(b, "copied"))
	if err := os.Rename(filepath.Join(a, "stop"), filepath.Join(b, "moved")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"moved", "copied"} {
		code, _, errs := run(t, context.Background(), "simulate", "--out", b, "--name", name, "--resume", "--quiet", "--plots=false")
		if code != 0 {
			t.Fatalf("resume of %s: exit %d: %s", name, code, errs)
		}
		x := stripTimings(t, filepath.Join(a, "full", runfolder.FileLog))
		y := stripTimings(t, filepath.Join(b, name, runfolder.FileLog))
		if len(x) == 0 || !reflect.DeepEqual(x, y) {
			t.Fatalf("%s: the resumed memory log differs from the uninterrupted run's (%d vs %d lines)", name, len(x), len(y))
		}
		for _, f := range []string{runfolder.FileProvenance, runfolder.FileAdmissions, runfolder.FileStorage} {
			p, _ := os.ReadFile(filepath.Join(a, "full", f))
			q, _ := os.ReadFile(filepath.Join(b, name, f))
			if len(p) == 0 || !bytes.Equal(p, q) {
				t.Errorf("%s: %s differs after resume", name, f)
			}
		}
	}
}
