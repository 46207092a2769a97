package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/vbench"
	"github.com/densitykv/densitykv/vbench/vbenchtest"
)

// TestVBenchCommands: export two lists, write VBench's results of every
// folder, render the tables; bad input exits with the usage code.
func TestVBenchCommands(t *testing.T) {
	root := t.TempDir()
	var runs []string
	for _, p := range []string{"native", "densitykv"} {
		runs = append(runs, vbenchtest.WriteList(t, filepath.Join(root, p), vbenchtest.List{Backbone: "longlive", Policy: p, Horizons: []float64{30, 60, 120}, Prompts: []string{"a fox", "a cat"}}))
	}
	out := filepath.Join(root, "export")
	code, stdout, stderr := run(t, context.Background(), append([]string{"vbench", "export", "--out", out, "--horizons", "30,60"}, runs...)...)
	if code != 0 {
		t.Fatalf("export: exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, s := range []string{"exported 8 videos of 2 runs into 4 folders", "| prompts-2/longlive/densitykv/60s | DensityKV | 2 |",
		"python vbench2_beta_long/eval_long.py --videos_path " + filepath.Join(out, "prompts-2/longlive/native/30s"), "densitykv vbench table --manifest " + out} {
		if !strings.Contains(stdout, s) {
			t.Errorf("export printed\n%s\nwithout %q", stdout, s)
		}
	}
	m, err := vbench.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range m.Folders {
		var files []string
		for _, v := range f.Videos {
			files = append(files, v.File)
		}
		s := 0.9 + 0.01*float64(i%2) // DensityKV above Native everywhere
		vbenchtest.WriteResults(t, filepath.Join(out, "results", f.Dir, "results_x"+vbench.ResultsSuffix), filepath.Join(out, f.Dir), files, [6]float64{s, s, s, s, s, s}, nil)
	}
	tables := filepath.Join(root, "tables")
	code, stdout, stderr = run(t, context.Background(), "vbench", "table", "--manifest", filepath.Join(out, vbench.FileManifest), "--out", tables, filepath.Join(out, "results"))
	if code != 0 {
		t.Fatalf("table: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "| DensityKV | **1.00** | 6 | 6 | 12 of 12 |") || !strings.Contains(stdout, "wrote 13 files into "+tables) {
		t.Errorf("table printed\n%s", stdout)
	}
	if _, err := os.Stat(filepath.Join(tables, "prompts-2", "wins.svg")); err != nil {
		t.Error(err)
	}
	// Bad input: the usage exit code and a message naming the problem.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"vbench", "export", "--out", filepath.Join(root, "x"), filepath.Join(root, "missing")}, "no such file or directory"},
		{[]string{"vbench", "export", "--out", filepath.Join(root, "x"), "--horizons", "45", runs[0]}, "has no 45 s video"},
		{[]string{"vbench", "export", runs[0]}, "--out is required"},
		{[]string{"vbench", "table", "--out", tables, out}, "--manifest is required"},
		{[]string{"vbench", "table", "--manifest", out, "--out", tables, filepath.Join(root, "native")}, "no VBench results"},
	} {
		code, _, stderr := run(t, context.Background(), c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, stderr, exitUsage, c.want)
		}
	}
}
