package riesz

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedAssemblyUpToDate regenerates epilogue_amd64.s with
// gen_epilogue.go and requires the checked-in file to match it (edit the
// generator, then run go generate ./riesz).
func TestGeneratedAssemblyUpToDate(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to run gen_epilogue.go: %v", err)
	}
	out := filepath.Join(t.TempDir(), "epilogue.s")
	cmd := exec.Command(goTool, "run", "gen_epilogue.go", "-o", out)
	cmd.Env = append(os.Environ(), "GOEXPERIMENT=", "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run gen_epilogue.go: %v\n%s", err, b)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("epilogue_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("epilogue_amd64.s is stale: run go generate ./riesz")
	}
}
