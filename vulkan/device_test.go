//go:build vulkan

package vulkan_test

import (
	"encoding/binary"
	"math"
	"os"
	"testing"

	"github.com/densitykv/densitykv/internal/vmath"
	"github.com/densitykv/densitykv/vulkan"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// addKernel loads testdata/add.spv: c[i] = fma(b[i], scale, a[i]) + offset
// for i < n, push constants (n uint32, scale float32), Spec[0] = offset's
// bits, Spec[1] = the workgroup size.
func addKernel(t *testing.T, d *vulkan.Device, offset float32, local uint32) *vulkan.Kernel {
	t.Helper()
	spv, err := os.ReadFile("testdata/add.spv")
	if err != nil {
		t.Fatal(err)
	}
	k, err := d.Kernel(vulkan.KernelSpec{Name: "add", SPIRV: spv, Bindings: 3, PushSize: 8, Spec: []uint32{math.Float32bits(offset), local}})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func addPush(n uint32, scale float32) []byte {
	p := binary.LittleEndian.AppendUint32(nil, n)
	return binary.LittleEndian.AppendUint32(p, math.Float32bits(scale))
}

func TestVulkanAddRoundTrip(t *testing.T) {
	d := vulkantest.Open(t)
	const n = 1000
	a, b := make([]float32, n), make([]float32, n)
	for i := range a {
		a[i] = float32(i) * 0.37
		b[i] = 1 / float32(i+3)
	}
	bufs := make([]*vulkan.Buffer, 3)
	for i := range bufs {
		var err error
		if bufs[i], err = d.Alloc(4 * n); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.UploadFloat32s(bufs[0], 0, a); err != nil {
		t.Fatal(err)
	}
	if err := d.UploadFloat32s(bufs[1], 0, b); err != nil {
		t.Fatal(err)
	}
	const local = 64
	k := addKernel(t, d, 0.25, local)
	batch := d.NewBatch()
	batch.Dispatch(k, [3]uint32{(n + local - 1) / local, 1, 1}, addPush(n-1, 3), bufs...)
	if err := batch.Run(); err != nil {
		t.Fatal(err)
	}
	c := make([]float32, n)
	if err := d.DownloadFloat32s(bufs[2], 0, c); err != nil {
		t.Fatal(err)
	}
	for i := range n - 1 {
		want := vmath.FMA32(b[i], 3, a[i]) + 0.25
		if math.Float32bits(c[i]) != math.Float32bits(want) {
			t.Fatalf("c[%d] = %v (%#x), want %v (%#x): a %v, b %v", i, c[i], math.Float32bits(c[i]), want, math.Float32bits(want), a[i], b[i])
		}
	}
	if c[n-1] != 0 {
		t.Errorf("c[%d] = %v beyond n (push constant n = %d), want 0 (buffers start zeroed)", n-1, c[n-1], n-1)
	}
}
