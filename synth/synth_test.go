package synth_test

import (
	"io"
	"math"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/synth"
	"github.com/densitykv/densitykv/synth/synthtest"
)

// The small stream, its generator and the bit comparison of these tests.
var (
	smallConfig = synthtest.SmallConfig
	mustGen     = synthtest.MustGen
	equal       = synthtest.Equal
)

func TestGeneratorDeterministic(t *testing.T) {
	c := smallConfig()
	_, a := synthtest.ReadAll(t, mustGen(t, c))
	g := mustGen(t, c)
	_, b := synthtest.ReadAll(t, g)
	g.Reset()
	_, again := synthtest.ReadAll(t, g)
	c.Seed++
	_, other := synthtest.ReadAll(t, mustGen(t, c))
	if len(a) != c.Blocks {
		t.Fatalf("got %d blocks, want %d", len(a), c.Blocks)
	}
	for bi := range a {
		for l := range a[bi] {
			if !equal(a[bi][l].K, b[bi][l].K) || !equal(a[bi][l].Q, b[bi][l].Q) || !equal(a[bi][l].V, b[bi][l].V) {
				t.Fatalf("block %d layer %d differs between two generators with the same seed", bi, l)
			}
			if !equal(a[bi][l].K, again[bi][l].K) {
				t.Fatalf("block %d layer %d differs after Reset", bi, l)
			}
			if equal(a[bi][l].K, other[bi][l].K) {
				t.Fatalf("block %d layer %d identical for a different seed", bi, l)
			}
		}
	}
}

func TestGeneratorLayerSkipMatchesSequential(t *testing.T) {
	c := smallConfig()
	_, all := synthtest.ReadAll(t, mustGen(t, c))
	g := mustGen(t, c)
	for b := 0; b < c.Blocks; b++ {
		if _, err := g.NextBlock(); err != nil {
			t.Fatal(err)
		}
		_, k, _, err := g.Layer(2)
		if err != nil {
			t.Fatal(err)
		}
		if !equal(k, all[b][2].K) {
			t.Fatalf("block %d: skipping to layer 2 gives different keys", b)
		}
		if _, _, _, err := g.Layer(1); err == nil {
			t.Fatal("going back to layer 1 succeeded")
		}
	}
	if _, err := g.NextBlock(); err != io.EOF {
		t.Fatalf("after last block: %v, want io.EOF", err)
	}
}

func TestGeneratorKeyGeometry(t *testing.T) {
	c := smallConfig()
	g := mustGen(t, c)
	_, all := synthtest.ReadAll(t, g)
	D := c.Layout.HeadDim
	for _, blk := range all {
		for _, ld := range blk {
			for r := 0; r < len(ld.K)/D; r++ {
				var ss, vs float64
				for _, x := range ld.K[r*D : (r+1)*D] {
					ss += float64(x) * float64(x)
				}
				for _, x := range ld.V[r*D : (r+1)*D] {
					if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
						t.Fatalf("value row %d not finite", r)
					}
					vs += float64(x) * float64(x)
				}
				// Key gains lie in [0.8, 1.2], so ‖k‖²/D lies in [0.64, 1.44].
				if ms := ss / float64(D); ms < 0.6 || ms > 1.5 {
					t.Fatalf("key row %d mean square %.3f, want ≈ 1 (qk-norm)", r, ms)
				}
				if vs == 0 {
					t.Fatalf("value row %d is zero", r)
				}
			}
		}
	}
}

func TestSceneSchedule(t *testing.T) {
	c := synth.DefaultConfig() // 120 frames, cut at 54, return at 90
	g := mustGen(t, c)
	for _, tc := range []struct{ frame, scene int }{{0, 0}, {53, 0}, {54, 1}, {89, 1}, {90, 0}, {119, 0}} {
		if got := g.SceneAt(tc.frame); got != tc.scene {
			t.Errorf("SceneAt(%d) = %d, want %d", tc.frame, got, tc.scene)
		}
	}
	c.ReturnAt = 0
	g = mustGen(t, c)
	if g.SceneAt(119) != 1 {
		t.Error("without a return the stream must stay in scene 1")
	}
}

// frameDistance is the mean per-token feature distance between two frames.
func frameDistance(g *synth.Generator, a, b int) float64 {
	c := g.Config()
	n := c.Layout.TokensPerFrame() * c.Channels
	fa := g.Frame(make([]float32, n), a)
	fb := g.Frame(make([]float32, n), b)
	var s float64
	for i := range fa {
		d := float64(fa[i] - fb[i])
		s += d * d
	}
	return math.Sqrt(s / float64(c.Layout.TokensPerFrame()))
}

func TestSceneContentReturns(t *testing.T) {
	c := synth.DefaultConfig()
	c.Drift = 0
	c.PanAmplitude = 0
	c.Objects = 0
	g := mustGen(t, c)
	same := frameDistance(g, 10, 100) // scene 0 before the cut and after the return
	cut := frameDistance(g, 10, 60)   // scene 0 vs scene 1
	if !(same < 0.5*cut) {
		t.Fatalf("returning scene distance %.3f should be well below the cut distance %.3f", same, cut)
	}
}

func TestConfigValidate(t *testing.T) {
	for name, mut := range map[string]func(*synth.Config){
		"blocks":   func(c *synth.Config) { c.Blocks = 0 },
		"headdim":  func(c *synth.Config) { c.Layout.HeadDim = 7 },
		"heads":    func(c *synth.Config) { c.Layout.Heads = 0 },
		"channels": func(c *synth.Config) { c.Channels = 0 },
		"noise":    func(c *synth.Config) { c.Noise = math.NaN() },
		"period":   func(c *synth.Config) { c.PanPeriod = 0 },
		"regions":  func(c *synth.Config) { c.Regions = 0 },
	} {
		c := smallConfig()
		mut(&c)
		if _, err := synth.NewGenerator(c); err == nil || !strings.HasPrefix(err.Error(), "synth: ") {
			t.Errorf("%s: error %v, want a synth error", name, err)
		}
	}
}

func BenchmarkGeneratorBlock(b *testing.B) {
	for _, tc := range []struct {
		name string
		cfg  synth.Config
	}{{"default", synth.DefaultConfig()}, {"paper", synth.PaperConfig(4)}} {
		b.Run(tc.name, func(b *testing.B) {
			g := mustGen(b, tc.cfg)
			for b.Loop() {
				if _, err := g.NextBlock(); err == io.EOF {
					g.Reset()
					if _, err := g.NextBlock(); err != nil {
						b.Fatal(err)
					}
				}
				for l := 0; l < tc.cfg.Layout.Layers; l++ {
					if _, _, _, err := g.Layer(l); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
