package gpu

import (
	"strings"
	"testing"

	"github.com/densitykv/densitykv/compute"
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

// TestBackendErrors: a view where a kernel binds whole buffers, a tensor
// of another backend and a short operand fail the operation, naming it;
// Flush returns the error once and the backend works on.
func TestBackendErrors(t *testing.T) {
	dev := vulkantest.Open(t)
	b, err := NewBackend(dev)
	if err != nil {
		t.Fatal(err)
	}
	x := b.New(8)
	defer b.Free(x)
	for _, c := range []struct {
		want string
		run  func()
	}{
		{"gpu: GELUTanh: operand 0 is a view at element 2", func() { b.GELUTanh(b.View(x, 2, 4)) }},
		{"gpu: Add: y is a tensor of another backend", func() { b.Add(x, compute.NewCPU().New(8)) }},
		{"gpu: RMSNorm: w holds 8 values, want 9", func() { b.RMSNorm(x, x, 0, 9, 1e-6, x) }},
		{"gpu: View: tensor holds 8 values, want 10", func() { b.View(x, 4, 6) }},
	} {
		c.run()
		b.Add(x, x) // skipped after the error
		if err := b.Flush(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want one saying %q", err, c.want)
		}
	}
	b.Upload(x, []float32{1, 2, 3, 4, 5, 6, 7, 8})
	b.Add(x, x)
	got := make([]float32, 8)
	if err := b.Download(got, x); err != nil || got[0] != 2 || got[7] != 16 {
		t.Fatalf("after the errors: %v, %v; want 2 … 16", got, err)
	}
}
