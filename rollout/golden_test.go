package rollout

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/internal/goldendir"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/wan"
)

const goldenTol = 1e-4

type goldenFile struct {
	t *testing.T
	s *checkpoint.Safetensors
}

func openGolden(t *testing.T, name string) *goldenFile {
	t.Helper()
	s, err := checkpoint.OpenSafetensors(filepath.Join(goldendir.Wan(t), name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &goldenFile{t, s}
}

func (g *goldenFile) f32(name string) []float32 {
	g.t.Helper()
	v, _, err := g.s.Float32(name)
	if err != nil {
		g.t.Fatal(err)
	}
	return v
}

func (g *goldenFile) f64(name string) []float64 {
	g.t.Helper()
	v, _, err := g.s.Float64(name)
	if err != nil {
		g.t.Fatal(err)
	}
	return v
}

func (g *goldenFile) i64(name string) ([]int64, []int) {
	g.t.Helper()
	v, sh, err := g.s.Int64(name)
	if err != nil {
		g.t.Fatal(err)
	}
	return v, sh
}

func relErr(got []float32, want []float64) float64 {
	var md, mw float64
	for i, w := range want {
		md = math.Max(md, math.Abs(float64(got[i])-w))
		mw = math.Max(mw, math.Abs(w))
	}
	if mw == 0 {
		return md
	}
	return md / mw
}

func goldenModel(t *testing.T) *wan.Model {
	t.Helper()
	m, err := wan.Load(filepath.Join(goldendir.Wan(t), "weights_generator.pt"), wan.TinyConfig(), wan.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestScheduleMatchesGolden(t *testing.T) {
	g := openGolden(t, "rollout_native.safetensors")
	s := DefaultSchedule()
	for i, v := range g.f64("timesteps") {
		if float64(s.Timesteps[i]) != v {
			t.Errorf("timestep %d = %v, want %v", i, s.Timesteps[i], v)
		}
	}
	for i, v := range g.f64("sigmas") {
		if float64(s.Sigmas[i]) != v {
			t.Errorf("sigma %d = %v, want %v", i, s.Sigmas[i], v)
		}
	}
	if got := s.Sigma(0); float64(got) != 0.004980080295354128 {
		t.Errorf("Sigma(0) = %v, want 0.004980080295354128 (nearest entry 4.98)", got)
	}
	if got := s.Sigma(1000); got != 1 {
		t.Errorf("Sigma(1000) = %v", got)
	}
}

// TestGoldenForwardX0 checks x0_pred = x − σ(t)·flow of the four forward
// files, including σ(0) of the clean pass.
func TestGoldenForwardX0(t *testing.T) {
	s := DefaultSchedule()
	for _, f := range []string{"forward_a_first_block_t1000", "forward_b_first_block_t0", "forward_c_second_block_with_cache", "forward_d_first_block_mixed_t"} {
		g := openGolden(t, f+".safetensors")
		x, flow, ts := g.f32("x"), g.f32("flow_pred"), g.f64("timestep")
		x0 := make([]float32, len(x))
		n := len(x) / len(ts)
		for fr, tv := range ts {
			ToX0(x0[fr*n:(fr+1)*n], x[fr*n:(fr+1)*n], flow[fr*n:(fr+1)*n], s.Sigma(float32(tv)))
		}
		if e := relErr(x0, g.f64("x0_pred")); e > 1e-6 {
			t.Errorf("%s: x0_pred relative error %.3g", f, e)
		}
	}
}

func goldenOptions(t *testing.T, m *wan.Model, g *goldenFile) Options {
	t.Helper()
	txt, err := m.EmbedText(g.f32("context"), 8)
	if err != nil {
		t.Fatal(err)
	}
	fs := 16 * 6 * 8
	return Options{Blocks: 8, FramesPerBlock: 3, Height: 6, Width: 8, Schedule: DefaultSchedule(),
		Noise:   &Sequence{InitialValues: g.f32("noise_initial"), RenoiseValues: g.f32("noise_renoise"), FrameSize: fs, BlockSize: 3 * fs, PerBlock: 3},
		Prompts: []Prompt{{Text: txt, Name: "golden"}}}
}

// checkRollout runs the golden rollout and compares every step's input,
// flow and x0, the clean-pass inputs and the final latents.
func checkRollout(t *testing.T, g *goldenFile, m *wan.Model, pol memory.Policy, extra func(b int, log BlockLog)) {
	t.Helper()
	opt := goldenOptions(t, m, g)
	bs := 3 * 16 * 6 * 8
	stepIn, stepFlow, stepX0 := g.f64("step_input"), g.f64("step_flow_pred"), g.f64("step_x0_pred")
	clean, lat := g.f64("clean_pass_input"), g.f64("latents")
	worst := map[string]float64{}
	note := func(k string, e float64) {
		worst[k] = math.Max(worst[k], e)
	}
	opt.Observe = func(r StepRecord) {
		if r.Clean {
			note("clean_pass_input", relErr(r.Input, clean[r.Block*bs:(r.Block+1)*bs]))
			return
		}
		o := (r.Block*4 + r.Step) * bs
		note("step_input", relErr(r.Input, stepIn[o:o+bs]))
		note("step_flow_pred", relErr(r.Flow, stepFlow[o:o+bs]))
		note("step_x0_pred", relErr(r.X0, stepX0[o:o+bs]))
	}
	opt.BlockDone = func(b int, x []float32, log BlockLog) {
		e := relErr(x, lat[b*bs:(b+1)*bs])
		note("latents", e)
		if e > goldenTol {
			t.Errorf("block %d latents: relative error %.3g > %g", b, e, goldenTol)
		}
		if extra != nil {
			extra(b, log)
		}
	}
	if err := Run(m, pol, opt); err != nil {
		t.Fatal(err)
	}
	for k, e := range worst {
		if e > goldenTol {
			t.Errorf("%s: worst relative error %.3g > %g", k, e, goldenTol)
		}
	}
	t.Logf("worst relative errors: %v", worst)
}

func TestGoldenRolloutNative(t *testing.T) {
	m := goldenModel(t)
	g := openGolden(t, "rollout_native.safetensors")
	pol, err := memory.New(memory.NameNative, memory.Config{Layout: m.Cfg.Layout(6, 8, 3), SinkFrames: 1, CacheFrames: 12})
	if err != nil {
		t.Fatal(err)
	}
	checkRollout(t, g, m, pol, nil)
}
