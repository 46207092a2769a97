package bank

import (
	"context"
	"errors"
	"testing"
)

// RunBench reports every step and stops at the next step once its context
// is cancelled.
func TestRunBenchProgressAndCancel(t *testing.T) {
	var seen []int
	total := 0
	bc := BenchConfig{Heads: 2, Candidates: 40, Capacity: 80, Dim: 16, Repeats: 3,
		Progress: func(done, n int) { seen = append(seen, done); total = n }}
	if _, err := RunBench(bc); err != nil {
		t.Fatal(err)
	}
	if total != 8 || len(seen) != 8 || seen[0] != 1 || seen[7] != 8 {
		t.Fatalf("progress %v of %d, want 1…8 of 8 (fill, warm-up, 3 updates, 3 passes)", seen, total)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen = nil
	bc.Context = ctx
	bc.Progress = func(done, _ int) {
		seen = append(seen, done)
		if done == 3 {
			cancel()
		}
	}
	r, err := RunBench(bc)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled bench: error %v, want context.Canceled", err)
	}
	if len(seen) != 3 || len(r.UpdateSeconds) != 1 {
		t.Fatalf("cancelled after step 3: progress %v, %d timed updates; want 3 steps and 1 update", seen, len(r.UpdateSeconds))
	}
}
