package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/bench"
	"github.com/densitykv/densitykv/gpu"
	"github.com/densitykv/densitykv/vulkan"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// TestDevices runs `densitykv devices` in either build: the default one
// says Vulkan is not in it; with -tags vulkan it lists the devices (at
// least one when DENSITYKV_TEST_DEVICE demands one), and auto never picks
// a CPU-type Vulkan device.
func TestDevices(t *testing.T) {
	code, out, errs := run(t, context.Background(), "devices")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.HasPrefix(out, "cpu: ") || !strings.Contains(out, "matrix kernels: fp32 ") || !strings.Contains(out, "--device auto picks ") {
		t.Errorf("output lacks the CPU or auto's choice:\n%s", out)
	}
	code, js, errs := run(t, context.Background(), "devices", "--json")
	if code != 0 {
		t.Fatalf("--json: exit %d: %s", code, errs)
	}
	var res devicesJSON
	if err := json.Unmarshal([]byte(js), &res); err != nil {
		t.Fatalf("--json: %v\n%s", err, js)
	}
	if res.CPU.Model == "" || res.CPU.Cores < 1 || len(res.CPU.Kernels) != 2 || res.Vulkan.Built != vulkan.Built {
		t.Errorf("--json: %+v", res)
	}
	if !vulkan.Built {
		if !strings.Contains(out, "Vulkan: not in this build (static binary); rebuild with -tags vulkan") || res.Auto.Device != "cpu" || len(res.Vulkan.Devices) != 0 {
			t.Errorf("default build:\n%s\n%+v", out, res)
		}
		return
	}
	if _, required, _ := vulkantest.Wanted(); required && len(res.Vulkan.Devices) == 0 {
		t.Fatalf("%s demands a Vulkan device; devices found none (%s):\n%s", vulkantest.Env, res.Vulkan.Error, out)
	}
	for i, d := range res.Vulkan.Devices {
		if d.Index != i || d.Device != fmt.Sprintf("vulkan:%d", i) {
			t.Errorf("device %d listed as %s (index %d)", i, d.Device, d.Index)
		}
		if !strings.Contains(out, d.Device+"  "+d.Name+"\n") || d.DriverName == "" || d.SubgroupSize == 0 {
			t.Errorf("device %d: %+v not listed in full:\n%s", i, d.DeviceInfo, out)
		}
		if d.ExactMode != (d.ExactError == "") {
			t.Errorf("device %d: exact_mode %v with exact_error %q", i, d.ExactMode, d.ExactError)
		}
		// The probe runs on every listed device: its verdict is the
		// kernels' (gpu.CheckExact), whatever the driver declares.
		if dev, err := vulkan.Open(d.Index); err == nil {
			props, err := gpu.CheckExact(dev)
			if (err == nil) != d.ExactMode || props.FMA != d.FusedFMA {
				t.Errorf("device %d: listed exact %v, fused fma %v; the probe says %v, %v", i, d.ExactMode, d.FusedFMA, err, props.FMA)
			}
			dev.Close()
		}
		if res.Auto.Device == d.Device && !d.IsGPU() {
			t.Errorf("auto picks %s, a %s device", d.Device, d.Type)
		}
	}
	for _, row := range []string{"subgroup size:", "exact mode:", "float controls:", "float64, int64:", "cooperative matrix:", "device memory:"} {
		if len(res.Vulkan.Devices) > 0 && !strings.Contains(out, row) {
			t.Errorf("no %q row:\n%s", row, out)
		}
	}
}

// TestBenchWanDevice runs bench wan --tiny on --device vulkan: in the
// default build a usage error naming the missing tag; with -tags vulkan
// (and a device) a result that names the device, at both precisions.
func TestBenchWanDevice(t *testing.T) {
	out, ok := runOnVulkan(t, "bench", "wan", "--tiny", "--device", "vulkan", "--quiet", "--json")
	if !ok {
		return
	}
	var res []bench.WanResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(res) != 2 {
		t.Fatalf("%d results, want fp32 and bf16", len(res))
	}
	for _, r := range res {
		if !strings.HasPrefix(r.Device, "vulkan:") || r.Kernel != "exact" || r.MedianCall <= 0 || r.GFLOPS <= 0 {
			t.Errorf("%s %v: device %q, kernel %q, median call %v s, %v GFLOP/s", r.Name, r.Precision, r.Device, r.Kernel, r.MedianCall, r.GFLOPS)
		}
	}
}

