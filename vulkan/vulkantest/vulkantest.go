// Package vulkantest opens the Vulkan device that tests of GPU code run on.
//
// DENSITYKV_TEST_DEVICE=vulkan (the first device) or vulkan:N (device N)
// demands a device: Open fails the test when none can be opened, in a build
// without the tag vulkan too, so that a CI meant to test the GPU path never
// passes by skipping it. Without the variable, Open opens the first device
// when it can and otherwise skips, saying what is missing (the build tag,
// the loader, a device).
package vulkantest

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/vulkan"
)

// Env is the variable naming the device the GPU tests must run on.
const Env = "DENSITYKV_TEST_DEVICE"

// Open returns the test device, closed when the test ends.
func Open(t testing.TB) *vulkan.Device {
	t.Helper()
	index, required, err := Wanted()
	if err != nil {
		t.Fatal(err)
	}
	if index < 0 {
		t.Skipf("%s=cpu: the GPU tests are off", Env)
	}
	d, err := vulkan.Open(index)
	if err == nil {
		t.Cleanup(func() {
			if err := d.Close(); err != nil {
				t.Errorf("closing %v: %v", d, err)
			}
		})
		return d
	}
	if required {
		t.Fatalf("%s=%s: %v", Env, os.Getenv(Env), err)
	}
	switch {
	case errors.Is(err, vulkan.ErrNotBuilt):
		t.Skipf("no Vulkan in this build (go test -tags vulkan; %s=vulkan makes this a failure)", Env)
	case errors.Is(err, vulkan.ErrNoLoader):
		t.Skipf("no Vulkan loader (%v; %s=vulkan makes this a failure)", err, Env)
	case errors.Is(err, vulkan.ErrNoDevice):
		t.Skipf("no Vulkan device (%v; install mesa-vulkan-drivers for lavapipe; %s=vulkan makes this a failure)", err, Env)
	}
	t.Skipf("no usable Vulkan device: %v (%s=vulkan makes this a failure)", err, Env)
	return nil
}

// Wanted reads DENSITYKV_TEST_DEVICE: the device index and whether a
// device is required ("vulkan", "vulkan:N"); unset or empty is device 0,
// not required; "cpu" is index -1: no GPU tests.
func Wanted() (index int, required bool, err error) {
	v := os.Getenv(Env)
	switch {
	case v == "":
		return 0, false, nil
	case v == "cpu":
		return -1, false, nil
	case v == "vulkan":
		return 0, true, nil
	case strings.HasPrefix(v, "vulkan:"):
		n, err := strconv.Atoi(strings.TrimPrefix(v, "vulkan:"))
		if err != nil || n < 0 {
			return 0, true, fmt.Errorf("%s=%q: want vulkan or vulkan:N with N a device index >= 0", Env, v)
		}
		return n, true, nil
	}
	return 0, false, fmt.Errorf("%s=%q: want vulkan or vulkan:N (unset: skip GPU tests without a device)", Env, v)
}
