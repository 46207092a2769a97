package generate

import (
	"strings"
	"testing"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/gpu"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/nn"
	"github.com/densitykv/densitykv/vae"
	"github.com/densitykv/densitykv/vulkan"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// oddVAE is a VAE of other shapes than Wan's: 3 latent channels, widths
// 12, 12, 18, 6 (dim 6, dim_mult [1, 3, 2]), two residual blocks a
// stage, an upsample2d then an upsample3d (4× in space, 2× in time).
var oddVAE = vae.Config{Dim: 6, ZDim: 3, DimMult: []int{1, 3, 2}, NumResBlocks: 1, TemporalUpsample: []bool{false, true}}

func randomVAE(t *testing.T, cfg vae.Config) *vae.Model {
	t.Helper()
	m, err := vae.Random(cfg, 5)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// vaeStats are latent statistics for a VAE of z channels.
func vaeStats(z int, prec gemm.Precision) vae.Options {
	o := vae.Options{Mean: make([]float32, z), Std: make([]float32, z), Precision: prec}
	for i := range o.Std {
		o.Mean[i], o.Std[i] = 0.1*float32(i), 1+0.25*float32(i)
	}
	return o
}

// TestVAENeed sizes the VAE decoder's device memory for the golden schema
// and an odd-shaped VAE at odd latent sizes: the weights are the
// parameters (float32: 4 bytes each; bf16: the convolutions' padded
// operands at 2 bytes, biases and gammas float32), the caches two frames
// of every causal convolution's input (counted by hand for the odd VAE),
// the activations at least a latent frame's pixel frames, the workspace
// at least the largest im2col and product; the rehearsal's memory is flat
// after vae.RehearseFrames latent frames.
func TestVAENeed(t *testing.T) {
	for _, cfg := range []vae.Config{vae.TinyConfig(4), oddVAE} {
		m := randomVAE(t, cfg)
		for _, hw := range [][2]int{{1, 1}, {5, 7}, {6, 2}} {
			h, w := hw[0], hw[1]
			P := int64(h * w)
			s := int64(cfg.SpatialScale())
			for _, prec := range []gemm.Precision{gemm.F32, gemm.BF16} {
				n, err := estimateVAENeed(m, h, w, prec)
				if err != nil {
					t.Fatal(err)
				}
				var weights int64
				for _, p := range m.Params() {
					size := int64(1)
					for _, d := range p.Shape {
						size *= int64(d)
					}
					if p.Kind != "weight" || prec == gemm.F32 {
						weights += 4 * size
						continue
					}
					kt, kh, kw := 1, p.Shape[2], p.Shape[3]
					if len(p.Shape) == 5 {
						kt, kh, kw = p.Shape[2], p.Shape[3], p.Shape[4]
					}
					_, k := (&nn.Conv{Cin: p.Shape[1], Cout: p.Shape[0], KT: kt, KH: kh, KW: kw}).BF16Offsets()
					weights += (int64(p.Shape[0])*int64(k)*2 + 3) &^ 3
				}
				if prec == gemm.F32 && weights != 4*m.NumParams() {
					t.Fatalf("%d bytes of weights, %d parameters", weights, m.NumParams())
				}
				if n.Weights != weights || n.Caches != m.CacheBytes(h, w) {
					t.Errorf("%v %d×%d %v: weights %d, caches %d; want %d and %d", cfg, h, w, prec, n.Weights, n.Caches, weights, m.CacheBytes(h, w))
				}
				pixels := int64(cfg.TemporalScale()) * 3 * P * s * s * 4 // a latent frame's pixel frames
				if n.Activations < pixels {
					t.Errorf("%v %d×%d %v: activations %d bytes, fewer than a latent frame's pixel frames (%d)", cfg, h, w, prec, n.Activations, pixels)
				}
				if n.H != h || n.W != w || n.Scale != int(s) || n.Total() != n.Weights+n.Caches+n.Activations+n.Workspace {
					t.Errorf("%+v", n)
				}
				if cfg.Dim != oddVAE.Dim {
					continue
				}
				// The odd VAE by hand: causal convolutions' inputs of
				// 3 + 4·12 + 4·12 channels at the latents' size, 6 + 3·18
				// + 18 (time_conv) at 2×, 9 + 3·6 + 6 (head) at 4×; two
				// frames each.
				if want := 2 * (99*P + 78*4*P + 33*16*P) * 4; n.Caches != want {
					t.Errorf("odd VAE %d×%d: caches %d bytes, want %d", h, w, n.Caches, want)
				}
				// The largest im2col (fp32): resample.1 of stage 1, 9·18
				// columns for each of the 16P pixels; the largest
				// product: time_conv's 36 channels at 4P, or resample.1's
				// 9 at 16P.
				if want := (162*16*P + 144*P) * 4; prec == gemm.F32 && n.Workspace < want {
					t.Errorf("odd VAE %d×%d: workspace %d bytes, want at least %d", h, w, n.Workspace, want)
				}
			}
		}
		// Flat after vae.RehearseFrames latent frames.
		for _, prec := range []gemm.Precision{gemm.F32, gemm.BF16} {
			var a, b gpu.Meter
			if err := m.Rehearse(&a, 5, 7, vae.RehearseFrames, prec); err != nil {
				t.Fatal(err)
			}
			if err := m.Rehearse(&b, 5, 7, 3*vae.RehearseFrames, prec); err != nil {
				t.Fatal(err)
			}
			if a.Peak != b.Peak || a.PeakTotal != b.PeakTotal {
				t.Errorf("%v %v: %d latent frames %+v, %d frames %+v", cfg, prec, vae.RehearseFrames, a.Peak, 3*vae.RehearseFrames, b.Peak)
			}
		}
	}
}

// TestVAENeedOnDevice decodes streams of 4 latent frames of 3×5 (chunks
// of 1, 2 and 1: the memory is flat after them, vae.RehearseFrames) of
// the golden schema's tiny VAE and the odd one on the Vulkan
// device at fp32 and bf16 and holds the estimate against the bytes the
// device allocated at their most (vulkan.Device.Allocated): an upper
// bound, within 1.25 times; the rehearsal's own peak is the measured one.
func TestVAENeedOnDevice(t *testing.T) {
	dev := vulkantest.Open(t)
	for _, cfg := range []vae.Config{vae.TinyConfig(4), oddVAE} {
		for _, prec := range []gemm.Precision{gemm.F32, gemm.BF16} {
			const h, w = 3, 5
			m := randomVAE(t, cfg)
			n, err := estimateVAENeed(m, h, w, prec)
			if err != nil {
				t.Fatal(err)
			}
			var meter gpu.Meter
			if err := m.Rehearse(&meter, h, w, vae.RehearseFrames, prec); err != nil {
				t.Fatal(err)
			}
			be, err := gpu.NewBackend(dev) // a new backend: its scratch starts empty
			if err != nil {
				t.Fatal(err)
			}
			live, _ := dev.Allocated()
			dev.ResetPeak()
			m.UseBackend(be)
			d, err := m.NewDecoder(vaeStats(cfg.ZDim, prec))
			if err != nil {
				t.Fatal(err)
			}
			z := make([]float32, vae.RehearseFrames*cfg.ZDim*h*w)
			for i := range z {
				z[i] = float32(i%7) - 3
			}
			for _, c := range [][2]int{{0, 1}, {1, 3}, {3, 4}} {
				if _, err := d.Decode(z[c[0]*cfg.ZDim*h*w:c[1]*cfg.ZDim*h*w], c[1]-c[0], cfg.ZDim, h, w); err != nil {
					t.Fatal(err)
				}
			}
			_, peak := dev.Allocated()
			measured := peak - live
			m.UseBackend(nil)
			ratio := float64(n.Total()) / float64(measured)
			t.Logf("%v %v at %d×%d: estimate %d bytes (%+v), rehearsal's peak %d, measured peak %d: %.3f×", cfg, prec, h, w, n.Total(), n, meter.PeakTotal, measured, ratio)
			if n.Total() < measured || ratio > 1.25 {
				t.Errorf("%v %v: estimate %d bytes, measured peak %d (%.3f×)", cfg, prec, n.Total(), measured, ratio)
			}
			if meter.PeakTotal != measured {
				t.Errorf("%v %v: the rehearsal's peak is %d bytes, the device's %d", cfg, prec, meter.PeakTotal, measured)
			}
		}
	}
}

// TestVAENeedWan sizes the Wan2.1 VAE's device memory at 480×832 (60×104
// latents) from its architecture (vae.DefaultConfig) at the 1.3B model's
// bf16 and at fp32, and checks the refusals against a device's heaps
// (alone, as decode runs it, and beside the 1.3B DiT, as generate keeps
// it), binding range and allocation limit, each naming the parts.
func TestVAENeedWan(t *testing.T) {
	m := randomVAE(t, vae.DefaultConfig())
	bf16, err := estimateVAENeed(m, 60, 104, gemm.BF16)
	if err != nil {
		t.Fatal(err)
	}
	f32, err := estimateVAENeed(m, 60, 104, gemm.F32)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the Wan2.1 VAE at 480×832: bf16 %s (%+v), fp32 %s (%+v)", memSize(bf16.Total()), bf16, memSize(f32.Total()), f32)
	for _, c := range []struct {
		n    vaeNeed
		want string
	}{
		{bf16, "needs 5.11 GiB on small, which has 4.00 GiB of device-local memory (weights 139.9 MiB, feature caches 3.52 GiB, activations 997.1 MiB, convolution workspace 491.7 MiB)"},
		{f32, "needs 5.18 GiB on small, which has 4.00 GiB of device-local memory (weights 279.6 MiB, feature caches 3.52 GiB, activations 997.1 MiB, convolution workspace 424.7 MiB)"},
	} {
		small := vulkan.DeviceInfo{Name: "small", Heaps: []vulkan.Heap{{Size: 4 << 30, DeviceLocal: true}, {Size: 64 << 30}}, MaxStorageBufferRange: 1 << 31, MaxAllocation: 1 << 32}
		err := checkVAEMemory(c.n, deviceNeed{}, small)
		if err == nil || !strings.Contains(err.Error(), "the VAE decoder at 60×104 latents (480×832 pixels) "+c.want) {
			t.Errorf("a 4 GiB device: %v", err)
		}
		small.Heaps[0].Size = 6 << 30
		if err := checkVAEMemory(c.n, deviceNeed{}, small); err != nil {
			t.Errorf("a 6 GiB device refused: %v", err)
		}
	}
	// Beside the 1.3B DiT (TestDeviceNeed's DensityKV run): a device that
	// holds the DiT alone, but not the VAE too; the DiT's attention
	// history is freed after each block's clean pass, before the VAE
	// decodes, so the two need the DiT without it plus the VAE.
	c := ditShape{Dim: 1536, FFNDim: 8960, TextLen: 512, Layers: 30, PatchH: 2, PatchW: 2, PatchLen: 64, OutLen: 64}
	g := config.GenerateSection{LatentHeight: 60, LatentWidth: 104, FramesPerBlock: 3, Blocks: 40}
	mc := memory.DefaultConfig(memory.DefaultLayout())
	mc.SinkFrames, mc.CacheFrames, mc.WindowFrames, mc.Capacity = 1, 12, 5, 9360
	dit := estimateDeviceNeed(c, 2_800_000_000, int64(2*c.Dim*c.FFNDim), g, mc, "densitykv")
	kept := dit.Total() - dit.History
	if dit.History == 0 || bf16.Total() <= dit.History {
		t.Fatalf("DensityKV's history %d bytes, the VAE %d: the case below needs a VAE larger than the history", dit.History, bf16.Total())
	}
	dev := vulkan.DeviceInfo{Name: "mid", Heaps: []vulkan.Heap{{Size: uint64(kept + (dit.History+bf16.Total())/2), DeviceLocal: true}}, MaxStorageBufferRange: 1 << 31, MaxAllocation: 1 << 32}
	if err := checkDeviceMemory(dit, dev); err != nil {
		t.Fatalf("the DiT alone: %v", err)
	}
	err = checkVAEMemory(bf16, dit, dev)
	if err == nil || !strings.Contains(err.Error(), "the DiT and the VAE need "+memSize(kept+bf16.Total())+" together on mid") ||
		!strings.Contains(err.Error(), "the DiT "+memSize(kept)+" kept on the device while the VAE decodes each block (its attention history, 1.61 GiB, is freed after the block's clean pass) and the VAE decoder at 60×104 latents (480×832 pixels) 5.11 GiB (weights 139.9 MiB, feature caches 3.52 GiB") {
		t.Errorf("the DiT and the VAE: %v", err)
	}
	dev.Heaps[0].Size = uint64(kept + bf16.Total())
	if err := checkVAEMemory(bf16, dit, dev); err != nil {
		t.Errorf("a device of the DiT without its history plus the VAE: %v", err)
	}
	t.Logf("the DiT (DensityKV, M = 9,360) and the VAE at 480×832, bf16: %s on the device at the most (the DiT %s, its history %s, the VAE %s)",
		memSize(max(dit.Total(), kept+bf16.Total())), memSize(dit.Total()), memSize(dit.History), memSize(bf16.Total()))
	// A frame of 96 channels at 480×832 is 146 MiB: beyond a binding
	// range of 128 MiB (lavapipe's), and an allocation limit.
	narrow := vulkan.DeviceInfo{Name: "narrow", Heaps: []vulkan.Heap{{Size: 80 << 30, DeviceLocal: true}}, MaxStorageBufferRange: 128 << 20, MaxAllocation: 1 << 32}
	if err := checkVAEMemory(bf16, deviceNeed{}, narrow); err == nil || !strings.Contains(err.Error(), "is 146.2 MiB, and narrow lets a shader see at most 128.0 MiB of one (maxStorageBufferRange; weights") {
		t.Errorf("a 128 MiB binding range: %v", err)
	}
	narrow.MaxStorageBufferRange, narrow.MaxAllocation = 1<<31, 100<<20
	if err := checkVAEMemory(bf16, deviceNeed{}, narrow); err == nil || !strings.Contains(err.Error(), "maxMemoryAllocationSize") {
		t.Errorf("a 100 MiB allocation limit: %v", err)
	}
}
