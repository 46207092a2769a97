package gemm

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedAssemblyUpToDate regenerates kernel_bf16_amd64.s with
// gen_bf16.go and requires the checked-in file to match it.
func TestGeneratedAssemblyUpToDate(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to run gen_bf16.go: %v", err)
	}
	out := filepath.Join(t.TempDir(), "kernel.s")
	cmd := exec.Command(goTool, "run", "gen_bf16.go", "-o", out)
	cmd.Env = append(os.Environ(), "GOEXPERIMENT=", "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run gen_bf16.go: %v\n%s", err, b)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("kernel_bf16_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("kernel_bf16_amd64.s is stale: run go generate ./gemm")
	}
}
