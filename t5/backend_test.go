package t5

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/gpu"
	"github.com/densitykv/densitykv/nn"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// TestBackendGPU: the golden tiny encoder on the GPU backend (lavapipe in
// CI) gives the CPU's bits at both precisions: every golden prompt through
// Encode, a Forward with a mask that is not a prefix (pads computed), its
// trace with the attention probabilities; and a random model of an odd
// configuration (3 heads of 5 values, 37 FFN columns). Each weight is
// uploaded once across the calls.
func TestBackendGPU(t *testing.T) {
	dev := vulkantest.Open(t)
	be, err := gpu.NewBackend(dev)
	if err != nil {
		t.Fatal(err)
	}
	dir, g := openGolden(t)
	for _, prec := range []gemm.Precision{gemm.F32, gemm.BF16} {
		t.Run("golden/"+prec.String(), func(t *testing.T) {
			m, err := Load(filepath.Join(dir, "weights.pth"), LoadOptions{Precision: prec})
			if err != nil {
				t.Fatal(err)
			}
			textLen := g.side.Config.TextLen
			var calls []backendCall
			for _, p := range g.side.Prompts {
				calls = append(calls, backendCall{name: p.Key,
					ids: toInt32(t, g.i64(p.Key+".input_ids", textLen)), mask: toInt32(t, g.i64(p.Key+".attention_mask", textLen))})
			}
			if len(calls) < 2 {
				t.Fatalf("%d golden prompts, want at least 2", len(calls))
			}
			// The first prompt with a hole in its mask: Forward on every
			// position, the trace with the probabilities.
			mask := append([]int32(nil), calls[0].mask...)
			mask[1] = 0
			calls = append(calls, backendCall{name: "forward with a hole", ids: calls[0].ids, mask: mask, forward: true})
			compareBackends(t, m, be, calls)
		})
	}
	for _, prec := range []gemm.Precision{gemm.F32, gemm.BF16} {
		t.Run("odd/"+prec.String(), func(t *testing.T) {
			m := testModel(t, oddConfigs[0], 5)
			m.Precision = prec
			ids := []int32{3, 17, 49, 0, 8, 8, 21, 2, 1}
			compareBackends(t, m, be, []backendCall{
				{name: "encode", ids: ids, mask: []int32{1, 1, 1, 1, 1, 1, 0, 0, 0}},
				{name: "forward", ids: ids, mask: []int32{0, 1, 1, 0, 1, 1, 1, 0, 1}, forward: true},
				{name: "forward, no mask", ids: ids[:4], forward: true},
			})
		})
	}
}

// backendCall is one Encode (or Forward with a trace) of compareBackends.
type backendCall struct {
	name      string
	ids, mask []int32
	forward   bool
}

// run returns the call's output, and for a Forward its trace, flattened.
func (c backendCall) run(t *testing.T, m *Model) [][]float32 {
	t.Helper()
	if !c.forward {
		out, err := m.Encode(c.ids, c.mask)
		if err != nil {
			t.Fatalf("%s on %v: %v", c.name, m.Backend(), err)
		}
		return [][]float32{out}
	}
	tr := &Trace{WantProbs: true}
	out, err := m.Forward(c.ids, c.mask, tr)
	if err != nil {
		t.Fatalf("%s on %v: %v", c.name, m.Backend(), err)
	}
	res := [][]float32{out, tr.Embedding}
	for _, l := range [][][]float32{tr.AfterAttn, tr.Blocks, tr.Probs} {
		if len(l) != m.Config.Layers {
			t.Fatalf("%s on %v: a trace of %d blocks", c.name, m.Backend(), len(l))
		}
		res = append(res, l...)
	}
	return res
}

// compareBackends runs calls on the CPU, then on be, and fails on any
// differing bit or a weight uploaded more than once.
func compareBackends(t *testing.T, m *Model, be *gpu.Backend, calls []backendCall) {
	t.Helper()
	var want [][][]float32
	for _, c := range calls {
		want = append(want, c.run(t, m))
	}
	cb := &countingT5Backend{Backend: be}
	m.UseBackend(cb)
	defer m.UseBackend(nil)
	for i, c := range calls {
		got := c.run(t, m)
		for j := range want[i] {
			if k := firstBitDiff32(got[j], want[i][j]); k >= 0 {
				t.Fatalf("%s: output %d (0: the result, then the trace) value %d: %v on %v, %v on the CPU",
					c.name, j, k, at32(got[j], k), be, at32(want[i][j], k))
			}
		}
	}
	if n := 7 * m.Config.Layers; cb.loads != n {
		t.Errorf("%d LoadLinearBF16 calls for %d calls, want %d (each weight once)", cb.loads, len(calls), n)
	}
}

// countingT5Backend counts the Linear uploads of a backend.
type countingT5Backend struct {
	*gpu.Backend
	loads int
}

func (c *countingT5Backend) LoadLinearBF16(l *nn.Linear[uint16], prec gemm.Precision) compute.Linear {
	c.loads++
	return c.Backend.LoadLinearBF16(l, prec)
}

// firstBitDiff32 returns the first index where a and b differ in bits or
// length, or −1.
func firstBitDiff32(a, b []float32) int {
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

// at32 formats v[i], or says v is shorter.
func at32(v []float32, i int) string {
	if i < len(v) {
		return fmt.Sprint(v[i])
	}
	return fmt.Sprintf("(%d values)", len(v))
}

// TestBackendError: a failure on the backend (here weights the CPU
// backend refuses) is Encode's error, naming the operation, and the
// model computes again once the weights are whole.
func TestBackendError(t *testing.T) {
	m := testModel(t, oddConfigs[0], 5)
	ids, mask := []int32{3, 17, 49, 1}, []int32{1, 1, 1, 1}
	want, err := m.Encode(ids, mask)
	if err != nil {
		t.Fatal(err)
	}
	w := m.Blocks[1].FFN.FC1.W
	m.Blocks[1].FFN.FC1.W = w[:5]
	if _, err := m.Encode(ids, mask); !contains(err, "t5: cpu", "LoadLinearBF16", "5 weights for 37×24") {
		t.Fatalf("Encode with a short weight: %v", err)
	}
	m.Blocks[1].FFN.FC1.W = w
	got, err := m.Encode(ids, mask)
	if err != nil {
		t.Fatal(err)
	}
	if i := firstBitDiff32(got, want); i >= 0 {
		t.Fatalf("after the error, value %d: %v, before %v", i, got[i], want[i])
	}
}
