package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/gpu"
	"github.com/densitykv/densitykv/vae"
	"github.com/densitykv/densitykv/vulkan"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// TestVAEMemoryOnVulkan: a VAE whose decode does not fit the device is
// refused up front by generate --device vulkan (beside the DiT, before
// the run folder is made) and by decode --device vulkan (before any
// video file is touched), the error naming the VAE's parts and the
// device-local memory. The VAE is the golden pipeline VAE's schema 5×
// as wide (dim 40), at 64×112 latents: 2.6 GiB on the device (lavapipe
// has 2 GiB), with the native policy (DensityKV's bank scratch at this
// size is beyond lavapipe's binding range). In the default build --device vulkan is a usage error
// naming the build tag.
func TestVAEMemoryOnVulkan(t *testing.T) {
	dir := t.TempDir()
	text := tinyText(t, dir)
	cfg := vae.TinyConfig(16)
	cfg.Dim = 40
	m, err := vae.Random(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	var ts []checkpoint.WriteTensor
	for _, p := range m.Params() {
		ts = append(ts, checkpoint.WriteTensor{Name: p.Name, Shape: p.Shape, Data: *p.Data})
	}
	wide := filepath.Join(dir, "wide_vae.safetensors")
	if err := checkpoint.WriteSafetensorsFile(wide, ts, nil); err != nil {
		t.Fatal(err)
	}
	args := func(name string, extra ...string) []string {
		return genResumeArgs(t, dir, name, text, 1, append([]string{"--latent-height", "64", "--latent-width", "112", "--policy", "native"}, extra...)...)
	}
	if !vulkan.Built {
		code, _, errs := run(t, context.Background(), args("gpu", "--vae", wide, "--device", "vulkan")...)
		if code != 2 || !strings.Contains(errs, "built without Vulkan: rebuild with -tags vulkan") {
			t.Fatalf("default build: exit %d: %s", code, errs)
		}
		return
	}
	index, required, _ := vulkantest.Wanted()
	devs, err := vulkan.Enumerate()
	if err != nil || index < 0 || index >= len(devs) {
		if required {
			t.Fatalf("no Vulkan device %d: %v", index, err)
		}
		t.Skipf("no Vulkan device: %v", err)
	}
	var meter gpu.Meter // what generate's and decode's check count
	if err := m.Rehearse(&meter, 64, 112, vae.RehearseFrames, gemm.F32); err != nil {
		t.Fatal(err)
	}
	if d := devs[index]; meter.Peak.Total() <= int64(d.DeviceLocalBytes()) && meter.Largest <= int64(d.MaxStorageBufferRange) {
		t.Skipf("%s holds the VAE's %d bytes (%d of device-local memory): the refusal needs a smaller device", d.Name, meter.Peak.Total(), d.DeviceLocalBytes())
	}
	refused := func(what, errs string) {
		t.Helper()
		t.Logf("%s refused: %s", what, errs)
		for _, s := range []string{"the VAE decoder at 64×112 latents (512×896 pixels)", "weights ", "feature caches ", "activations ", "convolution workspace ", "use --device cpu"} {
			if !strings.Contains(errs, s) {
				t.Fatalf("%s: the refusal lacks %q: %s", what, s, errs)
			}
		}
	}
	code, _, errs := run(t, context.Background(), args("gpu", "--vae", wide, "--device", "vulkan")...)
	if code == 0 {
		t.Fatalf("generate --device vulkan with the wide VAE ran")
	}
	refused("generate", errs)
	if _, err := os.Stat(filepath.Join(dir, "gpu")); !os.IsNotExist(err) {
		t.Errorf("the refused run made its folder (%v)", err)
	}

	// decode: the latents of a run made on the CPU without a VAE.
	if code, _, errs := run(t, context.Background(), args("cpu")...); code != 0 {
		t.Fatalf("generate on the CPU: exit %d: %s", code, errs)
	}
	before, err := os.ReadDir(filepath.Join(dir, "cpu"))
	if err != nil {
		t.Fatal(err)
	}
	code, _, errs = run(t, context.Background(), "decode", filepath.Join(dir, "cpu"), "--vae", wide, "--device", "vulkan", "--quiet")
	if code == 0 {
		t.Fatalf("decode --device vulkan with the wide VAE ran")
	}
	refused("decode", errs)
	if !strings.Contains(errs, "nothing was decoded") {
		t.Errorf("decode's refusal: %s", errs)
	}
	if after, err := os.ReadDir(filepath.Join(dir, "cpu")); err != nil || len(after) != len(before) {
		t.Errorf("the refused decode changed the run folder: %d entries, %d before (%v)", len(after), len(before), err)
	}
}
