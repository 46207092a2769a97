package main

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/golden"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/runfolder"
)

// generate shares simulate's memory flags and reads --config; a failed
// generate leaves no run folder behind, so that trying again just works.
func TestGenerateFlagsConfigAndFailures(t *testing.T) {
	g := golden.Wan(t)
	dir := t.TempDir()
	base := []string{"generate", "--arch", "tiny", "--checkpoint", filepath.Join(g, "weights.safetensors"),
		"--text", filepath.Join(g, "rollout_native.safetensors"), "--text-tensor", "context",
		"--latent-height", "6", "--latent-width", "8", "--blocks", "2", "--out", dir, "--quiet", "--preview=false", "--trace-step", "-1"}
	// Every memory flag of simulate exists on generate.
	gen := newGenerateCmd()
	for path, flag := range config.Flags() {
		if strings.HasPrefix(path, "memory.") && !strings.HasPrefix(path, "memory.layout.") && gen.Flags().Lookup(flag) == nil {
			t.Errorf("generate lacks --%s (%s)", flag, path)
		}
	}
	if gen.Flags().Lookup("config") == nil {
		t.Error("generate lacks --config")
	}
	// Failures before the run folder exists.
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"text tensor", []string{"--text-tensor", "nope"}, `no tensor "nope" (--text-tensor)`},
		{"checkpoint", []string{"--checkpoint", filepath.Join(g, "rollout_native.safetensors")}, "--checkpoint"},
		{"sigma", []string{"--sigma", "0"}, "--sigma is 0"},
		{"tau", []string{"--tau", "0.5"}, "memory.bank.tau (--tau)"},
		{"window", []string{"--window-frames", "2"}, "memory.window_frames (--window-frames)"},
	} {
		code, _, errs := run(t, context.Background(), append(append([]string(nil), base...), append(c.args, "--name", "x")...)...)
		if code != exitUsage || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d, stderr %q, want %q", c.name, code, errs, c.want)
		}
		if exists(filepath.Join(dir, "x")) {
			t.Fatalf("%s: the failed generate left a run folder", c.name)
		}
	}
	// The bank, Deep Forcing and LongLive-RAG flags reach the recorded config.
	flags := []string{"--p", "4", "--eps", "2", "--delta", "1e-5", "--admission", "sequential", "--descriptor", "pre-rope-key",
		"--payload", "f32", "--densities", "f64", "--workers", "1", "--deep-forcing-recent", "4", "--deep-forcing-max-reuse", "3",
		"--rag-top-k", "2", "--rag-descriptor", "key-mean", "--name", "x"}
	if code, _, errs := run(t, context.Background(), append(append([]string(nil), base...), flags...)...); code != 0 {
		t.Fatalf("generate with memory flags (after failures with the same name): exit %d: %s", code, errs)
	}
	var gc config.GenerateConfig
	if err := runfolder.LoadConfig(filepath.Join(dir, "x"), &gc); err != nil {
		t.Fatal(err)
	}
	m := gc.Memory
	if b := m.Bank; b.P != 4 || b.Eps != 2 || b.Delta != 1e-5 || b.Admission != bank.AdmitSequential || b.Descriptor != bank.DescPreRoPEKey ||
		b.Payload != bank.PayloadF32 || b.Densities != bank.F64 || b.Workers != 1 || m.DeepForcing.RecentFrames != 4 || m.DeepForcing.MaxReuse != 3 ||
		m.LongLiveRAG.TopK != 2 || m.LongLiveRAG.Descriptor != memory.RAGKeyMean || m.LongLiveRAG.DescriptorStorageDim != 2*32 {
		t.Fatalf("recorded memory config %+v", m)
	}
	y, _ := os.ReadFile(filepath.Join(dir, "x", runfolder.FileConfig))
	if strings.Contains(string(y), "synth:") {
		t.Errorf("generate's config has a stream.synth block:\n%s", y)
	}
	// --config: the recorded file, with flags on top.
	code, _, errs := run(t, context.Background(), "generate", "--config", filepath.Join(dir, "x", runfolder.FileConfig), "--name", "y", "--tau", "3", "--quiet")
	if code != 0 {
		t.Fatalf("generate --config: exit %d: %s", code, errs)
	}
	var gy config.GenerateConfig
	if err := runfolder.LoadConfig(filepath.Join(dir, "y"), &gy); err != nil {
		t.Fatal(err)
	}
	want := gc
	want.Run.Name, want.Memory.Bank.Tau = "y", 3
	if !reflect.DeepEqual(gy, want) {
		t.Fatalf("generate --config recorded\n%+v\nwant\n%+v", gy, want)
	}
	// A simulate config's synthetic stream cannot drive generate.
	sim := filepath.Join(dir, "sim.yaml")
	os.WriteFile(sim, []byte("stream: {kind: synthetic}\n"), 0o644)
	code, _, errs = run(t, context.Background(), append(append([]string(nil), base...), "--name", "w", "--config", sim)...)
	if code != exitUsage || !strings.Contains(errs, "stream.kind") {
		t.Fatalf("generate --config with a synthetic stream: exit %d: %s", code, errs)
	}
}
