//go:build vulkan

package vulkan_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

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

func alloc(t *testing.T, d *vulkan.Device, size int64) *vulkan.Buffer {
	t.Helper()
	b, err := d.Alloc(size)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func download32(t *testing.T, d *vulkan.Device, b *vulkan.Buffer) []uint32 {
	t.Helper()
	out := make([]uint32, b.Size()/4)
	if err := d.DownloadUint32s(b, 0, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestVulkanEnumerate(t *testing.T) {
	d := vulkantest.Open(t)
	infos, err := vulkan.Enumerate()
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) == 0 {
		t.Fatal("Enumerate found no device, yet one was opened")
	}
	for i, info := range infos {
		if info.Index != i {
			t.Errorf("device %d has Index %d", i, info.Index)
		}
		if info.Name == "" || info.APIVersion == "" {
			t.Errorf("device %d: empty name or version: %+v", i, info)
		}
	}
	info := d.Info()
	t.Logf("%s: %s, Vulkan %s, %s %s, subgroup %d, exact %v, heaps %+v", info.Name, info.Type, info.APIVersion, info.DriverName, info.DriverInfo, info.SubgroupSize, info.ExactMode(), info.Heaps)
	if info.SubgroupSize == 0 || info.MaxWorkgroupInvocations == 0 || info.MaxStorageBufferRange == 0 || info.MaxPushConstants < 128 {
		t.Errorf("limits missing: %+v", info)
	}
	if info.DeviceLocalBytes() == 0 {
		t.Errorf("no device-local heap: %+v", info.Heaps)
	}
	if info.DriverName == "" {
		t.Errorf("no driver name (VkPhysicalDeviceVulkan12Properties): %+v", info)
	}
	if info.DriverName == "llvmpipe" && (info.Type != "cpu" || info.IsGPU()) {
		t.Errorf("lavapipe is type %q, IsGPU %v: want cpu, false", info.Type, info.IsGPU())
	}
}

func TestVulkanSpecAndPushConstants(t *testing.T) {
	d := vulkantest.Open(t)
	const n = 300
	a, b, c := alloc(t, d, 4*n), alloc(t, d, 4*n), alloc(t, d, 4*n)
	ones := make([]float32, n)
	for i := range ones {
		ones[i] = 1
	}
	if err := d.UploadFloat32s(a, 0, ones); err != nil {
		t.Fatal(err)
	}
	if err := d.UploadFloat32s(b, 0, ones); err != nil {
		t.Fatal(err)
	}
	k1, k2 := addKernel(t, d, 0.5, 32), addKernel(t, d, 2.5, 32)
	if k1 == k2 {
		t.Fatal("kernels with different specialization constants are one")
	}
	if again := addKernel(t, d, 0.5, 32); again != k1 {
		t.Error("the same kernel spec was built twice, want the cached kernel")
	}
	for _, tc := range []struct {
		k     *vulkan.Kernel
		n     uint32
		scale float32
		want  float32
	}{{k1, n, 2, 1 + 2 + 0.5}, {k2, n, -1, 1 - 1 + 2.5}, {k1, 7, 10, 1 + 10 + 0.5}} {
		batch := d.NewBatch()
		batch.Fill(c, 0, 4*n, 0)
		batch.Dispatch(tc.k, [3]uint32{(n + 31) / 32, 1, 1}, addPush(tc.n, tc.scale), a, b, c)
		if err := batch.Run(); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, n)
		if err := d.DownloadFloat32s(c, 0, got); err != nil {
			t.Fatal(err)
		}
		for i, v := range got {
			want := tc.want
			if i >= int(tc.n) {
				want = 0
			}
			if v != want {
				t.Fatalf("n %d, scale %v: c[%d] = %v, want %v", tc.n, tc.scale, i, v, want)
			}
		}
	}
}

func TestVulkanFillCopy(t *testing.T) {
	d := vulkantest.Open(t)
	a, b := alloc(t, d, 64), alloc(t, d, 64)
	batch := d.NewBatch()
	batch.Fill(a, 0, 64, 0x11111111)
	batch.Fill(a, 16, 8, 0xdeadbeef)
	batch.Copy(b, 4, a, 12, 20) // a[3..8) → b[1..6): 0x11.., 0xdead.., 0xdead.., 0x11.., 0x11..
	batch.Copy(a, 60, a, 0, 4)
	batch.Fill(a, 0, 0, 7) // nothing
	if err := batch.Run(); err != nil {
		t.Fatal(err)
	}
	const x, y = 0x11111111, 0xdeadbeef
	if got, want := download32(t, d, b), []uint32{0, x, y, y, x, x, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}; !slices.Equal(got, want) {
		t.Errorf("b = %#x, want %#x", got, want)
	}
	if got, want := download32(t, d, a), []uint32{x, x, x, x, y, y, x, x, x, x, x, x, x, x, x, x}; !slices.Equal(got, want) {
		t.Errorf("a = %#x, want %#x", got, want)
	}
	// Upload and Download at offsets, odd sizes.
	if err := d.Upload(b, 3, []byte{1, 2, 3, 4, 5}); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 7)
	if err := d.Download(b, 2, got); err != nil {
		t.Fatal(err)
	}
	if want := []byte{0, 1, 2, 3, 4, 5, 0xef}; !bytes.Equal(got, want) { // byte 8: 0xdeadbeef's low byte
		t.Errorf("bytes 2..9 = %v, want %v", got, want)
	}
	for _, tc := range []struct {
		name string
		rec  func(*vulkan.Batch)
		want string
	}{
		{"unaligned fill", func(b *vulkan.Batch) { b.Fill(a, 2, 8, 0) }, "multiples of 4"},
		{"fill past the end", func(b *vulkan.Batch) { b.Fill(a, 60, 8, 0) }, "outside the buffer's 64 bytes"},
		{"overlapping copy", func(b *vulkan.Batch) { b.Copy(a, 8, a, 4, 8) }, "overlap"},
		{"copy past the end", func(b *vulkan.Batch) { b.Copy(b2(t, d), 0, a, 32, 40) }, "outside the buffer's 64 bytes"},
	} {
		batch := d.NewBatch()
		batch.Fill(a, 0, 4, 1)
		tc.rec(batch)
		err := batch.Run()
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "batch command 1") {
			t.Errorf("%s: Run gave %v, want an error about command 1 with %q", tc.name, err, tc.want)
		}
	}
}

