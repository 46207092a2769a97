package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
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
// with two and three frames after a leading token (left alone), and RopeAt
// against Table.Apply and Rotator.Token at positions anywhere in the
// tables; head dimensions 22 (5/3/3 pairs) and 32, edge values included,
// pairs built to cancel (ropeCancel).
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

		// RopeAt: tokens 2 … 9 at positions anywhere in the tables.
		pos := make([]rope.Pos, 8)
		for i := range pos {
			pos[i] = rope.Pos{T: r.IntN(c.times), H: r.IntN(c.H), W: r.IntN(c.W)}
		}
		pos[0] = rope.Pos{T: c.times - 1, H: c.H - 1, W: c.W - 1}
		rp, err := rt.Positions(dev, pos)
		must(t, err)
		defer rp.Free()
		x = nnValues(r, tokens*row, 0.05)
		ropeCancel(r, tab, x[2*row:], c.heads, pos)
		xb = upFloats(t, dev, x)
		batch = dev.NewBatch()
		must(t, RopeAt(dev, batch, xb, 2, c.heads, rp))
		run(t, batch)
		got = down(t, dev, xb, len(x))
		want = append(want[:0], x...)
		must(t, tab.Apply(want[2*row:(2+len(pos))*row], c.heads, pos))
		sameFloats(t, "RopeAt, Table.Apply", got, want)
		want = append(want[:0], x...)
		for i, p := range pos {
			rot.Token(want[(2+i)*row:], c.heads, p.T, p.H, p.W)
		}
		sameFloats(t, "RopeAt, Rotator.Token", got, want)
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

