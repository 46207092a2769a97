package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/drift"
	"github.com/densitykv/densitykv/generate"
	"github.com/densitykv/densitykv/runfolder"
)

// TestGenerateDrift: a tiny run with a VAE writes drift.jsonl (one record a
// block, with pixel and seam statistics), the same bytes in a second run,
// after a Ctrl-C stop and --resume, and after --stop-on-drift stops and
// resumes (each rule stops the run once; exit status 3); the figure is
// drawn; bad rules are refused before the run folder exists.
func TestGenerateDrift(t *testing.T) {
	ffTools(t)
	dir := t.TempDir()
	read := func(name string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name, runfolder.FileDrift))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, name := range []string{"a", "b"} {
		if code, _, errs := run(t, context.Background(), pipelineArgs(t, dir, name, "--quiet")...); code != 0 {
			t.Fatal(errs)
		}
	}
	want := read("a")
	if !bytes.Equal(read("b"), want) {
		t.Fatalf("two runs wrote other drift.jsonl:\n%s\n%s", want, read("b"))
	}
	recs, err := drift.ReadFile(filepath.Join(dir, "a", runfolder.FileDrift))
	if err != nil || len(recs) != 4 {
		t.Fatalf("%d records: %v", len(recs), err)
	}
	for _, r := range recs {
		// Block 0 decodes to 1+4·(F−1) frames, later blocks to 4·F (F = 3).
		frames := 12
		if r.Block == 0 {
			frames = 9
		}
		if r.Frames != frames || r.HistDist == nil || r.IntraChange == nil || (r.SeamFlicker != nil) != (r.Block > 0) || r.LatentRMS <= 0 {
			t.Fatalf("record %+v", r)
		}
	}
	for _, ext := range []string{".png", ".svg"} {
		if st, err := os.Stat(filepath.Join(dir, "a", runfolder.DirPlots, "drift"+ext)); err != nil || st.Size() == 0 {
			t.Fatalf("plots/drift%s: %v", ext, err)
		}
	}

	// Stopped after 2 blocks and resumed: the same records.
	stopAfterBlocks(t, 2, pipelineArgs(t, dir, "stop", "--quiet", "--snapshot-every", "0"))
	if got := read("stop"); !bytes.Equal(got, want[:len(got)]) || bytes.Count(got, []byte("\n")) != 2 {
		t.Fatalf("the stopped run's drift.jsonl:\n%s", got)
	}
	if code, _, errs := run(t, context.Background(), "generate", "--out", dir, "--name", "stop", "--resume", "--quiet"); code != 0 {
		t.Fatal(errs)
	}
	if !bytes.Equal(read("stop"), want) {
		t.Fatalf("resumed drift.jsonl:\n%s\nwant\n%s", read("stop"), want)
	}

	// densitykv trace draws the figure again.
	os.Remove(filepath.Join(dir, "a", runfolder.DirPlots, "drift.png"))
	if code, _, errs := run(t, context.Background(), "trace", filepath.Join(dir, "a")); code != 0 {
		t.Fatal(errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "a", runfolder.DirPlots, "drift.png")); err != nil {
		t.Fatalf("trace: %v", err)
	}

	// Two rules that block 0 trips: the first stops the run after block 0
	// (the checkpoint is written when stopping); on resume it is spent and
	// the second stops it after block 1 (the checkpoint of --snapshot-every
	// 2 stands); the third run completes.
	rules := "latent_rms>0,latent_rms_ratio>0.5"
	code, _, errs := run(t, context.Background(), pipelineArgs(t, dir, "trip", "--quiet", "--snapshot-every", "2", "--stop-on-drift", rules)...)
	if code != exitDriftStop || !strings.Contains(errs, "block 0 tripped latent_rms>0") || !strings.Contains(errs, "with 1 of 4 blocks done") || !strings.Contains(errs, "--resume") {
		t.Fatalf("stop-on-drift: exit %d: %s", code, errs)
	}
	code, _, errs = run(t, context.Background(), "generate", "--out", dir, "--name", "trip", "--resume", "--quiet")
	if code != exitDriftStop || !strings.Contains(errs, "block 1 tripped latent_rms_ratio>0.5") || !strings.Contains(errs, "with 2 of 4 blocks done") {
		t.Fatalf("resumed stop-on-drift: exit %d: %s", code, errs)
	}
	if code, _, errs := run(t, context.Background(), "generate", "--out", dir, "--name", "trip", "--resume", "--quiet"); code != 0 {
		t.Fatalf("second resume: exit %d: %s", code, errs)
	}
	if !bytes.Equal(read("trip"), want) {
		t.Fatalf("drift.jsonl of the run stopped by --stop-on-drift:\n%s\nwant\n%s", read("trip"), want)
	}

	// Without a VAE: the latent statistics alone, the same values.
	var latentsOnly []string
	for i, a := range pipelineArgs(t, dir, "latents", "--quiet") {
		if a != "--vae" && (i == 0 || pipelineArgs(t, dir, "latents")[i-1] != "--vae") {
			latentsOnly = append(latentsOnly, a)
		}
	}
	if code, _, errs := run(t, context.Background(), latentsOnly...); code != 0 {
		t.Fatal(errs)
	}
	lr, err := drift.ReadFile(filepath.Join(dir, "latents", runfolder.FileDrift))
	if err != nil || len(lr) != 4 {
		t.Fatalf("latents only: %d records, %v", len(lr), err)
	}
	for b, r := range lr {
		if r.Frames != 0 || r.HistDist != nil || r.SeamChange != nil || r.LatentRMS != recs[b].LatentRMS {
			t.Fatalf("latents-only record %+v, with a VAE %+v", r, recs[b])
		}
	}

	for _, bad := range []string{"flicker>3", "seam_flicker>x", "seam_flicker=3", "seam_flicker>NaN"} {
		code, _, errs := run(t, context.Background(), pipelineArgs(t, dir, "bad", "--quiet", "--stop-on-drift", bad)...)
		if code != exitUsage || !strings.Contains(errs, "--stop-on-drift") {
			t.Fatalf("--stop-on-drift %s: exit %d: %s", bad, code, errs)
		}
		if _, err := os.Stat(filepath.Join(dir, "bad")); !os.IsNotExist(err) {
			t.Fatalf("--stop-on-drift %s made the run folder", bad)
		}
	}
}

