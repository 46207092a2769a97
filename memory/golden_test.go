package memory

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/golden"
)

// TestGoldenBlock0RoPE checks the RoPE geometry of block 0 against the Wan
// golden forward (forward_a: layer-0 q/k after RMSNorm and RoPE at τ = 0,1,2
// and v). The pre-RoPE q/k are recovered by rotating the golden values back
// (float64, angles from the README's formula, not from package rope); every
// policy must then return the golden rotated q, k and the values, in token
// order, to float32 precision.
func TestGoldenBlock0RoPE(t *testing.T) {
	dir := golden.Wan(t)
	st, err := checkpoint.OpenSafetensors(filepath.Join(dir, "forward_a_first_block_t1000.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	read := func(name string) []float64 {
		x, shape, err := st.Float64(name)
		if err != nil {
			t.Fatal(err)
		}
		if len(shape) != 4 || shape[1] != 36 || shape[2] != 2 || shape[3] != 32 {
			t.Fatalf("%s: shape %v", name, shape)
		}
		return x
	}
	qr, kr, v := read("inter.block0_selfattn_q_roped"), read("inter.block0_selfattn_k_roped"), read("inter.block0_selfattn_v")
	// The inverse rotation comes straight from the golden README's formula,
	// independent of package rope (so a wrong rope angle cannot cancel
	// out): c = 16 interleaved pairs (x[2j], x[2j+1]) split
	// [c−2⌊c/3⌋, ⌊c/3⌋, ⌊c/3⌋] = [6, 5, 5] over (τ, h, w); pair j of a part
	// with n pairs rotates by pos·10000^(−2j/(2n)), in float64.
	const c = 32 / 2
	split := [3]int{c - 2*(c/3), c / 3, c / 3}
	angles := func(pos [3]int) []float64 {
		var out []float64
		for axis, n := range split {
			for j := 0; j < n; j++ {
				out = append(out, float64(pos[axis])*math.Pow(10000, -2*float64(j)/float64(2*n)))
			}
		}
		return out
	}
	unrotate := func(x []float64) []float32 {
		out := make([]float32, len(x))
		for tok := 0; tok < 36; tok++ {
			a := angles([3]int{tok / 12, tok % 12 / 4, tok % 4}) // token = f·12 + h·4 + w, τ = f
			for h := 0; h < 2; h++ {
				o := (tok*2 + h) * 32
				for j, aj := range a {
					s, c := math.Sincos(-aj)
					x0, x1 := x[o+2*j], x[o+2*j+1]
					out[o+2*j] = float32(x0*c - x1*s)
					out[o+2*j+1] = float32(x0*s + x1*c)
				}
			}
		}
		return out
	}
	q, k := unrotate(qr), unrotate(kr)
	vf := make([]float32, len(v))
	for i, x := range v {
		vf[i] = float32(x)
	}
	relErr := func(got []float32, want []float64) float64 {
		var d, m float64
		for i := range want {
			d = math.Max(d, math.Abs(float64(got[i])-want[i]))
			m = math.Max(m, math.Abs(want[i]))
		}
		return d / m
	}
	cfg := tinyConfig()
	cfg.LongLiveRAG.Descriptor = RAGKeyMean
	for _, name := range Names() {
		p, err := New(name, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Begin(Call{Block: 0, First: true}); err != nil {
			t.Fatal(err)
		}
		c, err := p.Attend(0, q, k, vf)
		if err != nil {
			t.Fatal(err)
		}
		if c.Parts != (Parts{Sink: 12, Local: 24}) {
			t.Fatalf("%s: parts %+v", name, c.Parts)
		}
		eq, ek, ev := relErr(c.Q, qr), relErr(c.K, kr), relErr(c.V, v)
		if eq > 1e-6 || ek > 1e-6 || ev > 1e-7 {
			t.Fatalf("%s: relative errors q %.3g k %.3g v %.3g vs the golden RoPE", name, eq, ek, ev)
		}
	}
}
