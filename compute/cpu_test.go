package compute_test

import (
	"math"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/compute/computetest"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/nn"
	"github.com/densitykv/densitykv/rope"
)

// TestCPUCases runs the conformance cases on the CPU backend (the
// reference against itself: every case runs and reads back).
func TestCPUCases(t *testing.T) {
	computetest.Run(t, compute.NewCPU())
}

// TestVecGroups: Modulate and GatedAdd read group g's vectors at
// Off + g·Stride, each row r in group r / groupRows.
func TestVecGroups(t *testing.T) {
	const rows, d, groupRows = 5, 3, 2
	b := compute.NewCPU()
	y := make([]float32, rows*d)
	mods := make([]float32, 3*4*d) // 3 groups of [4][d]: shift at d, scale at 3d
	for i := range y {
		y[i] = float32(i%7) - 2.5
	}
	for i := range mods {
		mods[i] = float32(i) / 8
	}
	want := make([]float32, len(y))
	for r := range rows {
		g := r / groupRows
		for j := range d {
			sh, sc := mods[g*4*d+d+j], mods[g*4*d+3*d+j]
			want[r*d+j] = float32(y[r*d+j]*(1+sc)) + sh
		}
	}
	yt, mt := b.Wrap(y), b.Param(mods)
	b.Modulate(yt, rows, d, groupRows, compute.Vec{T: mt, Off: d, Stride: 4 * d}, compute.Vec{T: mt, Off: 3 * d, Stride: 4 * d})
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := range y {
		if y[i] != want[i] {
			t.Fatalf("y[%d] = %v, want %v", i, y[i], want[i])
		}
	}
	x := make([]float32, rows*d)
	copy(want, x)
	for r := range rows {
		for j := range d {
			want[r*d+j] += float32(y[r*d+j] * mods[(r/groupRows)*d+j])
		}
	}
	b.GatedAdd(b.Wrap(x), yt, rows, d, groupRows, compute.Vec{T: mt, Stride: d})
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := range x {
		if x[i] != want[i] {
			t.Fatalf("x[%d] = %v, want %v", i, x[i], want[i])
		}
	}
}

type alien struct{}

func (alien) Len() int { return 100 }

// TestCPUErrors: a bad operand fails the operation with an error naming
// it; later operations are skipped until Flush returns the error.
func TestCPUErrors(t *testing.T) {
	l := &nn.Linear[float32]{In: 4, Out: 3, W: make([]float32, 12)}
	l.Pack(gemm.F32)
	for _, c := range []struct {
		name, want string
		run        func(b *compute.CPU)
	}{
		{"short y", "Linear: y holds 5 values, want 6", func(b *compute.CPU) {
			b.Linear(b.New(5), b.LoadLinear(l, gemm.F32), b.New(8), 2)
		}},
		{"alien", "LayerNorm: x is a tensor of another backend", func(b *compute.CPU) {
			b.LayerNorm(b.New(8), alien{}, 2, 4, 1e-6, nil, nil)
		}},
		{"half affine", "LayerNorm: b is nil", func(b *compute.CPU) {
			b.LayerNorm(b.New(8), b.New(8), 2, 4, 1e-6, b.New(4), nil)
		}},
		{"vec", "Modulate: shift holds 8 values, want 12", func(b *compute.CPU) {
			b.Modulate(b.New(12), 3, 4, 1, compute.Vec{T: b.New(8), Stride: 4}, compute.Vec{T: b.New(4)})
		}},
		{"group rows", "Modulate: 0 rows per group", func(b *compute.CPU) {
			b.Modulate(b.New(12), 3, 4, 0, compute.Vec{T: b.New(8)}, compute.Vec{T: b.New(4)})
		}},
		{"negative stride", "GatedAdd: gate (offset 0, stride -4", func(b *compute.CPU) {
			b.GatedAdd(b.New(12), b.New(12), 3, 4, 1, compute.Vec{T: b.New(8), Stride: -4})
		}},
		{"attention without keys", "Attention: 2 queries and 0 keys", func(b *compute.CPU) {
			b.Attention(gemm.F32, b.New(8), b.New(8), b.New(0), b.New(0), 2, 0, 1, 4, 1)
		}},
		{"unpacked", "LoadLinear: 2×2 weights not packed", func(b *compute.CPU) {
			b.LoadLinear(&nn.Linear[float32]{In: 2, Out: 2, W: make([]float32, 4)}, gemm.F32)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := compute.NewCPU()
			c.run(b)
			x := []float32{1, 2}
			b.Add(b.Wrap(x), b.Wrap([]float32{1, 1})) // skipped after the error
			err := b.Flush()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
			if x[0] != 1 || x[1] != 2 {
				t.Errorf("an operation ran after the error: x = %v", x)
			}
			if err := b.Flush(); err != nil {
				t.Errorf("second Flush: %v (the error is forgotten once returned)", err)
			}
		})
	}
}

