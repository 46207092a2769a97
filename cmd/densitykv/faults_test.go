package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/densitykv/densitykv/internal/atomicfile"
	"github.com/densitykv/densitykv/runfolder"
)

// TestGenerateFailsAtWrites injects ENOSPC (the disk stays full) at write
// operations of a small generate run (the tiny golden model, DensityKV,
// recorded stream, lineage and per-layer trace; atomicfile.Faulty sees
// every run-folder writer but the latent shards, package rollout's): every
// k up to the run's first checkpoint and then every third, so that each
// kind of write is hit and the test stays within seconds. After each, the
// folder is never presented as complete unless it is, and --resume with
// the disk working again ends with files identical to an uninterrupted
// run's, or refuses naming what to do.
func TestGenerateFailsAtWrites(t *testing.T) {
	dir := t.TempDir()
	text := tinyText(t, dir)
	args := func(name string) []string {
		return genResumeArgs(t, dir, name, text, 4, "--policy", "densitykv", "--capacity", "24", "--sigma", "4", "--snapshot-every", "2", "--preview=false")
	}
	defer atomicfile.Use(atomicfile.NoSync)()
	counter := &atomicfile.Faulty{FS: atomicfile.NoSync}
	restore := atomicfile.Use(counter)
	code, _, errs := run(t, context.Background(), args("ref")...)
	restore()
	if code != 0 {
		t.Fatal(errs)
	}
	ops := counter.Ops()
	t.Logf("%d write operations", ops)
	outcomes := map[string]int{}
	for k := 1; k <= ops; k++ {
		if k > 12 && k%11 != 0 {
			continue
		}
		name := fmt.Sprintf("f%03d", k)
		fy := &atomicfile.Faulty{FS: atomicfile.NoSync, FailAt: k, Err: syscall.ENOSPC, Sticky: true}
		restore := atomicfile.Use(fy)
		code, _, errs := run(t, context.Background(), args(name)...)
		restore()
		label := name + ": fault at " + fy.Failed
		if code == 0 {
			sameRunFiles(t, dir, "ref", name)
			outcomes["no effect"]++
			continue
		}
		if !strings.Contains(errs, "no space left on device") {
			t.Fatalf("%s: exit %d: %s", label, code, errs)
		}
		var sum runfolder.Summary
		if runfolder.ReadJSON(filepath.Join(dir, name, runfolder.FileSummary), &sum) == nil && sum.Complete {
			sameRunFiles(t, dir, "ref", name)
		}
		code, _, errs = run(t, context.Background(), "generate", "--out", dir, "--name", name, "--resume", "--quiet")
		switch {
		case code == 0:
			sameRunFiles(t, dir, "ref", name)
			outcomes["resumed"]++
		case code == exitUsage && strings.Contains(errs, "already complete"):
			// The final checkpoint was renamed into place and only the
			// folder sync after it failed: complete, and must be.
			sameRunFiles(t, dir, "ref", name)
			outcomes["complete"]++
		case code == exitUsage && (strings.Contains(errs, "without --resume") || strings.Contains(errs, "--force")):
			outcomes["refused"]++
		default:
			t.Fatalf("%s: resume: exit %d: %s", label, code, errs)
		}
		if t.Failed() {
			t.Fatalf("%s", label)
		}
		os.RemoveAll(filepath.Join(dir, name))
		os.Remove(filepath.Join(dir, name+".dkvs"))
	}
	t.Logf("outcomes: %v", outcomes)
	if outcomes["resumed"] == 0 {
		t.Fatal("no fault was recoverable by --resume")
	}
}
