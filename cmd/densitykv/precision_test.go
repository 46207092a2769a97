package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/golden"
	"github.com/densitykv/densitykv/runfolder"
)

// generate --precision and generate.precision: one spelling (fp32, bf16,
// bf16-fast; bf16-fast refused on the CPU),
// the default rule (bf16 for the real model, fp32 for tiny), the recorded
// value, and errors that name the flag or key, the value and the names
// allowed, before any run folder exists.
func TestGeneratePrecision(t *testing.T) {
	if config.DefaultPrecision("1.3b") != gemm.BF16 || config.DefaultPrecision("tiny") != gemm.F32 {
		t.Fatalf("default precisions: 1.3b %v, tiny %v", config.DefaultPrecision("1.3b"), config.DefaultPrecision("tiny"))
	}
	g := golden.Wan(t)
	dir := t.TempDir()
	base := []string{"generate", "--arch", "tiny", "--checkpoint", filepath.Join(g, "weights.safetensors"),
		"--text", filepath.Join(g, "rollout_native.safetensors"), "--text-tensor", "context",
		"--latent-height", "6", "--latent-width", "8", "--blocks", "1", "--out", dir, "--quiet", "--preview=false", "--trace-step", "-1"}
	recorded := func(name string) compute.Precision {
		t.Helper()
		var gc config.GenerateConfig
		if err := runfolder.LoadConfig(filepath.Join(dir, name), &gc); err != nil {
			t.Fatal(err)
		}
		y, _ := os.ReadFile(filepath.Join(dir, name, runfolder.FileConfig))
		if !strings.Contains(string(y), "precision: "+gc.Generate.Precision.String()+"\n") {
			t.Errorf("%s: config.resolved.yaml does not record precision %v:\n%s", name, gc.Generate.Precision, y)
		}
		return gc.Generate.Precision
	}
	for _, c := range []struct {
		name string
		args []string
		want compute.Precision
	}{{"default", nil, compute.FP32}, {"bf16", []string{"--precision", "bf16"}, compute.BF16}, {"fp32", []string{"--precision", "fp32"}, compute.FP32}} {
		if code, _, errs := run(t, context.Background(), append(append(append([]string(nil), base...), c.args...), "--name", c.name)...); code != 0 {
			t.Fatalf("%s: exit %d: %s", c.name, code, errs)
		}
		if p := recorded(c.name); p != c.want {
			t.Errorf("%s: recorded precision %v, want %v", c.name, p, c.want)
		}
	}
	// The recorded bf16 config runs again as it is; a flag overrides it.
	cfg := filepath.Join(dir, "bf16", runfolder.FileConfig)
	if code, _, errs := run(t, context.Background(), "generate", "--config", cfg, "--name", "again", "--quiet"); code != 0 || recorded("again") != compute.BF16 {
		t.Fatalf("--config of a bf16 run: exit %d: %s", code, errs)
	}
	if code, _, errs := run(t, context.Background(), "generate", "--config", cfg, "--name", "over", "--quiet", "--precision", "fp32"); code != 0 || recorded("over") != compute.FP32 {
		t.Fatalf("--config of a bf16 run with --precision fp32: exit %d: %s", code, errs)
	}
	// Unknown values.
	code, _, errs := run(t, context.Background(), append(append([]string(nil), base...), "--precision", "f32", "--name", "bad")...)
	if code != exitUsage || !strings.Contains(errs, "--precision") || !strings.Contains(errs, `"f32"`) || !strings.Contains(errs, "fp32, bf16 or bf16-fast") {
		t.Errorf("--precision f32: exit %d, stderr %q", code, errs)
	}
	y := filepath.Join(dir, "half.yaml")
	os.WriteFile(y, []byte("generate: {precision: half}\n"), 0o644)
	code, _, errs = run(t, context.Background(), append(append([]string(nil), base...), "--config", y, "--name", "bad")...)
	if code != exitUsage || !strings.Contains(errs, `"half"`) || !strings.Contains(errs, "fp32, bf16 or bf16-fast") {
		t.Errorf("generate.precision: half: exit %d, stderr %q", code, errs)
	}
	// bf16-fast on the CPU: refused naming why, from the flag and the key.
	code, _, errs = run(t, context.Background(), append(append([]string(nil), base...), "--precision", "bf16-fast", "--name", "bad")...)
	if code != exitUsage || !strings.Contains(errs, "bf16-fast") || !strings.Contains(errs, "the CPU computes exact mode only") {
		t.Errorf("--precision bf16-fast on the CPU: exit %d, stderr %q", code, errs)
	}
	os.WriteFile(y, []byte("generate: {precision: bf16-fast}\n"), 0o644)
	code, _, errs = run(t, context.Background(), append(append([]string(nil), base...), "--config", y, "--name", "bad")...)
	if code != exitUsage || !strings.Contains(errs, "generate.precision") || !strings.Contains(errs, "VK_NV_cooperative_matrix") {
		t.Errorf("generate.precision: bf16-fast on the CPU: exit %d, stderr %q", code, errs)
	}
	if exists(filepath.Join(dir, "bad")) {
		t.Fatal("a failed generate left a run folder")
	}
}
