package sysmem

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestRead: on Linux the machine's memory and a folder's free space are
// known and plausible.
func TestRead(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc and statfs (Linux)")
	}
	m := Read()
	if m.Total <= 0 || m.Available <= 0 || m.Available > m.Total {
		t.Fatalf("memory %+v", m)
	}
	dir := t.TempDir()
	free := FreeDisk(dir)
	if free <= 0 {
		t.Fatalf("free disk of %s: %d", dir, free)
	}
	// A folder that does not exist yet: its nearest parent's filesystem.
	if got := FreeDisk(filepath.Join(dir, "not", "yet")); got <= 0 {
		t.Fatalf("free disk of a future folder: %d", got)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCgroupFiles: the limit and usage files are read, "max" and v1's huge
// value mean no limit.
func TestCgroupFiles(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "x")
	for _, c := range []struct {
		text string
		want int64
	}{{"max\n", unlimited}, {"1073741824\n", 1 << 30}, {"9223372036854771712\n", 9223372036854771712}} {
		os.WriteFile(p, []byte(c.text), 0o644)
		if got, err := readInt(p); err != nil || got != c.want {
			t.Fatalf("%q: %d %v", c.text, got, err)
		}
	}
}
