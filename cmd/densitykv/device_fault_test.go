package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/vulkan"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// TestGenerateDeviceFaults runs a 4-block DensityKV generate on the
// device without a recorded stream, so the DiT takes the planned
// attention path (each layer's history kept on the device), and requires
// the CPU run's files. Then the device fails between blocks — lost after
// block 2, out of memory after block 1 (vulkan.InjectFault: the driver's
// error at the next call), with a checkpoint after every block — and
// each run stops with an error naming the fault and how to go on, keeps
// the blocks it finished, and resumes (on the CPU after the loss, on the
// device after the out-of-memory) into the CPU run's files. Without a
// checkpoint yet, the error says to run again.
func TestGenerateDeviceFaults(t *testing.T) {
	if !vulkan.Built {
		t.Skip("the default build has no device (TestGenerateOnVulkan checks its refusal)")
	}
	if _, required, _ := vulkantest.Wanted(); !required {
		if _, err := vulkan.Enumerate(); err != nil {
			t.Skipf("no Vulkan device: %v", err)
		}
	}
	dir := t.TempDir()
	text := tinyText(t, dir)
	args := func(name string, extra ...string) []string {
		a := genResumeArgs(t, dir, name, text, 4, append([]string{"--policy", "densitykv", "--snapshot-every", "1"}, extra...)...)
		i := slices.Index(a, "--record-stream")
		return slices.Delete(a, i, i+2) // a recorded stream reads q, k, v on the host
	}
	for _, a := range [][]string{args("cpu"), args("gpu", "--device", "vulkan")} {
		if code, _, errs := run(t, context.Background(), a...); code != 0 {
			t.Fatalf("%v: exit %d: %s", a, code, errs)
		}
	}
	sameRunFilesStream(t, dir, "cpu", "gpu", false)

	for _, c := range []struct {
		name   string
		fault  vulkan.Fault
		after  int
		want   string
		resume string
	}{
		{"lost", vulkan.FaultDeviceLost, 2, "device lost (VK_ERROR_DEVICE_LOST)", "cpu"},
		{"oom", vulkan.FaultOutOfMemory, 1, "out of device memory (VK_ERROR_OUT_OF_DEVICE_MEMORY)", "vulkan"},
	} {
		t.Run(c.name, func(t *testing.T) {
			done := 0
			genHook = func() {
				if done++; done == c.after {
					vulkan.InjectFault(c.fault)
				}
			}
			code, _, errs := run(t, context.Background(), args(c.name, "--device", "vulkan")...)
			genHook = nil
			vulkan.InjectFault(0)
			if code == 0 || !strings.Contains(errs, c.want) || !strings.Contains(errs, fmt.Sprintf("checkpoint after block %d", c.after-1)) || !strings.Contains(errs, "--resume") {
				t.Fatalf("a %s after block %d: exit %d: %s", c.name, c.after, code, errs)
			}
			if code, _, errs := run(t, context.Background(), "generate", "--out", dir, "--name", c.name, "--resume", "--device", c.resume, "--quiet"); code != 0 {
				t.Fatalf("resume on %s: exit %d: %s", c.resume, code, errs)
			}
			sameRunFilesStream(t, dir, "cpu", c.name, false)
		})
	}
	genHook = func() { vulkan.InjectFault(vulkan.FaultDeviceLost) }
	code, _, errs := run(t, context.Background(), args("early", "--device", "vulkan", "--snapshot-every", "10")...)
	genHook = nil
	vulkan.InjectFault(0)
	if code == 0 || !strings.Contains(errs, "before the run's first checkpoint (one every 10 blocks") {
		t.Fatalf("lost before a checkpoint: exit %d: %s", code, errs)
	}
}