// TestBlockChain chains one DiT block's non-product steps (wan's
// Block.Forward and Attention.self) in ONE batch, run once, and compares
// the results with the CPU functions: the products are replaced by
// identities and bias adds on the device (q = k = y + bias, o = RoPE'd q,
// the cross-attention's output the normed y, the FFN's input the
// modulated y), so that every step reads the one before it from device
// memory; nothing is downloaded until the batch has run.
//
//	mods = modulation + e0;  y = modulate(LN(x), m0, m1)
//	q = RMSNorm(y + bq, wq), RoPE;  k = RMSNorm(y + bk, wk), RoPE;  x += (q + bo)·m2
//	y = LN_affine(x, w3, b3);  x += y + bc
//	y = modulate(LN(x), m3, m4);  h = GELU(y + b0);  x += (h + b2)·m5
func TestBlockChain(t *testing.T) {
	dev := vulkantest.Open(t)
	r := rand.New(rand.NewPCG(29, 30))
	const F, H, W, heads, hd = 2, 2, 3, 2, 22
	const tpf, T, d, eps = H * W, F * H * W, heads * hd, 1e-6
	x, e0, modulation := nnValues(r, T*d, 0), nnValues(r, F*6*d, 0), nnValues(r, 6*d, 0)
	w3, b3, wq, wk := nnValues(r, d, 0), nnValues(r, d, 0), nnValues(r, d, 0), nnValues(r, d, 0)
	// Edge values in row 0 of x (an Inf and a NaN make that row NaN), a
	// huge value and denormals in row 1, zeros and denormal weights.
	copy(x, []float32{float32(math.Inf(1)), float32(math.NaN()), 0x1p-149})
	copy(x[d:], []float32{0x1p120, -0x1p-140, float32(math.Copysign(0, -1)), 0x1p-149})
	for _, w := range [][]float32{w3, b3, wq, wk} {
		copy(w[3:], []float32{0, float32(math.Copysign(0, -1)), 0x1p-149, -0x1p-130})
	}
	bq, bk, bo, bc, b0, b2 := nnValues(r, d, 0), nnValues(r, d, 0), nnValues(r, d, 0), nnValues(r, d, 0), nnValues(r, d, 0), nnValues(r, d, 0)
	for i := range e0 {
		e0[i] *= 0.1
	}
	tab := rope.MustNew(hd)
	rt, err := NewRopeTables(dev, tab, F, H, W)
	must(t, err)
	defer rt.Free()

	up := func(v []float32) *vulkan.Buffer { return upFloats(t, dev, v) }
	xb, e0b, modb := up(x), up(e0), up(modulation)
	w3b, b3b, wqb, wkb := up(w3), up(b3), up(wq), up(wk)
	bqb, bkb, bob, bcb, b0b, b2b := up(bq), up(bk), up(bo), up(bc), up(b0), up(b2)
	mods, y, q, k, h := up(make([]float32, F*6*d)), up(make([]float32, T*d)), up(make([]float32, T*d)), up(make([]float32, T*d)), up(make([]float32, T*d))
	m := func(i int) FrameVectors { return FrameVectors{mods, i * d, 6 * d} }
	size := int64(4 * T * d)

	batch := dev.NewBatch()
	must(t, AddBias(dev, batch, mods, e0b, modb, F, 6*d))
	must(t, LayerNorm(dev, batch, y, xb, T, d, eps, nil, nil))
	must(t, Modulate(dev, batch, y, T, d, tpf, m(0), m(1)))
	must(t, AddBias(dev, batch, q, y, bqb, T, d))
	must(t, AddBias(dev, batch, k, y, bkb, T, d))
	must(t, RMSNorm(dev, batch, q, q, T, d, eps, wqb))
	must(t, RMSNorm(dev, batch, k, k, T, d, eps, wkb))
	must(t, Rope(dev, batch, q, 0, heads, rt, 0, F))
	must(t, Rope(dev, batch, k, 0, heads, rt, 0, F))
	must(t, AddBias(dev, batch, h, q, bob, T, d))
	must(t, GatedAdd(dev, batch, xb, h, T, d, tpf, m(2)))
	must(t, LayerNorm(dev, batch, y, xb, T, d, eps, w3b, b3b))
	must(t, AddBias(dev, batch, y, y, bcb, T, d))
	must(t, Add(dev, batch, xb, y, T*d))
	must(t, LayerNorm(dev, batch, y, xb, T, d, eps, nil, nil))
	must(t, Modulate(dev, batch, y, T, d, tpf, m(3), m(4)))
	batch.Copy(h, 0, y, 0, size)
	must(t, AddBias(dev, batch, h, h, b0b, T, d))
	must(t, GELUTanh(dev, batch, h, T*d))
	must(t, AddBias(dev, batch, h, h, b2b, T, d))
	must(t, GatedAdd(dev, batch, xb, h, T, d, tpf, m(5)))
	if batch.Len() != 21 {
		t.Fatalf("the batch holds %d commands, want 21", batch.Len())
	}
	run(t, batch)

	cm := make([]float32, F*6*d)
	cpuMods(cm, modulation, e0, F, d)
	cx, cy, cq, ck, ch := append([]float32(nil), x...), make([]float32, T*d), make([]float32, T*d), make([]float32, T*d), make([]float32, T*d)
	nn.LayerNorm(cy, cx, T, d, eps, nil, nil)
	cpuModulate(cy, T, d, tpf, modRow(cm, d, 0), modRow(cm, d, 1))
	copy(cq, cy)
	copy(ck, cy)
	cpuAddBias(cq, bq, T)
	cpuAddBias(ck, bk, T)
	nn.RMSNorm(cq, cq, T, d, eps, wq)
	nn.RMSNorm(ck, ck, T, d, eps, wk)
	rot := tab.NewRotator(H, W)
	for f := 0; f < F; f++ {
		rot.Frame(cq[f*tpf*d:], heads, f)
		rot.Frame(ck[f*tpf*d:], heads, f)
	}
	copy(ch, cq)
	cpuAddBias(ch, bo, T)
	cpuGatedAdd(cx, ch, T, d, tpf, modRow(cm, d, 2))
	nn.LayerNorm(cy, cx, T, d, eps, w3, b3)
	cpuAddBias(cy, bc, T)
	cpuAddInto(cx, cy)
	nn.LayerNorm(cy, cx, T, d, eps, nil, nil)
	cpuModulate(cy, T, d, tpf, modRow(cm, d, 3), modRow(cm, d, 4))
	copy(ch, cy)
	cpuAddBias(ch, b0, T)
	nn.GELUTanh(ch)
	cpuAddBias(ch, b2, T)
	cpuGatedAdd(cx, ch, T, d, tpf, modRow(cm, d, 5))

	sameFloats(t, "k (RMSNorm, RoPE)", down(t, dev, k, T*d), ck)
	sameFloats(t, "y (LayerNorm, modulate)", down(t, dev, y, T*d), cy)
	sameFloats(t, "h (GELU)", down(t, dev, h, T*d), ch)
	if sameFloats(t, "x", down(t, dev, xb, T*d), cx) {
		finite := 0
		for _, v := range cx {
			if !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) {
				finite++
			}
		}
		if finite < T*d*9/10 {
			t.Errorf("only %d of %d outputs are finite: the chain tests little", finite, T*d)
		}
	}
}

