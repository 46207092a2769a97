package main

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/runfolder"
)

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// An explicit zero (flag or YAML key) that memory.Config.Resolve would
// silently replace by the default is an error naming the flag or key and
// the value; no run folder is created.
func TestExplicitZerosAreErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ flag, value, want string }{
		{"p", "0", "--p is 0, want a finite number > 0 (memory.bank.p"},
		{"tau", "0", "--tau is 0, want a finite number > 1 (memory.bank.tau"},
		{"eps", "0", "--eps is 0, want a finite number > 0 (memory.bank.eps"},
		{"sigma", "0", "--sigma is 0, want a finite number > 0 (memory.bank.sigma"},
		{"delta", "0", "--delta is 0"},
		{"window-frames", "0", "--window-frames is 0"},
		{"sink-frames", "0", "--sink-frames is 0"},
		{"cache-frames", "0", "--cache-frames is 0"},
		{"heads", "0", "--heads is 0, want an integer >= 1 (memory.layout.heads"},
		{"frames-per-block", "0", "--frames-per-block is 0, want an integer >= 1"},
		{"layers", "0", "--layers is 0"},
		{"height", "0", "--height is 0"},
		{"head-dim", "0", "--head-dim is 0, want an even integer >= 6"},
		{"deep-forcing-recent", "0", "--deep-forcing-recent is 0"},
		{"deep-forcing-max-reuse", "0", "--deep-forcing-max-reuse is 0"},
		{"ordering", "", `--ordering is "", want mean, max or source`},
		{"rag-descriptor", " ", `--rag-descriptor is ""`},
	} {
		t.Run(c.flag, func(t *testing.T) {
			code, _, errs := run(t, context.Background(), tiny(dir, c.flag, "--"+c.flag+"="+c.value)...)
			if code != exitUsage || !strings.Contains(errs, c.want) {
				t.Fatalf("exit %d (want %d), stderr %q, want it to contain %q", code, exitUsage, errs, c.want)
			}
			if exists(filepath.Join(dir, c.flag)) {
				t.Fatal("a rejected configuration left a run folder")
			}
		})
	}
	// All at once: every one is named.
	code, _, errs := run(t, context.Background(), tiny(dir, "all", "--p", "0", "--tau", "0", "--eps", "0", "--sigma", "0", "--window-frames", "0")...)
	for _, f := range []string{"--p is 0", "--tau is 0", "--eps is 0", "--sigma is 0", "--window-frames is 0"} {
		if code != exitUsage || !strings.Contains(errs, f) {
			t.Errorf("exit %d, stderr lacks %q:\n%s", code, f, errs)
		}
	}
	// demo and eval: --sigma 0 is an error, not σ = 8.
	for _, args := range [][]string{
		{"demo", "--out", dir, "--name", "d", "--seconds", "1", "--quiet", "--sigma", "0"},
		tinyEval(dir, "e", "--sigma", "0"),
	} {
		if code, _, errs := run(t, context.Background(), args...); code != exitUsage || !strings.Contains(errs, "--sigma is 0") {
			t.Errorf("%s --sigma 0: exit %d, stderr %q", args[0], code, errs)
		}
	}
	// YAML keys, named with the file.
	for _, c := range []struct{ yaml, want string }{
		{"memory:\n  bank:\n    p: 0\n", "memory.bank.p (--p) is 0, want a finite number > 0"},
		{"memory:\n  window_frames: 0\n", "memory.window_frames (--window-frames) is 0"},
		{"memory:\n  rope_theta: 0\n", "memory.rope_theta is 0, want a finite number > 1"},
		{"memory:\n  longlive_rag: {exclude_recent: 0}\n", "memory.longlive_rag.exclude_recent is 0"},
		{"memory:\n  bank: {ordering: ''}\n", `memory.bank.ordering (--ordering) is ""`},
	} {
		f := filepath.Join(dir, "zero.yaml")
		os.WriteFile(f, []byte(c.yaml), 0o644)
		code, _, errs := run(t, context.Background(), tiny(dir, "y", "--config", f)...)
		if code != exitUsage || !strings.Contains(errs, f+": "+c.want) {
			t.Errorf("%q: exit %d, stderr %q, want %q", c.yaml, code, errs, c.want)
		}
	}
	// Zeros that are documented choices stay accepted, resolved in the record.
	code, _, errs = run(t, context.Background(), tiny(dir, "ok", "--capacity", "0", "--rag-top-k", "0", "--workers", "0", "--snapshot-every", "0", "--plots=false")...)
	if code != 0 {
		t.Fatalf("documented zeros: exit %d: %s", code, errs)
	}
	cfg, err := loadRunConfig(filepath.Join(dir, "ok"))
	if err != nil {
		t.Fatal(err)
	}
	if m := cfg.Memory; m.Capacity != 6*24 || m.LongLiveRAG.TopK != 6 || m.Bank.Workers != min(runtime.GOMAXPROCS(0), 2) {
		t.Fatalf("resolved capacity %d, top-k %d, workers %d", m.Capacity, m.LongLiveRAG.TopK, m.Bank.Workers)
	}
}

