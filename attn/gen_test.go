package attn

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedAssemblyUpToDate regenerates softmax_amd64.s with
// gen_softmax.go and requires the checked-in file to match it (edit the
// generator, then run go generate ./attn).
func TestGeneratedAssemblyUpToDate(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to run gen_softmax.go: %v", err)
	}
	out := filepath.Join(t.TempDir(), "softmax.s")
	cmd := exec.Command(goTool, "run", "gen_softmax.go", "-o", out)
	cmd.Env = append(os.Environ(), "GOEXPERIMENT=", "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run gen_softmax.go: %v\n%s", err, b)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("softmax_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("softmax_amd64.s is stale: run go generate ./attn")
	}
}