// fused counts LayerNormModulate calls and computes them unfused on the
// CPU, negated, so that the test sees which path ran.
type fused struct {
	*compute.CPU
	calls int
}

func (f *fused) LayerNormModulate(y, x compute.Tensor, rows, d int, eps float64, groupRows int, shift, scale compute.Vec) {
	f.calls++
	f.CPU.LayerNorm(y, x, rows, d, eps, nil, nil)
	f.CPU.Modulate(y, rows, d, groupRows, shift, scale)
	for i, v := range f.Host(y) {
		f.Host(y)[i] = -v
	}
}

// TestLayerNormModulate: the fused kernel runs where the backend has one,
// the two operations elsewhere.
func TestLayerNormModulate(t *testing.T) {
	const rows, d = 4, 6
	run := func(b compute.Backend, h compute.HostMemory) []float32 {
		x := make([]float32, rows*d)
		for i := range x {
			x[i] = float32(math.Sin(float64(i)))
		}
		mods := make([]float32, 2*d)
		for i := range mods {
			mods[i] = float32(i) / 10
		}
		y := b.New(rows * d)
		compute.LayerNormModulate(b, y, h.Wrap(x), rows, d, 1e-6, 2, compute.Vec{T: h.Wrap(mods)}, compute.Vec{T: h.Wrap(mods), Off: d})
		if err := b.Flush(); err != nil {
			t.Fatal(err)
		}
		return h.Host(y)
	}
	cpu := compute.NewCPU()
	want := run(cpu, cpu)
	f := &fused{CPU: compute.NewCPU()}
	got := run(f, f)
	if f.calls != 1 {
		t.Fatalf("fused kernel called %d times, want 1", f.calls)
	}
	for i := range want {
		if got[i] != -want[i] {
			t.Fatalf("value %d: fused %v, unfused %v", i, got[i], want[i])
		}
	}
}

// TestCPURope: Rope is rope.Table.Apply at rope.Grid's positions (frame f
// at t0+f) on the tokens from tok0, the tokens before untouched; bad
// arguments and a short tensor are errors naming Rope.
func TestCPURope(t *testing.T) {
	r, err := rope.New(12, 500)
	if err != nil {
		t.Fatal(err)
	}
	const heads, H, W, tok0, t0, frames = 3, 2, 3, 4, 6, 2
	row := heads * 12
	x := make([]float32, (tok0+frames*H*W)*row)
	for i := range x {
		x[i] = float32(math.Sin(float64(i))) * 3
	}
	want := append([]float32(nil), x...)
	if err := r.Apply(want[tok0*row:], heads, rope.Grid(frames, H, W, t0)); err != nil {
		t.Fatal(err)
	}
	b := compute.NewCPU()
	b.Rope(b.Wrap(x), tok0, heads, r, H, W, t0, frames)
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := range x {
		if math.Float32bits(x[i]) != math.Float32bits(want[i]) {
			t.Fatalf("x[%d] = %v, want %v", i, x[i], want[i])
		}
	}
	for _, c := range []struct {
		name string
		run  func(b *compute.CPU)
		want string
	}{
		{"short", func(b *compute.CPU) { b.Rope(b.Wrap(x[1:]), tok0, heads, r, H, W, t0, frames) }, "Rope: x holds 575 values, want 576"},
		{"nil table", func(b *compute.CPU) { b.Rope(b.Wrap(x), 0, heads, nil, H, W, 0, 1) }, "Rope: table false"},
		{"negative t0", func(b *compute.CPU) { b.Rope(b.Wrap(x), 0, heads, r, H, W, -1, 1) }, "frames 1 from -1"},
	} {
		b := compute.NewCPU()
		c.run(b)
		if err := b.Flush(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}
