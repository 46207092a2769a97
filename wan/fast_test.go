package wan

import (
	"math"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/golden"
	"github.com/densitykv/densitykv/gpu"
	"github.com/densitykv/densitykv/gpu/gputest"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/nn"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// goldenTolFast is fast mode's tolerance against the float64 goldens
// (max |Δ| over max |ref| per tensor, as goldenTolBF16), derived from the
// largest depth of a linear read from the golden weights' shapes.
//
// Derivation. Fast mode computes the bf16 model with the same operand
// roundings (the bfloat16 operands reach the tensor cores exactly: package
// gpu's PrepFast and UploadFast; TestFastOperandRange checks that no
// operand of this model falls outside the exact window) and the same
// exact kernels for everything but the linears' products, whose float32
// accumulation differs from gemm's bfloat16 definition by at most
// (k+2)·2^-23·Σ|a·b| each (twice the sequential bound: tensor cores may
// truncate their alignment; gpu's fastTol). The bf16 model's own error is
// goldenTolBF16 (4u); the accumulation adds, per tensor, at most
// (kmax+2)·2^-23 times Σ|a·b| over max|ref|, taken as 2 for these
// incoherent sums (the measured bf16 errors are dominated by the operand
// roundings, not by cancellation). So the tolerance is goldenTolBF16 +
// 2·(kmax+2)·2^-23: fast mode must be as close to the float64 model as
// exact bf16 is, up to the accumulation (kmax 256 here: 6e-5, against
// 4u = 0.0156).
func goldenTolFast(t *testing.T) float64 {
	t.Helper()
	g := golden.Open(t, "weights.safetensors")
	kmax := 0
	for _, n := range g.Names() {
		info, _ := g.Info(n)
		if !strings.HasSuffix(n, ".weight") || len(info.Shape) < 2 {
			continue
		}
		k := 1
		for _, d := range info.Shape[1:] {
			k *= d
		}
		kmax = max(kmax, k)
	}
	if kmax < 16 {
		t.Fatalf("weights.safetensors: largest linear depth %d: no linear weights found", kmax)
	}
	return goldenTolBF16 + 2*float64(kmax+2)*0x1p-23
}

// TestFastModeGolden runs the golden tiny DiT in fast mode on the test
// device's tensor cores (gpu.NewFastBackend) and compares flow_pred and
// every intermediate of the four single-block forwards with the float64
// goldens within goldenTolFast. On a device without a usable cooperative
// matrix (lavapipe) it requires the refusal instead, naming the device
// and VK_NV_cooperative_matrix, and says so: it never passes as if fast
// mode had run (TestFastModeGoldenEmulated runs the same comparison with
// the multiply emulated).
func TestFastModeGolden(t *testing.T) {
	if be := gputest.FastBackend(t); be != nil {
		fastGolden(t, be)
	}
}

// TestFastModeGoldenEmulated is TestFastModeGolden with the tensor cores'
// multiply emulated (gpu.NewEmulatedFastBackend): fast mode's tile loop,
// operand preparation and scaling at the model's shapes, within the same
// tolerance, on any device (lavapipe in CI). It says nothing of tensor
// cores.
func TestFastModeGoldenEmulated(t *testing.T) {
	dev := vulkantest.Open(t)
	be, err := gpu.NewEmulatedFastBackend(dev)
	if err != nil {
		t.Fatal(err)
	}
	fastGolden(t, be)
}

// fastGolden compares the bf16 golden model on be (fast mode) with the
// float64 goldens within goldenTolFast, requires be to have run its
// linears in fast mode, and logs how far fast mode is from the CPU's
// exact bf16 flow.
func fastGolden(t *testing.T, be *gpu.Backend) {
	tol := goldenTolFast(t)
	if compute.ModeOf(be) != compute.Fast {
		t.Fatalf("%v is not in fast mode", be)
	}
	cpu := goldenModelAs(t, gemm.BF16)
	for _, c := range goldenForwardCases {
		t.Run(c.file, func(t *testing.T) {
			g := openGolden(t, c.file+".safetensors")
			run := func(m *Model, trace func(string, []float32)) []float32 { return c.run(t, m, g, trace) }
			m := goldenModelAs(t, gemm.BF16)
			m.UseBackend(be)
			defer m.UseBackend(nil)
			before := be.FastProducts()
			got := map[string][]float32{}
			flow := run(m, func(name string, x []float32) { got[name] = append([]float32(nil), x...) })
			if n := be.FastProducts() - before; n < len(m.linears()) {
				t.Fatalf("%d fast-mode products for a forward of %d linears: fast mode did not run", n, len(m.linears()))
			}
			e := relErr(flow, g.F64("flow_pred"))
			if e > tol {
				t.Errorf("fast flow_pred: relative error %.3g (%.2fu) > %.3g", e, e/bf16U, tol)
			}
			golden.Mark(c.file+".safetensors", "flow_pred")
			d := relErr(flow, f64(run(cpu, nil)))
			t.Logf("fast flow_pred: relative error %.3g = %.2fu against float64; %.3g from the CPU's exact bf16 (tolerance %.3g)", e, e/bf16U, d, tol)
			if d > tol {
				t.Errorf("fast and exact bf16 flows differ by %.3g of the largest value (> %.3g)", d, tol)
			}
			worst, at := 0.0, ""
			for _, n := range g.Names() {
				if len(n) < 7 || n[:6] != "inter." || n == "inter.context_embed" {
					continue
				}
				x, ok := got[n[6:]]
				if !ok {
					t.Errorf("%s: no trace", n)
					continue
				}
				e := relErr(x, g.F64(n))
				if e > tol {
					t.Errorf("fast %s: relative error %.3g (%.2fu) > %.3g", n, e, e/bf16U, tol)
				}
				if e > worst {
					worst, at = e, n
				}
			}
			if at != "" {
				t.Logf("worst intermediate: %s, %.3g = %.2fu", at, worst, worst/bf16U)
			}
		})
	}
}

// rangeSpy is a CPU backend that records the bfloat16 operands of the bf16
// linears (their weights when loaded, their inputs when applied) for
// TestFastOperandRange.
type rangeSpy struct {
	*compute.CPU
	weights, inputs operandRange
	seen            map[*nn.Linear[float32]]bool // weights counted once
}

func (s *rangeSpy) LoadLinear(l *nn.Linear[float32], prec gemm.Precision) compute.Linear {
	if prec == gemm.BF16 && !s.seen[l] {
		s.seen[l] = true
		v := l.Weight()
		for r := 0; r < l.Out; r++ {
			s.weights.add(v[r*l.In : (r+1)*l.In])
		}
	}
	return s.CPU.LoadLinear(l, prec)
}

func (s *rangeSpy) Linear(y compute.Tensor, w compute.Linear, x compute.Tensor, rows int) {
	v, in := s.Host(x), w.In()
	for r := 0; r < rows; r++ {
		s.inputs.add(v[r*in : (r+1)*in])
	}
	s.CPU.Linear(y, w, x, rows)
}

// operandRange counts bfloat16 operands (gemm.BF16OperandBits of float32
// rows) by what float16 makes of them: unscaled (a plain conversion: an
// overflow at 2^16 and above, an inexact or lost value below 2^-17), and
// scaled per row as fast mode does (inexact only below 2^-31 of the
// row's largest value); and the exponent range seen.
type operandRange struct {
	values, zeros                    int
	overflow, underflow, scaledInexa int
	minExp, maxExp                   int
}

func (o *operandRange) add(row []float32) {
	bits := make([]uint16, len(row))
	gemm.BF16OperandBits(bits, row)
	emax := 0
	for _, h := range bits {
		if e := int(h>>7) & 0xff; e != 0xff && e > emax {
			emax = e
		}
	}
	if o.values == 0 {
		o.minExp, o.maxExp = math.MaxInt, math.MinInt
	}
	for _, h := range bits {
		o.values++
		e := int(h>>7) & 0xff
		switch {
		case e == 0:
			o.zeros++
			continue
		case e == 0xff:
			continue
		}
		x := e - 127
		o.minExp, o.maxExp = min(o.minExp, x), max(o.maxExp, x)
		if x >= 16 {
			o.overflow++
		}
		if x < -17 {
			o.underflow++
		}
		if e < emax-31 {
			o.scaledInexa++
		}
	}
}

// TestFastOperandRange measures, on the golden tiny model's four forwards
// in bf16 (on the CPU), what converting its linears' bfloat16 operands to
// float16 would lose: plainly (bfloat16 has float32's exponent range,
// float16 2^-24 … 65504), and with fast mode's power-of-two scale per row.
// It requires the scaled conversion to be exact for every operand (the
// premise of goldenTolFast) and logs the plain conversion's losses.
func TestFastOperandRange(t *testing.T) {
	spy := &rangeSpy{CPU: compute.NewCPU(), seen: map[*nn.Linear[float32]]bool{}}
	m := goldenModelAs(t, gemm.BF16)
	m.UseBackend(spy)
	defer m.UseBackend(nil)
	for _, file := range []string{"forward_a_first_block_t1000", "forward_b_first_block_t0", "forward_d_first_block_mixed_t"} {
		g := openGolden(t, file+".safetensors")
		ts64 := g.F64("timestep")
		ts := make([]float32, len(ts64))
		for i, v := range ts64 {
			ts[i] = float32(v)
		}
		flow := make([]float32, goldenF*m.Cfg.InDim*goldenH*goldenW)
		if err := m.Forward(flow, Call{Latent: g.F32("x"), Height: goldenH, Width: goldenW, Timesteps: ts, Text: goldenText(t, m, g),
			Mem: memory.Call{Block: 0, First: true}}, nativePolicy(t, m)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		what string
		r    operandRange
	}{{"weights", spy.weights}, {"inputs", spy.inputs}} {
		r := c.r
		if r.values == 0 {
			t.Fatalf("%s: no operands recorded", c.what)
		}
		t.Logf("%s: %d bfloat16 operands (%d zero), exponents 2^%d … 2^%d; plain float16: %d overflow, %d below 2^-17 (inexact or lost); scaled per row: %d inexact",
			c.what, r.values, r.zeros, r.minExp, r.maxExp, r.overflow, r.underflow, r.scaledInexa)
		if r.scaledInexa != 0 {
			t.Errorf("%s: %d operands outside fast mode's exact window", c.what, r.scaledInexa)
		}
	}
}
