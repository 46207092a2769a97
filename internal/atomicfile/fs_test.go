package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Faulty fails exactly the k-th write operation (sticky: and every later
// one), with a torn half-write for Write; Write then leaves the
// destination as it was and no temporary file, for every k.
func TestFaultyAtEveryOperation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f.json")
	if err := WriteBytes(path, []byte("old")); err != nil {
		t.Fatal(err)
	}
	write := func() error {
		return Write(path, func(w io.Writer) error {
			for range 3 {
				if _, err := w.Write([]byte("new-")); err != nil {
					return err
				}
			}
			return nil
		})
	}
	counter := &Faulty{}
	restore := Use(counter)
	if err := write(); err != nil {
		t.Fatal(err)
	}
	restore()
	ops := counter.Ops()
	if ops != 8 { // create temp, 3 writes, chmod, sync, rename, sync folder
		t.Fatalf("%d operations, want 8", ops)
	}
	for _, sticky := range []bool{false, true} {
		for k := 1; k <= ops; k++ {
			WriteBytes(path, []byte("old"))
			f := &Faulty{FailAt: k, Err: syscall.ENOSPC, Sticky: sticky}
			restore := Use(f)
			err := write()
			restore()
			if k == ops { // the folder sync after the rename: new content, error reported
				if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "sync folder") {
					t.Fatalf("k=%d: %v", k, err)
				}
				continue
			}
			if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), path) {
				t.Fatalf("k=%d (%s): err = %v, want ENOSPC naming %s", k, f.Failed, err, path)
			}
			if b, _ := os.ReadFile(path); string(b) != "old" {
				t.Fatalf("k=%d (%s): destination now %q", k, f.Failed, b)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 1 {
				t.Fatalf("k=%d (%s): %d entries left", k, f.Failed, len(ents))
			}
		}
	}
	// A torn write: half the bytes, then the error.
	p := filepath.Join(dir, "log")
	f := &Faulty{FailAt: 2, Err: syscall.EIO}
	restore = Use(f)
	lf, err := OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	n, err := lf.Write([]byte("0123456789"))
	lf.Close()
	restore()
	if b, _ := os.ReadFile(p); n != 5 || !errors.Is(err, syscall.EIO) || string(b) != "01234" {
		t.Fatalf("torn write: n=%d err=%v file %q", n, err, b)
	}
}

// CheckOutputs refuses an output that is an input: same path however
// spelled, a hard or symbolic link, or an input inside an output folder.
func TestCheckOutputs(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "w.safetensors")
	os.WriteFile(in, []byte("weights"), 0o644)
	hard := filepath.Join(dir, "hard")
	os.Link(in, hard)
	soft := filepath.Join(dir, "soft")
	os.Symlink(in, soft)
	os.Mkdir(filepath.Join(dir, "run"), 0o755)
	inside := filepath.Join(dir, "run", "state", "x")
	ins := []Input{{"--checkpoint", in}, {"--text", inside}}
	for _, c := range []struct {
		out  Output
		want string
	}{
		{Output{Role: "--record-stream", Path: in}, "--record-stream " + in + " is --checkpoint " + in},
		{Output{Role: "--record-stream", Path: filepath.Join(dir, ".", "sub", "..", "w.safetensors")}, "is --checkpoint"},
		{Output{Role: "--record-stream", Path: hard}, "is --checkpoint"},
		{Output{Role: "--record-stream", Path: soft}, "is --checkpoint"},
		{Output{Role: "state", Path: filepath.Join(dir, "run", "state"), Dir: true}, "holds --text " + inside},
	} {
		err := CheckOutputs([]Output{c.out}, ins)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.out, err, c.want)
		}
	}
	for _, out := range []Output{{Role: "o", Path: filepath.Join(dir, "other")}, {Role: "d", Path: filepath.Join(dir, "run", "plots"), Dir: true},
		{Role: "d", Path: filepath.Join(dir, "ru"), Dir: true}} {
		if err := CheckOutputs([]Output{out}, ins); err != nil {
			t.Errorf("%+v: %v", out, err)
		}
	}
	if err := CheckWritable("--record-stream", "/nodir/x"); err == nil || !strings.Contains(err.Error(), "its folder /nodir") {
		t.Errorf("missing folder: %v", err)
	}
	if err := CheckWritable("--record-stream", dir); err == nil || !strings.Contains(err.Error(), "is a folder") {
		t.Errorf("a folder: %v", err)
	}
	if err := CheckWritable("--record-stream", filepath.Join(in, "x")); err == nil || !strings.Contains(err.Error(), "is not a folder") {
		t.Errorf("under a file: %v", err)
	}
}

// CleanTemps removes exactly the temporary files of interrupted writes.
func TestCleanTemps(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "plots"), 0o755)
	keep := []string{"summary.json", ".hidden", "a.tmp", ".x.tmpfile", "plots/p.png"}
	drop := []string{".summary.json.tmp123", "plots/.p.svg.tmp9", ".y.tmp"}
	for _, f := range append(append([]string(nil), keep...), drop...) {
		os.WriteFile(filepath.Join(dir, f), nil, 0o644)
	}
	if err := CleanTemps(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range keep {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s removed", f)
		}
	}
	for _, f := range drop {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t.Errorf("%s kept", f)
		}
	}
	if err := CleanTemps(filepath.Join(dir, "missing")); err != nil {
		t.Errorf("missing folder: %v", err)
	}
}
