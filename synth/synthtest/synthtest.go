// Package synthtest reads KV streams (synth.Reader: the synthetic
// generator, a recorded stream file) whole, for tests.
package synthtest

import (
	"io"
	"testing"

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
