package runfolder

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Claim: a new folder is marked; another command's folder, a user folder
// and an unmarked run folder of unknown command are refused without force;
// a folder from before markers is known by its summary.json.
func TestClaim(t *testing.T) {
	root := t.TempDir()
	d := filepath.Join(root, "a")
	if err := Claim(d, "simulate", false, false); err != nil {
		t.Fatal(err)
	}
	if o, err := ReadOwner(d); o != "simulate" || err != nil {
		t.Fatalf("owner %q %v", o, err)
	}
	if err := Claim(d, "demo", false, true); err == nil || !strings.Contains(err.Error(), "belongs to a simulate run") {
		t.Fatalf("demo over simulate: %v", err)
	}
	if err := Claim(d, "demo", true, false); err != nil {
		t.Fatalf("--force: %v", err)
	}
	if o, _ := ReadOwner(d); o != "demo" {
		t.Fatalf("owner after --force: %q", o)
	}
	// Before markers: a demo folder with its summary.
	old := filepath.Join(root, "old")
	os.MkdirAll(old, 0o755)
	os.WriteFile(filepath.Join(old, FileConfig), []byte("run: {}\n"), 0o644)
	os.WriteFile(filepath.Join(old, FileLog), []byte("{}\n"), 0o644)
	os.WriteFile(filepath.Join(old, FileSummary), []byte(`{"command": "demo"}`), 0o644)
	if err := Claim(old, "demo", false, true); err != nil {
		t.Fatalf("demo over an old demo folder: %v", err)
	}
	os.WriteFile(filepath.Join(old, FileOwner), nil, 0o644)
	os.WriteFile(filepath.Join(old, FileConfig), []byte("run: {}\n"), 0o644)
	if err := Claim(old, "demo", false, true); err == nil || !strings.Contains(err.Error(), "is damaged") {
		t.Fatalf("damaged marker: %v", err)
	}
	unknown := filepath.Join(root, "unknown")
	os.MkdirAll(unknown, 0o755)
	os.WriteFile(filepath.Join(unknown, FileConfig), []byte("run: {}\n"), 0o644)
	if err := Claim(unknown, "demo", false, true); err == nil || !strings.Contains(err.Error(), "earlier run") {
		t.Fatalf("unknown run folder: %v", err)
	}
	user := filepath.Join(root, "user")
	os.MkdirAll(user, 0o755)
	os.WriteFile(filepath.Join(user, "notes"), nil, 0o644)
	if err := Claim(user, "simulate", false, false); err == nil || !strings.Contains(err.Error(), "not a densitykv run folder") {
		t.Fatalf("user folder: %v", err)
	}
	if err := CheckOwner(d, "simulate"); err == nil || !strings.Contains(err.Error(), "densitykv demo --resume") {
		t.Fatalf("CheckOwner: %v", err)
	}
}
