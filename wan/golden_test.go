package wan

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/densitykv/densitykv/golden"
	"github.com/densitykv/densitykv/memory"
)

// goldenFile is an opened golden safetensors file (package golden).
type goldenFile = golden.File

var (
	openGolden = golden.Open
	relErr     = golden.RelErr
)

const goldenTol = 1e-4

// The golden latent geometry the tests use: 6×8 latents (a 3×4 token grid)
// and 3-frame blocks (checked against the sidecars by TestGoldenSidecars).
const goldenH, goldenW, goldenF = 6, 8, 3

func goldenModel(t *testing.T) *Model {
	t.Helper()
	m, err := Load(filepath.Join(golden.Wan(t), "weights.safetensors"), TinyConfig(), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func nativePolicy(t *testing.T, m *Model) memory.Policy {
	t.Helper()
	p, err := memory.New(memory.NameNative, memory.Config{Layout: m.Cfg.Layout(goldenH, goldenW, goldenF), SinkFrames: 1, CacheFrames: 12})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func goldenText(t *testing.T, m *Model, g *goldenFile) *Text {
	t.Helper()
	txt, err := m.EmbedText(g.F32("context"), 8)
	if err != nil {
		t.Fatal(err)
	}
	return txt
}

// TestGoldenForwards runs the four single-block forwards on the native
// cache and compares flow_pred and every intermediate (inter.*, and cache.*
// as the clean pass's roped keys and values) to goldenTol relative. The
// inputs x, timestep, context and history_x are fed in. (x0_pred is
// compared by package rollout, which owns the schedule.)
func TestGoldenForwards(t *testing.T) {
	m := goldenModel(t)
	cases := []struct {
		file  string
		calls func(g *goldenFile) []memory.Call // history calls before the checked one
		check memory.Call
	}{
		{"forward_a_first_block_t1000", nil, memory.Call{Block: 0, First: true}},
		{"forward_b_first_block_t0", nil, memory.Call{Block: 0, First: true, Clean: true, Step: 4}},
		{"forward_c_second_block_with_cache", nil, memory.Call{Block: 1, First: true}},
		{"forward_d_first_block_mixed_t", nil, memory.Call{Block: 0, First: true}},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			file := c.file + ".safetensors"
			g := openGolden(t, file)
			pol := nativePolicy(t, m)
			txt := goldenText(t, m, g)
			golden.Mark(file, "x", "timestep", "context")
			if c.file == "forward_a_first_block_t1000" {
				if e := relErr(txt.Embed, g.F64("inter.context_embed")); e > goldenTol {
					t.Errorf("context_embed: relative error %.3g", e)
				}
				golden.Mark(file, "inter.context_embed")
			}
			if c.check.Block == 1 {
				golden.Mark(file, "history_x")
				hist := make([]float32, goldenF*m.Cfg.InDim*goldenH*goldenW)
				err := m.Forward(hist, Call{Latent: g.F32("history_x"), Height: goldenH, Width: goldenW, Timesteps: []float32{0, 0, 0},
					Text: txt, Mem: memory.Call{Block: 0, First: true, Clean: true, Step: 4}}, pol)
				if err != nil {
					t.Fatal(err)
				}
			}
			ts64 := g.F64("timestep")
			ts := make([]float32, len(ts64))
			for i, v := range ts64 {
				ts[i] = float32(v)
			}
			got := map[string][]float32{}
			flow := make([]float32, goldenF*m.Cfg.InDim*goldenH*goldenW)
			err := m.Forward(flow, Call{Latent: g.F32("x"), Height: goldenH, Width: goldenW, Timesteps: ts, Text: txt, Mem: c.check,
				Trace: func(name string, x []float32) { got[name] = append([]float32(nil), x...) }}, pol)
			if err != nil {
				t.Fatal(err)
			}
			if e := relErr(flow, g.F64("flow_pred")); e > goldenTol {
				t.Errorf("flow_pred: relative error %.3g > %g", e, goldenTol)
			} else {
				t.Logf("flow_pred: relative error %.3g", e)
			}
			golden.Mark(file, "flow_pred")
			for _, n := range g.Names() {
				var key string
				switch {
				case len(n) > 6 && n[:6] == "inter.":
					key = n[6:]
				case len(n) > 6 && n[:6] == "cache.":
					var l int
					var kv string
					fmt.Sscanf(n, "cache.layer%d.%s", &l, &kv)
					key = fmt.Sprintf("block%d_selfattn_k_roped", l)
					if kv == "v" {
						key = fmt.Sprintf("block%d_selfattn_v", l)
					}
				default:
					continue
				}
				if key == "context_embed" {
					continue
				}
				x, ok := got[key]
				if !ok {
					t.Errorf("%s: no trace %q", n, key)
					continue
				}
				if e := relErr(x, g.F64(n)); e > goldenTol {
					t.Errorf("%s: relative error %.3g > %g", n, e, goldenTol)
				}
				golden.Mark(file, n)
			}
		})
	}
}
