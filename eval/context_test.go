package eval

import (
	"context"
	"errors"
	"testing"

	"github.com/densitykv/densitykv/memory"
)

// A cancelled Options.Context stops Run within the next block (between
// layers), with an error wrapping the context's.
func TestRunStopsOnCancelledContext(t *testing.T) {
	g, base := evalStream(t, 8)
	vs := []Variant{{Group: "g", Label: "fifo", Policy: memory.NameFIFO, Config: base}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := 0
	_, err := Run(g, vs, Options{Base: base, Queries: 8, TopK: 4, CoverageSample: 32, Context: ctx,
		Progress: func(d, _ int) {
			done = d
			if d == 2 {
				cancel()
			}
		}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run after cancel: error %v, want one wrapping context.Canceled", err)
	}
	if done != 2 {
		t.Fatalf("Run finished %d blocks after the cancel at block 2", done)
	}
	// Already cancelled: no block at all.
	g, _ = evalStream(t, 8)
	done = 0
	if _, err := Run(g, vs, Options{Base: base, Context: ctx, Progress: func(d, _ int) { done = d }}); !errors.Is(err, context.Canceled) || done != 0 {
		t.Fatalf("cancelled before Run: error %v after %d blocks", err, done)
	}
}