// TestBenchBankDevice runs bench bank at a tiny size on --device vulkan:
// the default build refuses naming the tag; with -tags vulkan the result
// names the device and every candidate of the video-like stream's new
// scenes is admitted, as on the CPU.
func TestBenchBankDevice(t *testing.T) {
	args := []string{"bench", "bank", "--heads", "2", "--candidates", "60", "--capacity", "120", "--dim", "16", "--repeats", "2", "--quiet", "--json"}
	out, ok := runOnVulkan(t, append(args, "--device", "vulkan")...)
	if !ok {
		return
	}
	var gpuRes, cpuRes bench.BankResult
	if err := json.Unmarshal([]byte(out), &gpuRes); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	code, out, errs := run(t, context.Background(), args...)
	if code != 0 {
		t.Fatalf("cpu: exit %d: %s", code, errs)
	}
	if err := json.Unmarshal([]byte(out), &cpuRes); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.HasPrefix(gpuRes.Device, "vulkan:") || cpuRes.Device != "cpu" || gpuRes.UpdateSecondsMedian <= 0 ||
		fmt.Sprint(gpuRes.Accepted) != fmt.Sprint(cpuRes.Accepted) {
		t.Errorf("device %q (cpu %q), median update %v s, admitted %v (cpu %v)", gpuRes.Device, cpuRes.Device, gpuRes.UpdateSecondsMedian, gpuRes.Accepted, cpuRes.Accepted)
	}
}

// runOnVulkan runs a command line that asks for --device vulkan. In the
// default build it requires the usage error naming the build tag and
// reports false; with -tags vulkan it requires success (skipping when no
// device is found and DENSITYKV_TEST_DEVICE does not demand one) and
// returns the standard output.
func runOnVulkan(t *testing.T, args ...string) (string, bool) {
	t.Helper()
	code, out, errs := run(t, context.Background(), args...)
	if !vulkan.Built {
		if code != 2 || !strings.Contains(errs, "built without Vulkan: rebuild with -tags vulkan") {
			t.Fatalf("default build: exit %d, stderr %q", code, errs)
		}
		return "", false
	}
	if _, required, _ := vulkantest.Wanted(); !required && code != 0 {
		t.Skipf("no Vulkan device (%s)", errs)
	}
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	return out, true
}

// TestBenchModelsDevice runs bench text and bench vae on the tiny models
// with --device vulkan: the default build refuses naming the tag; with
// -tags vulkan each result names the device and the exact kernels.
func TestBenchModelsDevice(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "text", "--tiny", "--precision", "fp32,bf16"},
		{"bench", "vae", "--tiny", "--blocks", "1", "--precision", "bf16"},
	} {
		out, ok := runOnVulkan(t, append(args, "--device", "vulkan", "--quiet", "--json")...)
		if !ok {
			continue
		}
		var res struct {
			Results []struct {
				Device, Kernel string
				GFLOPS         float64 `json:"gflops"`
			} `json:"results"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		if len(res.Results) == 0 {
			t.Fatalf("%v: no results:\n%s", args, out)
		}
		for _, r := range res.Results {
			if !strings.HasPrefix(r.Device, "vulkan:") || r.Kernel != "exact" || r.GFLOPS <= 0 {
				t.Errorf("%v: device %q, kernel %q, %v GFLOP/s", args, r.Device, r.Kernel, r.GFLOPS)
			}
		}
	}
}

// TestBenchPipelineDevice runs bench pipeline on the tiny models with
// --device vulkan (text stage, one block, one VAE frame): the default
// build refuses naming the tag; with -tags vulkan the result names the
// device and has both stages.
func TestBenchPipelineDevice(t *testing.T) {
	out, ok := runOnVulkan(t, "bench", "pipeline", "--tiny", "--precision", "bf16", "--vae-frames", "1", "--blocks", "1", "--device", "vulkan", "--quiet", "--json")
	if !ok {
		return
	}
	var res bench.PipelineResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.HasPrefix(res.Device, "vulkan:") || len(res.Stages) != 2 {
		t.Errorf("device %q, %d stages:\n%s", res.Device, len(res.Stages), out)
	}
}
