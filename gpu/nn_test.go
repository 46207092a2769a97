package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/densitykv/densitykv/nn"
	"github.com/densitykv/densitykv/rope"
	"github.com/densitykv/densitykv/vulkan"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// nnEdge are the edge values sprinkled into the tests' inputs: signed
// zeros, denormals, the largest normals, infinities, NaN, 1 and −1.
var nnEdge = []float32{0, float32(math.Copysign(0, -1)), 0x1p-149, -0x1p-149, 0x1.fffffcp-127, -0x1p-130,
	math.MaxFloat32, -math.MaxFloat32, 0x1p100, -0x1p90, float32(math.Inf(1)), float32(math.Inf(-1)),
	float32(math.NaN()), 1, -1, 0x1p-126}

// nnValues returns n float32 values: normal ones of varied scale, with a
// fraction edge values (edge ≤ 0: none).
func nnValues(r *rand.Rand, n int, edge float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		switch {
		case r.Float64() < edge:
			v[i] = nnEdge[r.IntN(len(nnEdge))]
		default:
			v[i] = float32(r.NormFloat64() * math.Exp2(float64(r.IntN(12)-4)))
		}
	}
	return v
}

// nnRows returns rows×d values, each row of one kind: normal values,
// values around a large mean (the variance cancels), huge values, tiny and
// denormal ones, signed zeros, a constant, rows with an Inf or a NaN, and
// values of widely spread magnitudes, and ±2^60 before small values
// (whose float64 sums depend on the order).
func nnRows(r *rand.Rand, rows, d int) []float32 {
	x := make([]float32, rows*d)
	for row := 0; row < rows; row++ {
		xr := x[row*d : (row+1)*d]
		for j := range xr {
			g := r.NormFloat64()
			switch row % 10 {
			case 0:
				xr[j] = float32(g)
			case 1:
				xr[j] = float32(1000 + g*1e-3)
			case 2:
				xr[j] = float32(g * 1e38)
			case 3:
				xr[j] = float32(g * 1e-40) // denormal
			case 4:
				xr[j] = float32(math.Copysign(0, g))
			case 5:
				xr[j] = 3.25
			case 6:
				xr[j] = float32(g * 7)
				if j == d/2 {
					xr[j] = float32(math.Inf(1))
				}
			case 7:
				xr[j] = float32(g)
				if j == d-1 {
					xr[j] = float32(math.NaN())
				}
			case 8:
				xr[j] = float32(math.Ldexp(g, r.IntN(120)-60))
			case 9:
				xr[j] = [...]float32{0x1p60, -0x1p60, float32(g)}[min(j, 2)]
			}
		}
	}
	return x
}

// down downloads n float32 values.
func down(t testing.TB, dev *vulkan.Device, b *vulkan.Buffer, n int) []float32 {
	t.Helper()
	v := make([]float32, n)
	if err := dev.DownloadFloat32s(b, 0, v); err != nil {
		t.Fatal(err)
	}
	return v
}

// run runs batch.
func run(t testing.TB, batch *vulkan.Batch) {
	t.Helper()
	if err := batch.Run(); err != nil {
		t.Fatal(err)
	}
}

