package generate

import (
	"strings"
	"testing"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/vulkan"
)

// TestDeviceNeed sizes the 1.3B DiT's device memory at 480×832 for the
// paper's bounded policies (context: sink + window + M keys, or the native
// cache) and for the full history (every token of the run), and checks
// the refusals against a device's heaps, binding range and allocation
// limit, each naming the numbers.
func TestDeviceNeed(t *testing.T) {
	// Wan2.1-T2V-1.3B's architecture.
	c := ditShape{Dim: 1536, FFNDim: 8960, TextLen: 512, Layers: 30, PatchH: 2, PatchW: 2, PatchLen: 64, OutLen: 64}
	g := config.GenerateSection{LatentHeight: 60, LatentWidth: 104, FramesPerBlock: 3, Blocks: 40}
	mc := memory.DefaultConfig(memory.DefaultLayout())
	mc.SinkFrames, mc.CacheFrames, mc.WindowFrames, mc.Capacity = 1, 12, 5, 9360
	weights, largest := int64(2_800_000_000), int64(2*c.Dim*c.FFNDim)
	tpf := 30 * 52
	for _, tc := range []struct {
		policy string
		keys   int
	}{
		{"densitykv", 6*tpf + 9360},
		{"native", 12 * tpf},
		{"deep-forcing", 12 * tpf},
		{"full-history", 40 * 3 * tpf},
		{"full", 40 * 3 * tpf},
	} {
		n := estimateDeviceNeed(c, weights, largest, g, mc, tc.policy)
		if n.Keys != tc.keys || n.Context != int64(2*tc.keys*c.Dim*4) || n.Weights != weights {
			t.Errorf("%s: %+v, want %d keys", tc.policy, n, tc.keys)
		}
		if n.Total() != n.Weights+n.Text+n.Activations+n.Context+n.History+n.Banks+n.BankScratch || n.Largest < int64(tc.keys*c.Dim*4) {
			t.Errorf("%s: total %d, largest %d", tc.policy, n.Total(), n.Largest)
		}
		// Every policy but Deep Forcing keeps each layer's history (the
		// context before the block's 4,680 keys) on the device; DensityKV
		// without its banks' 9,360 rows, copied from the banks there.
		hist := int64(30 * 2 * (tc.keys - 3*tpf) * c.Dim * 4)
		switch tc.policy {
		case "deep-forcing":
			hist = 0
		case "densitykv":
			hist = int64(30 * 2 * (tc.keys - 3*tpf - 9360) * c.Dim * 4)
		}
		if n.History != hist {
			t.Errorf("%s: history %d bytes, want %d", tc.policy, n.History, hist)
		}
		// DensityKV's banks are on the device: 30 layers × 12 heads × two
		// banks of M states (descriptor = key, its norm, key, value), and
		// one shared update scratch holding at least the 12 heads'
		// 4,680 × 9,360 interactions.
		banks, scratch := int64(30*12*2*9360*(128+1+128+128)*4), int64(12*4680*9360*4)
		if tc.policy != memory.NameDensityKV {
			banks, scratch = 0, 0
		}
		if n.Banks != banks || n.BankScratch < scratch || n.BankScratch > 2*scratch {
			t.Errorf("%s: banks %d bytes, their scratch %d; want %d and %d…%d", tc.policy, n.Banks, n.BankScratch, banks, scratch, 2*scratch)
		}
	}
	n := estimateDeviceNeed(c, weights, largest, g, mc, "densitykv")
	big := vulkan.DeviceInfo{Name: "big", Heaps: []vulkan.Heap{{Size: 80 << 30, DeviceLocal: true}}, MaxStorageBufferRange: 1 << 31, MaxAllocation: 1 << 32}
	if err := checkDeviceMemory(n, big); err != nil {
		t.Errorf("an 80 GiB device refused: %v", err)
	}
	small := big
	small.Name, small.Heaps = "small", []vulkan.Heap{{Size: 2 << 30, DeviceLocal: true}, {Size: 64 << 30}}
	if err := checkDeviceMemory(n, small); err == nil || !strings.Contains(err.Error(), "2.00 GiB of device-local memory") || !strings.Contains(err.Error(), "weights 2.61 GiB") ||
		!strings.Contains(err.Error(), "DensityKV banks 9.67 GiB and their update scratch 3.50 GiB") || !strings.Contains(err.Error(), "every layer's history 1.61 GiB") {
		t.Errorf("a 2 GiB device: %v", err)
	}
	narrow := big
	narrow.MaxStorageBufferRange = 64 << 20
	if err := checkDeviceMemory(n, narrow); err == nil || !strings.Contains(err.Error(), "maxStorageBufferRange") {
		t.Errorf("a 64 MiB binding range: %v", err)
	}
	long := g
	long.Blocks = 160 // 120 s
	full := estimateDeviceNeed(c, weights, largest, long, mc, "full-history")
	if err := checkDeviceMemory(full, big); err == nil || !strings.Contains(err.Error(), "every layer's history 255.47 GiB") {
		t.Errorf("full history's %d-key history on an 80 GiB device: %v", full.Keys, err)
	}
	huge := big
	huge.Heaps = []vulkan.Heap{{Size: 1 << 40, DeviceLocal: true}}
	if err := checkDeviceMemory(full, huge); err == nil || !strings.Contains(err.Error(), "largest buffer") {
		t.Errorf("full history's %d-key context on a 2 GiB binding range: %v", full.Keys, err)
	}
}
