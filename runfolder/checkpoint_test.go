package runfolder

import (
	"os"
	"path/filepath"
	"testing"
)

// TestFingerprint: small files are hashed whole; large ones by their size
// and evenly spaced pieces, the first and last included.
func TestFingerprint(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	data := make([]byte, 10000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	fp := func(b []byte) FileFingerprint {
		t.Helper()
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := fingerprint("text", p)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	if f := fp(data); f.SHA256 != sha256Hex(data) || f.Size != 10000 || f.Role != "text" || f.Path != p {
		t.Fatalf("small file: %+v", f)
	}
	defer func(w, n, s int64) { fingerprintWhole, fingerprintPieces, fingerprintPiece = w, n, s }(fingerprintWhole, fingerprintPieces, fingerprintPiece)
	fingerprintWhole, fingerprintPieces, fingerprintPiece = 4096, 4, 256 // pieces at 0, 3248, 6496, 9744
	base := fp(data)
	if base.SHA256 == sha256Hex(data) {
		t.Fatal("large file hashed whole")
	}
	changed := func(at int) bool {
		b := append([]byte(nil), data...)
		b[at] ^= 1
		return fp(b).SHA256 != base.SHA256
	}
	if !changed(0) || !changed(3300) || !changed(9999) {
		t.Fatal("a change inside a sampled piece went unnoticed")
	}
	if changed(2000) {
		t.Fatal("a change between the pieces is noticed: the file was not sampled")
	}
	if fp(append(data, 0)).SHA256 == base.SHA256 {
		t.Fatal("a size change went unnoticed")
	}
	if _, err := fingerprint("text", filepath.Join(dir, "missing")); err == nil {
		t.Fatal("missing file fingerprinted")
	}
}
