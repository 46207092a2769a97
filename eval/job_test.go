package eval_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/eval"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/runfolder"
)

// tinyJob is an eval job on a tiny synthetic stream (4 blocks) into
// out/name.
func tinyJob(t *testing.T, out, name string) eval.Job {
	t.Helper()
	c := config.EvalConfig()
	c.Memory.Layout = memory.Layout{Height: 4, Width: 6, FramesPerBlock: 3, Layers: 1, Heads: 2, HeadDim: 16}
	c.Stream.Seconds = 3
	c.Run.Out, c.Run.Name, c.Run.Plots = out, name, false
	r, err := c.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	return eval.Job{Config: r, Groups: []string{eval.GroupBaselines}, Queries: 4, TopK: 4}
}

// TestJob runs the eval job: the folder holds config.yaml, the tables and
// summary.json listing them; bad settings are user errors that write
// nothing; a complete folder needs Force; a cancelled job writes no table.
func TestJob(t *testing.T) {
	dir := t.TempDir()
	j := tinyJob(t, dir, "e")
	var plan eval.Plan
	calls := 0
	j.Start = func(p eval.Plan) { plan = p }
	j.Progress = func(int, int) { calls++ }
	out, err := j.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rd := filepath.Join(dir, "e")
	if plan.Dir != rd || plan.Blocks != 4 || plan.Variants != 7 || calls != 4 || out.Dir != rd || out.Result.Blocks != 4 {
		t.Fatalf("plan %+v, %d progress calls, outcome in %s of %d blocks", plan, calls, out.Dir, out.Result.Blocks)
	}
	var sum struct {
		Command  string   `json:"command"`
		Complete bool     `json:"complete"`
		Blocks   int      `json:"blocks"`
		Files    []string `json:"files"`
	}
	if err := runfolder.ReadJSON(filepath.Join(rd, runfolder.FileSummary), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Command != "eval" || !sum.Complete || sum.Blocks != 4 || !slices.Equal(sum.Files, out.Files) ||
		len(out.Files) < 2 || out.Files[0] != filepath.Join(rd, runfolder.FileConfig) || !slices.Contains(out.Files, filepath.Join(rd, "tables.md")) {
		t.Fatalf("summary %+v, outcome files %v", sum, out.Files)
	}
	for _, f := range out.Files {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("listed file: %v", err)
		}
	}

	// A complete folder is refused without Force, taken with it.
	again := tinyJob(t, dir, "e")
	var ue *runfolder.UserError
	if _, err := again.Run(context.Background()); !errors.As(err, &ue) {
		t.Fatalf("rerun without Force: %v, want a user error", err)
	}
	again.Force = true
	if _, err := again.Run(context.Background()); err != nil {
		t.Fatalf("rerun with Force: %v", err)
	}

	// Bad settings: user errors, before any folder.
	for name, mut := range map[string]func(*eval.Job){
		"queries":     func(j *eval.Job) { j.Queries = 0 },
		"top-k":       func(j *eval.Job) { j.TopK = 1 << 21 },
		"sample":      func(j *eval.Job) { j.CoverageSample = -1 },
		"horizon":     func(j *eval.Job) { j.Horizons = []float64{60} },
		"group":       func(j *eval.Job) { j.Groups = []string{"nope"} },
		"first layer": func(j *eval.Job) { j.Config.Stream.FirstLayer = 1 },
	} {
		b := tinyJob(t, dir, "bad")
		mut(&b)
		if _, err := b.Run(context.Background()); !errors.As(err, &ue) {
			t.Errorf("%s: %v, want a user error", name, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "bad")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s: the refused job made its folder (%v)", name, err)
		}
	}

	// Cancelled: interrupted, no table, no summary.
	ctx, cancel := context.WithCancel(context.Background())
	c := tinyJob(t, dir, "stopped")
	c.Progress = func(int, int) { cancel() }
	if _, err := c.Run(ctx); !errors.Is(err, runfolder.ErrInterrupted) {
		t.Fatalf("cancelled job: %v, want ErrInterrupted", err)
	}
	for _, f := range []string{"tables.md", runfolder.FileSummary} {
		if _, err := os.Stat(filepath.Join(dir, "stopped", f)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a stopped eval wrote %s (%v)", f, err)
		}
	}
}
