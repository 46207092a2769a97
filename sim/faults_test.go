package sim

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/internal/atomicfile"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/runfolder"
	"github.com/densitykv/densitykv/runfolder/runfoldertest"
)

// faultConfig is a simulate run small enough to fail at every one of its
// writes: 6 blocks of a 1-layer, 2-head layout, DensityKV and FIFO,
// checkpoints every 2 blocks.
func faultConfig(t *testing.T, out, name string, plots bool) config.Config {
	t.Helper()
	r := smallRun(t, out, name, plots, 2, 4.5, memory.Layout{Height: 2, Width: 4, Layers: 1, Heads: 2, HeadDim: 8})
	if r.Blocks() != 6 {
		t.Fatalf("%d blocks, want 6", r.Blocks())
	}
	return r
}

// smallRun is the demo configuration of DensityKV and FIFO (sigma 2) over
// seconds of a stream of layout l (its size; the rest the demo's),
// checkpointed every snapEvery blocks, resolved.
func smallRun(t *testing.T, out, name string, plots bool, snapEvery int, seconds float64, l memory.Layout) config.Config {
	t.Helper()
	c := config.DemoConfig()
	c.Run.Out, c.Run.Name, c.Run.Plots, c.Run.SnapshotEvery = out, name, plots, snapEvery
	c.Stream.Seconds = seconds
	c.Memory.Layout.Height, c.Memory.Layout.Width, c.Memory.Layout.Layers, c.Memory.Layout.Heads, c.Memory.Layout.HeadDim = l.Height, l.Width, l.Layers, l.Heads, l.HeadDim
	c.Memory.Bank.Sigma = 2
	c.Policies = []string{memory.NameDensityKV, memory.NameFIFO}
	r, err := c.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// newRun claims and configures a simulate run folder.
func newRun(t *testing.T, cfg config.Config) string {
	t.Helper()
	dir := filepath.Join(cfg.Run.Out, cfg.Run.Name)
	if err := runfolder.Claim(dir, "simulate", false, false); err != nil {
		t.Fatal(err)
	}
	y, err := config.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := runfolder.WriteFile(filepath.Join(dir, runfolder.FileConfig), y); err != nil {
		t.Fatal(err)
	}
	return dir
}

var (
	timingFields = regexp.MustCompile(`"(update_seconds|attend_seconds|elapsed_seconds)": ?[-+0-9.eE]+`)
	tempFile     = regexp.MustCompile(`(^|/)\..*\.tmp[0-9]*$`)
)

// resultFiles reads a run folder's files (not state/) with wall-clock
// fields blanked and the folder's own path replaced.
func resultFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	return runfoldertest.Files(t, dir, func(rel string, b []byte) ([]byte, error) {
		b = timingFields.ReplaceAll(b, []byte(`"$1":0`))
		b = bytes.ReplaceAll(b, []byte(dir), []byte("RUN"))
		b = bytes.ReplaceAll(b, []byte(filepath.Dir(dir)), []byte("OUT"))
		if rel == runfolder.FileConfig {
			b = bytes.ReplaceAll(b, []byte("name: "+filepath.Base(dir)+"\n"), []byte("name: RUN\n"))
		}
		return b, nil
	})
}

// complete reports whether the folder's checkpoint records the whole run.
func complete(dir string, blocks int) bool {
	st, err := runfolder.ReadSimulateCheckpoint(dir)
	return err == nil && st.NextBlock == blocks
}

