package main

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/runfolder"
)

// config.resolved.yaml has snake_case layout keys, records the resolved
// bank workers and descriptor size, and older files (framesperblock,
// headdim) are still read.
func TestResolvedConfigKeys(t *testing.T) {
	dir := t.TempDir()
	if code, _, errs := run(t, context.Background(), tiny(dir, "k", "--plots=false", "--policy", "longlive-rag", "--rag-descriptor", "key-mean")...); code != 0 {
		t.Fatal(errs)
	}
	y, err := os.ReadFile(filepath.Join(dir, "k", runfolder.FileConfig))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"frames_per_block: 3\n", "head_dim: 8\n", "workers: ", "descriptor_storage_dim: 16\n"} {
		if !strings.Contains(string(y), s) {
			t.Errorf("config.resolved.yaml lacks %q:\n%s", s, y)
		}
	}
	for _, s := range []string{"framesperblock", "headdim", "workers: 0", "descriptor_storage_dim: 0"} {
		if strings.Contains(string(y), s) {
			t.Errorf("config.resolved.yaml has %q:\n%s", s, y)
		}
	}
	// An older file: its layout keys are read (as --config, and as a run folder).
	old := strings.NewReplacer("frames_per_block:", "framesperblock:", "head_dim:", "headdim:").Replace(string(y))
	os.MkdirAll(filepath.Join(dir, "old"), 0o755)
	os.WriteFile(filepath.Join(dir, "old", runfolder.FileConfig), []byte(old), 0o644)
	a, err := loadRunConfig(filepath.Join(dir, "k"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := loadRunConfig(filepath.Join(dir, "old"))
	if err != nil || !reflect.DeepEqual(a, b) {
		t.Fatalf("older run folder config read as %+v (%v), want %+v", b.Memory.Layout, err, a.Memory.Layout)
	}
	code, _, errs := run(t, context.Background(), "simulate", "--config", filepath.Join(dir, "old", runfolder.FileConfig), "--out", dir, "--name", "again", "--quiet", "--plots=false")
	if code != 0 {
		t.Fatalf("--config of an older file: %s", errs)
	}
	c, _ := loadRunConfig(filepath.Join(dir, "again"))
	if c.Memory != a.Memory {
		t.Fatalf("older file resolved to %+v, want %+v", c.Memory, a.Memory)
	}
}

// The YAML example of docs/simulate.md (once the README's) is a valid
// configuration.
func TestDocsYAMLExample(t *testing.T) {
	b, err := os.ReadFile("../../docs/simulate.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```yaml\n")
	y, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/simulate.md has no yaml example")
	}
	c := config.DefaultConfig()
	if _, err := config.Decode([]byte(y), &c, true); err != nil {
		t.Fatalf("docs/simulate.md example: %v\n%s", err, y)
	}
	if _, err := c.Resolve(); err != nil || c.Memory.Layout.FramesPerBlock != 3 || c.Memory.Layout.HeadDim != 128 {
		t.Fatalf("docs/simulate.md example resolves to %+v: %v", c.Memory.Layout, err)
	}
}
