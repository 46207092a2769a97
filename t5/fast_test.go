package t5

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/gpu"
	"github.com/densitykv/densitykv/gpu/gputest"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// fastAccumulation is the share of fast mode's float32 accumulation in its
// tolerance: 2·(kmax+2)·2^-23, kmax the largest depth of a linear read
// from the golden weights' shapes (see wan's goldenTolFast: the bfloat16
// operands reach the tensor cores exactly, each product's accumulation
// differs from gemm's bfloat16 definition by at most (k+2)·2^-23·Σ|a·b|,
// taken as twice the output's scale).
func fastAccumulation(t *testing.T, dir string) float64 {
	t.Helper()
	s, err := checkpoint.OpenSafetensors(filepath.Join(dir, "weights.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	kmax := 0
	for _, n := range s.Names() {
		if info, _ := s.Info(n); strings.HasSuffix(n, ".weight") && len(info.Shape) == 2 && !strings.Contains(n, "embedding") {
			kmax = max(kmax, info.Shape[1])
		}
	}
	if kmax < 16 {
		t.Fatalf("weights.safetensors: largest linear depth %d: no linear weights found", kmax)
	}
	return 2 * float64(kmax+2) * 0x1p-23
}

// TestFastModeGolden encodes every golden prompt in fast mode on the test
// device's tensor cores and compares with the float64 outputs within
// TestGoldenBF16's tolerances plus fastAccumulation; on a device without a
// usable cooperative matrix (lavapipe) it requires the refusal instead
// (TestFastModeGoldenEmulated runs the comparison with the multiply
// emulated).
func TestFastModeGolden(t *testing.T) {
	if be := gputest.FastBackend(t); be != nil {
		fastGolden(t, be)
	}
}

// TestFastModeGoldenEmulated is TestFastModeGolden with the tensor cores'
// multiply emulated (gpu.NewEmulatedFastBackend), on any device.
func TestFastModeGoldenEmulated(t *testing.T) {
	dev := vulkantest.Open(t)
	be, err := gpu.NewEmulatedFastBackend(dev)
	if err != nil {
		t.Fatal(err)
	}
	fastGolden(t, be)
}

func fastGolden(t *testing.T, be *gpu.Backend) {
	dir, g := openGolden(t)
	acc := fastAccumulation(t, dir)
	m, err := Load(filepath.Join(dir, "weights.safetensors"), LoadOptions{Precision: gemm.BF16})
	if err != nil {
		t.Fatal(err)
	}
	m.UseBackend(be)
	defer m.UseBackend(nil)
	before := be.FastProducts()
	textLen := g.side.Config.TextLen
	for _, p := range g.side.Prompts {
		ids := toInt32(t, g.i64(p.Key+".input_ids", textLen))
		mask := toInt32(t, g.i64(p.Key+".attention_mask", textLen))
		want := g.f64(p.Key+".output", p.SeqLen, m.Config.Dim)
		out, err := m.Encode(ids, mask)
		if err != nil {
			t.Fatal(err)
		}
		var num, den, peak, maxAbs float64
		for j, w := range want {
			d := float64(out[j]) - w
			num, den = num+d*d, den+w*w
			peak, maxAbs = max(peak, math.Abs(w)), max(maxAbs, math.Abs(d))
		}
		rel := math.Sqrt(num / den)
		t.Logf("%s in fast mode: relative L2 %.3g = %.2fu, max %.2fu of the largest value", p.Key, rel, rel/bf16U, maxAbs/peak/bf16U)
		if !(rel <= tolRelL2BF16+acc) {
			t.Errorf("%s: relative L2 error %.3g > %.3g", p.Key, rel, tolRelL2BF16+acc)
		}
		if !(maxAbs <= (tolElementBF16+acc)*peak) {
			t.Errorf("%s: max error %.3g > %.3g × max |ref| %.3g", p.Key, maxAbs, tolElementBF16+acc, peak)
		}
	}
	if be.FastProducts() == before {
		t.Fatal("no fast-mode product recorded: fast mode did not run")
	}
}
