package limitread

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	for limit := int64(0); limit <= 6; limit++ {
		b, err := File(p, limit, "test files")
		switch {
		case limit >= 5 && (err != nil || string(b) != "hello"):
			t.Errorf("limit %d: %q, %v", limit, b, err)
		case limit < 5 && (!errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "test files")):
			t.Errorf("limit %d: error %v", limit, err)
		}
	}
	if _, err := File(filepath.Join(dir, "missing"), 10, "x"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := File(p, -1, "x"); err == nil {
		t.Error("negative limit accepted")
	}
}

// An endless device is read only up to the limit.
func TestEndless(t *testing.T) {
	_, err := File("/dev/zero", 1<<20, "configuration files")
	if err == nil || !strings.Contains(err.Error(), "larger than 1 MiB, the limit for configuration files") {
		t.Fatalf("/dev/zero: %v", err)
	}
	b, err := Reader(bytes.NewReader(make([]byte, 100)), "r", 100, "x")
	if err != nil || len(b) != 100 {
		t.Fatalf("exact limit: %d bytes, %v", len(b), err)
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{100: "100 bytes", 1 << 10: "1 KiB", 3 << 20: "3 MiB", 2 << 30: "2 GiB", 1<<20 + 1: "1048577 bytes"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}