func b2(t *testing.T, d *vulkan.Device) *vulkan.Buffer { return alloc(t, d, 128) }

// TestVulkanManyBatches runs many multi-dispatch batches: each frees its
// descriptor pool, and the barriers order the dispatches (each reads what
// the one before wrote).
func TestVulkanManyBatches(t *testing.T) {
	d := vulkantest.Open(t)
	const n = 64
	bufs := []*vulkan.Buffer{alloc(t, d, 4*n), alloc(t, d, 4*n), alloc(t, d, 4*n)}
	k := addKernel(t, d, 0, 64)
	one := make([]float32, n)
	for i := range one {
		one[i] = 1
	}
	if err := d.UploadFloat32s(bufs[1], 0, one); err != nil {
		t.Fatal(err)
	}
	const runs, chain = 400, 4
	for r := range runs {
		batch := d.NewBatch()
		for i := range chain { // c = a + 1, then a = c + 1, ...
			x, y := bufs[0], bufs[2]
			if i%2 == 1 {
				x, y = y, x
			}
			batch.Dispatch(k, [3]uint32{1, 1, 1}, addPush(n, 1), x, bufs[1], y)
		}
		if err := batch.Run(); err != nil {
			t.Fatalf("run %d: %v", r, err)
		}
		if p := vulkan.LiveDescriptorPools(d); p != 0 {
			t.Fatalf("run %d left %d descriptor pools", r, p)
		}
	}
	got := make([]float32, n)
	if err := d.DownloadFloat32s(bufs[0], 0, got); err != nil {
		t.Fatal(err)
	}
	if want := float32(runs * chain); got[0] != want || got[n-1] != want {
		t.Errorf("after %d chained dispatches a = %v…%v, want %v", runs*chain, got[0], got[n-1], want)
	}
}

