package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/golden"
	"github.com/densitykv/densitykv/ragae/aetest"
	"github.com/densitykv/densitykv/runfolder"
)

// Each refusal below names the fault, exits 2, and leaves nothing behind:
// no run folder, no overwritten input (issue #16, points 2, 5 and 7).
func TestRefusedBeforeAnythingIsWritten(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"seconds 1e12", []string{"demo", "--out", dir, "--name", "x", "--seconds", "1e12", "--quiet"}, "more than the 1048576 a run may have"},
		{"seconds 1e8", []string{"demo", "--out", dir, "--name", "x", "--seconds", "1e8", "--quiet"}, "4e+08 latent frames"},
		{"heads 1e9", tiny(dir, "x", "--heads", "1000000000"), "want at most 16777216"},
		{"tau -1", tiny(dir, "x", "--tau", "-1"), "memory.bank.tau (--tau) is -1, want a finite number > 1"},
		{"stream-file without --stream file", tiny(dir, "x", "--stream-file", filepath.Join(dir, "s.dkvs")), "a stream file is read only with --stream file"},
		{"empty name", tiny(dir, "", "--plots=false"), `run.name (--name) is "", want a plain folder name`},
		{"empty name resume", []string{"simulate", "--out", dir, "--name", "", "--resume"}, `--name (run.name) "" must be a plain folder name`},
		{"horizons NaN", tinyEval(dir, "x", "--horizons", "NaN"), "--horizons NaN s is not within the stream"},
		{"horizons 1e300", tinyEval(dir, "x", "--horizons", "1e300"), "--horizons 1e+300 s is not within the stream"},
		{"queries 1e9", tinyEval(dir, "x", "--queries", "1000000000"), "must each be at most"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, errs := run(t, context.Background(), c.args...)
			if code != exitUsage || !strings.Contains(errs, c.want) || strings.Contains(errs, "panic") {
				t.Fatalf("exit %d, stderr %q, want %q", code, errs, c.want)
			}
			if ents, _ := os.ReadDir(dir); len(ents) > 0 {
				t.Fatalf("left %s in --out", ents[0].Name())
			}
		})
	}
	// Flag errors: one "densitykv:" prefix.
	for _, args := range [][]string{{"demo", "--bogus"}, {"--bogus"}, {"simulate", "--seconds", "x"}} {
		code, _, errs := run(t, context.Background(), args...)
		if code != exitUsage || strings.Contains(errs, "densitykv: densitykv") || !strings.HasPrefix(errs, "densitykv: ") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errs)
		}
	}
}

// A run folder belongs to the command that made it: demo overwrites only a
// demo folder (before: it replaced a simulate run's provenance), simulate
// does not take over a demo folder, --resume names the right command; an
// input inside the run folder is not overwritten even with --force.
func TestRunFolderOwnership(t *testing.T) {
	dir := t.TempDir()
	if code, _, errs := run(t, context.Background(), tiny(dir, "sim", "--plots=false")...); code != 0 {
		t.Fatal(errs)
	}
	prov := filepath.Join(dir, "sim", runfolder.FileProvenance)
	before, _ := os.ReadFile(prov)
	code, _, errs := run(t, context.Background(), "demo", "--out", dir, "--name", "sim", "--seconds", "1", "--quiet", "--plots=false")
	if code != exitUsage || !strings.Contains(errs, "belongs to a simulate run") || !strings.Contains(errs, "--force") {
		t.Fatalf("demo over a simulate run: exit %d, %q", code, errs)
	}
	if after, _ := os.ReadFile(prov); !bytes.Equal(before, after) {
		t.Fatal("demo changed the simulate run's provenance")
	}
	// demo reuses its own folder without --force.
	for range 2 {
		if code, _, errs := run(t, context.Background(), "demo", "--out", dir, "--name", "d", "--seconds", "1", "--quiet", "--plots=false"); code != 0 {
			t.Fatalf("demo over a demo folder: exit %d: %s", code, errs)
		}
	}
	if o, err := runfolder.ReadOwner(filepath.Join(dir, "d")); o != "demo" || err != nil {
		t.Fatalf("owner %q %v", o, err)
	}
	code, _, errs = run(t, context.Background(), tiny(dir, "d", "--plots=false")...)
	if code != exitUsage || !strings.Contains(errs, "belongs to a demo run") {
		t.Fatalf("simulate over a demo folder: exit %d, %q", code, errs)
	}
	code, _, errs = run(t, context.Background(), "simulate", "--out", dir, "--name", "d", "--resume")
	if code != exitUsage || !strings.Contains(errs, "continue it with densitykv demo --resume") {
		t.Fatalf("simulate --resume of a demo folder: exit %d, %q", code, errs)
	}
	// A non-run folder is not written into without --force.
	os.MkdirAll(filepath.Join(dir, "mine"), 0o755)
	os.WriteFile(filepath.Join(dir, "mine", "notes.txt"), []byte("keep"), 0o644)
	code, _, errs = run(t, context.Background(), tiny(dir, "mine", "--plots=false")...)
	if code != exitUsage || !strings.Contains(errs, "is not a densitykv run folder") {
		t.Fatalf("simulate into a user folder: exit %d, %q", code, errs)
	}
	// --force takes over, but never over an input: a --config file at a
	// path the run writes.
	cfgPath := filepath.Join(dir, "sim", runfolder.FileConfig)
	code, _, errs = run(t, context.Background(), "simulate", "--config", cfgPath, "--out", dir, "--name", "sim", "--force", "--quiet")
	if code != exitUsage || !strings.Contains(errs, "--config "+cfgPath) || !strings.Contains(errs, "would overwrite an input") {
		t.Fatalf("--config inside the run folder with --force: exit %d, %q", code, errs)
	}
	if after, _ := os.ReadFile(prov); !bytes.Equal(before, after) {
		t.Fatal("the refused run changed the folder")
	}
	// Through a symbolic link too.
	link := filepath.Join(dir, "link.yaml")
	os.Symlink(cfgPath, link)
	code, _, errs = run(t, context.Background(), "simulate", "--config", link, "--out", dir, "--name", "sim", "--force", "--quiet")
	if code != exitUsage || !strings.Contains(errs, "would overwrite an input") {
		t.Fatalf("--config linked into the run folder: exit %d, %q", code, errs)
	}
}

