package device

import (
	"errors"
	"testing"

	"github.com/densitykv/densitykv/vulkan"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// TestResolveHere resolves against this machine: in the default build auto
// is the CPU and vulkan fails with ErrNotBuilt; with -tags vulkan and a
// device (DENSITYKV_TEST_DEVICE=vulkan demands one) vulkan picks it and
// auto never picks a CPU-type device.
func TestResolveHere(t *testing.T) {
	auto, err := Resolve(Auto)
	if err != nil {
		t.Fatal(err)
	}
	if auto.Vulkan && !auto.Device.IsGPU() {
		t.Errorf("auto chose %v, a %s device", auto, auto.Device.Type)
	}
	c, err := Resolve(Vulkan)
	if !vulkan.Built {
		if !errors.Is(err, vulkan.ErrNotBuilt) || auto.Vulkan {
			t.Errorf("default build: vulkan gave %v, %v; auto %v", c, err, auto)
		}
		return
	}
	t.Logf("auto: %v; vulkan: %v, %v", auto, c, err)
	if err != nil {
		if _, required, _ := vulkantest.Wanted(); required {
			t.Fatalf("%s demands a Vulkan device: %v", vulkantest.Env, err)
		}
		t.Skipf("no Vulkan device to resolve to: %v", err)
	}
	d, err := c.Open()
	if err != nil {
		t.Fatalf("opening %v: %v", c, err)
	}
	defer d.Close()
	if d.Info().Name != c.Device.Name {
		t.Errorf("opened %s, chose %s", d.Info().Name, c.Device.Name)
	}
}
