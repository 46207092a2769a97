package bench

import (
	"context"
	"errors"
	"testing"

	"github.com/densitykv/densitykv/gemm"
)

// RunBank reports every step and stops at the next step once its context
// is cancelled.
func TestRunBankProgressAndCancel(t *testing.T) {
	var seen []int
	total := 0
	bc := BankOptions{Heads: 2, Candidates: 40, Capacity: 80, Dim: 16, Repeats: 3,
		Progress: func(done, n int) { seen = append(seen, done); total = n }}
	before := gemm.HardwareBF16()
	for _, f32 := range []bool{false, true} {
		bc.Float32Kernel = f32
		seen = nil
		// fill, warm-up, 3 updates, 3 passes, and 3 float32 passes when
		// the bfloat16 kernel is in use.
		want := 8
		if gemm.HardwareBF16() && !f32 {
			want = 11
		}
		r, err := RunBank(bc)
		if err != nil {
			t.Fatal(err)
		}
		if bc.Steps() != want || total != want || len(seen) != want || seen[0] != 1 || seen[want-1] != want {
			t.Fatalf("float32 kernel %v: progress %v of %d (Steps %d), want 1…%d", f32, seen, total, bc.Steps(), want)
		}
		if r.BF16 != (want == 11) || (r.BF16Speedup > 0) != r.BF16 || (r.PassFloat32GFLOPS > 0) != r.BF16 {
			t.Fatalf("float32 kernel %v: BF16 %v, speed-up %v, float32 pass %v GFLOP/s", f32, r.BF16, r.BF16Speedup, r.PassFloat32GFLOPS)
		}
	}
	if gemm.HardwareBF16() != before {
		t.Fatalf("gemm.HardwareBF16() = %v after the runs, %v before: Float32Kernel was not undone", gemm.HardwareBF16(), before)
	}
	bc.Float32Kernel = false
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
	r, err := RunBank(bc)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled bench: error %v, want context.Canceled", err)
	}
	if len(seen) != 3 || len(r.UpdateSeconds) != 1 {
		t.Fatalf("cancelled after step 3: progress %v, %d timed updates; want 3 steps and 1 update", seen, len(r.UpdateSeconds))
	}
}
