package rollout

import (
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/golden"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/wan"
)

const goldenTol = 1e-4

// The golden latent geometry: 6×8 latents (a 3×4 token grid), 3-frame
// blocks (package wan checks it against the sidecars).
const goldenH, goldenW, goldenF = 6, 8, 3

// goldenRollouts lists the golden rollout files (without extension).
var goldenRollouts = []string{"rollout_native", "rollout_densitykv", "rollout_densitykv_cap60", "rollout_densitykv_large"}

// goldenFile is an opened golden safetensors file (package golden).
type goldenFile = golden.File

var (
	openGolden = golden.Open
	relErr     = golden.RelErr
)

func goldenModel(t *testing.T) *wan.Model {
	t.Helper()
	m, err := wan.Load(filepath.Join(golden.Wan(t), "weights_generator.pt"), wan.TinyConfig(), wan.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// checkSchedule compares the file's timesteps and sigmas with s exactly.
func checkSchedule(t *testing.T, g *goldenFile, s *Schedule) {
	t.Helper()
	for _, c := range []struct {
		name string
		got  []float32
	}{{"timesteps", s.Timesteps}, {"sigmas", s.Sigmas}} {
		want := g.F64(c.name)
		if len(want) != len(c.got) {
			t.Errorf("%s: %s has %d values, the schedule %d", g.Name(), c.name, len(want), len(c.got))
			continue
		}
		for i, v := range want {
			if float64(c.got[i]) != v {
				t.Errorf("%s: %s[%d] = %v, golden %v", g.Name(), c.name, i, c.got[i], v)
			}
		}
		g.Mark(c.name)
	}
}

// TestScheduleMatchesGolden checks DefaultSchedule against every rollout
// file's float32 timesteps and sigmas, and σ at t = 0 and 1000.
func TestScheduleMatchesGolden(t *testing.T) {
	s := DefaultSchedule()
	for _, f := range goldenRollouts {
		checkSchedule(t, openGolden(t, f+".safetensors"), s)
	}
	if got := s.Sigma(0); float64(got) != 0.004980080295354128 {
		t.Errorf("Sigma(0) = %v, want 0.004980080295354128 (nearest entry 4.98)", got)
	}
	if got := s.Sigma(1000); got != 1 {
		t.Errorf("Sigma(1000) = %v", got)
	}
}

// goldenForwards lists the golden single-block forward files (without
// extension).
var goldenForwards = []string{"forward_a_first_block_t1000", "forward_b_first_block_t0", "forward_c_second_block_with_cache", "forward_d_first_block_mixed_t"}

// TestGoldenForwardX0 checks x0_pred = x − σ(t)·flow of the four forward
// files, including σ(0) of the clean pass.
func TestGoldenForwardX0(t *testing.T) {
	s := DefaultSchedule()
	for _, f := range goldenForwards {
		g := openGolden(t, f+".safetensors")
		x, flow, ts := g.F32("x"), g.F32("flow_pred"), g.F64("timestep")
		x0 := make([]float32, len(x))
		n := len(x) / len(ts)
		for fr, tv := range ts {
			ToX0(x0[fr*n:(fr+1)*n], x[fr*n:(fr+1)*n], flow[fr*n:(fr+1)*n], s.Sigma(float32(tv)))
		}
		if e := relErr(x0, g.F64("x0_pred")); e > 1e-6 {
			t.Errorf("%s: x0_pred relative error %.3g", f, e)
		}
		g.Mark("x0_pred")
	}
}

func goldenOptions(t *testing.T, m *wan.Model, g *goldenFile) Options {
	t.Helper()
	ctx := g.F32("context")
	txt, err := m.EmbedText(ctx, len(ctx)/m.Cfg.TextDim)
	if err != nil {
		t.Fatal(err)
	}
	fs := m.Cfg.InDim * goldenH * goldenW
	return Options{Blocks: 8, FramesPerBlock: goldenF, Height: goldenH, Width: goldenW, Schedule: DefaultSchedule(),
		Noise: &Sequence{InitialValues: g.F32("noise_initial"), RenoiseValues: g.F32("noise_renoise"), FrameSize: fs,
			BlockSize: goldenF * fs, PerBlock: len(DefaultSchedule().Timesteps) - 1},
		Prompts: []Prompt{{Text: txt, Name: "golden"}}}
}

// rolloutSidecar is the part of a rollout sidecar checkRollout compares.
type rolloutSidecar struct {
	Rollout map[string]json.RawMessage `json:"rollout"`
	Check   map[string]float64         `json:"check"`
}

// checkRollout runs the golden rollout and compares every step's input,
// flow and x0, the clean-pass inputs and the final latents (goldenTol
// relative), the timesteps and sigmas (exactly), and the sidecar's rollout
// settings and reference self-check against what the run used. The inputs
// context, noise_initial and noise_renoise are fed in (the noise draws in
// the documented order; step_input checks that order).
func checkRollout(t *testing.T, g *goldenFile, m *wan.Model, pol memory.Policy, extra func(b int, log BlockLog)) {
	t.Helper()
	opt := goldenOptions(t, m, g)
	checkSchedule(t, g, opt.Schedule)
	S := len(opt.Schedule.Timesteps)
	bs := opt.FramesPerBlock * m.Cfg.InDim * opt.Height * opt.Width
	stepIn, stepFlow, stepX0 := g.F64("step_input"), g.F64("step_flow_pred"), g.F64("step_x0_pred")
	clean, lat := g.F64("clean_pass_input"), g.F64("latents")
	if len(stepIn) != opt.Blocks*S*bs || len(clean) != opt.Blocks*bs || len(lat) != opt.Blocks*bs {
		t.Fatalf("%s: golden step/latent tensors hold %d/%d/%d values, want %d blocks × %d steps × %d", g.Name(), len(stepIn), len(clean), len(lat), opt.Blocks, S, bs)
	}
	worst := map[string]float64{}
	note := func(k string, e float64) {
		worst[k] = math.Max(worst[k], e)
	}
	calls := make([]int, opt.Blocks)
	var flow00 []float32
	opt.Observe = func(r StepRecord) {
		calls[r.Block]++
		if r.Clean {
			note("clean_pass_input", relErr(r.Input, clean[r.Block*bs:(r.Block+1)*bs]))
			return
		}
		if r.Block == 0 && r.Step == 0 {
			flow00 = append([]float32(nil), r.Flow...)
		}
		o := (r.Block*S + r.Step) * bs
		note("step_input", relErr(r.Input, stepIn[o:o+bs]))
		note("step_flow_pred", relErr(r.Flow, stepFlow[o:o+bs]))
		note("step_x0_pred", relErr(r.X0, stepX0[o:o+bs]))
	}
	blocks := 0
	opt.BlockDone = func(b int, x []float32, log BlockLog) error {
		blocks++
		e := relErr(x, lat[b*bs:(b+1)*bs])
		note("latents", e)
		if e > goldenTol {
			t.Errorf("block %d latents: relative error %.3g > %g", b, e, goldenTol)
		}
		if extra != nil {
			extra(b, log)
		}
		return nil
	}
	if err := Run(m, pol, opt); err != nil {
		t.Fatal(err)
	}
	if blocks != opt.Blocks {
		t.Fatalf("%d of %d blocks ran", blocks, opt.Blocks)
	}
	for k, e := range worst {
		if e > goldenTol {
			t.Errorf("%s: worst relative error %.3g > %g", k, e, goldenTol)
		}
	}
	g.Mark("step_input", "step_flow_pred", "step_x0_pred", "clean_pass_input", "latents", "context", "noise_initial", "noise_renoise")
	t.Logf("worst relative errors: %v", worst)

	var sc rolloutSidecar
	g.Sidecar(&sc)
	pc := pol.(interface{ Config() memory.Config }).Config()
	for k, raw := range sc.Rollout {
		var want any
		switch k {
		case "num_blocks":
			want = opt.Blocks
		case "num_latent_frames":
			want = opt.Blocks * opt.FramesPerBlock
		case "sink_size_frames":
			want = pc.SinkFrames
		case "local_attn_size_frames":
			want = pc.CacheFrames
		case "denoising_step_list":
			want = DefaultSteps
		case "timestep_shift", "warp_denoising_step":
			// The schedule the rollout ran must be the step list warped
			// (or not) with this shift.
			var steps []int
			var shift float64
			var warp bool
			if json.Unmarshal(sc.Rollout["denoising_step_list"], &steps) != nil || json.Unmarshal(sc.Rollout["timestep_shift"], &shift) != nil ||
				json.Unmarshal(sc.Rollout["warp_denoising_step"], &warp) != nil {
				t.Errorf("%s: rollout step list / shift / warp unreadable", g.Name())
				continue
			}
			if !warp {
				shift = 1
			}
			s, err := NewSchedule(steps, shift, 1000)
			if err != nil || !slices.Equal(s.Timesteps, opt.Schedule.Timesteps) || !slices.Equal(s.Sigmas, opt.Schedule.Sigmas) {
				t.Errorf("%s: rollout.%s: steps %v, shift %v, warp %v give %+v (%v), the rollout used %+v", g.Name(), k, steps, shift, warp, s, err, opt.Schedule)
			}
			g.MarkSidecar("rollout." + k)
			continue
		case "denoising_update_mode":
			want = "x0_renoise" // the only update Run implements: x0 = x − σ·v, re-noised with fresh noise
		case "context_noise":
			want = 0 // Run feeds the clean pass the clean x0 (clean_pass_input checks it)
		case "forwards_per_block":
			for b, n := range calls {
				if n != calls[0] {
					t.Errorf("block %d: %d forward calls, block 0 had %d", b, n, calls[0])
				}
			}
			want = calls[0]
		default:
			t.Errorf("%s: sidecar rollout.%s = %s is not compared: add it to checkRollout", g.Name(), k, raw)
			continue
		}
		if !golden.SameJSON(t, raw, want) {
			t.Errorf("%s: sidecar rollout.%s = %s, the rollout used %v", g.Name(), k, raw, want)
		}
		g.MarkSidecar("rollout." + k)
	}
	if len(sc.Rollout) == 0 {
		t.Errorf("%s: sidecar has no rollout settings", g.Name())
	}
	// The reference's self-check: its block-0 step-0 flow equals forward
	// case a's (the same first call). Recompute it from the golden files,
	// and check the Go rollout's first call against forward case a too.
	for k, v := range sc.Check {
		if !strings.HasPrefix(k, "max_abs_diff_block0_step0_vs_") || !strings.HasSuffix(k, "forward_a") {
			t.Errorf("%s: sidecar check.%s is not compared: add it to checkRollout", g.Name(), k)
			continue
		}
		fa := openGolden(t, goldenForwards[0]+".safetensors").F64("flow_pred")
		var d float64
		for i, w := range fa {
			d = math.Max(d, math.Abs(stepFlow[i]-w))
		}
		if d != v {
			t.Errorf("%s: check.%s = %v, the golden files differ by %v", g.Name(), k, v, d)
		}
		if e := relErr(flow00, fa); e > goldenTol {
			t.Errorf("%s: block 0 step 0 flow vs forward case a: relative error %.3g", g.Name(), e)
		}
		g.MarkSidecar("check." + k)
	}
}

func TestGoldenRolloutNative(t *testing.T) {
	m := goldenModel(t)
	g := openGolden(t, "rollout_native.safetensors")
	pol, err := memory.New(memory.NameNative, memory.Config{Layout: m.Cfg.Layout(goldenH, goldenW, goldenF), SinkFrames: 1, CacheFrames: 12})
	if err != nil {
		t.Fatal(err)
	}
	checkRollout(t, g, m, pol, nil)
}
