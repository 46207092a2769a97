package vae

import (
	"math"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/gpu"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// streamRun decodes a stream of 4 latent frames of 2×3 in three chunks
// (1, 2, 1: the caches and the first-frame flags carry across chunks) on
// m's backend and returns the pixels of each chunk followed by every
// module's trace, in order.
func streamRun(t *testing.T, m *Model, prec gemm.Precision) [][]float32 {
	t.Helper()
	var out [][]float32
	opt := tinyStats(m.Cfg.ZDim)
	opt.Precision = prec
	var traces [][]float32
	opt.Trace = func(call int, module string, c, h, w int, data []float32) {
		traces = append(traces, append([]float32{float32(call), float32(c), float32(h), float32(w)}, data...))
	}
	d, err := m.NewDecoder(opt)
	if err != nil {
		t.Fatal(err)
	}
	const c, h, w = 4, 2, 3
	z := randLatents(4*c*h*w, 9)
	for _, ch := range [][2]int{{0, 1}, {1, 3}, {3, 4}} {
		v, err := d.Decode(z[ch[0]*c*h*w:ch[1]*c*h*w], ch[1]-ch[0], c, h, w)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return append(out, traces...)
}

// TestBackendGPU: a tiny random decoder on the GPU backend (lavapipe in
// CI) decodes a stream of three chunks with the CPU's bits at fp32 and
// bf16: every pixel and every module's traced output, the FLOP count the
// same.
func TestBackendGPU(t *testing.T) {
	be, err := gpu.NewBackend(vulkantest.Open(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, prec := range []gemm.Precision{gemm.F32, gemm.BF16} {
		t.Run(prec.String(), func(t *testing.T) {
			want := streamRun(t, tinyModel(t, 4), prec)
			m := tinyModel(t, 4)
			m.UseBackend(be)
			defer m.UseBackend(nil)
			got := streamRun(t, m, prec)
			if len(got) != len(want) {
				t.Fatalf("%d outputs on %v, %d on the CPU", len(got), be, len(want))
			}
			for i := range want {
				if j := firstDiff(got[i], want[i]); j >= 0 {
					t.Fatalf("output %d (3 chunks, then the traces) value %d: %v on %v, %v on the CPU", i, j, got[i][j], be, want[i][j])
				}
			}
		})
	}
}

// firstDiff returns the first index where a and b differ in bits (or
// length), −1 if none.
func firstDiff(a, b []float32) int {
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

// TestBackendMoved: a decoder whose model moved to another backend after
// it began refuses its next chunk, naming both.
func TestBackendMoved(t *testing.T) {
	m := tinyModel(t, 4)
	d, err := m.NewDecoder(tinyStats(4))
	if err != nil {
		t.Fatal(err)
	}
	m.UseBackend(compute.NewCPU())
	_, err = d.Decode(randLatents(4*2*2, 1), 1, 4, 2, 2)
	if err == nil || !strings.Contains(err.Error(), "(UseBackend): start a new decoder") {
		t.Fatalf("error %v, want the move named", err)
	}
	if d.LatentFrames() != 0 {
		t.Fatalf("%d latent frames decoded after the refusal", d.LatentFrames())
	}
}
