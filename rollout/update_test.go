package rollout

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

// TestUnwarpedScheduleKnownAnswer pins warp_denoising_step: false to the
// authors' code by hand: the timesteps are the raw steps, and σ is the
// shifted table's entry nearest to each (argmin |t_i − t|). With shift 5
// the table is t_i = 1000·σ'_i, σ'_i = 5·l_i/(1 + 4·l_i), l_i = 1 − i/1000:
//
//   - t = 1000: i = 0, σ = 1;
//   - t = 750: σ' = 0.75 needs l = 0.75/(5 − 3) = 0.375, i = 625 exactly;
//   - t = 500: l = 1/6, i ∈ {833, 834}: t_833 = 500.599, t_834 = 498.798,
//     so i = 833 (σ ≈ 0.500599);
//   - t = 250: l = 0.0625, i ∈ {937, 938}: t_937 = 251.597, t_938 =
//     248.397, so i = 937 (σ ≈ 0.251597).
func TestUnwarpedScheduleKnownAnswer(t *testing.T) {
	s, err := BuildSchedule([]int{1000, 750, 500, 250}, 5, 1000, false)
	if err != nil {
		t.Fatal(err)
	}
	sig := func(i int) float64 { l := 1 - float64(i)/1000; return 5 * l / (1 + 4*l) }
	for k, c := range []struct {
		t float32
		i int
	}{{1000, 0}, {750, 625}, {500, 833}, {250, 937}} {
		if s.Timesteps[k] != c.t {
			t.Errorf("step %d: timestep %v, want the raw %v", k, s.Timesteps[k], c.t)
		}
		if d := math.Abs(float64(s.Sigmas[k]) - sig(c.i)); d > 1e-6 {
			t.Errorf("step %d (t = %v): σ = %v, want table entry %d = %.7f", k, c.t, s.Sigmas[k], c.i, sig(c.i))
		}
	}
	// Warped, the same list gives the released timesteps; a final step 0
	// is the terminal value 0 (σ looked up at the nearest entry, 4.98).
	w, err := BuildSchedule([]int{1000, 750, 500, 250, 0}, 5, 1000, true)
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{1000, 937.5, 833.3333, 625, 0}
	for k := range want {
		if math.Abs(float64(w.Timesteps[k]-want[k])) > 1e-3 {
			t.Fatalf("warped timesteps %v, want %v", w.Timesteps, want)
		}
	}
	if float64(w.Sigmas[4]) != 0.004980080295354128 {
		t.Errorf("σ at the terminal step 0 = %v, want 0.00498008 (nearest entry)", w.Sigmas[4])
	}
	for _, bad := range [][]int{{1000, 1000}, {-1}, {1001}, {500, 750}} {
		if _, err := BuildSchedule(bad, 5, 1000, false); err == nil {
			t.Errorf("steps %v accepted", bad)
		}
	}
}

// TestScheduleOptionsBuild checks the first-chunk list, the defaults and
// the update names.
func TestScheduleOptionsBuild(t *testing.T) {
	main, first, err := ScheduleOptions{FirstChunkSteps: []int{1000, 500}}.Build()
	if err != nil {
		t.Fatal(err)
	}
	if first == nil || len(first.Timesteps) != 2 || math.Abs(float64(first.Timesteps[1])-833.3333) > 1e-3 {
		t.Fatalf("first chunk schedule %+v", first)
	}
	d := DefaultSchedule()
	if !bytes.Equal(f32b(main.Timesteps), f32b(d.Timesteps)) || !bytes.Equal(f32b(main.Sigmas), f32b(d.Sigmas)) {
		t.Fatalf("default options give %v, want %v", main.Timesteps, d.Timesteps)
	}
	if _, f, _ := DefaultScheduleOptions().Build(); f != nil {
		t.Fatal("a first-chunk schedule without first-chunk steps")
	}
	if n := (ScheduleOptions{FirstChunkSteps: []int{1000, 800, 600, 400, 200}}).MaxSteps(); n != 5 {
		t.Errorf("MaxSteps = %d, want 5", n)
	}
	if _, _, err := (ScheduleOptions{FirstChunkSteps: []int{0, 5}}).Build(); err == nil {
		t.Error("a first-chunk list that does not decrease was accepted")
	}
	var u Update
	if err := u.UnmarshalText([]byte("flow_euler")); err != nil || u != UpdateFlowEuler || UpdateX0Renoise.String() != "x0_renoise" {
		t.Fatalf("update names: %v %v", u, err)
	}
	if err := u.UnmarshalText([]byte("euler")); err == nil {
		t.Fatal("unknown update name accepted")
	}
	if _, _, err := (ScheduleOptions{Update: 7}).Build(); err == nil {
		t.Fatal("update 7 accepted")
	}
}

