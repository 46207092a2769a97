package record

import (
	"strings"
	"testing"

	"github.com/densitykv/densitykv/memory"
)

// TestTracerPlans: the attention tracer is a memory.Planner that sends
// every call but the traced step to its policy's plan (HostCall false),
// takes Attend on the traced step (HostCall true, AttendPlan refused
// naming it), and takes Attend always around a policy that does not plan.
func TestTracerPlans(t *testing.T) {
	lay := memory.Layout{Height: 2, Width: 2, FramesPerBlock: 1, Layers: 1, Heads: 1, HeadDim: 8}
	for _, name := range []string{memory.NameDensityKV, memory.NameDeepForcing} {
		pol, err := memory.New(name, memory.Config{Layout: lay, Capacity: 4})
		if err != nil {
			t.Fatal(err)
		}
		tr := NewAttentionTracer(pol, 1, 4)
		var _ memory.Planner = tr
		_, plans := pol.(memory.Planner)
		n := lay.TokensPerBlock() * lay.Heads * lay.HeadDim
		q, k, v := make([]float32, n), make([]float32, n), make([]float32, n)
		for i := range q {
			q[i], k[i], v[i] = float32(i%5)-2, float32(i%3)-1, float32(i%7)/7
		}
		kv := func() ([]float32, []float32, error) { return k, v, nil }
		for step := 0; step <= 2; step++ {
			c := memory.Call{Block: 0, Step: step, First: step == 0, Clean: step == 2}
			if err := tr.Begin(c); err != nil {
				t.Fatal(err)
			}
			traced := step == 1
			if got := tr.HostCall(); got != (traced || !plans) {
				t.Errorf("%s step %d: HostCall %v", name, step, got)
			}
			if tr.HostCall() {
				if _, err := tr.AttendPlan(0, kv, 0); err == nil || !strings.Contains(err.Error(), "must take Attend") {
					t.Errorf("%s step %d: AttendPlan on a host call: %v", name, step, err)
				}
				if _, err := tr.Attend(0, q, k, v); err != nil {
					t.Fatal(err)
				}
			} else if _, err := tr.AttendPlan(0, kv, 0); err != nil {
				t.Fatalf("%s step %d: %v", name, step, err)
			}
			if err := tr.End(); err != nil {
				t.Fatal(err)
			}
		}
		if sum := tr.Mass[0]; plans && sum == 0 {
			t.Errorf("%s: the traced step measured nothing (mass %v)", name, tr.Mass)
		}
	}
}
