package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/device"
	"github.com/densitykv/densitykv/golden"
	"github.com/densitykv/densitykv/gpu"
	"github.com/densitykv/densitykv/vulkan"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// TestFastModeRefused: --precision bf16-fast where it cannot run. On the
// CPU (the default --device), bench wan, bench text and encode-text
// refuse it saying the CPU computes exact mode only; bench vae, bench
// pipeline and decode refuse it because the VAE decoder has no fast mode.
// On the test device (a build with -tags vulkan), generate and bench wan
// with --device vulkan refuse it naming VK_NV_cooperative_matrix and the
// device where FastSupport does (lavapipe), before any run folder; where
// the device offers a usable cooperative matrix, bench wan runs the tiny
// model in fast mode and says so.
func TestFastModeRefused(t *testing.T) {
	t5 := golden.T5(t)
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "wan", "--tiny", "--precision", "bf16,bf16-fast"}, "the CPU computes exact mode only"},
		{[]string{"bench", "text", "--tiny", "--precision", "bf16-fast"}, "the CPU computes exact mode only"},
		{[]string{"encode-text", "--text-encoder", filepath.Join(t5, "weights.pth"), "--tokenizer", filepath.Join(t5, "spiece.model"), "--text-len", "8",
			"--prompt", "a fox", "-o", filepath.Join(dir, "e.safetensors"), "--precision", "bf16-fast"}, "the CPU computes exact mode only"},
		{[]string{"bench", "vae", "--tiny", "--precision", "bf16-fast"}, "the VAE decoder has no fast mode"},
		{[]string{"bench", "pipeline", "--tiny", "--precision", "bf16-fast"}, "has no fast mode"},
		{[]string{"decode", dir, "--precision", "bf16-fast"}, "the VAE decoder has no fast mode"},
	} {
		code, out, errs := run(t, context.Background(), append(c.args, "--quiet")...)
		if code != exitUsage || !strings.Contains(errs, c.want) || !strings.Contains(errs, "bf16-fast") || strings.Contains(out, "running") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want a usage error with %q", c.args, code, out, errs, c.want)
		}
	}
	if !vulkan.Built {
		return
	}
	index, required, err := vulkantest.Wanted()
	infos, enumErr := vulkan.Enumerate()
	if err != nil || index < 0 || enumErr != nil || index >= len(infos) {
		if required {
			t.Fatalf("%s: device %d of %d: %v %v", vulkantest.Env, index, len(infos), err, enumErr)
		}
		t.Skipf("no Vulkan device to check fast mode's refusal on")
	}
	info := infos[index]
	spec := device.VulkanIndex(index).String()
	why := gpu.FastSupport(info)
	code, out, errs := run(t, context.Background(), "bench", "wan", "--tiny", "--device", spec, "--precision", "bf16-fast", "--quiet")
	if why == nil {
		if code != 0 || !strings.Contains(out, "fast mode") {
			t.Fatalf("bench wan bf16-fast on %s: exit %d, stdout %q, stderr %q", info.Name, code, out, errs)
		}
		t.Logf("fast mode ran on %s: %s", info.Name, out)
		return
	}
	if code != exitUsage || !strings.Contains(errs, "VK_NV_cooperative_matrix") || !strings.Contains(errs, info.Name) || strings.Contains(out, "running") {
		t.Errorf("bench wan bf16-fast on %s (%v): exit %d, stdout %q, stderr %q", info.Name, why, code, out, errs)
	}
	g := golden.Wan(t)
	code, _, errs = run(t, context.Background(), "generate", "--arch", "tiny", "--checkpoint", filepath.Join(g, "weights.safetensors"),
		"--text", filepath.Join(g, "rollout_native.safetensors"), "--text-tensor", "context", "--latent-height", "6", "--latent-width", "8",
		"--blocks", "1", "--out", dir, "--name", "fast", "--quiet", "--device", spec, "--precision", "bf16-fast")
	if code != exitUsage || !strings.Contains(errs, "VK_NV_cooperative_matrix") || !strings.Contains(errs, info.Name) {
		t.Errorf("generate bf16-fast on %s: exit %d, stderr %q", info.Name, code, errs)
	}
	if exists(filepath.Join(dir, "fast")) {
		t.Error("the refused generate made a run folder")
	}
	t.Logf("refused on %s, as it must be: %s", info.Name, strings.TrimSpace(errs))
}
