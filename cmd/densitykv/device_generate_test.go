package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/golden"
	"github.com/densitykv/densitykv/vulkan"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// TestGenerateOnVulkan runs the tiny golden model's 4-block DensityKV
// rollout with the DiT on a Vulkan device (exact mode) and requires every
// file of the run folder — latents, memory log, bank lineage, attention
// trace, the recorded stream, previews — to equal the CPU run's byte for
// byte (wall-clock fields and the recorded device aside); so does a run
// stopped after 2 blocks on the device and resumed on the CPU, and one
// stopped on the CPU and resumed on the device. DensityKV's banks are on
// the device (gpu.NewBank); a bank variant the device cannot run (p = 1.5)
// is refused. In the default build --device vulkan is a usage error
// naming the build tag.
func TestGenerateOnVulkan(t *testing.T) {
	dir := t.TempDir()
	text := tinyText(t, dir)
	args := func(name string, extra ...string) []string {
		return genResumeArgs(t, dir, name, text, 4, append([]string{"--policy", "densitykv"}, extra...)...)
	}
	if !vulkan.Built {
		code, _, errs := run(t, context.Background(), args("gpu", "--device", "vulkan")...)
		if code != 2 || !strings.Contains(errs, "built without Vulkan: rebuild with -tags vulkan") {
			t.Fatalf("default build: exit %d: %s", code, errs)
		}
		return
	}
	if _, required, _ := vulkantest.Wanted(); !required {
		if _, err := vulkan.Enumerate(); err != nil {
			t.Skipf("no Vulkan device: %v", err)
		}
	}
	for _, a := range [][]string{args("cpu"), args("gpu", "--device", "vulkan")} {
		if code, _, errs := run(t, context.Background(), a...); code != 0 {
			t.Fatalf("%v: exit %d: %s", a, code, errs)
		}
	}
	sameRunFiles(t, dir, "cpu", "gpu")

	stopAfterBlocks(t, 2, args("mixed", "--device", "vulkan"))
	if code, _, errs := run(t, context.Background(), "generate", "--out", dir, "--name", "mixed", "--resume", "--device", "cpu", "--quiet"); code != 0 {
		t.Fatalf("resume on the CPU: exit %d: %s", code, errs)
	}
	sameRunFiles(t, dir, "cpu", "mixed")

	// Stopped on the CPU, resumed on the device: the snapshot's banks
	// load into the device's banks.
	stopAfterBlocks(t, 2, args("cpu2gpu"))
	if code, _, errs := run(t, context.Background(), "generate", "--out", dir, "--name", "cpu2gpu", "--resume", "--device", "vulkan", "--quiet"); code != 0 {
		t.Fatalf("resume on the device: exit %d: %s", code, errs)
	}
	sameRunFiles(t, dir, "cpu", "cpu2gpu")

	// A bank variant without a device path is refused up front, naming
	// it, never run on the CPU in silence.
	code, _, errs := run(t, context.Background(), args("p15", "--device", "vulkan", "--p", "1.5")...)
	if code == 0 || !strings.Contains(errs, "P = 1.5") || !strings.Contains(errs, "--device cpu runs it") {
		t.Fatalf("--p 1.5 on the device: exit %d: %s", code, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "p15")); !os.IsNotExist(err) {
		t.Errorf("the refused run made its folder (%v)", err)
	}
}

// TestPipelineOnVulkan runs the README's prompt-to-mp4 command with the
// text encoder, the DiT and the VAE on a Vulkan device and requires the
// CPU run's bytes: the latent shards, the prompt's embedding and
// video.mp4; then decode --device vulkan remakes the CPU run's video with
// the same bytes, and encode-text --device vulkan writes the same file as
// on the CPU.
func TestPipelineOnVulkan(t *testing.T) {
	ffTools(t)
	cpu, gpuDir := t.TempDir(), t.TempDir()
	if code, _, errs := run(t, context.Background(), pipelineArgs(t, cpu, "e2e", "--quiet", "--blocks", "2")...); code != 0 {
		t.Fatalf("cpu: exit %d: %s", code, errs)
	}
	if _, ok := runOnVulkan(t, pipelineArgs(t, gpuDir, "e2e", "--quiet", "--blocks", "2", "--device", "vulkan")...); !ok {
		return
	}
	same := func(what, a, b string) {
		t.Helper()
		x, err := os.ReadFile(a)
		if err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(b)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s: %s and %s differ (%d and %d bytes)", what, a, b, len(x), len(y))
		}
	}
	files, err := filepath.Glob(filepath.Join(cpu, "e2e", "latents", "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no latent shards in the CPU run (%v)", err)
	}
	embeds, _ := filepath.Glob(filepath.Join(cpu, "e2e", "prompts", "*"))
	for _, f := range append(append(files, embeds...), filepath.Join(cpu, "e2e", "video.mp4")) {
		rel, _ := filepath.Rel(cpu, f)
		same("generate --device vulkan", f, filepath.Join(gpuDir, rel))
	}

	cpuVideo, err := os.ReadFile(filepath.Join(cpu, "e2e", "video.mp4"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := runOnVulkan(t, "decode", filepath.Join(cpu, "e2e"), "--device", "vulkan", "--quiet"); !ok {
		return
	}
	if v, err := os.ReadFile(filepath.Join(cpu, "e2e", "video.mp4")); err != nil || !bytes.Equal(v, cpuVideo) {
		t.Errorf("decode --device vulkan: video.mp4 differs from the CPU's (%d and %d bytes, %v)", len(v), len(cpuVideo), err)
	}

	enc := func(out string, extra ...string) []string {
		return append([]string{"encode-text", "--text-encoder", filepath.Join(golden.T5(t), "weights.pth"), "--tokenizer", filepath.Join(golden.T5(t), "spiece.model"),
			"--text-len", "8", "--prompt", "a heron lands on a lake", "-o", out, "--quiet"}, extra...)
	}
	dir := t.TempDir()
	if code, _, errs := run(t, context.Background(), enc(filepath.Join(dir, "cpu.safetensors"))...); code != 0 {
		t.Fatalf("encode-text: exit %d: %s", code, errs)
	}
	if _, ok := runOnVulkan(t, enc(filepath.Join(dir, "gpu.safetensors"), "--device", "vulkan")...); ok {
		same("encode-text --device vulkan", filepath.Join(dir, "cpu.safetensors"), filepath.Join(dir, "gpu.safetensors"))
	}
}
