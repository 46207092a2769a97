package bench

import (
	"testing"

	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/rope"
	"github.com/densitykv/densitykv/wan"
)

// deviceLike is the CPU backend seen as a device (no compute.HostMemory),
// counting the rotations that show the planned attention path.
type deviceLike struct {
	compute.Backend
	ropes int
}

func (d *deviceLike) Rope(x compute.Tensor, tok0, heads int, r *rope.Table, height, width, t0, frames int) {
	d.ropes++
	d.Backend.Rope(x, tok0, heads, r, height, width, t0, frames)
}

// TestBenchFixedContextPlans: the fixed-context policy of bench wan plans
// (its history, the first S − T rows, sent once per layer; the block's
// frames at the cache's last slots), so on a device backend the measured
// calls keep the history there: every layer call rotates the block's
// keys and queries on the backend, and reusing the history sends none.
func TestBenchFixedContextPlans(t *testing.T) {
	lay := wan.TinyConfig().Layout(6, 8, 3)
	p := newFixedPolicy(lay, 12*lay.TokensPerFrame(), 1)
	var pl memory.Planner = p
	first, err := pl.AttendPlan(0, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	T, row := lay.TokensPerBlock(), lay.Heads*lay.HeadDim
	if first.HistoryRows() != p.S-T || len(first.K) != (p.S-T)*row || first.Parts.Total() != p.S || len(first.QT) != 3 || first.QT[2] != 11 {
		t.Fatalf("plan: %d history rows, %d keys, parts %+v, query positions %v", first.HistoryRows(), len(first.K), first.Parts, first.QT)
	}
	if again, _ := pl.AttendPlan(0, nil, first.Key); again.K != nil {
		t.Error("the held history was sent again")
	}
	d := &deviceLike{Backend: compute.NewCPU()}
	const calls = 2
	r, err := RunWan(WanOptions{Name: "tiny", Model: wan.TinyConfig(), Height: 6, Width: 8, Calls: calls, Backend: d, Device: "device-like cpu"})
	if err != nil {
		t.Fatal(err)
	}
	if want := calls * wan.TinyConfig().Layers * 2 * 3; d.ropes < want || r.MedianCall <= 0 {
		t.Fatalf("%d rotations on the backend, want at least %d (planned calls); result %+v", d.ropes, want, r)
	}
}
