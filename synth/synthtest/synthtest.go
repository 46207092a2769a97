// Package synthtest reads KV streams (synth.Reader: the synthetic
// generator, a recorded stream file) whole, for tests.
package synthtest

import (
	"io"
	"math"
	"testing"

	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/synth"
)

// Layer is one layer of a block: copies of its q, k and v.
type Layer struct{ Q, K, V []float32 }

// ReadAll reads r to its end: every block's info (its latent copied) and
// its layers, in order; an error fails the test.
func ReadAll(t testing.TB, r synth.Reader) ([]synth.BlockInfo, [][]Layer) {
	t.Helper()
	var infos []synth.BlockInfo
	var out [][]Layer
	for {
		info, err := r.NextBlock()
		if err == io.EOF {
			return infos, out
		}
		if err != nil {
			t.Fatal(err)
		}
		info.Latent = append([]float32(nil), info.Latent...)
		infos = append(infos, info)
		var ls []Layer
		for l := 0; l < r.Layout().Layers; l++ {
			q, k, v, err := r.Layer(l)
			if err != nil {
				t.Fatal(err)
			}
			ls = append(ls, Layer{append([]float32(nil), q...), append([]float32(nil), k...), append([]float32(nil), v...)})
		}
		out = append(out, ls)
	}
}

// SmallConfig is a small synthetic stream for tests: 4×6 tokens per frame,
// 2 frames per block, 3 layers of 2 heads of 16, 5 blocks, a pan.
func SmallConfig() synth.Config {
	c := synth.DefaultConfig()
	c.Layout = memory.Layout{Height: 4, Width: 6, FramesPerBlock: 2, Layers: 3, Heads: 2, HeadDim: 16}
	c.Blocks = 5
	c.PanAmplitude = 3
	c.PanPeriod = 8
	return c
}

// MustGen is synth.NewGenerator(c); an error fails the test.
func MustGen(t testing.TB, c synth.Config) *synth.Generator {
	t.Helper()
	g, err := synth.NewGenerator(c)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// Equal reports whether a and b hold the same float32 bits.
func Equal(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}