// TestCollectDrift: collect summarises the prompts' drift.jsonl per policy
// and per prompt, the same as drift.Summarize of the files, and report.md
// has the table; --stop-on-drift is refused with a prompt list.
func TestCollectDrift(t *testing.T) {
	ffTools(t)
	dir := t.TempDir()
	pf := filepath.Join(dir, "prompts.txt")
	os.WriteFile(pf, []byte("a heron lands on a lake\na red panda walks through snow\n"), 0o644)
	if code, _, errs := run(t, context.Background(), listArgs(t, dir, "list", pf, "--stop-on-drift", "seam_flicker>3")...); code != exitUsage || !strings.Contains(errs, "--stop-on-drift") {
		t.Fatalf("list with --stop-on-drift: exit %d: %s", code, errs)
	}
	if code, _, errs := run(t, context.Background(), listArgs(t, dir, "list", pf)...); code != 0 {
		t.Fatal(errs)
	}
	code, out, errs := run(t, context.Background(), "collect", "--json", "--out", filepath.Join(dir, "report"), filepath.Join(dir, "list"))
	var r generate.Report
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil {
		t.Fatalf("collect: exit %d\n%s\n%s", code, out, errs)
	}
	if len(r.Drift) != 1 || r.Drift[0].Policy != "densitykv" || r.Drift[0].Prompts != 2 {
		t.Fatalf("drift %+v", r.Drift)
	}
	var all []float64
	watch, _ := drift.ParseRules(drift.Watch, "")
	for k, p := range r.Prompts {
		recs, err := drift.ReadFile(filepath.Join(runfolder.BatchDir(filepath.Join(dir, "list"), p.Index), runfolder.FileDrift))
		if err != nil || len(recs) != 2 {
			t.Fatalf("prompt %d: %d records, %v", k, len(recs), err)
		}
		a, _ := json.Marshal(drift.Summarize(recs, watch))
		b, _ := json.Marshal(p.Drift)
		if !bytes.Equal(a, b) {
			t.Errorf("prompt %d: summary %s, want %s", k, b, a)
		}
		for _, rec := range recs {
			all = append(all, *rec.HistDist)
		}
	}
	slices.Sort(all)
	hd := r.Drift[0].Stats["hist_dist"]
	if hd.Blocks != 4 || hd.Max != all[3] || hd.Median != (all[1]+all[2])/2 {
		t.Errorf("hist_dist over the list %+v, values %v", hd, all)
	}
	if len(r.Drift[0].Watch) != len(watch) {
		t.Errorf("watch %+v", r.Drift[0].Watch)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report", generate.FileReportMD))
	if err != nil || !strings.Contains(string(md), "## Drift") || !strings.Contains(string(md), "| densitykv | 2 | seam_flicker | 2 |") {
		t.Fatalf("report.md: %v\n%s", err, md)
	}
}
