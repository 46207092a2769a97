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

// TestPathFolder: a folder is identified by its files (names, sizes,
// contents), hidden files aside, symbolic links followed; a file by
// File's Sum.
func TestPathFolder(t *testing.T) {
	dir := t.TempDir()
	m := filepath.Join(dir, "model")
	os.MkdirAll(filepath.Join(m, "transformer"), 0o755)
	os.WriteFile(filepath.Join(m, "model_index.json"), []byte("{}"), 0o644)
	os.WriteFile(filepath.Join(m, "transformer", "w.safetensors"), []byte("weights"), 0o644)
	base, err := Path(m)
	if err != nil || base.Size != 9 {
		t.Fatalf("%+v %v", base, err)
	}
	if f, err := Path(filepath.Join(m, "model_index.json")); err != nil || f.Size != 2 {
		t.Fatalf("file: %+v %v", f, err)
	}
	same := func() bool {
		s, err := Path(m)
		if err != nil {
			t.Fatal(err)
		}
		return s == base
	}
	os.WriteFile(filepath.Join(m, ".cache"), []byte("x"), 0o644)
	os.MkdirAll(filepath.Join(m, ".git"), 0o755)
	os.WriteFile(filepath.Join(m, ".git", "HEAD"), []byte("x"), 0o644)
	if !same() {
		t.Fatal("a hidden file changed the folder's sum")
	}
	os.WriteFile(filepath.Join(m, "transformer", "w.safetensors"), []byte("weightz"), 0o644)
	if same() {
		t.Fatal("a changed file went unnoticed")
	}
	os.WriteFile(filepath.Join(m, "transformer", "w.safetensors"), []byte("weights"), 0o644)
	if !same() {
		t.Fatal("the same content gives another sum")
	}
	os.Rename(filepath.Join(m, "transformer", "w.safetensors"), filepath.Join(m, "transformer", "v.safetensors"))
	if same() {
		t.Fatal("a renamed file went unnoticed")
	}
	os.Rename(filepath.Join(m, "transformer", "v.safetensors"), filepath.Join(m, "transformer", "w.safetensors"))
	// A Hugging Face cache: the files are links to blobs.
	blob := filepath.Join(dir, "blob")
	os.WriteFile(blob, []byte("weights"), 0o644)
	os.Remove(filepath.Join(m, "transformer", "w.safetensors"))
	if err := os.Symlink(blob, filepath.Join(m, "transformer", "w.safetensors")); err != nil {
		t.Fatal(err)
	}
	if !same() {
		t.Fatal("a link to the same content gives another sum")
	}
	if _, err := Path(t.TempDir()); err == nil {
		t.Fatal("an empty folder hashed")
	}
}