// generate refuses, before the run folder exists: --record-stream onto an
// input (the checkpoint, the text; before: the weights were replaced with
// exit 0) or into a missing folder, a prompt switch beyond the run (@999),
// and text values that overflow in the text projections (3e38: before, it
// failed mid-run blaming the memory policy).
func TestGenerateRefusals(t *testing.T) {
	g := golden.Wan(t)
	dir := t.TempDir()
	text := tinyText(t, dir)
	weights := filepath.Join(dir, "w.safetensors")
	wb, err := os.ReadFile(filepath.Join(g, "weights.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(weights, wb, 0o644)
	huge := filepath.Join(dir, "huge.safetensors")
	s, err := checkpoint.OpenSafetensors(text)
	if err != nil {
		t.Fatal(err)
	}
	ctx, shape, _ := s.Float32("context")
	s.Close()
	for i := range ctx {
		ctx[i] = 3e38
	}
	checkpoint.WriteSafetensorsFile(huge, []checkpoint.WriteTensor{{Name: "context", Shape: shape, Data: ctx}}, nil)
	ae := filepath.Join(dir, "ae_latent_mem.pt")
	if err := aetest.Write(ae, aetest.Config{InChannels: 16, SpatialH: 6, SpatialW: 8, LatentDim: 8, HiddenDims: []int{4}}, 1); err != nil {
		t.Fatal(err)
	}
	base := func(extra ...string) []string {
		a := []string{"generate", "--arch", "tiny", "--checkpoint", weights, "--latent-height", "6", "--latent-width", "8",
			"--blocks", "2", "--out", dir, "--name", "r", "--quiet"}
		return append(a, extra...)
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"record onto the checkpoint", base("--text", text, "--record-stream", weights), "--record-stream " + weights + " is --checkpoint " + weights},
		{"record onto the text", base("--text", text, "--record-stream", filepath.Join(dir, ".", "text.safetensors")), "is --text " + text},
		{"record onto the retrieval autoencoder", base("--text", text, "--policy", "longlive-rag", "--rag-ae", ae, "--record-stream", ae), "--record-stream " + ae + " is --rag-ae " + ae},
		{"record into a missing folder", base("--text", text, "--record-stream", "/nodir/x.dkvs"), "--record-stream /nodir/x.dkvs: its folder /nodir"},
		{"record into the run folder", base("--text", text, "--record-stream", filepath.Join(dir, "r", runfolder.FileLog)), "the run writes it"},
		{"prompt beyond the run", base("--text", text, "--text", text+"@999"), "the prompt would start at block 999, but the run has blocks 0..1"},
		{"text overflow", base("--text", huge), "--text " + huge + ": the text embedding overflows float32"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, errs := run(t, context.Background(), c.args...)
			if code != exitUsage || !strings.Contains(errs, c.want) {
				t.Fatalf("exit %d, stderr %q, want %q", code, errs, c.want)
			}
			if exists(filepath.Join(dir, "r")) {
				t.Fatal("left a run folder")
			}
			if now, _ := os.ReadFile(weights); !bytes.Equal(now, wb) {
				t.Fatal("the checkpoint changed")
			}
		})
	}
}

