package nn

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestRowNorms: RMSNorm and LayerNorm (with and without affine weights)
// against their float64 formulas, and in place (y = x) the same bits.
func TestRowNorms(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	const rows, d, eps = 37, 96, 1e-6
	x := randF32(r, rows*d, 3)
	for i := range x[:d] {
		x[i] += 100 // a row far from zero mean
	}
	w, b := randF32(r, d, 1), randF32(r, d, 1)
	for _, c := range []struct {
		name string
		f    func(y, x []float32)
		ref  func(xr []float64, j int) float64
	}{
		{"RMSNorm", func(y, x []float32) { RMSNorm(y, x, rows, d, eps, w) }, func(xr []float64, j int) float64 {
			var q float64
			for _, v := range xr {
				q += v * v
			}
			return xr[j] / math.Sqrt(q/d+eps) * float64(w[j])
		}},
		{"LayerNorm", func(y, x []float32) { LayerNorm(y, x, rows, d, eps, nil, nil) }, func(xr []float64, j int) float64 {
			m, v := meanVar(xr)
			return (xr[j] - m) / math.Sqrt(v+eps)
		}},
		{"LayerNorm affine", func(y, x []float32) { LayerNorm(y, x, rows, d, eps, w, b) }, func(xr []float64, j int) float64 {
			m, v := meanVar(xr)
			return (xr[j]-m)/math.Sqrt(v+eps)*float64(w[j]) + float64(b[j])
		}},
	} {
		y := make([]float32, rows*d)
		c.f(y, x)
		for i := 0; i < rows; i++ {
			xr := make([]float64, d)
			for j := range xr {
				xr[j] = float64(x[i*d+j])
			}
			for j := 0; j < d; j++ {
				want := c.ref(xr, j)
				if got := float64(y[i*d+j]); math.Abs(got-want) > 1e-6*math.Max(1, math.Abs(want)) {
					t.Fatalf("%s [%d][%d] = %v, want %v", c.name, i, j, got, want)
				}
			}
		}
		z := append([]float32(nil), x...)
		c.f(z, z)
		if i := firstDiff(z, y); i >= 0 {
			t.Fatalf("%s in place: [%d] = %v, want %v", c.name, i, z[i], y[i])
		}
	}
}

func meanVar(x []float64) (m, v float64) {
	for _, e := range x {
		m += e
	}
	m /= float64(len(x))
	for _, e := range x {
		v += (e - m) * (e - m)
	}
	return m, v / float64(len(x))
}

// TestGroupNorm against its float64 formula: per group of channels, mean
// and biased variance over the group's channels and positions, the affine
// weights, then SiLU.
func TestGroupNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	const ch, P, groups, eps = 12, 50, 4, 1e-5
	x := randF32(r, ch*P, 2)
	w, b := randF32(r, ch, 1), randF32(r, ch, 1)
	for _, silu := range []bool{false, true} {
		y := append([]float32(nil), x...)
		GroupNorm(y, ch, P, groups, w, b, eps, silu)
		cpg := ch / groups
		for g := 0; g < groups; g++ {
			part := make([]float64, cpg*P)
			for i := range part {
				part[i] = float64(x[g*cpg*P+i])
			}
			m, v := meanVar(part)
			for i := range part {
				c := g*cpg + i/P
				want := (part[i]-m)/math.Sqrt(v+eps)*float64(w[c]) + float64(b[c])
				if silu {
					want /= 1 + math.Exp(-want)
				}
				if got := float64(y[g*cpg*P+i]); math.Abs(got-want) > 1e-6*math.Max(1, math.Abs(want)) {
					t.Fatalf("silu %v: group %d value %d = %v, want %v", silu, g, i, got, want)
				}
			}
		}
	}
}