func TestVulkanRunTimed(t *testing.T) {
	d := vulkantest.Open(t)
	b := alloc(t, d, 1<<20)
	batch := d.NewBatch()
	batch.Fill(b, 0, 1<<20, 3)
	dt, err := batch.RunTimed()
	if err != nil {
		t.Fatal(err)
	}
	if dt <= 0 || dt > time.Minute {
		t.Errorf("RunTimed = %v, want a positive time", dt)
	}
	if got := download32(t, d, b); got[0] != 3 || got[len(got)-1] != 3 {
		t.Errorf("filled buffer holds %d…%d, want 3", got[0], got[len(got)-1])
	}
	t.Logf("fill of 1 MiB: %v (timestamp period %v ns)", dt, d.Info().TimestampPeriod)
}

// TestVulkanStaging moves data through a small staging buffer, in pieces,
// as on a discrete GPU whose memory the host cannot map.
func TestVulkanStaging(t *testing.T) {
	restore := vulkan.ForceStaging(4096)
	d := vulkantest.Open(t)
	b := alloc(t, d, 10001*4)
	restore()
	if vulkan.Mapped(b) {
		t.Fatal("the buffer is mapped under ForceStaging")
	}
	src := make([]uint32, 10001)
	for i := range src {
		src[i] = uint32(i)*2654435761 + 1
	}
	if z := download32(t, d, b); slices.ContainsFunc(z, func(v uint32) bool { return v != 0 }) {
		t.Fatal("a new buffer is not zeroed")
	}
	if err := d.UploadUint32s(b, 0, src); err != nil {
		t.Fatal(err)
	}
	if got := download32(t, d, b); !slices.Equal(got, src) {
		t.Fatal("staged round trip changed the data")
	}
	part := make([]uint16, 3000)
	if err := d.DownloadUint16s(b, 4094, part); err != nil {
		t.Fatal(err)
	}
	if want := uint16(src[1024]); part[1] != want || part[0] != uint16(src[1023]>>16) {
		t.Errorf("uint16s at bytes 4094, 4096 = %#x, %#x, want %#x, %#x", part[0], part[1], uint16(src[1023]>>16), want)
	}
}

func TestVulkanAllocErrors(t *testing.T) {
	d := vulkantest.Open(t)
	for _, size := range []int64{0, -4} {
		if _, err := d.Alloc(size); err == nil || !strings.Contains(err.Error(), "want > 0") {
			t.Errorf("Alloc(%d): %v, want a clear error", size, err)
		}
	}
	huge := int64(d.Info().MaxStorageBufferRange) + 1
	_, err := d.Alloc(huge)
	if !errors.Is(err, vulkan.ErrOutOfDeviceMemory) || !strings.Contains(err.Error(), "maxStorageBufferRange") {
		t.Errorf("Alloc(%d): %v, want ErrOutOfDeviceMemory naming maxStorageBufferRange", huge, err)
	}
	b := alloc(t, d, 16)
	if err := d.Upload(b, 10, make([]byte, 8)); err == nil || !strings.Contains(err.Error(), "[10, 18) outside the buffer's 16 bytes") {
		t.Errorf("Upload past the end: %v", err)
	}
	if err := d.Download(b, -1, make([]byte, 1)); err == nil {
		t.Error("Download at offset -1 succeeded")
	}
	b.Free()
	b.Free()
	if err := d.Upload(b, 0, []byte{1}); err == nil || !strings.Contains(err.Error(), "freed") {
		t.Errorf("Upload to a freed buffer: %v", err)
	}
	if n := vulkan.LiveBuffers(d); n != 0 {
		t.Errorf("%d buffers live after Free", n)
	}
}

