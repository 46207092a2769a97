package rollout

import (
	"math"
	"testing"
)

// TestShiftKnownAnswer derives warped timesteps by hand for another shift:
// with shift 3, step 750 is table entry 250, l = 0.75, σ' = 3·0.75/(1 +
// 2·0.75) = 0.9, t = 900; step 500: l = 0.5, σ' = 1.5/2 = 0.75.
func TestShiftKnownAnswer(t *testing.T) {
	s, err := BuildSchedule([]int{1000, 750, 500}, 3, 1000, true)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range []float64{1, 0.9, 0.75} {
		if math.Abs(float64(s.Sigmas[k])-want) > 1e-6 || math.Abs(float64(s.Timesteps[k])-1000*want) > 1e-3 {
			t.Errorf("step %d: t %v σ %v, want σ %v", k, s.Timesteps[k], s.Sigmas[k], want)
		}
	}
}

// TestX0RenoiseRollout pins denoising_update_mode: x0_renoise to the
// authors' scheduler.add_noise on an unwarped schedule: each step's input
// is (1 − σ')·x0 + σ'·ε in float32, σ' the table's σ nearest to the next
// raw timestep and ε the step's re-noise draw, and x0 = x − σ·v (float64).
func TestX0RenoiseRollout(t *testing.T) {
	m := goldenModel(t)
	g := openGolden(t, "rollout_native.safetensors")
	ctx := g.F32("context")
	txt, err := m.EmbedText(ctx, len(ctx)/m.Cfg.TextDim)
	if err != nil {
		t.Fatal(err)
	}
	sch, err := BuildSchedule([]int{1000, 750, 500, 250}, 5, 1000, false)
	if err != nil {
		t.Fatal(err)
	}
	noise := Seeded{Seed: 9, StepsPerBlock: 3}
	var recs []StepRecord
	err = Run(m, tinyNative(t, m), Options{Blocks: 1, Height: 6, Width: 8, Schedule: sch, Noise: noise, Prompts: []Prompt{{Text: txt}},
		Observe: func(r StepRecord) {
			if !r.Clean {
				recs = append(recs, StepRecord{Step: r.Step, Input: append([]float32(nil), r.Input...), Flow: append([]float32(nil), r.Flow...), X0: append([]float32(nil), r.X0...)})
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	eps := make([]float32, len(recs[0].Input))
	for s := 0; s+1 < len(recs); s++ {
		if err := noise.Renoise(0, s, eps); err != nil {
			t.Fatal(err)
		}
		sig := sch.Sigmas[s]
		next := sch.Sigma(sch.Timesteps[s+1])
		for i := range eps {
			x0 := float32(float64(recs[s].Input[i]) - float64(sig)*float64(recs[s].Flow[i]))
			if x0 != recs[s].X0[i] {
				t.Fatalf("step %d value %d: x0 %v, want x − σ·v = %v", s, i, recs[s].X0[i], x0)
			}
			want := float32(float32((1-next)*x0) + float32(next*eps[i]))
			if recs[s+1].Input[i] != want {
				t.Fatalf("step %d value %d: input %v, want (1 − σ')·x0 + σ'·ε = %v", s+1, i, recs[s+1].Input[i], want)
			}
		}
	}
}