// noRenoise is a Seeded source whose re-noise draws are an error: a flow
// Euler rollout must not draw.
type noRenoise struct{ Seeded }

func (noRenoise) Renoise(block, step int, dst []float32) error {
	return errors.New("re-noise draw in a flow Euler rollout")
}

// TestFlowEulerRollout pins denoising_update_mode: flow_euler to the
// authors' scheduler.step_to: each step's input is the previous input plus
// flow·(σ_next − σ) in float32 (the difference first), the block's latents
// are the last input plus flow·(0 − σ), and no noise is drawn after the
// initial noise.
func TestFlowEulerRollout(t *testing.T) {
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
	var inputs, flows [][]float32
	var latents [][]float32
	err = Run(m, tinyNative(t, m), Options{Blocks: 2, Height: 6, Width: 8, Schedule: sch, Update: UpdateFlowEuler,
		Noise: noRenoise{Seeded{Seed: 5, StepsPerBlock: 3}}, Prompts: []Prompt{{Text: txt}},
		Observe: func(r StepRecord) {
			if !r.Clean {
				inputs = append(inputs, append([]float32(nil), r.Input...))
				flows = append(flows, append([]float32(nil), r.Flow...))
			}
		},
		BlockDone: func(_ int, x []float32, _ BlockLog) error {
			latents = append(latents, append([]float32(nil), x...))
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	S := len(sch.Timesteps)
	for b := 0; b < 2; b++ {
		for s := 0; s < S; s++ {
			x, v := inputs[b*S+s], flows[b*S+s]
			next, want := float32(0), latents[b]
			if s < S-1 {
				next, want = sch.Sigmas[s+1], inputs[b*S+s+1]
			}
			d := next - sch.Sigmas[s]
			for i := range x {
				if e := x[i] + float32(v[i]*d); e != want[i] {
					t.Fatalf("block %d step %d value %d: %v, want x + v·(σ' − σ) = %v", b, s, i, want[i], e)
				}
			}
		}
	}
}

// TestFirstChunkSchedule checks that block 0 runs the first-chunk list and
// later blocks the general one, x0 re-noise drawing once per step of each.
func TestFirstChunkSchedule(t *testing.T) {
	m := goldenModel(t)
	g := openGolden(t, "rollout_native.safetensors")
	ctx := g.F32("context")
	txt, _ := m.EmbedText(ctx, len(ctx)/m.Cfg.TextDim)
	main, first, err := ScheduleOptions{FirstChunkSteps: []int{1000, 750, 500, 250, 125}}.Build()
	if err != nil {
		t.Fatal(err)
	}
	ts := map[int][]float32{}
	err = Run(m, tinyNative(t, m), Options{Blocks: 2, Height: 6, Width: 8, Schedule: main, FirstSchedule: first,
		Noise: Seeded{Seed: 5, StepsPerBlock: 4}, Prompts: []Prompt{{Text: txt}},
		Observe: func(r StepRecord) {
			if !r.Clean {
				ts[r.Block] = append(ts[r.Block], r.Timestep)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(f32b(ts[0]), f32b(first.Timesteps)) || !bytes.Equal(f32b(ts[1]), f32b(main.Timesteps)) {
		t.Fatalf("timesteps block 0 %v (want %v), block 1 %v (want %v)", ts[0], first.Timesteps, ts[1], main.Timesteps)
	}
	// The step's re-noise uses σ of the next timestep at its nearest entry.
	if err := Run(m, tinyNative(t, m), Options{Blocks: 1, Height: 6, Width: 8, Schedule: main, Update: 9,
		Noise: Seeded{}, Prompts: []Prompt{{Text: txt}}}); err == nil {
		t.Fatal("update 9 accepted")
	}
}
