package device

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/densitykv/densitykv/vulkan"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Spec
	}{{"cpu", CPU}, {"auto", Auto}, {"vulkan", Vulkan}, {"vulkan:0", VulkanIndex(0)}, {"vulkan:12", VulkanIndex(12)}} {
		got, err := Parse(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if got.String() != tc.in {
			t.Errorf("String of Parse(%q) = %q", tc.in, got.String())
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"vulkan:x", "vulkan:N with N a device index >= 0"},
		{"vulkan:-1", "vulkan:N with N a device index >= 0"},
		{"vulkan:", "vulkan:N"},
		{"vulkan:+1", "vulkan:N"},
		{"gpu", `unknown device "gpu": want cpu, vulkan, vulkan:N or auto`},
		{"", "unknown device"},
		{"CPU", "unknown device"},
	} {
		if _, err := Parse(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q): %v, want an error with %q", tc.in, err, tc.want)
		}
	}
	if CPU != (Spec{}) {
		t.Error("the zero Spec is not the CPU")
	}
}

func TestYAML(t *testing.T) {
	var cfg struct {
		Device Spec `yaml:"device"`
	}
	if err := yaml.Unmarshal([]byte("device: vulkan:1\n"), &cfg); err != nil || cfg.Device != VulkanIndex(1) {
		t.Fatalf("device: vulkan:1 read as %v, %v", cfg.Device, err)
	}
	out, err := yaml.Marshal(cfg)
	if err != nil || string(out) != "device: vulkan:1\n" {
		t.Errorf("written as %q, %v", out, err)
	}
	if err := yaml.Unmarshal([]byte("device: gpu\n"), &cfg); err == nil || !strings.Contains(err.Error(), `unknown device "gpu"`) {
		t.Errorf("device: gpu: %v", err)
	}
	var s Spec
	if err := s.Set("auto"); err != nil || s != Auto || s.Type() != "device" {
		t.Errorf("Set(auto): %v, %v", s, err)
	}
}

var (
	lavapipe = vulkan.DeviceInfo{Name: "llvmpipe (LLVM 15.0.6, 256 bits)", Type: "cpu", DriverName: "llvmpipe"}
	h200     = vulkan.DeviceInfo{Name: "NVIDIA H200", Type: "discrete-gpu"}
	igpu     = vulkan.DeviceInfo{Name: "Intel(R) Graphics", Type: "integrated-gpu"}
	oldGPU   = vulkan.DeviceInfo{Name: "Old GPU", Type: "discrete-gpu", Unsupported: "Vulkan 1.1.0; densitykv needs 1.2 (float controls)"}
)

func devices(ds ...vulkan.DeviceInfo) Enumerator {
	return func() ([]vulkan.DeviceInfo, error) {
		out := append([]vulkan.DeviceInfo(nil), ds...)
		for i := range out {
			out[i].Index = i
		}
		return out, nil
	}
}

func failing(err error) Enumerator {
	return func() ([]vulkan.DeviceInfo, error) { return nil, err }
}

func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		spec   Spec
		enum   Enumerator
		device string // "" for the CPU
		index  int
		reason string
	}{
		{CPU, devices(h200), "", 0, "--device cpu"},
		{Auto, devices(lavapipe), "", 0, "no Vulkan GPU found (llvmpipe (LLVM 15.0.6, 256 bits) is a CPU device)"},
		{Auto, devices(lavapipe, h200), "NVIDIA H200", 1, "the first Vulkan GPU"},
		{Auto, devices(oldGPU, igpu, h200), "Intel(R) Graphics", 1, "the first Vulkan GPU"},
		{Auto, devices(oldGPU), "", 0, "no Vulkan GPU found (Old GPU: Vulkan 1.1.0; densitykv needs 1.2"},
		{Auto, devices(), "", 0, "no Vulkan device"},
		{Auto, failing(vulkan.ErrNotBuilt), "", 0, "no Vulkan in this build"},
		{Auto, failing(fmt.Errorf("x: %w", vulkan.ErrNoLoader)), "", 0, "no Vulkan loader"},
		{Auto, failing(vulkan.ErrNoDevice), "", 0, "no Vulkan device"},
		{Auto, failing(errors.New("vkCreateInstance: boom")), "", 0, "Vulkan unavailable: vkCreateInstance: boom"},
		{Vulkan, devices(lavapipe), "llvmpipe (LLVM 15.0.6, 256 bits)", 0, "no Vulkan GPU; the first Vulkan device"},
		{Vulkan, devices(lavapipe, oldGPU, h200), "NVIDIA H200", 2, "the first Vulkan GPU"},
		{VulkanIndex(0), devices(lavapipe, h200), "llvmpipe (LLVM 15.0.6, 256 bits)", 0, "--device vulkan:0"},
		{VulkanIndex(1), devices(lavapipe, h200), "NVIDIA H200", 1, "--device vulkan:1"},
	} {
		c, err := ResolveWith(tc.spec, tc.enum)
		if err != nil {
			t.Errorf("%v: %v", tc.spec, err)
			continue
		}
		name := ""
		if c.Vulkan {
			name = c.Device.Name
		}
		if name != tc.device || c.Vulkan && c.Device.Index != tc.index || !strings.Contains(c.Reason, tc.reason) || c.Spec != tc.spec {
			t.Errorf("%v: %v, want device %q (index %d) because %q", tc.spec, c, tc.device, tc.index, tc.reason)
		}
	}
}

func TestResolveErrors(t *testing.T) {
	for _, tc := range []struct {
		spec Spec
		enum Enumerator
		want string
		is   error
	}{
		{Vulkan, failing(vulkan.ErrNotBuilt), "--device vulkan: built without Vulkan: rebuild with -tags vulkan", vulkan.ErrNotBuilt},
		{Vulkan, devices(), "--device vulkan: no usable Vulkan device", vulkan.ErrNoDevice},
		{Vulkan, devices(oldGPU), "no usable Vulkan device (0: Old GPU: Vulkan 1.1.0", vulkan.ErrNoDevice},
		{VulkanIndex(2), devices(lavapipe), "--device vulkan:2: there are 1 Vulkan devices (0: llvmpipe", vulkan.ErrNoDevice},
		{VulkanIndex(0), devices(oldGPU), "--device vulkan:0: Old GPU: Vulkan 1.1.0", nil},
		{VulkanIndex(0), failing(vulkan.ErrNoLoader), "--device vulkan:0", vulkan.ErrNoLoader},
	} {
		_, err := ResolveWith(tc.spec, tc.enum)
		if err == nil || !strings.Contains(err.Error(), tc.want) || tc.is != nil && !errors.Is(err, tc.is) {
			t.Errorf("%v: %v, want an error with %q (is %v)", tc.spec, err, tc.want, tc.is)
		}
	}
	if _, err := (Choice{Spec: Auto, Reason: "no Vulkan device"}).Open(); err == nil || !strings.Contains(err.Error(), "resolved to the CPU") {
		t.Errorf("Open of a CPU choice: %v", err)
	}
}
