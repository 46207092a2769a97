package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/bench"
)

// Ctrl-C (a cancelled context) stops eval and both benchmarks with exit
// 130, the per-command notice, and stops catching the signal once.
func TestCtrlCStopsEvalAndBench(t *testing.T) {
	dir := t.TempDir()
	// The bank bench also times float32 passes where the bfloat16 kernel runs.
	benchStop := fmt.Sprintf("bench bank stopped after 0 of %d steps (fill, warm-up, 2 updates, 2 passes", bench.BankOptions{Repeats: 2}.Steps())
	cases := []struct {
		name   string
		args   []string
		notice string
		stop   string
	}{
		{"eval", tinyEval(dir, "e", "--groups", "baselines"), "stopping after the current layer; a stopped eval writes no tables", "eval stopped after 0 of 8 blocks"},
		{"bench bank", []string{"bench", "bank", "--heads", "2", "--candidates", "64", "--capacity", "128", "--dim", "16", "--repeats", "2", "--quiet"},
			"stopping after the current update or pass", benchStop},
		{"bench", []string{"bench", "--heads", "2", "--candidates", "64", "--capacity", "128", "--dim", "16", "--repeats", "2", "--quiet"},
			"stopping after the current update or pass", benchStop},
		{"bench wan", []string{"bench", "wan", "--tiny", "--quiet"}, "stopping after the current forward call", "bench wan stopped in tiny (golden config) at fp32 after 0 of 40 forward calls"},
		{"simulate", tiny(dir, "s"), "stopping after the current block", "interrupted with 0 of 12 blocks done"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stops := 0
			stopSignals = func() { stops++ }
			defer func() { stopSignals = nil }()
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			code, _, errs := run(t, ctx, c.args...)
			if code != exitInterrupted {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitInterrupted, errs)
			}
			if want := "densitykv: Ctrl-C: " + c.notice + " (Ctrl-C again to abort)\n"; !strings.Contains(errs, want) {
				t.Errorf("stderr lacks the notice %q:\n%s", want, errs)
			}
			if !strings.Contains(errs, c.stop) {
				t.Errorf("stderr lacks %q:\n%s", c.stop, errs)
			}
			if stops != 1 {
				t.Errorf("signal catching stopped %d times, want once", stops)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "e", "tables.md")); err == nil {
		t.Error("a stopped eval wrote tables.md")
	}
	// Without Ctrl-C: no notice, signals kept.
	stops := 0
	stopSignals = func() { stops++ }
	defer func() { stopSignals = nil }()
	code, _, errs := run(t, context.Background(), "bench", "bank", "--heads", "2", "--candidates", "64", "--capacity", "128", "--dim", "16", "--repeats", "1", "--quiet")
	if code != 0 || strings.Contains(errs, "Ctrl-C") || stops != 0 {
		t.Fatalf("uninterrupted bench: exit %d, %d stops, stderr %q", code, stops, errs)
	}
}

// bench bank and bench wan report progress on stderr (plain lines when it
// is not a terminal), and --quiet silences it.
func TestBenchProgress(t *testing.T) {
	bankArgs := []string{"bench", "bank", "--heads", "2", "--candidates", "64", "--capacity", "128", "--dim", "16", "--repeats", "2", "--json"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{bankArgs, fmt.Sprintf("bench bank: %[1]d/%[1]d (100%%)", bench.BankOptions{Repeats: 2}.Steps())},
		{[]string{"bench", "wan", "--tiny", "--json"}, "bench wan tiny (golden config) bf16 (forward calls): 40/40 (100%)"},
	} {
		code, _, errs := run(t, context.Background(), c.args...)
		if code != 0 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, stderr lacks %q:\n%s", c.args, code, c.want, errs)
		}
		code, _, errs = run(t, context.Background(), append(c.args, "--quiet")...)
		if code != 0 || errs != "" {
			t.Errorf("%v --quiet: exit %d, stderr %q", c.args, code, errs)
		}
	}
}
