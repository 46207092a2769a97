package gpu

import (
	"testing"

	"github.com/densitykv/densitykv/compute/computetest"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// TestBackend runs compute's conformance cases on the device: each
// operation gives the CPU backend's bits.
func TestBackend(t *testing.T) {
	dev := vulkantest.Open(t)
	b, err := NewBackend(dev)
	if err != nil {
		t.Fatal(err)
	}
	computetest.Run(t, b)
}
