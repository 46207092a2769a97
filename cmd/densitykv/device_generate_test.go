package main

import (
	"context"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/vulkan"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// TestGenerateOnVulkan runs the tiny golden model's 4-block DensityKV
// rollout with the DiT on a Vulkan device (exact mode) and requires every
// file of the run folder — latents, memory log, bank lineage, attention
// trace, the recorded stream, previews — to equal the CPU run's byte for
// byte (wall-clock fields and the recorded device aside); so does a run
// stopped after 2 blocks on the device and resumed on the CPU. In the
// default build --device vulkan is a usage error naming the build tag.
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
}
