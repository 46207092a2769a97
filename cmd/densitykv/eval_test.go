package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/record"
	"github.com/densitykv/densitykv/runfolder"
	"github.com/densitykv/densitykv/synth"
)

func tinyEval(out, name string, extra ...string) []string {
	a := []string{"eval", "--out", out, "--name", name, "--height", "4", "--width", "6", "--heads", "2", "--head-dim", "16",
		"--seconds", "6", "--queries", "8", "--quiet"}
	return append(a, extra...)
}

func TestEvalWritesTablesAndPlots(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := run(t, context.Background(), tinyEval(dir, "e", "--groups", "baselines,tau", "--json")...)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	var sum struct {
		Dir      string   `json:"dir"`
		Blocks   int      `json:"blocks"`
		Horizons []int    `json:"horizon_blocks"`
		Variants int      `json:"variants"`
		Files    []string `json:"files"`
	}
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatalf("json summary: %v\n%s", err, out)
	}
	// 6 s at 4 frames/s = 24 frames = 8 blocks; 7 baselines + 3 τ rows.
	if sum.Blocks != 8 || sum.Variants != 10 || len(sum.Horizons) != 3 {
		t.Fatalf("summary %+v", sum)
	}
	rd := filepath.Join(dir, "e")
	for _, f := range []string{runfolder.FileConfig, "tables.md", "baselines_h8.csv", "tau_h8.csv", "cells.csv", "series.csv", "fidelity.png", "fidelity.svg"} {
		if st, err := os.Stat(filepath.Join(rd, f)); err != nil || st.Size() == 0 {
			t.Errorf("eval folder lacks %s (%v)", f, err)
		}
	}
	md, err := os.ReadFile(filepath.Join(rd, "tables.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"### baselines, horizon 8 blocks", "| DensityKV |", "| τ=1.5 |", "Avg. Rank"} {
		if !strings.Contains(string(md), s) {
			t.Errorf("tables.md lacks %q", s)
		}
	}
	// An existing folder needs --force.
	if code, _, _ := run(t, context.Background(), tinyEval(dir, "e", "--groups", "tau")...); code != exitUsage {
		t.Fatalf("rerun without --force: exit %d, want %d", code, exitUsage)
	}
	if code, _, errs := run(t, context.Background(), tinyEval(dir, "e", "--groups", "tau", "--force")...); code != 0 {
		t.Fatalf("rerun with --force: exit %d: %s", code, errs)
	}
}

// TestEvalPlotsFlag checks that --plots=false writes the tables but no
// picture, and that flags eval does not use are hidden and rejected.
func TestEvalPlotsFlag(t *testing.T) {
	dir := t.TempDir()
	if code, out, errs := run(t, context.Background(), tinyEval(dir, "np", "--groups", "baselines", "--plots=false")...); code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	ents, err := os.ReadDir(filepath.Join(dir, "np"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
		if ext := filepath.Ext(e.Name()); ext == ".png" || ext == ".svg" {
			t.Errorf("--plots=false wrote %s", e.Name())
		}
	}
	if !strings.Contains(strings.Join(names, " "), "tables.md") {
		t.Errorf("no tables.md in %v", names)
	}
	for _, args := range [][]string{
		tinyEval(dir, "s", "--snapshot-every", "2"),
		tinyEval(dir, "f", "--first-layer", "1"),
	} {
		if code, _, errs := run(t, context.Background(), args...); code != exitUsage || !strings.Contains(errs, "does not apply to eval") {
			t.Errorf("%v: exit %d, want %d: %s", args, code, exitUsage, errs)
		}
	}
	_, help, _ := run(t, context.Background(), "eval", "--help")
	for _, name := range evalIgnoredFlags {
		if strings.Contains(help, "--"+name) {
			t.Errorf("eval --help lists --%s", name)
		}
	}
	for _, want := range []string{"--plots", "Memory grows linearly with the stream", "nothing is paged to disk"} {
		if !strings.Contains(help, want) {
			t.Errorf("eval --help lacks %q", want)
		}
	}
}

// TestEvalDefaultScale pins the default that keeps both builds within a
// few minutes (docs/EVAL.md): one layer of the demo layout, 30 s.
func TestEvalDefaultScale(t *testing.T) {
	c := config.EvalConfig()
	if l := c.Memory.Layout; l.Layers != 1 || l.Heads != 4 || l.HeadDim != 64 || c.Blocks() != 40 {
		t.Fatalf("eval default layout %+v, %d blocks; docs/EVAL.md times 1 layer × 4 heads × 64, 40 blocks", l, c.Blocks())
	}
}

func TestEvalUsageErrors(t *testing.T) {
	dir := t.TempDir()
	for name, args := range map[string][]string{
		"group":   tinyEval(dir, "a", "--groups", "nope"),
		"policy":  tinyEval(dir, "b", "--policy", "fifo"),
		"queries": tinyEval(dir, "c", "--queries", "0"),
		"sample":  tinyEval(dir, "e", "--coverage-sample", "-1"),
		"horizon": tinyEval(dir, "d", "--horizons", "60"),
	} {
		if code, _, errs := run(t, context.Background(), args...); code != exitUsage {
			t.Errorf("%s: exit %d, want %d (%s)", name, code, exitUsage, errs)
		}
	}
}

func TestEvalRecordedStream(t *testing.T) {
	dir := t.TempDir()
	sc := synth.DefaultConfig()
	sc.Layout = memory.Layout{Height: 4, Width: 6, FramesPerBlock: 3, Layers: 2, Heads: 2, HeadDim: 16}
	sc.Blocks = 6
	g, err := synth.NewGenerator(sc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "s.dkvs")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := record.NewWriter(f, record.Header{Layout: sc.Layout, DType: record.BFloat16, Blocks: sc.Blocks})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := record.Copy(w, g); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run(t, context.Background(), "eval", "--out", dir, "--name", "r", "--stream", "file", "--stream-file", path,
		"--groups", "baselines", "--queries", "8", "--coverage-sample", "32", "--rag-descriptor", "key-mean", "--json")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	var sum struct {
		Blocks   int `json:"blocks"`
		Variants int `json:"variants"`
	}
	if err := json.Unmarshal([]byte(out), &sum); err != nil || sum.Blocks != 6 || sum.Variants != 7 {
		t.Fatalf("summary %+v (%v)\n%s", sum, err, out)
	}
}
