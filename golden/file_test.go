package golden

import (
	"slices"
	"testing"
)

func TestRelErr(t *testing.T) {
	for _, c := range []struct {
		got  []float32
		want []float64
		rel  float64
	}{
		{[]float32{1, 2}, []float64{1, 2}, 0},
		{[]float32{1, 3}, []float64{1, 2}, 0.5},   // max|Δ| 1 over max|want| 2
		{[]float32{-4, 0}, []float64{-2, 0}, 1},   // the sign does not cancel
		{[]float32{0.5, 0}, []float64{0, 0}, 0.5}, // all-zero reference: the absolute error
	} {
		if r := RelErr(c.got, c.want); r != c.rel {
			t.Errorf("RelErr(%v, %v) = %v, want %v", c.got, c.want, r, c.rel)
		}
	}
}

// Open reads a golden file's tensors and sidecar; a missing tensor fails.
func TestOpenReadsTheGoldenFiles(t *testing.T) {
	g := Open(t, "rollout_native.safetensors")
	if g.Name() != "rollout_native.safetensors" || !slices.Contains(g.Names(), "context") {
		t.Fatalf("file %q with tensors %v", g.Name(), g.Names())
	}
	ctx := g.F32("context")
	wide := g.F64("context")
	if len(ctx) == 0 || len(ctx) != len(wide) || float64(ctx[3]) != wide[3] {
		t.Fatalf("context: %d float32, %d float64 values", len(ctx), len(wide))
	}
	var side map[string]any
	g.Sidecar(&side)
	if len(side) == 0 {
		t.Fatal("empty sidecar")
	}
}