// must fails the test on a record-time error.
func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// sameFloats reports the first differences of got and want bit for bit
// (any NaN equal to any NaN) and whether they are equal.
func sameFloats(t testing.TB, what string, got, want []float32) bool {
	t.Helper()
	bad := 0
	for i := range want {
		if g, w := math.Float32bits(got[i]), math.Float32bits(want[i]); !sameBits(g, w) {
			if bad < 5 {
				t.Errorf("%s [%d]: got %#08x (%g), want %#08x (%g)", what, i, g, got[i], w, want[i])
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d values differ", what, bad, len(want))
	}
	return bad == 0
}

// TestNorms: LayerNorm (with and without affine weights) and RMSNorm
// against nn's on rows of every kind (nnRows), d below, at and above the
// 64 invocations of a workgroup, in place and not, and eps 0 on zero rows.
func TestNorms(t *testing.T) {
	dev := vulkantest.Open(t)
	r := rand.New(rand.NewPCG(21, 22))
	for _, d := range []int{1, 7, 64, 131} {
		for _, eps := range []float64{1e-6, 0} {
			rows := 20
			x := nnRows(r, rows, d)
			w, b := nnValues(r, d, 0.3), nnValues(r, d, 0.3)
			xb, wb, bb := upFloats(t, dev, x), upFloats(t, dev, w), upFloats(t, dev, b)
			ln, lna, rms := upFloats(t, dev, make([]float32, rows*d)), upFloats(t, dev, make([]float32, rows*d)), upFloats(t, dev, make([]float32, rows*d))
			inplace := upFloats(t, dev, x)
			batch := dev.NewBatch()
			must(t, LayerNorm(dev, batch, ln, xb, rows, d, eps, nil, nil))
			must(t, LayerNorm(dev, batch, lna, xb, rows, d, eps, wb, bb))
			must(t, RMSNorm(dev, batch, rms, xb, rows, d, eps, wb))
			must(t, LayerNorm(dev, batch, inplace, inplace, rows, d, eps, wb, bb))
			run(t, batch)

			want := make([]float32, rows*d)
			nn.LayerNorm(want, x, rows, d, eps, nil, nil)
			sameFloats(t, fmt.Sprintf("LayerNorm d=%d eps=%g", d, eps), down(t, dev, ln, rows*d), want)
			nn.LayerNorm(want, x, rows, d, eps, w, b)
			sameFloats(t, fmt.Sprintf("LayerNorm affine d=%d eps=%g", d, eps), down(t, dev, lna, rows*d), want)
			sameFloats(t, fmt.Sprintf("LayerNorm affine in place d=%d eps=%g", d, eps), down(t, dev, inplace, rows*d), want)
			nn.RMSNorm(want, x, rows, d, eps, w)
			sameFloats(t, fmt.Sprintf("RMSNorm d=%d eps=%g", d, eps), down(t, dev, rms, rows*d), want)
		}
	}
}

// The CPU's element-wise steps, ported literally from wan/ops.go (modulate,
// gatedAdd, addInto; unexported there), nn/linear.go (addBias) and
// wan/forward.go (mods = modulation + e0).

func cpuModulate(y []float32, rows, d, rowsPerFrame int, shift, scale func(f int) []float32) {
	for r := 0; r < rows; r++ {
		f := r / rowsPerFrame
		sh, sc := shift(f), scale(f)
		yr := y[r*d : (r+1)*d]
		for j := range yr {
			yr[j] = float32(yr[j]*(1+sc[j])) + sh[j]
		}
	}
}

func cpuGatedAdd(x, o []float32, rows, d, rowsPerFrame int, gate func(f int) []float32) {
	for r := 0; r < rows; r++ {
		g := gate(r / rowsPerFrame)
		xr, or := x[r*d:(r+1)*d], o[r*d:(r+1)*d]
		for j := range xr {
			xr[j] += float32(or[j] * g[j])
		}
	}
}

func cpuAddInto(x, y []float32) {
	for i, v := range y[:len(x)] {
		x[i] += v
	}
}

func cpuAddBias(y, bias []float32, rows int) {
	out := len(bias)
	for r := 0; r < rows; r++ {
		yr := y[r*out : (r+1)*out]
		for j, b := range bias {
			yr[j] += b
		}
	}
}

func cpuMods(mods, modulation, e0 []float32, F, d int) {
	for f := 0; f < F; f++ {
		for i := 0; i < 6*d; i++ {
			mods[f*6*d+i] = modulation[i] + e0[f*6*d+i]
		}
	}
}

// modRow returns wan's mod(i): row i of frame f of mods [F][6][d].
func modRow(mods []float32, d, i int) func(f int) []float32 {
	return func(f int) []float32 { return mods[(f*6+i)*d : (f*6+i+1)*d] }
}

// TestElementwise: Add, AddBias (as the bias and as the modulation),
// Modulate and GatedAdd against the CPU's steps, on 7 rows of 3 frames
// (the last one partial) of 13 and 70 values, edge values included.
func TestElementwise(t *testing.T) {
	dev := vulkantest.Open(t)
	r := rand.New(rand.NewPCG(23, 24))
	for _, d := range []int{13, 70} {
		rows, rpf := 7, 3
		F := (rows + rpf - 1) / rpf
		x, y, o := nnValues(r, rows*d, 0.1), nnValues(r, rows*d, 0.1), nnValues(r, rows*d, 0.1)
		bias, modulation, e0 := nnValues(r, d, 0.2), nnValues(r, 6*d, 0.1), nnValues(r, F*6*d, 0.1)
		xb, yb, ob := upFloats(t, dev, x), upFloats(t, dev, y), upFloats(t, dev, o)
		biasb, modb, e0b := upFloats(t, dev, bias), upFloats(t, dev, modulation), upFloats(t, dev, e0)
		modsb, yb2 := upFloats(t, dev, make([]float32, F*6*d)), upFloats(t, dev, y)
		batch := dev.NewBatch()
		must(t, AddBias(dev, batch, modsb, e0b, modb, F, 6*d))
		must(t, Modulate(dev, batch, yb, rows, d, rpf, FrameVectors{modsb, 0, 6 * d}, FrameVectors{modsb, d, 6 * d}))
		must(t, GatedAdd(dev, batch, xb, ob, rows, d, rpf, FrameVectors{modsb, 2 * d, 6 * d}))
		must(t, AddBias(dev, batch, ob, ob, biasb, rows, d))
		must(t, Add(dev, batch, xb, ob, rows*d))
		must(t, Add(dev, batch, yb2, yb2, rows*d)) // x += x
		run(t, batch)

		mods := make([]float32, F*6*d)
		cpuMods(mods, modulation, e0, F, d)
		sameFloats(t, "mods", down(t, dev, modsb, F*6*d), mods)
		cpuModulate(y, rows, d, rpf, modRow(mods, d, 0), modRow(mods, d, 1))
		sameFloats(t, "modulate", down(t, dev, yb, rows*d), y)
		cpuGatedAdd(x, o, rows, d, rpf, modRow(mods, d, 2))
		cpuAddBias(o, bias, rows)
		sameFloats(t, "bias", down(t, dev, ob, rows*d), o)
		cpuAddInto(x, o)
		sameFloats(t, "gatedAdd, addInto", down(t, dev, xb, rows*d), x)
	}
}

// TestActivations: GELUTanh and SiLU against nn.GELUTanh (its slice
// kernel) and nn.SiLU: every specials' pair, random bit patterns, and a
// dense sweep of [−20, 20] and of the ends of the exponential's range.
func TestActivations(t *testing.T) {
	dev := vulkantest.Open(t)
	r := rand.New(rand.NewPCG(25, 26))
	x := append([]float32(nil), nnEdge...)
	for _, b := range exSpecials {
		x = append(x, math.Float32frombits(b))
	}
	for i := 0; i < 1<<15; i++ {
		x = append(x, math.Float32frombits(r.Uint32()), float32(r.Float64()*40-20), float32(r.Float64()*30-110), float32(r.Float64()*30+75))
	}
	x = append(x, 1, 2, 3) // a tail beyond a workgroup
	xb, gb, sb := upFloats(t, dev, x), upFloats(t, dev, x), upFloats(t, dev, make([]float32, len(x)))
	batch := dev.NewBatch()
	must(t, GELUTanh(dev, batch, gb, len(x)))
	must(t, SiLU(dev, batch, sb, xb, len(x)))
	run(t, batch)
	want := append([]float32(nil), x...)
	nn.GELUTanh(want)
	sameFloats(t, "GELUTanh", down(t, dev, gb, len(x)), want)
	for i, v := range x {
		want[i] = nn.GELUTanh32(v)
	}
	sameFloats(t, "GELUTanh32", down(t, dev, gb, len(x)), want)
	nn.SiLU(want, x)
	sameFloats(t, "SiLU", down(t, dev, sb, len(x)), want)
}

// TestRope: Rope against rope.Rotator.Frame and rope.Table.Apply on grids
// with two and three frames after a leading token (left alone), head
// dimensions 22 (5/3/3 pairs) and 32, edge values included.
func TestRope(t *testing.T) {
	dev := vulkantest.Open(t)
	r := rand.New(rand.NewPCG(27, 28))
	for _, c := range []struct{ hd, heads, H, W, times, t0, frames int }{{22, 3, 3, 5, 6, 3, 2}, {32, 2, 4, 3, 9, 6, 3}} {
		tab := rope.MustNew(c.hd)
		rt, err := NewRopeTables(dev, tab, c.times, c.H, c.W)
		must(t, err)
		defer rt.Free()
		row := c.heads * c.hd
		tokens := 1 + c.frames*c.H*c.W
		x := nnValues(r, tokens*row, 0.05)
		ropeCancel(r, tab, x[row:], c.heads, rope.Grid(c.frames, c.H, c.W, c.t0))
		xb := upFloats(t, dev, x)
		batch := dev.NewBatch()
		must(t, Rope(dev, batch, xb, 1, c.heads, rt, c.t0, c.frames))
		run(t, batch)
		got := down(t, dev, xb, len(x))

		want := append([]float32(nil), x...)
		rot := tab.NewRotator(c.H, c.W)
		for f := 0; f < c.frames; f++ {
			rot.Frame(want[(1+f*c.H*c.W)*row:], c.heads, c.t0+f)
		}
		sameFloats(t, "Rotator.Frame", got, want)
		want = append(want[:0], x...)
		must(t, tab.Apply(want[row:], c.heads, rope.Grid(c.frames, c.H, c.W, c.t0)))
		sameFloats(t, "Table.Apply", got, want)
	}
}

// ropeCancel sets, in a third of the pairs of x (tokens at pos, heads
// heads), x1 = float32(x0·c/s), and in another third x1 = −float32(x0·s/c):
// x0·c − x1·s or x0·s + x1·c then cancels to a few of the products' low
// bits, so that the rotation's float32 result depends on how each product
// was rounded.
func ropeCancel(r *rand.Rand, tab *rope.Table, x []float32, heads int, pos []rope.Pos) {
	d := tab.HeadDim()
	ang := make([]float64, d/2)
	for i, p := range pos {
		for j, a := range tab.Angles(ang, p) {
			s, c := math.Sincos(a)
			for h := 0; h < heads; h++ {
				v := x[(i*heads+h)*d+2*j:]
				if math.IsInf(float64(v[0]), 0) || v[0] != v[0] {
					continue
				}
				switch r.IntN(3) {
				case 0:
					v[1] = float32(float64(v[0]) * c / s)
				case 1:
					v[1] = -float32(float64(v[0]) * s / c)
				}
			}
		}
	}
}