// TestVulkanAllocated: Allocated counts the bytes of the live buffers
// (as asked for, not rounded) and their peak; freeing twice or a failed
// Alloc changes nothing, ResetPeak starts the peak at the live bytes, and
// Close frees everything.
func TestVulkanAllocated(t *testing.T) {
	d := vulkantest.Open(t)
	live0, _ := d.Allocated()
	d.ResetPeak()
	a, b := alloc(t, d, 1000), alloc(t, d, 6)
	if live, peak := d.Allocated(); live != live0+1006 || peak != live {
		t.Errorf("two buffers of 1000 and 6 bytes: live %d, peak %d, want %d for both", live, peak, live0+1006)
	}
	if _, err := d.Alloc(int64(d.Info().MaxStorageBufferRange) + 1); err == nil {
		t.Fatal("an Alloc beyond maxStorageBufferRange succeeded")
	}
	a.Free()
	a.Free()
	c := alloc(t, d, 500)
	if live, peak := d.Allocated(); live != live0+506 || peak != live0+1006 {
		t.Errorf("after freeing 1000 bytes (twice) and allocating 500: live %d, peak %d, want %d and %d", live, peak, live0+506, live0+1006)
	}
	d.ResetPeak()
	b.Free()
	c.Free()
	if live, peak := d.Allocated(); live != live0 || peak != live0+506 {
		t.Errorf("after ResetPeak and freeing the rest: live %d, peak %d, want %d and %d", live, peak, live0, live0+506)
	}
	alloc(t, d, 64)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if live, _ := d.Allocated(); live != 0 {
		t.Errorf("%d bytes live after Close", live)
	}
}

