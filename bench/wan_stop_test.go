package bench

import (
	"context"
	"errors"
	"testing"

	"github.com/densitykv/densitykv/rollout"
	"github.com/densitykv/densitykv/wan"
)

// RunWan reports every forward call and stops at the next one once its
// context is cancelled, in both modes (real rollout, fixed context).
func TestRunWanProgressAndCancel(t *testing.T) {
	cfg := wan.TinyConfig()
	for _, o := range []WanOptions{
		{Name: "rollout", Model: cfg, Height: 6, Width: 8, Blocks: 2},
		{Name: "fixed", Model: cfg, LayersRun: 1, Height: 6, Width: 8, Calls: 3},
	} {
		t.Run(o.Name, func(t *testing.T) {
			var seen []int
			total := 0
			o.Progress = func(done, n int) { seen = append(seen, done); total = n }
			if _, err := RunWan(o); err != nil {
				t.Fatal(err)
			}
			want := o.Calls
			if o.Blocks > 0 {
				want = o.Blocks * (len(rollout.DefaultSchedule().Timesteps) + 1)
			}
			if total != want || len(seen) != want || seen[want-1] != want {
				t.Fatalf("progress %v of %d, want 1…%d", seen, total, want)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			seen = nil
			o.Context = ctx
			o.Progress = func(done, _ int) {
				seen = append(seen, done)
				if done == 2 {
					cancel()
				}
			}
			if _, err := RunWan(o); !errors.Is(err, context.Canceled) || len(seen) != 2 {
				t.Fatalf("cancelled after call 2: error %v, progress %v", err, seen)
			}
		})
	}
}
