//go:build unix

package main

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/densitykv/densitykv/golden"
	"github.com/densitykv/densitykv/runfolder"
	"github.com/densitykv/densitykv/runfolder/runfoldertest"
	"github.com/densitykv/densitykv/video"
)

// killAfter runs the densitykv command line args in a child process (this
// test binary as the command, like startCommand) and SIGKILLs it after d,
// or lets it finish first. It reports whether the kill landed.
func killAfter(t *testing.T, d time.Duration, args ...string) bool {
	t.Helper()
	c := exec.Command(os.Args[0], args...)
	c.Env = append(os.Environ(), envTestMain+"=1")
	var stderr bytes.Buffer
	c.Stderr = &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%v ended with %v before the kill: %s", args, err, stderr.String())
		}
		return false
	case <-time.After(d):
		c.Process.Kill()
		<-done
		return true
	}
}

// timed runs args in process and returns how long it took.
func timed(t *testing.T, args ...string) time.Duration {
	t.Helper()
	start := time.Now()
	if code, _, errs := run(t, context.Background(), args...); code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errs)
	}
	return time.Since(start)
}

var (
	wallClock = regexp.MustCompile(`"(update_seconds|attend_seconds|elapsed_seconds|seconds|created)": ?("[^"]*"|[-+0-9.eE]+)`)
	tempName  = regexp.MustCompile(`(^|/)\..*\.tmp[0-9]*$`)
)

// folderFiles reads a run folder's files but state/ (and skip), wall-clock
// fields blanked, the folder's path and name replaced.
func folderFiles(t *testing.T, dir string, skip func(rel string) bool) map[string][]byte {
	t.Helper()
	name := filepath.Base(dir)
	return runfoldertest.Files(t, dir, func(rel string, b []byte) ([]byte, error) {
		if tempName.MatchString(rel) {
			t.Errorf("%s: temporary file %s left", dir, rel)
		}
		if skip != nil && skip(rel) {
			return nil, runfoldertest.Skip
		}
		b = wallClock.ReplaceAll(b, []byte(`"$1":0`))
		b = bytes.ReplaceAll(b, []byte(dir), []byte("RUN"))
		return bytes.ReplaceAll(b, []byte("name: "+name+"\n"), []byte("name: RUN\n")), nil
	})
}

// killPoints returns n kill times spread at random over [0, span): a
// stratified sample, so that early, middle and late kills all occur.
func killPoints(t *testing.T, n int, span time.Duration) []time.Duration {
	seed := uint64(time.Now().UnixNano())
	t.Logf("kill points seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 16))
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration((float64(i) + r.Float64()) / float64(n) * float64(span))
	}
	return out
}

// resumeOrRefuse continues a killed run with args and checks the outcome:
// identical files to the uninterrupted run's, or a usage error naming what
// to do.
func resumeOrRefuse(t *testing.T, label, dir string, want map[string][]byte, skip func(string) bool, args ...string) string {
	t.Helper()
	code, _, errs := run(t, context.Background(), args...)
	switch {
	case code == 0:
		if d := runfoldertest.Diff(want, folderFiles(t, dir, skip)); d != "" {
			t.Fatalf("%s: resumed run: %s", label, d)
		}
		return "resumed"
	case code == exitUsage && strings.Contains(errs, "already complete"):
		if d := runfoldertest.Diff(want, folderFiles(t, dir, skip)); d != "" {
			t.Fatalf("%s: says complete but %s", label, d)
		}
		return "complete"
	case code == exitUsage && (strings.Contains(errs, "--force") || strings.Contains(errs, "without --resume")):
		return "refused"
	}
	t.Fatalf("%s: exit %d: %s", label, code, errs)
	return ""
}

// SIGKILL at random points of simulate, then --resume: the files equal an
// uninterrupted run's byte for byte (wall-clock fields aside), or resume
// refuses naming what to do (a kill before the first checkpoint); never a
// torn file presented as complete.
func TestSIGKILLSimulate(t *testing.T) {
	dir := t.TempDir()
	args := func(name string) []string {
		return tiny(dir, name, "--seconds", "30", "--snapshot-every", "3")
	}
	span := timed(t, args("ref")...) + 150*time.Millisecond // the child's start too
	want := folderFiles(t, filepath.Join(dir, "ref"), nil)
	outcomes := map[string]int{}
	for i, d := range killPoints(t, 4, span) {
		name := "k" + itoa(i)
		killed := killAfter(t, d, args(name)...)
		label := name + " killed at " + d.String()
		if !killed {
			outcomes["finished"]++
			if diff := runfoldertest.Diff(want, folderFiles(t, filepath.Join(dir, name), nil)); diff != "" {
				t.Fatalf("%s: finished before the kill but %s", label, diff)
			}
			continue
		}
		outcomes[resumeOrRefuse(t, label, filepath.Join(dir, name), want, nil, "simulate", "--out", dir, "--name", name, "--resume", "--quiet")]++
	}
	t.Logf("outcomes: %v", outcomes)
}

