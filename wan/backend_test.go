package wan

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/gpu"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/nn"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// TestBackendGPU: the golden tiny model on the GPU backend (lavapipe in
// CI) gives the CPU's bits at both precisions: the text embedding (Embed,
// K, V) and the flow of three consecutive calls through the native memory
// policy (bitsRun: a first block, its clean pass, the second block
// against the cache), and the same trace.
func TestBackendGPU(t *testing.T) {
	dev := vulkantest.Open(t)
	be, err := gpu.NewBackend(dev)
	if err != nil {
		t.Fatal(err)
	}
	for _, prec := range []gemm.Precision{gemm.F32, gemm.BF16} {
		t.Run(prec.String(), func(t *testing.T) {
			want := bitsRun(t, goldenModelAs(t, prec))
			m := goldenModelAs(t, prec)
			cb := &countingBackend{Backend: be}
			m.UseBackend(cb)
			defer m.UseBackend(nil)
			got := bitsRun(t, m)
			for i := range want {
				if j := firstBitDiff(got[i], want[i]); j >= 0 {
					t.Fatalf("output %d (of text embed, K, V, three flows) value %d: %v on %v, %v on the CPU", i, j, got[i][j], be, want[i][j])
				}
			}
			if n := len(m.linears()); cb.loads != n {
				t.Errorf("%d Linear uploads for EmbedText and three forwards, want %d (each weight once)", cb.loads, n)
			}
		})
	}
	t.Run("trace", func(t *testing.T) {
		want := traceRun(t, goldenModelAs(t, gemm.BF16))
		m := goldenModelAs(t, gemm.BF16)
		m.UseBackend(be)
		defer m.UseBackend(nil)
		got := traceRun(t, m)
		if len(got) != len(want) || len(want) < 10 {
			t.Fatalf("%d traced tensors on %v, %d on the CPU", len(got), be, len(want))
		}
		for name, w := range want {
			if j := firstBitDiff(got[name], w); j >= 0 {
				t.Fatalf("trace %s value %d differs: %v on %v, %v on the CPU", name, j, at(got[name], j), be, at(w, j))
			}
		}
	})
}

// countingBackend counts the Linear uploads of a backend.
type countingBackend struct {
	*gpu.Backend
	loads int
}

func (c *countingBackend) LoadLinear(l *nn.Linear[float32], prec gemm.Precision) compute.Linear {
	c.loads++
	return c.Backend.LoadLinear(l, prec)
}

// traceRun returns the trace of one forward call of m (copies).
func traceRun(t *testing.T, m *Model) map[string][]float32 {
	t.Helper()
	g := openGolden(t, "forward_c_second_block_with_cache.safetensors")
	txt := goldenText(t, m, g)
	tr := map[string][]float32{}
	flow := make([]float32, goldenF*m.Cfg.InDim*goldenH*goldenW)
	c := Call{Latent: g.F32("x"), Height: goldenH, Width: goldenW, Timesteps: []float32{500, 500, 500}, Text: txt, Mem: memory.Call{First: true},
		Trace: func(name string, v []float32) { tr[name] = append([]float32(nil), v...) }}
	if err := m.Forward(flow, c, nativePolicy(t, m)); err != nil {
		t.Fatal(err)
	}
	return tr
}

// firstBitDiff returns the first index where a and b differ in bits (or
// their length), -1 if none.
func firstBitDiff(a, b []float32) int {
	for i := range min(len(a), len(b)) {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// failing is the CPU backend with GELUTanh missing.
type failing struct {
	*compute.CPU
	err error
}

func (f *failing) GELUTanh(compute.Tensor) {
	if f.err == nil {
		f.err = fmt.Errorf("test: GELUTanh: %w", compute.ErrNoKernel)
	}
}

func (f *failing) Flush() error {
	if err := f.err; err != nil {
		f.err = nil
		f.CPU.Flush()
		return err
	}
	return f.CPU.Flush()
}

// TestBackendErrors: an operation the backend fails makes EmbedText and
// Forward return its error, naming the backend.
func TestBackendErrors(t *testing.T) {
	m := goldenModel(t)
	g := openGolden(t, "forward_c_second_block_with_cache.safetensors")
	txt := goldenText(t, m, g)
	m.UseBackend(&failing{CPU: compute.NewCPU()})
	if _, err := m.EmbedText(g.F32("context"), 8); !errors.Is(err, compute.ErrNoKernel) {
		t.Fatalf("EmbedText: error %v, want compute.ErrNoKernel", err)
	}
	flow := make([]float32, goldenF*m.Cfg.InDim*goldenH*goldenW)
	err := m.Forward(flow, Call{Latent: g.F32("x"), Height: goldenH, Width: goldenW, Timesteps: []float32{1, 1, 1}, Text: txt, Mem: memory.Call{First: true}}, nativePolicy(t, m))
	if !errors.Is(err, compute.ErrNoKernel) {
		t.Fatalf("Forward: error %v, want compute.ErrNoKernel", err)
	}
}

// at returns v[i], or NaN past its end.
func at(v []float32, i int) float32 {
	if i < len(v) {
		return v[i]
	}
	return float32(math.NaN())
}