func TestVulkanKernelErrors(t *testing.T) {
	d := vulkantest.Open(t)
	spv, err := os.ReadFile("testdata/add.spv")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		spec vulkan.KernelSpec
		want string
	}{
		{vulkan.KernelSpec{Name: "x", SPIRV: []byte("not spir-v at all....")}, "whole number of 32-bit words"},
		{vulkan.KernelSpec{Name: "x", SPIRV: make([]byte, 40)}, "not SPIR-V"},
		{vulkan.KernelSpec{Name: "x", SPIRV: spv, Bindings: 3, PushSize: 6}, "multiple of 4"},
		{vulkan.KernelSpec{Name: "x", SPIRV: spv, Bindings: 3, PushSize: 1 << 20}, "beyond the device's"},
	} {
		if _, err := d.Kernel(tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "kernel x") {
			t.Errorf("Kernel(%+v): %v, want an error naming kernel x with %q", tc.spec.PushSize, err, tc.want)
		}
	}
	k := addKernel(t, d, 0, 1)
	b := alloc(t, d, 16)
	for _, tc := range []struct {
		name string
		rec  func(*vulkan.Batch)
		want string
	}{
		{"two buffers", func(bt *vulkan.Batch) { bt.Dispatch(k, [3]uint32{1, 1, 1}, addPush(1, 1), b, b) }, "2 buffers, the kernel binds 3"},
		{"short push", func(bt *vulkan.Batch) { bt.Dispatch(k, [3]uint32{1, 1, 1}, []byte{1}, b, b, b) }, "1 bytes of push constants, the kernel takes 8"},
		{"nil kernel", func(bt *vulkan.Batch) { bt.Dispatch(nil, [3]uint32{1, 1, 1}, nil) }, "nil kernel"},
		{"too many groups", func(bt *vulkan.Batch) { bt.Dispatch(k, [3]uint32{1 << 31, 1, 1}, addPush(1, 1), b, b, b) }, "workgroups in dimension 0"},
	} {
		bt := d.NewBatch()
		tc.rec(bt)
		if err := bt.Run(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Run gave %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestVulkanClosed(t *testing.T) {
	d := vulkantest.Open(t)
	b := alloc(t, d, 64)
	k := addKernel(t, d, 0, 1)
	batch := d.NewBatch()
	batch.Dispatch(k, [3]uint32{1, 1, 1}, addPush(1, 1), b, b, alloc(t, d, 64))
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := d.Alloc(64); !errors.Is(err, vulkan.ErrClosed) {
		t.Errorf("Alloc after Close: %v, want ErrClosed", err)
	}
	if err := d.Upload(b, 0, []byte{1}); !errors.Is(err, vulkan.ErrClosed) {
		t.Errorf("Upload after Close: %v, want ErrClosed", err)
	}
	if err := d.Download(b, 0, []byte{1}); !errors.Is(err, vulkan.ErrClosed) {
		t.Errorf("Download after Close: %v, want ErrClosed", err)
	}
	if _, err := d.Kernel(vulkan.KernelSpec{Name: "k"}); !errors.Is(err, vulkan.ErrClosed) {
		t.Errorf("Kernel after Close: %v, want ErrClosed", err)
	}
	if err := batch.Run(); !errors.Is(err, vulkan.ErrClosed) {
		t.Errorf("Run after Close: %v, want ErrClosed", err)
	}
	b.Free() // no-op
}

// TestVulkanConcurrent shares one device between goroutines, each with its
// own buffers and batches.
func TestVulkanConcurrent(t *testing.T) {
	d := vulkantest.Open(t)
	k := addKernel(t, d, 0, 16)
	const workers, rounds, n = 4, 15, 100
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			errs <- func() error {
				for r := range rounds {
					bufs := make([]*vulkan.Buffer, 3)
					for i := range bufs {
						b, err := d.Alloc(4 * n)
						if err != nil {
							return err
						}
						defer b.Free()
						bufs[i] = b
					}
					x := make([]float32, n)
					for i := range x {
						x[i] = float32(w*1000 + r)
					}
					if err := d.UploadFloat32s(bufs[0], 0, x); err != nil {
						return err
					}
					if err := d.UploadFloat32s(bufs[1], 0, x); err != nil {
						return err
					}
					batch := d.NewBatch()
					batch.Dispatch(k, [3]uint32{(n + 15) / 16, 1, 1}, addPush(n, 1), bufs...)
					if err := batch.Run(); err != nil {
						return err
					}
					got := make([]float32, n)
					if err := d.DownloadFloat32s(bufs[2], 0, got); err != nil {
						return err
					}
					if want := 2 * x[0]; got[0] != want || got[n-1] != want {
						return fmt.Errorf("worker %d round %d: %v…%v, want %v", w, r, got[0], got[n-1], want)
					}
				}
				return nil
			}()
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if n := vulkan.LiveBuffers(d); n != 0 {
		t.Errorf("%d buffers live after every worker freed its own", n)
	}
}

func TestVulkanDeviceLost(t *testing.T) {
	d := vulkantest.Open(t)
	b := alloc(t, d, 16)
	vulkan.LoseDevice(d, "vkWaitForFences")
	err := d.Upload(b, 0, []byte{1})
	if !errors.Is(err, vulkan.ErrDeviceLost) || !strings.Contains(err.Error(), "vkWaitForFences: device lost (VK_ERROR_DEVICE_LOST)") {
		t.Errorf("Upload after a device loss: %v", err)
	}
	if _, err := d.Alloc(16); !errors.Is(err, vulkan.ErrDeviceLost) {
		t.Errorf("Alloc after a device loss: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("Close after a device loss: %v", err)
	}
}

// BenchmarkVulkanRun is the cost of one Run of a batch of dispatches
// (descriptor pool, sets, recording, submission, fence) on tiny data.
func BenchmarkVulkanRun(b *testing.B) {
	for _, n := range []int{1, 100} {
		b.Run(fmt.Sprintf("dispatches=%d", n), func(b *testing.B) {
			d := vulkantest.Open(b)
			spv, err := os.ReadFile("testdata/add.spv")
			if err != nil {
				b.Fatal(err)
			}
			k, err := d.Kernel(vulkan.KernelSpec{Name: "add", SPIRV: spv, Bindings: 3, PushSize: 8, Spec: []uint32{0, 64}})
			if err != nil {
				b.Fatal(err)
			}
			bufs := make([]*vulkan.Buffer, 3)
			for i := range bufs {
				if bufs[i], err = d.Alloc(256); err != nil {
					b.Fatal(err)
				}
			}
			batch := d.NewBatch()
			for range n {
				batch.Dispatch(k, [3]uint32{1, 1, 1}, addPush(64, 1), bufs...)
			}
			for b.Loop() {
				if err := batch.Run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
