package gpu

import (
	"testing"

	"github.com/densitykv/densitykv/compute/computetest"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// TestBackend runs compute's conformance cases on the device: each
// operation gives the CPU backend's bits, and those whose kernels are not
// here yet fail with compute.ErrNoKernel.
func TestBackend(t *testing.T) {
	dev := vulkantest.Open(t)
	b, err := NewBackend(dev)
	if err != nil {
		t.Fatal(err)
	}
	computetest.Run(t, b, backendMissing...)
}

// backendMissing names the conformance cases whose kernels Backend does
// not have yet (a Linear with a bias needs AddBias).
var backendMissing = []string{
	"Linear/fp32/bias=true", "Linear/bf16/bias=true",
	"LayerNorm", "LayerNorm/affine", "RMSNorm", "GELUTanh", "SiLU",
	"Modulate", "GatedAdd", "Add", "AddBias",
}
