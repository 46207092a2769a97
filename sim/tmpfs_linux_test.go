//go:build linux

package sim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/runfolder"
	"github.com/densitykv/densitykv/runfolder/runfoldertest"
)

// envRequireTmpfs makes TestSimulateOnFullTmpfs fail, instead of skip,
// where a tmpfs cannot be mounted (CI runs as root and sets it).
const envRequireTmpfs = "DENSITYKV_REQUIRE_TMPFS"

// mountTmpfs mounts a tmpfs of size bytes at dir (unmounted at cleanup),
// or reports why it cannot.
func mountTmpfs(t *testing.T, dir string, size int64) error {
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0755", size)); err != nil {
		return err
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	return nil
}

// TestSimulateOnFullTmpfs runs a simulate (with its figures) on real small
// file systems (tmpfs of 12 KiB up to about the run's size), so that the
// disk fills at different writes; then the file system grows (remount)
// and --resume finishes the run: its files must equal a run on a roomy
// disk, or resume refuses naming what to do; a folder that says complete
// is complete. Where tmpfs cannot be mounted (not root, no
// CAP_SYS_ADMIN, not Linux) the test says so and skips: disk-full is then
// covered by the injector (TestSimulateFailsAtEveryWrite) alone; with
// DENSITYKV_REQUIRE_TMPFS=1 it fails instead.
func TestSimulateOnFullTmpfs(t *testing.T) {
	root := t.TempDir()
	probe := filepath.Join(root, "probe")
	os.Mkdir(probe, 0o755)
	if err := mountTmpfs(t, probe, 1<<20); err != nil {
		msg := fmt.Sprintf("cannot mount a tmpfs here (%v): disk-full is covered by the fault injector only (TestSimulateFailsAtEveryWrite)", err)
		if os.Getenv(envRequireTmpfs) == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	syscall.Unmount(probe, syscall.MNT_DETACH)
	cfg := tmpfsConfig(t, root, "ref")
	refDir := newRun(t, cfg)
	if _, err := (&Job{Command: "simulate", Config: cfg, Dir: refDir}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := resultFiles(t, refDir)
	outcomes := map[string]int{}
	for _, size := range []int64{12 << 10, 48 << 10, 160 << 10, 256 << 10, 384 << 10, 512 << 10, 640 << 10, 768 << 10, 1 << 20} {
		mnt := filepath.Join(root, fmt.Sprintf("tmpfs-%d", size))
		os.Mkdir(mnt, 0o755)
		if err := mountTmpfs(t, mnt, size); err != nil {
			t.Fatal(err)
		}
		c := tmpfsConfig(t, mnt, "run")
		dir := filepath.Join(mnt, "run")
		var err error
		if err = runfolder.Claim(dir, "simulate", false, false); err == nil {
			var y []byte
			if y, err = config.Marshal(c); err == nil {
				err = runfolder.WriteFile(filepath.Join(dir, runfolder.FileConfig), y)
			}
		}
		if err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("%d bytes: preparing the folder: %v", size, err)
			}
			outcomes["no room for the folder"]++
			continue
		}
		_, err = (&Job{Command: "simulate", Config: c, Dir: dir}).Run(context.Background())
		got := resultFiles(t, dir)
		for f := range got {
			if tempFile.MatchString(f) {
				t.Errorf("%d bytes: temporary file %s left", size, f)
			}
		}
		var sum runfolder.Summary
		if err == nil || runfolder.ReadJSON(filepath.Join(dir, runfolder.FileSummary), &sum) == nil && sum.Complete || complete(dir, c.Blocks()) {
			if d := runfoldertest.Diff(want, got); d != "" {
				t.Fatalf("%d bytes: the folder says complete (run error %v) but %s", size, err, d)
			}
			outcomes["fit"]++
			continue
		}
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("%d bytes: %v, want ENOSPC", size, err)
		}
		t.Logf("%d-byte tmpfs: %v", size, err)
		// More room; --resume.
		if err := syscall.Mount("tmpfs", mnt, "tmpfs", syscall.MS_REMOUNT, "size=16m"); err != nil {
			t.Fatal(err)
		}
		_, err = (&Job{Command: "simulate", Config: c, Dir: dir, Resume: true}).Run(context.Background())
		var ue *runfolder.UserError
		switch {
		case err == nil:
			if d := runfoldertest.Diff(want, resultFiles(t, dir)); d != "" {
				t.Fatalf("%d bytes: resumed run: %s", size, d)
			}
			outcomes["resumed"]++
		case errors.As(err, &ue) && (strings.Contains(err.Error(), "--force") || strings.Contains(err.Error(), "without --resume")):
			outcomes["refused"]++
		default:
			t.Fatalf("%d bytes: resume: %v", size, err)
		}
	}
	t.Logf("outcomes: %v", outcomes)
	if outcomes["resumed"] == 0 {
		t.Fatal("no full disk was recovered by --resume")
	}
}

// tmpfsConfig is faultConfig with figures and a larger layout (about
// 300 KiB of files at its peak).
func tmpfsConfig(t *testing.T, out, name string) config.Config {
	t.Helper()
	return smallRun(t, out, name, true, 3, 9, memory.Layout{Height: 4, Width: 6, Layers: 2, Heads: 2, HeadDim: 8})
}
