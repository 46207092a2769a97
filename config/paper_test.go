package config

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite configs/paper from PaperConfigs")

// TestPaperConfigs: configs/paper holds exactly the files PaperConfigs
// renders (-update writes them), and each decodes strictly into a generate
// configuration with the paper's protocol: seed 0, the backbone, 120 s with
// 30/60/120 s horizons over every prompt (main, authors) or 60 s over the
// 16-prompt subset (ablation), the ordering (mean; max for authors).
func TestPaperConfigs(t *testing.T) {
	root := filepath.Join("..", "configs", "paper")
	files := PaperConfigs()
	if *update {
		for _, f := range files {
			p := filepath.Join(root, filepath.FromSlash(f.Path))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, f.Data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := map[string]bool{}
	counts := map[string]int{}
	for _, f := range files {
		want[f.Path] = true
		counts[strings.SplitN(f.Path, "/", 2)[0]]++
		have, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f.Path)))
		if err != nil {
			t.Fatalf("%v (go test ./config -run TestPaperConfigs -update writes it)", err)
		}
		if !bytes.Equal(have, f.Data) {
			t.Fatalf("configs/paper/%s differs from PaperConfigs (edit config/paper.go, then -update)", f.Path)
		}
		gc := GenerateDefaults()
		keys, err := Decode(have, &gc, true)
		if err != nil {
			t.Fatalf("%s: %v", f.Path, err)
		}
		set, backbone, stem := splitPaperPath(t, f.Path)
		g := gc.Generate
		if gc.Run.Seed != 0 || !keys.Set["run.seed"] || g.Backbone.String() != backbone || g.Arch != "1.3b" || !g.SkipExisting || len(gc.Policies) != 1 {
			t.Fatalf("%s: %+v", f.Path, gc)
		}
		switch set {
		case "main", "authors":
			if gc.Stream.Seconds != 120 || !slices.Equal(g.Horizons, []float64{30, 60, 120}) || g.PromptIndices != nil || gc.Policies[0] != stem {
				t.Fatalf("%s: %v s, horizons %v, indices %v, policy %v", f.Path, gc.Stream.Seconds, g.Horizons, g.PromptIndices, gc.Policies)
			}
			ord := "mean"
			if set == "authors" {
				ord = "max"
			}
			if stem == "densitykv" && (gc.Memory.Bank.Ordering.String() != ord || !keys.Set["memory.bank.ordering"]) {
				t.Fatalf("%s: ordering %v, want %s", f.Path, gc.Memory.Bank.Ordering, ord)
			}
		case "ablation":
			if gc.Stream.Seconds != 60 || !slices.Equal(g.PromptIndices, PaperAblationIndices) || gc.Policies[0] != "densitykv" {
				t.Fatalf("%s: %v s, indices %v", f.Path, gc.Stream.Seconds, g.PromptIndices)
			}
			if want := "mean"; stem != "source-order" && gc.Memory.Bank.Ordering.String() != want {
				t.Fatalf("%s: ordering %v", f.Path, gc.Memory.Bank.Ordering)
			}
		default:
			t.Fatalf("%s: unknown set", f.Path)
		}
	}
	if counts["main"] != 15 || counts["authors"] != 3 || counts["ablation"] != 3*len(PaperAblations) {
		t.Fatalf("files per set %v", counts)
	}
	// No stray file under configs/paper (but its README).
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel != "README.md" && !want[filepath.ToSlash(rel)] {
			t.Errorf("configs/paper/%s is not one of PaperConfigs' files", rel)
		}
		return nil
	})
}

// TestPaperAblationSubset: the subset is the paper's list (16 distinct
// indices within the 128 prompts, in increasing order).
func TestPaperAblationSubset(t *testing.T) {
	if len(PaperAblationIndices) != 16 || !slices.IsSorted(PaperAblationIndices) || PaperAblationIndices[0] != 0 || PaperAblationIndices[15] != PaperPrompts-1 {
		t.Fatal(PaperAblationIndices)
	}
	if len(slices.Compact(slices.Clone(PaperAblationIndices))) != 16 {
		t.Fatal("repeated index")
	}
}

func splitPaperPath(t *testing.T, p string) (set, backbone, stem string) {
	parts := strings.Split(p, "/")
	if len(parts) != 3 || !strings.HasSuffix(parts[2], ".yaml") {
		t.Fatalf("path %s", p)
	}
	return parts[0], parts[1], strings.TrimSuffix(parts[2], ".yaml")
}
