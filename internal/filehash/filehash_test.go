package filehash

import (
	"os"
	"path/filepath"
	"testing"
)

// TestFile: small files are hashed whole; large ones by their size and
// evenly spaced pieces, the first and last included.
func TestFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	data := make([]byte, 10000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	sum := func(b []byte) Sum {
		t.Helper()
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		s, err := File(p)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if s := sum(data); s.SHA256 != Bytes(data) || s.Size != 10000 || s.Sampled || s.String() != "sha256:"+Bytes(data) {
		t.Fatalf("small file: %+v", s)
	}
	defer func(w, n, s int64) { Whole, Pieces, Piece = w, n, s }(Whole, Pieces, Piece)
	Whole, Pieces, Piece = 4096, 4, 256 // pieces at 0, 3248, 6496, 9744
	base := sum(data)
	if base.SHA256 == Bytes(data) || !base.Sampled || base.String() != "sampled-sha256:"+base.SHA256 {
		t.Fatalf("large file hashed whole: %+v", base)
	}
	changed := func(at int) bool {
		b := append([]byte(nil), data...)
		b[at] ^= 1
		return sum(b).SHA256 != base.SHA256
	}
	if !changed(0) || !changed(3300) || !changed(9999) {
		t.Fatal("a change inside a sampled piece went unnoticed")
	}
	if changed(2000) {
		t.Fatal("a change between the pieces is noticed: the file was not sampled")
	}
	if sum(append(data, 0)).SHA256 == base.SHA256 {
		t.Fatal("a size change went unnoticed")
	}
	if _, err := File(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("missing file hashed")
	}
	if _, err := File(dir); err == nil {
		t.Fatal("a folder hashed")
	}
}
