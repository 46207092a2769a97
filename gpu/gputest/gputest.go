// Package gputest holds what the models' GPU tests share.
package gputest

import (
	"errors"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/gpu"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// FastBackend opens the test device (vulkantest.Open) and returns its
// fast-mode backend (gpu.NewFastBackend). On a device without a usable
// cooperative matrix (lavapipe) it requires the refusal instead — naming
// the device and VK_NV_cooperative_matrix, no backend — logs that the
// tensor-core path did not run, and returns nil: the caller returns, and
// never passes as if fast mode had run.
func FastBackend(t testing.TB) *gpu.Backend {
	t.Helper()
	dev := vulkantest.Open(t)
	be, err := gpu.NewFastBackend(dev)
	if why := gpu.FastSupport(dev.Info()); why != nil {
		if err == nil || be != nil || !errors.Is(err, gpu.ErrNoFastMode) || !strings.Contains(err.Error(), "VK_NV_cooperative_matrix") || !strings.Contains(err.Error(), dev.Info().Name) {
			t.Fatalf("fast mode on %v, which lacks a usable cooperative matrix: backend %v, error %v; want the refusal", dev, be, err)
		}
		t.Logf("fast mode refused on %v, as it must be; the tensor-core path did NOT run here: %v", dev, err)
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return be
}
