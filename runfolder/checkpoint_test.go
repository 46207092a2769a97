package runfolder

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/densitykv/densitykv/internal/filehash"
)

// TestFingerprint: an input's fingerprint is its role, path and
// filehash.File sum (whose own tests cover the sampling of large files).
func TestFingerprint(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	data := []byte("some text embeddings")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Fingerprint("text", p)
	if err != nil {
		t.Fatal(err)
	}
	if f.SHA256 != filehash.Bytes(data) || f.Size != int64(len(data)) || f.Role != "text" || f.Path != p {
		t.Fatalf("fingerprint %+v", f)
	}
	if _, err := Fingerprint("text", filepath.Join(dir, "missing")); err == nil {
		t.Fatal("missing file fingerprinted")
	}
}