// SIGKILL at random points of generate (tiny golden model, recorded
// stream, the pipeline VAE's video with a horizon), then --resume:
// identical latents, logs, trace, provenance, summary, recorded stream,
// segments, video.mp4 and horizon video (each one continuous encode, the
// same bytes as the uninterrupted run's), or a refusal naming what to do.
func TestSIGKILLGenerate(t *testing.T) {
	dir := t.TempDir()
	text := tinyText(t, dir)
	args := func(name string) []string {
		return genResumeArgs(t, dir, name, text, 8, "--policy", "densitykv", "--capacity", "24", "--sigma", "4", "--snapshot-every", "2", "--preview=false",
			"--vae", filepath.Join(golden.PipelineVAE(t), "weights.pth"), "--horizons", "3")
	}
	complete := func(name string) {
		t.Helper()
		for _, f := range []string{video.FileVideo, "video_3s.mp4", "segments/segment_00007.mp4"} {
			if _, err := os.Stat(filepath.Join(dir, name, f)); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		if _, err := os.Stat(filepath.Join(dir, name, runfolder.DirState, runfolder.DirVideoState)); !os.IsNotExist(err) {
			t.Fatalf("%s: the lossless copies are kept after the run is complete (%v)", name, err)
		}
	}
	span := timed(t, args("ref")...) + 300*time.Millisecond
	complete("ref")
	outcomes := map[string]int{}
	for i, d := range killPoints(t, 3, span) {
		name := "k" + itoa(i)
		label := name + " killed at " + d.String()
		if !killAfter(t, d, args(name)...) {
			outcomes["finished"]++
			sameRunFiles(t, dir, "ref", name)
			complete(name)
			continue
		}
		code, _, errs := run(t, context.Background(), "generate", "--out", dir, "--name", name, "--resume", "--quiet")
		switch {
		case code == 0:
			outcomes["resumed"]++
			sameRunFiles(t, dir, "ref", name)
			complete(name)
		case code == exitUsage && strings.Contains(errs, "already complete"):
			outcomes["complete"]++
			sameRunFiles(t, dir, "ref", name)
		case code == exitUsage && (strings.Contains(errs, "without --resume") || strings.Contains(errs, "--force")):
			outcomes["refused"]++
		default:
			t.Fatalf("%s: resume: exit %d: %s", label, code, errs)
		}
	}
	t.Logf("outcomes: %v", outcomes)
}

// SIGKILL at random points of eval (which has no resume), then the same
// command again: it runs in place (a killed eval is not "complete": its
// summary.json is written last) and its tables equal an uninterrupted
// run's, or it refuses naming --force.
func TestSIGKILLEval(t *testing.T) {
	dir := t.TempDir()
	args := func(name string) []string {
		return tinyEval(dir, name, "--groups", "baselines", "--seconds", "40", "--plots=false")
	}
	// Timings (series.csv, the tables' update column) are wall clock.
	skip := func(rel string) bool {
		return rel != "cells.csv" && rel != "frame_coverage.csv" && rel != runfolder.FileConfig
	}
	span := timed(t, args("ref")...) + 150*time.Millisecond
	want := folderFiles(t, filepath.Join(dir, "ref"), skip)
	outcomes := map[string]int{}
	for i, d := range killPoints(t, 4, span) {
		name := "k" + itoa(i)
		label := name + " killed at " + d.String()
		if !killAfter(t, d, args(name)...) {
			outcomes["finished"]++
			continue
		}
		// summary.json is written last: a kill that lands after it (the
		// process was exiting) leaves a complete run, which must then hold
		// every table of an uninterrupted one.
		var sum struct{ Complete bool }
		if runfolder.ReadJSON(filepath.Join(dir, name, runfolder.FileSummary), &sum) == nil && sum.Complete {
			if d := runfoldertest.Diff(want, folderFiles(t, filepath.Join(dir, name), skip)); d != "" {
				t.Fatalf("%s: a killed eval says complete but %s", label, d)
			}
			outcomes["complete before the kill"]++
			continue
		}
		outcomes[resumeOrRefuse(t, label, filepath.Join(dir, name), want, skip, args(name)...)]++
	}
	t.Logf("outcomes: %v", outcomes)
}

func itoa(i int) string { return strings.TrimSpace(strings.Repeat(" ", 0) + string(rune('0'+i))) }