// TestSimulateFailsAtEveryWrite injects ENOSPC (the disk stays full) and
// EIO (one failure) at each write operation of a small simulate run, in
// turn, from the first to the last (atomicfile.Faulty: file creation,
// every write, sync, chmod, truncate, rename, folder sync). After each:
//   - the run returns the error (never success);
//   - nothing is presented as complete that is not: a checkpoint at the
//     last block, or a summary.json saying complete, comes only with every
//     result file equal to an uninterrupted run's; no temporary file is
//     left; trace renders the folder whatever its state (a torn log line
//     is skipped);
//   - --resume with the disk working again finishes the run with files
//     identical to the uninterrupted run's (wall-clock fields aside), or
//     refuses with a UserError that names what to do; finished blocks up
//     to the last checkpoint are not computed again.
func TestSimulateFailsAtEveryWrite(t *testing.T) {
	root := t.TempDir()
	ref := faultConfig(t, root, "ref", false)
	refDir := newRun(t, ref)
	defer atomicfile.Use(atomicfile.NoSync)()
	counter := &atomicfile.Faulty{FS: atomicfile.NoSync}
	restore := atomicfile.Use(counter)
	_, err := (&Job{Command: "simulate", Config: ref, Dir: refDir}).Run(context.Background())
	restore()
	if err != nil {
		t.Fatal(err)
	}
	want := resultFiles(t, refDir)
	ops := counter.Ops()
	if ops < 30 {
		t.Fatalf("the run made %d write operations; the injector does not see the writers", ops)
	}
	t.Logf("%d write operations in a %d-block run", ops, ref.Blocks())
	refusals, resumed := 0, 0
	for _, fault := range []struct {
		name   string
		err    error
		sticky bool
	}{{"ENOSPC", syscall.ENOSPC, true}, {"EIO", syscall.EIO, false}} {
		for k := 1; k <= ops; k++ {
			name := fault.name + "-" + strings.Repeat("0", 4-len(itoa(k))) + itoa(k)
			cfg := ref
			cfg.Run.Name = name
			dir := newRun(t, cfg)
			fy := &atomicfile.Faulty{FS: atomicfile.NoSync, FailAt: k, Err: fault.err, Sticky: fault.sticky}
			restore := atomicfile.Use(fy)
			_, err := (&Job{Command: "simulate", Config: cfg, Dir: dir}).Run(context.Background())
			restore()
			got := resultFiles(t, dir)
			if err == nil && (!complete(dir, cfg.Blocks()) || runfoldertest.Diff(want, got) != "") {
				t.Fatalf("%s: fault at %s: the run succeeded with %s", name, fy.Failed, runfoldertest.Diff(want, got))
			}
			if err != nil && !errors.Is(err, fault.err) {
				t.Fatalf("%s: fault at %s: err = %v, want %v", name, fy.Failed, err, fault.err)
			}
			for f := range got {
				if tempFile.MatchString(f) {
					t.Errorf("%s: fault at %s left the temporary file %s", name, fy.Failed, f)
				}
			}
			var sum runfolder.Summary
			if runfolder.ReadJSON(filepath.Join(dir, runfolder.FileSummary), &sum) == nil && sum.Complete || complete(dir, cfg.Blocks()) {
				if d := runfoldertest.Diff(want, got); d != "" {
					t.Fatalf("%s: fault at %s: the folder says complete but %s", name, fy.Failed, d)
				}
			}
			if k%16 == 0 { // trace renders any state (slow: a sample)
				if _, err := runfolder.Render(dir); err != nil && !strings.Contains(err.Error(), "completed no block") && !errors.Is(err, os.ErrNotExist) {
					t.Errorf("%s: fault at %s: trace: %v", name, fy.Failed, err)
				}
				os.RemoveAll(filepath.Join(dir, runfolder.DirPlots))
			}
			// The disk works again: --resume.
			first := -1
			_, err = (&Job{Command: "simulate", Config: cfg, Dir: dir, Resume: true, Hooks: runfolder.Hooks{Start: func(f, _ int) { first = f }}}).Run(context.Background())
			var ue *runfolder.UserError
			switch {
			case err == nil:
				resumed++
				if d := runfoldertest.Diff(want, resultFiles(t, dir)); d != "" {
					t.Fatalf("%s: fault at %s: resumed run %s", name, fy.Failed, d)
				}
				if cp, _ := os.ReadFile(filepath.Join(dir, runfolder.DirState, runfolder.FileCheckpoint)); first == 0 && strings.Contains(string(cp), `"next_block":2`) {
					t.Errorf("%s: resume started at block 0 despite a checkpoint", name)
				}
			case errors.As(err, &ue) && (strings.Contains(err.Error(), "--force") || strings.Contains(err.Error(), "without --resume") || strings.Contains(err.Error(), "already complete")):
				refusals++
				if strings.Contains(err.Error(), "already complete") {
					if d := runfoldertest.Diff(want, resultFiles(t, dir)); d != "" {
						t.Fatalf("%s: fault at %s: resume says complete but %s", name, fy.Failed, d)
					}
				}
			default:
				t.Fatalf("%s: fault at %s: resume: %v", name, fy.Failed, err)
			}
			os.RemoveAll(dir)
		}
	}
	t.Logf("%d faults: %d resumed to identical files, %d refused with what to do", 2*ops, resumed, refusals)
	if resumed == 0 {
		t.Fatal("no fault was recoverable by --resume")
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

// A torn last line of the memory log (a write that failed mid-line) is
// reported by ReadLog as ErrTornLine with the complete lines before it,
// and trace renders those: it never fails on it (the 300 kB case:
// "line 843: unexpected end of JSON input").
func TestTornLogLine(t *testing.T) {
	root := t.TempDir()
	cfg := faultConfig(t, root, "torn", true)
	dir := newRun(t, cfg)
	if _, err := (&Job{Command: "simulate", Config: cfg, Dir: dir}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, runfolder.FileLog)
	all, err := runfolder.ReadLog(path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	last := bytes.LastIndexByte(b[:len(b)-1], '\n') + 1
	// A write after the checkpoint's record of the log that failed 40
	// bytes into its line.
	if err := os.WriteFile(path, append(bytes.Clone(b), b[last:last+40]...), 0o644); err != nil {
		t.Fatal(err)
	}
	lines, err := runfolder.ReadLog(path)
	if !errors.Is(err, runfolder.ErrTornLine) || len(lines) != len(all) || !strings.Contains(err.Error(), "line "+itoa(len(all)+1)) {
		t.Fatalf("torn log: %d lines (want %d), err %v", len(lines), len(all), err)
	}
	if _, err := runfolder.Render(dir); err != nil {
		t.Fatalf("trace of a torn log: %v", err)
	}
	// The log cut into the lines the checkpoint records (40 bytes into
	// the last one) was changed since the run wrote it: trace refuses it,
	// naming the file (issue #26).
	if err := os.WriteFile(path, b[:last+40], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runfolder.Render(dir); err == nil || !strings.Contains(err.Error(), path+" has") || !strings.Contains(err.Error(), "fewer than") {
		t.Fatalf("trace of a log cut below the checkpoint's record: %v", err)
	}
	// A line torn in the middle of the file is still an error.
	mid := bytes.IndexByte(b, '\n')
	bad := append(append(append([]byte(nil), b[:mid-10]...), '\n'), b[mid+1:]...)
	os.WriteFile(path, bad, 0o644)
	if _, err := runfolder.ReadLog(path); err == nil || errors.Is(err, runfolder.ErrTornLine) || !strings.Contains(err.Error(), "line 1") {
		t.Fatalf("damaged first line: %v", err)
	}
}

// runfolder.Inspect does not take a damaged checkpoint for the run's: a complete
// run whose checkpoint's state no longer has its SHA-256 is not complete.
func TestInspectDamagedCheckpoint(t *testing.T) {
	root := t.TempDir()
	cfg := faultConfig(t, root, "r", false)
	dir := newRun(t, cfg)
	if _, err := (&Job{Command: "simulate", Config: cfg, Dir: dir}).Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !runfolder.Inspect(dir).Complete {
		t.Fatal("the complete run is not complete")
	}
	path := filepath.Join(dir, runfolder.DirState, runfolder.FileCheckpoint)
	b, _ := os.ReadFile(path)
	i := bytes.Index(b, []byte(`"log_bytes": `))
	if i < 0 {
		t.Fatalf("no log_bytes in %s", b)
	}
	i += len(`"log_bytes": `)
	b[i] = '1' + (b[i]-'0')%8 // another size
	os.WriteFile(path, b, 0o644)
	if runfolder.Inspect(dir).Complete {
		t.Fatal("runfolder.Inspect takes a damaged checkpoint for a complete run")
	}
	if _, err := runfolder.Render(dir); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("trace with a damaged checkpoint: %v", err)
	}
}