// The whole configuration, the DensityKV bank's rules included, is checked
// before the run folder exists; errors name the flags (and values), never a
// struct dump.
func TestValidationBeforeRunFolder(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tau", "0.5"}, "memory.bank.tau (--tau): DensityKV bank: Tau = 0.5 must be finite and > 1"},
		{[]string{"--window-frames", "2"}, "memory.window_frames (--window-frames), memory.layout.frames_per_block (--frames-per-block): window frames 2 < frames per block 3"},
		{[]string{"--heads", "-1"}, "memory.layout.heads (--heads): layout heads -1 must be positive"},
		{[]string{"--frames-per-block", "-3"}, "memory.layout.frames_per_block (--frames-per-block): layout frames_per_block -3"},
		{[]string{"--eps", "1e-30", "--p", "4"}, "memory.bank.eps (--eps), memory.bank.p (--p)"},
	} {
		code, _, errs := run(t, context.Background(), tiny(dir, "v", c.args...)...)
		if code != exitUsage || !strings.Contains(errs, c.want) || strings.Contains(errs, "{") {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, errs, c.want)
		}
		if exists(filepath.Join(dir, "v")) {
			t.Fatalf("%v left a run folder", c.args)
		}
	}
	// τ = 0.5 is only the bank's rule: without DensityKV it is not checked.
	args := tiny(dir, "fifo", "--tau", "0.5", "--plots=false")
	for i, a := range args {
		if a == "densitykv,fifo,native" {
			args[i] = "fifo,native"
		}
	}
	if code, _, errs := run(t, context.Background(), args...); code != 0 {
		t.Fatalf("fifo and native with τ 0.5: exit %d: %s", code, errs)
	}
}

// A run folder that holds nothing to continue (no checkpoint, no logged
// block) is reused by a new run; one with logged blocks but no checkpoint
// says to use --force, and --resume says what to do.
func TestRunFolderWithoutCheckpoint(t *testing.T) {
	dir := t.TempDir()
	rd := filepath.Join(dir, "r")
	if code, _, errs := run(t, context.Background(), tiny(dir, "r", "--plots=false")...); code != 0 {
		t.Fatal(errs)
	}
	// As if it failed before its first block: config.resolved.yaml only.
	os.RemoveAll(filepath.Join(rd, runfolder.DirState))
	os.Remove(filepath.Join(rd, runfolder.FileLog))
	code, _, errs := run(t, context.Background(), "simulate", "--out", dir, "--name", "r", "--resume")
	if code != exitUsage || !strings.Contains(errs, "has no checkpoint") || !strings.Contains(errs, "start it again without --resume") || strings.Contains(errs, "--force") {
		t.Fatalf("resume without checkpoint: exit %d, %q", code, errs)
	}
	if code, _, errs := run(t, context.Background(), tiny(dir, "r", "--plots=false")...); code != 0 {
		t.Fatalf("new run in an empty run folder: exit %d: %s", code, errs)
	}
	os.Remove(filepath.Join(rd, runfolder.DirState, runfolder.FileCheckpoint)) // as if it crashed before its first checkpoint
	code, _, errs = run(t, context.Background(), tiny(dir, "r")...)
	if code != exitUsage || !strings.Contains(errs, "no checkpoint to continue from; overwrite it with --force") {
		t.Fatalf("logged blocks, no checkpoint: exit %d, %q", code, errs)
	}
	code, _, errs = run(t, context.Background(), "simulate", "--out", dir, "--name", "r", "--resume")
	if code != exitUsage || !strings.Contains(errs, "--force") {
		t.Fatalf("resume, logged blocks, no checkpoint: exit %d, %q", code, errs)
	}
}

// Every flag bound to the configuration names its YAML key, and back.
func TestEveryConfigFlagHasItsKey(t *testing.T) {
	cmd := newSimulateCmd()
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if slices.Contains([]string{"config", "json", "resume", "force", "quiet", "updates", "help"}, f.Name) {
			return
		}
		found := false
		for p, fl := range config.Flags() {
			if fl == f.Name {
				found = true
				if !strings.Contains(f.Usage, "("+p+")") {
					t.Errorf("--%s usage %q does not name %s", f.Name, f.Usage, p)
				}
			}
		}
		if !found {
			t.Errorf("--%s has no YAML key in config.Flags()", f.Name)
		}
	})
}
