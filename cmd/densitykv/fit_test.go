package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRefusesRunsThatDoNotFit: a run whose estimated peak memory exceeds
// what the machine has available, or whose run folder would not fit the
// free disk, is refused with exit 2 before its run folder is made, with a
// message naming what to change; --force runs it with a warning, and a
// resumed run is checked too. Without a refusal the estimate is printed.
func TestRefusesRunsThatDoNotFit(t *testing.T) {
	defer func(m func(string) (int64, int64)) { machine = m }(machine)
	dir := t.TempDir()
	for _, c := range []struct {
		name      string
		mem, disk int64
		want      []string
	}{
		{"memory", 1 << 20, 1 << 40, []string{"of memory at its peak", "1.0 MiB is available", "--force"}},
		{"disk", 1 << 40, 1 << 10, []string{"of disk", "1.0 KiB free", "--force"}},
	} {
		machine = func(string) (int64, int64) { return c.mem, c.disk }
		code, _, errs := run(t, context.Background(), tiny(dir, c.name)...)
		if code != exitUsage {
			t.Fatalf("%s: exit %d, want %d: %s", c.name, code, exitUsage, errs)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%s: the refusal lacks %q: %s", c.name, w, errs)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, c.name)); err == nil {
			t.Errorf("%s: a refused run made its folder", c.name)
		}
		code, _, errs = run(t, context.Background(), tiny(dir, c.name, "--force", "--plots=false")...)
		if code != 0 || !strings.Contains(errs, "going on: --force") {
			t.Fatalf("%s with --force: exit %d: %s", c.name, code, errs)
		}
	}
	// A resumable run, then a machine without room: --resume is refused
	// too (and accepts --force).
	machine = func(string) (int64, int64) { return 1 << 40, 1 << 40 }
	ctx, cancel := context.WithCancel(context.Background())
	afterBlockHook = func(b int) { cancel() }
	code, _, errs := run(t, ctx, tiny(dir, "r", "--plots=false")...)
	afterBlockHook = nil
	if code != exitInterrupted {
		t.Fatalf("stopped run: exit %d: %s", code, errs)
	}
	machine = func(string) (int64, int64) { return 1 << 20, 1 << 40 }
	if code, _, errs := run(t, context.Background(), "simulate", "--out", dir, "--name", "r", "--resume"); code != exitUsage || !strings.Contains(errs, "of memory") {
		t.Fatalf("resume without room: exit %d: %s", code, errs)
	}
	if code, _, errs := run(t, context.Background(), "simulate", "--out", dir, "--name", "r", "--resume", "--force", "--quiet"); code != 0 {
		t.Fatalf("resume with --force: exit %d: %s", code, errs)
	}
	machine = func(string) (int64, int64) { return 1 << 40, 1 << 40 }
	code, _, errs = run(t, context.Background(), "simulate", "--out", dir, "--name", "ok", "--height", "4", "--width", "6", "--layers", "2",
		"--heads", "2", "--head-dim", "8", "--seconds", "3", "--sigma", "2", "--plots=false")
	if code != 0 || !strings.Contains(errs, "estimate: peak memory about") || !strings.Contains(errs, "of disk free") {
		t.Fatalf("estimate line: exit %d: %s", code, errs)
	}
}