// TestNNErrors: bad sizes and aliasing are errors at record time, naming
// the function and the operand, and record nothing.
func TestNNErrors(t *testing.T) {
	dev := vulkantest.Open(t)
	small, big, other := upFloats(t, dev, make([]float32, 10)), upFloats(t, dev, make([]float32, 100)), upFloats(t, dev, make([]float32, 100))
	tab, err := NewRopeTables(dev, rope.MustNew(6), 2, 2, 2)
	must(t, err)
	defer tab.Free()
	if _, err := NewRopeTables(dev, rope.MustNew(6), 2, 0, 2); err == nil || !strings.Contains(err.Error(), "height 0") {
		t.Errorf("NewRopeTables with height 0: %v", err)
	}
	if _, err := tab.Positions(dev, []rope.Pos{{T: 1, H: 1, W: 1}, {T: 2}}); err == nil || !strings.Contains(err.Error(), "position 1 {T:2 H:0 W:0} outside") {
		t.Errorf("Positions outside the tables: %v", err)
	}
	pos, err := tab.Positions(dev, []rope.Pos{{T: 1, H: 1, W: 1}, {}, {}})
	must(t, err)
	defer pos.Free()
	batch := dev.NewBatch()
	for _, c := range []struct {
		want string
		err  error
	}{
		{"LayerNorm: x holds 40 bytes", LayerNorm(dev, batch, big, small, 4, 5, 1e-6, nil, nil)},
		{"LayerNorm: y holds 40 bytes", LayerNorm(dev, batch, small, big, 4, 5, 1e-6, nil, nil)},
		{"LayerNorm: rows -1", LayerNorm(dev, batch, big, big, -1, 5, 1e-6, nil, nil)},
		{"LayerNorm: affine weights w and b: both or neither", LayerNorm(dev, batch, big, big, 4, 5, 1e-6, small, nil)},
		{"LayerNorm: w holds 40 bytes", LayerNorm(dev, batch, big, big, 4, 20, 1e-6, small, big)},
		{"LayerNorm: y shares a buffer with the weights", LayerNorm(dev, batch, big, other, 4, 5, 1e-6, big, small)},
		{"RMSNorm: w is nil", RMSNorm(dev, batch, big, big, 4, 5, 1e-6, nil)},
		{"Add: n -3 is negative", Add(dev, batch, big, big, -3)},
		{"Add: y holds 40 bytes", Add(dev, batch, big, small, 11)},
		{"AddBias: b holds 40 bytes", AddBias(dev, batch, big, big, small, 2, 11)},
		{"AddBias: dst is the bias buffer", AddBias(dev, batch, small, big, small, 2, 5)},
		{"Modulate: rows per frame 0", Modulate(dev, batch, big, 4, 5, 0, FrameVectors{small, 0, 5}, FrameVectors{small, 5, 0})},
		{"Modulate: shift holds 40 bytes", Modulate(dev, batch, big, 4, 5, 2, FrameVectors{small, 0, 6}, FrameVectors{small, 5, 0})},
		{"Modulate: scale: offset -1", Modulate(dev, batch, big, 4, 5, 2, FrameVectors{small, 0, 5}, FrameVectors{small, -1, 0})},
		{"Modulate: y shares a buffer", Modulate(dev, batch, big, 4, 5, 2, FrameVectors{big, 0, 5}, FrameVectors{small, 5, 0})},
		{"GatedAdd: gate holds 40 bytes", GatedAdd(dev, batch, big, other, 4, 5, 1, FrameVectors{small, 0, 3})},
		{"GatedAdd: x shares a buffer with the gate", GatedAdd(dev, batch, big, other, 4, 5, 4, FrameVectors{big, 0, 5})},
		{"GELUTanh: x holds 40 bytes", GELUTanh(dev, batch, small, 11)},
		{"SiLU: y holds 40 bytes", SiLU(dev, batch, small, big, 11)},
		{"Rope: frames 1 … 2 outside", Rope(dev, batch, big, 0, 1, tab, 1, 2)},
		{"Rope: x holds 40 bytes", Rope(dev, batch, small, 0, 1, tab, 0, 1)},
		{"Rope: tok0 0, heads 0", Rope(dev, batch, big, 0, 0, tab, 0, 1)},
		{"Rope: no RopeTables", Rope(dev, batch, big, 0, 1, nil, 0, 1)},
		{"RopeAt: x holds 400 bytes", RopeAt(dev, batch, big, 7, 3, pos)},
		{"RopeAt: no RopePositions", RopeAt(dev, batch, big, 0, 1, nil)},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("got error %v, want one containing %q", c.err, c.want)
		}
	}
	if batch.Len() != 0 {
		t.Errorf("the failed calls recorded %d commands", batch.Len())
	}
}