// generate --resume acts on the folder --out/--name names (before: on the
// folder the run was started in, whatever --name said).
func TestGenerateResumeHonoursName(t *testing.T) {
	dir := t.TempDir()
	text := tinyText(t, dir)
	args := genResumeArgs(t, dir, "a", text, 4, "--policy", "fifo", "--snapshot-every", "2", "--trace-step", "-1", "--preview=false")
	stopAfterBlocks(t, 2, args)
	if err := os.Rename(filepath.Join(dir, "a"), filepath.Join(dir, "b")); err != nil {
		t.Fatal(err)
	}
	code, _, errs := run(t, context.Background(), "generate", "--out", dir, "--name", "b", "--resume", "--quiet")
	if code != 0 {
		t.Fatalf("resume of the moved folder: exit %d: %s", code, errs)
	}
	if exists(filepath.Join(dir, "a")) {
		t.Fatal("resume wrote into the folder the run started in")
	}
	var sum runfolder.Summary
	if err := runfolder.ReadJSON(filepath.Join(dir, "b", runfolder.FileSummary), &sum); err != nil || !sum.Complete || sum.CompletedBlocks != 4 {
		t.Fatalf("moved folder after resume: %+v %v", sum, err)
	}
}

// trace on a run that stopped (or whose log ends in a torn line) renders
// what it has and says the run is not complete, with the command that
// continues it; on a complete run it says nothing of the kind.
func TestTraceSaysIncomplete(t *testing.T) {
	dir := t.TempDir()
	if code, _, errs := run(t, context.Background(), tiny(dir, "a", "--plots=false")...); code != 0 {
		t.Fatal(errs)
	}
	rd := filepath.Join(dir, "a")
	code, _, errs := run(t, context.Background(), "trace", rd)
	if code != 0 || strings.Contains(errs, "not complete") {
		t.Fatalf("complete run: exit %d, %q", code, errs)
	}
	// A failed last write (after the checkpoint's record of the log): the
	// log's last line torn, the run not complete.
	log := filepath.Join(rd, runfolder.FileLog)
	b, _ := os.ReadFile(log)
	os.WriteFile(log, append(bytes.Clone(b), b[:30]...), 0o644)
	os.Remove(filepath.Join(rd, runfolder.FileSummary))
	code, _, errs = run(t, context.Background(), "trace", rd)
	if code != 0 || !strings.Contains(errs, "is not complete") || !strings.Contains(errs, "torn line") ||
		!strings.Contains(errs, "densitykv simulate --out "+dir+" --name a --resume") {
		t.Fatalf("torn run: exit %d, %q", code, errs)
	}
	// A log cut into the lines the checkpoint records was changed since
	// the run wrote it: trace refuses it by name (issue #26).
	os.WriteFile(log, b[:len(b)-30], 0o644)
	code, _, errs = run(t, context.Background(), "trace", rd)
	if code == 0 || !strings.Contains(errs, log+" has") || !strings.Contains(errs, "fewer than") {
		t.Fatalf("log cut below the checkpoint's record: exit %d, %q", code, errs)
	}
}

// Unbounded text inputs (a device, a wrong file) are refused with the limit
// named, before anything is written, instead of ending the process out of
// memory: --config for every command, --prompts and --extended-prompts.
func TestUnboundedInputsRefused(t *testing.T) {
	dir := t.TempDir()
	g, t5 := golden.Wan(t), golden.T5(t)
	prompts := filepath.Join(t.TempDir(), "prompts.txt")
	if err := os.WriteFile(prompts, []byte("a cat\na dog\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gen := func(extra ...string) []string {
		return append([]string{"generate", "--arch", "tiny", "--checkpoint", filepath.Join(g, "weights.safetensors"),
			"--text-encoder", filepath.Join(t5, "weights.pth"), "--tokenizer", filepath.Join(t5, "spiece.model"),
			"--latent-height", "6", "--latent-width", "8", "--blocks", "1", "--out", dir, "--name", "x", "--quiet"}, extra...)
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"simulate config", tiny(dir, "x", "--config", "/dev/zero"), "--config: config /dev/zero: /dev/zero is larger than 16 MiB, the limit for configuration files"},
		{"eval config", tinyEval(dir, "x", "--config", "/dev/zero"), "/dev/zero is larger than 16 MiB, the limit for configuration files"},
		{"generate config", gen("--prompts", prompts, "--config", "/dev/zero"), "/dev/zero is larger than 16 MiB, the limit for configuration files"},
		{"prompts", gen("--prompts", "/dev/zero"), "--prompts: runfolder: prompts file: /dev/zero is larger than 64 MiB, the limit for prompts files"},
		{"extended prompts", gen("--prompts", prompts, "--extended-prompts", "/dev/zero"),
			"--prompts/--extended-prompts: runfolder: extended prompts file: /dev/zero is larger than 64 MiB, the limit for extended prompts files"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, _, errs := run(t, context.Background(), c.args...)
			if code != exitUsage || !strings.Contains(errs, c.want) {
				t.Fatalf("exit %d, stderr %q, want %q", code, errs, c.want)
			}
			if ents, _ := os.ReadDir(dir); len(ents) > 0 {
				t.Fatalf("left %s in --out", ents[0].Name())
			}
		})
	}
}
