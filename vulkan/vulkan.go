// Package vulkan is densitykv's Vulkan compute runtime: the devices
// (Enumerate, Open), device-local storage buffers (Alloc, Upload,
// Download), compute kernels compiled from SPIR-V (Kernel) and batches of
// dispatches, fills and copies submitted at once (NewBatch, Batch.Run).
// Package gpu writes its kernels on it; package device chooses the device.
//
// # Builds
//
// The Vulkan loader is opened at run time through purego (no cgo), and only
// in a build with the tag vulkan (go build -tags vulkan): purego links the
// binary dynamically against libc, and the default build stays a static,
// CPU-only binary. Without the tag every type and method exists (so code
// using the package compiles and is vetted in both builds), Enumerate and
// Open return ErrNotBuilt, and nothing else can be reached.
//
// # Model
//
// Everything is synchronous: Upload, Download, Alloc's zeroing and
// Batch.Run submit their work, wait for it and return. A Batch records
// dispatches, fills and copies in Go and replays them into one command
// buffer at Run, with a barrier between consecutive commands (each sees
// every write of the ones before it); it may be Run again. A buffer is one
// VkBuffer of device-local memory bound whole to its binding (set 0,
// binding i = the i-th buffer of a dispatch); a kernel reads its sizes from
// push constants or specialization constants.
//
// # Concurrency
//
// A Device may be used from several goroutines: a mutex serialises every
// call into the device (allocation, transfers, kernel creation, submission),
// so concurrent Runs execute one after the other. A Batch is not safe for
// concurrent recording. Buffers and kernels belong to their device; Close
// frees them all, after which every method returns ErrClosed.
//
// # Faults
//
// Failed Vulkan calls are *ResultError values naming the function. A lost
// device (ErrDeviceLost) makes every later call on it return that error
// (close it; a new Open may work, or continue on the CPU); out of device
// memory (ErrOutOfDeviceMemory) leaves the device usable.
//
// # Loader
//
// The loader is libvulkan.so.1 (Linux), libvulkan.1.dylib or
// libMoltenVK.dylib (macOS), or the file DENSITYKV_VULKAN_LOADER names (one
// carried to a machine without it installed). Only 64-bit platforms are
// supported (handles are passed in registers).
package vulkan

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// Errors. Failures of Vulkan calls are *ResultError values, which match
// ErrDeviceLost and ErrOutOfDeviceMemory with errors.Is.
var (
	ErrNotBuilt          = errors.New("built without Vulkan: rebuild with -tags vulkan")
	ErrNoLoader          = errors.New("vulkan: no Vulkan loader")
	ErrNoDevice          = errors.New("vulkan: no Vulkan device")
	ErrDeviceLost        = errors.New("vulkan: device lost")
	ErrOutOfDeviceMemory = errors.New("vulkan: out of device memory")
	// ErrClosed is returned by every method of a closed Device (and of its
	// buffers, kernels and batches).
	ErrClosed = errors.New("vulkan: device closed")
)

// DeviceInfo describes a physical device: what densitykv reads to choose a
// device and its kernels.
type DeviceInfo struct {
	Index      int    `json:"index"` // position in Vulkan's enumeration order (Open's argument)
	Name       string `json:"name"`  // deviceName, e.g. "NVIDIA H200", "llvmpipe (LLVM 15.0.6, 256 bits)"
	Type       string `json:"type"`  // "discrete-gpu", "integrated-gpu", "virtual-gpu", "cpu" or "other"
	VendorID   uint32 `json:"vendor_id"`
	DeviceID   uint32 `json:"device_id"`
	APIVersion string `json:"api_version"` // the device's Vulkan version, "1.3.230"
	DriverName string `json:"driver_name"` // VkPhysicalDeviceDriverProperties.driverName, "llvmpipe"
	DriverInfo string `json:"driver_info"` // driverInfo, "Mesa 22.3.6 (LLVM 15.0.6)"
	Heaps      []Heap `json:"heaps"`

	SubgroupSize            uint32    `json:"subgroup_size"`
	MaxWorkgroupInvocations uint32    `json:"max_workgroup_invocations"`
	MaxWorkgroupSize        [3]uint32 `json:"max_workgroup_size"`
	MaxWorkgroupCount       [3]uint32 `json:"max_workgroup_count"`      // groups per dispatch in each dimension
	MaxSharedMemory         uint32    `json:"max_shared_memory"`        // bytes of shared memory per workgroup
	MaxPushConstants        uint32    `json:"max_push_constants"`       // bytes
	MaxStorageBufferRange   uint32    `json:"max_storage_buffer_range"` // bytes: the largest buffer a binding sees whole
	MaxAllocation           uint64    `json:"max_allocation"`           // maxMemoryAllocationSize, bytes (0 when unknown)

	// 32-bit float controls (Vulkan 1.2 / VK_KHR_shader_float_controls):
	// together they make exact mode possible (ExactMode).
	DenormPreserve32           bool `json:"denorm_preserve32"`
	DenormFlushToZero32        bool `json:"denorm_flush_to_zero32"`
	RoundingModeRTE32          bool `json:"rounding_mode_rte32"`
	SignedZeroInfNanPreserve32 bool `json:"signed_zero_inf_nan_preserve32"`
	// The same for 64-bit floats (modules that use float64 declare them
	// too; package gpu leaves out of a module what the device lacks).
	DenormPreserve64           bool `json:"denorm_preserve64"`
	RoundingModeRTE64          bool `json:"rounding_mode_rte64"`
	SignedZeroInfNanPreserve64 bool `json:"signed_zero_inf_nan_preserve64"`

	Float64      bool `json:"float64"`       // shaderFloat64
	Int64        bool `json:"int64"`         // shaderInt64
	Int16        bool `json:"int16"`         // shaderInt16
	Float16      bool `json:"float16"`       // shaderFloat16
	Int8         bool `json:"int8"`          // shaderInt8
	Storage16Bit bool `json:"storage_16bit"` // storageBuffer16BitAccess: 16-bit types in storage buffers
	Storage8Bit  bool `json:"storage_8bit"`  // storageBuffer8BitAccess

	MemoryModel bool `json:"memory_model"` // vulkanMemoryModel (cooperative-matrix shaders need it)

	// CooperativeMatrix lists the VK_KHR_cooperative_matrix shapes; empty
	// when the extension is not offered.
	CooperativeMatrix []CoopMatrixShape `json:"cooperative_matrix,omitempty"`
	// CooperativeMatrixNV lists the VK_NV_cooperative_matrix shapes (what
	// fast mode's kernel uses, package gpu); empty when the extension or
	// its feature is not offered.
	CooperativeMatrixNV []CoopMatrixShape `json:"cooperative_matrix_nv,omitempty"`
	// TimestampPeriod is nanoseconds per timestamp tick; 0 when the compute
	// queue has no timestamps (RunTimed then measures wall time).
	TimestampPeriod float32 `json:"timestamp_period"`

	// Unsupported says why Open refuses this device ("Vulkan 1.1; densitykv
	// needs 1.2"); empty when it can be opened.
	Unsupported string `json:"unsupported,omitempty"`
}

// Heap is one memory heap of a device.
type Heap struct {
	Size        uint64 `json:"size"` // bytes
	DeviceLocal bool   `json:"device_local"`
}

// CoopMatrixShape is one VkCooperativeMatrixPropertiesKHR: an M×K by K×N
// product accumulated into M×N, with its component types ("float16",
// "bfloat16", "float32", "sint8", ...) and scope ("subgroup", ...).
type CoopMatrixShape struct {
	M, N, K         uint32
	A, B, C, Result string
	Saturating      bool
	Scope           string
}

// String is "16x16x16 float16*float16+float32=float32 (subgroup)".
func (s CoopMatrixShape) String() string {
	sat := ""
	if s.Saturating {
		sat = " saturating"
	}
	return fmt.Sprintf("%dx%dx%d %s*%s+%s=%s (%s%s)", s.M, s.N, s.K, s.A, s.B, s.C, s.Result, s.Scope, sat)
}

// IsGPU reports whether the device is a GPU (discrete, integrated or
// virtual), not a CPU implementation such as lavapipe.
func (i DeviceInfo) IsGPU() bool {
	return i.Type == "discrete-gpu" || i.Type == "integrated-gpu" || i.Type == "virtual-gpu"
}

// ExactMode reports whether the device's 32-bit float controls allow the
// CPU's bits: denormals preserved, round-to-nearest-even, signed zero, Inf
// and NaN preserved.
func (i DeviceInfo) ExactMode() bool {
	return i.DenormPreserve32 && i.RoundingModeRTE32 && i.SignedZeroInfNanPreserve32
}

// DeviceLocalBytes is the total size of the device-local heaps.
func (i DeviceInfo) DeviceLocalBytes() uint64 {
	var n uint64
	for _, h := range i.Heaps {
		if h.DeviceLocal {
			n += h.Size
		}
	}
	return n
}

// Enumerate lists every physical device, Index in enumeration order. It
// returns ErrNotBuilt in the default build and an error wrapping
// ErrNoLoader when the Vulkan loader cannot be opened; no device is an
// empty list, not an error.
func Enumerate() ([]DeviceInfo, error) { return enumerate() }

// Open opens physical device index (DeviceInfo.Index) with one compute
// queue. It refuses devices older than Vulkan 1.2.
func Open(index int) (*Device, error) {
	if index < 0 {
		return nil, fmt.Errorf("vulkan: device index %d, want >= 0", index)
	}
	return open(index)
}

// Device is an opened Vulkan device. See the package comment on
// concurrency.
type Device struct {
	info   DeviceInfo
	mu     sync.Mutex // serialises every call into the device
	closed bool
	lost   error // the first error that lost the device: every later call returns it
	impl   deviceImpl
	// live and peak are the bytes of Alloc's buffers not yet freed, now
	// and at their most since Open or ResetPeak (Allocated).
	live, peak int64
}

// Allocated returns the bytes of the buffers Alloc made that are not freed
// yet (their sizes as asked for), now and at their most since the device
// was opened or ResetPeak was called: what a device-memory estimate is
// checked against. The runtime's own staging buffer (discrete GPUs,
// host-visible memory) is not counted.
func (d *Device) Allocated() (live, peak int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.live, d.peak
}

// ResetPeak makes the peak Allocated reports the bytes live now.
func (d *Device) ResetPeak() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.peak = d.live
}

// Info describes the device.
func (d *Device) Info() DeviceInfo { return d.info }

func (d *Device) String() string { return fmt.Sprintf("vulkan:%d (%s)", d.info.Index, d.info.Name) }

// Close waits for the device, frees every buffer, kernel and the device.
// Closing twice is a no-op.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	err := d.impl.close()
	d.live = 0 // every buffer is freed
	if d.lost != nil && errors.Is(err, ErrDeviceLost) {
		err = nil // known: the device was lost before
	}
	return err
}

// lock takes the device for a call, or says it is closed or lost.
func (d *Device) lock(what string) error {
	d.mu.Lock()
	switch {
	case d.closed:
		d.mu.Unlock()
		return fmt.Errorf("%s on %v: %w", what, d, ErrClosed)
	case d.lost != nil:
		d.mu.Unlock()
		return fmt.Errorf("%s on %v: the device was lost earlier: %w", what, d, d.lost)
	}
	return nil
}

// failed records err when it lost the device (VK_ERROR_DEVICE_LOST: the
// device can do nothing more; close it and reopen, or continue on the CPU)
// and returns it.
func (d *Device) failed(err error) error {
	if err != nil && d.lost == nil && errors.Is(err, ErrDeviceLost) {
		d.lost = err
	}
	return err
}

// Buffer is a device-local storage buffer.
type Buffer struct {
	dev   *Device
	size  int64
	freed bool
	impl  bufferImpl
}

// Size is the buffer's size in bytes, as allocated.
func (b *Buffer) Size() int64 { return b.size }

// Free releases the buffer. Freeing twice, or after the device's Close, is
// a no-op; a batch that uses a freed buffer fails at Run.
func (b *Buffer) Free() {
	d := b.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	if b.freed || d.closed {
		b.freed = true
		return
	}
	b.freed = true
	d.impl.free(b)
	d.live -= b.size
}

// Alloc allocates a zeroed device-local storage buffer of size bytes. It
// refuses sizes beyond the device's maxStorageBufferRange (a binding sees a
// buffer whole), its largest allocation or its largest device-local heap;
// a failed allocation wraps ErrOutOfDeviceMemory.
func (d *Device) Alloc(size int64) (*Buffer, error) {
	if err := d.lock("vulkan: Alloc"); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	if size <= 0 {
		return nil, fmt.Errorf("vulkan: Alloc of %d bytes on %v: want > 0", size, d)
	}
	if r := int64(d.info.MaxStorageBufferRange); size > r {
		return nil, fmt.Errorf("vulkan: Alloc of %d bytes on %v: beyond the device's maxStorageBufferRange (%d bytes), the largest buffer a kernel can bind: %w", size, d, r, ErrOutOfDeviceMemory)
	}
	if m := d.info.MaxAllocation; m > 0 && uint64(size) > m {
		return nil, fmt.Errorf("vulkan: Alloc of %d bytes on %v: beyond the device's maxMemoryAllocationSize (%d bytes): %w", size, d, m, ErrOutOfDeviceMemory)
	}
	b := &Buffer{dev: d, size: size}
	if err := d.call("vkAllocateMemory", func() error { return d.impl.alloc(b) }); err != nil {
		return nil, fmt.Errorf("vulkan: Alloc of %d bytes on %v: %w", size, d, err)
	}
	d.live += size
	d.peak = max(d.peak, d.live)
	return b, nil
}

// checkRange checks that [off, off+n) lies in b, a live buffer of d.
func (d *Device) checkRange(what string, b *Buffer, off, n int64) error {
	switch {
	case b == nil:
		return fmt.Errorf("vulkan: %s: nil buffer", what)
	case b.dev != d:
		return fmt.Errorf("vulkan: %s: buffer of %v used on %v", what, b.dev, d)
	case b.freed:
		return fmt.Errorf("vulkan: %s: buffer of %d bytes was freed", what, b.size)
	case off < 0 || n < 0 || off > b.size || n > b.size-off:
		return fmt.Errorf("vulkan: %s: bytes [%d, %d) outside the buffer's %d bytes", what, off, off+n, b.size)
	}
	return nil
}

// Upload copies src into dst at byte offset off.
func (d *Device) Upload(dst *Buffer, off int64, src []byte) error {
	if err := d.lock("vulkan: Upload"); err != nil {
		return err
	}
	defer d.mu.Unlock()
	if err := d.checkRange("Upload", dst, off, int64(len(src))); err != nil {
		return err
	}
	if len(src) == 0 {
		return nil
	}
	return d.call("vkQueueSubmit", func() error { return d.impl.upload(dst, off, src) })
}

// Download copies len(dst) bytes of src from byte offset off into dst.
func (d *Device) Download(src *Buffer, off int64, dst []byte) error {
	if err := d.lock("vulkan: Download"); err != nil {
		return err
	}
	defer d.mu.Unlock()
	if err := d.checkRange("Download", src, off, int64(len(dst))); err != nil {
		return err
	}
	if len(dst) == 0 {
		return nil
	}
	return d.call("vkQueueSubmit", func() error { return d.impl.download(src, off, dst) })
}

// UploadFloat32s uploads src as little-endian float32s at byte offset off.
func (d *Device) UploadFloat32s(dst *Buffer, off int64, src []float32) error {
	return d.Upload(dst, off, leBytes(src))
}

// DownloadFloat32s downloads len(dst) float32s from byte offset off.
func (d *Device) DownloadFloat32s(src *Buffer, off int64, dst []float32) error {
	return downloadAs(d, src, off, dst)
}

// UploadUint16s uploads src (e.g. bfloat16 bits) at byte offset off.
func (d *Device) UploadUint16s(dst *Buffer, off int64, src []uint16) error {
	return d.Upload(dst, off, leBytes(src))
}

// DownloadUint16s downloads len(dst) uint16s from byte offset off.
func (d *Device) DownloadUint16s(src *Buffer, off int64, dst []uint16) error {
	return downloadAs(d, src, off, dst)
}

// UploadUint32s uploads src at byte offset off.
func (d *Device) UploadUint32s(dst *Buffer, off int64, src []uint32) error {
	return d.Upload(dst, off, leBytes(src))
}

// DownloadUint32s downloads len(dst) uint32s from byte offset off.
func (d *Device) DownloadUint32s(src *Buffer, off int64, dst []uint32) error {
	return downloadAs(d, src, off, dst)
}

type word interface{ uint16 | uint32 | float32 }

var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// leBytes returns x as little-endian bytes: a view of its memory on a
// little-endian machine, a copy otherwise.
func leBytes[T word](x []T) []byte {
	if len(x) == 0 {
		return nil
	}
	n := len(x) * int(unsafe.Sizeof(x[0]))
	if littleEndian {
		return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), n)
	}
	b := make([]byte, 0, n)
	for _, v := range x {
		switch v := any(v).(type) {
		case uint16:
			b = binary.LittleEndian.AppendUint16(b, v)
		case uint32:
			b = binary.LittleEndian.AppendUint32(b, v)
		case float32:
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
	}
	return b
}

// downloadAs downloads into dst's memory directly on a little-endian
// machine, through a copy otherwise.
func downloadAs[T word](d *Device, src *Buffer, off int64, dst []T) error {
	if littleEndian || len(dst) == 0 {
		return d.Download(src, off, leBytes(dst))
	}
	b := make([]byte, len(dst)*int(unsafe.Sizeof(dst[0])))
	if err := d.Download(src, off, b); err != nil {
		return err
	}
	for i := range dst {
		switch p := any(&dst[i]).(type) {
		case *uint16:
			*p = binary.LittleEndian.Uint16(b[2*i:])
		case *uint32:
			*p = binary.LittleEndian.Uint32(b[4*i:])
		case *float32:
			*p = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	}
	return nil
}

// KernelSpec describes a compute kernel: a SPIR-V module with entry point
// "main" whose storage buffers are set 0, bindings 0..Bindings-1, with
// PushSize bytes of push constants (a multiple of 4) and specialization
// constants: constant_id i is Spec[i] (a 32-bit value: use
// math.Float32bits for a float).
type KernelSpec struct {
	Name     string // for errors and timings
	SPIRV    []byte
	Bindings int
	PushSize int
	Spec     []uint32
}

// Kernel is a compute pipeline of a device.
type Kernel struct {
	dev      *Device
	name     string
	bindings int
	pushSize int
	impl     kernelImpl
}

// Name is the kernel's KernelSpec.Name.
func (k *Kernel) Name() string { return k.name }

// Kernel builds (or returns the cached) pipeline of s; kernels are cached
// per (SPIR-V, Spec, Bindings, PushSize) and live until Close.
func (d *Device) Kernel(s KernelSpec) (*Kernel, error) {
	if err := d.lock("vulkan: Kernel " + s.Name); err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	if s.Name == "" {
		s.Name = "kernel"
	}
	if err := d.checkKernelSpec(s); err != nil {
		return nil, fmt.Errorf("vulkan: kernel %s: %w", s.Name, err)
	}
	var k *Kernel
	err := d.call("vkCreateComputePipelines", func() (err error) {
		k, err = d.impl.kernel(d, s)
		return err
	})
	return k, err
}

func (d *Device) checkKernelSpec(s KernelSpec) error {
	const spirvMagic = 0x07230203
	switch {
	case len(s.SPIRV) < 20 || len(s.SPIRV)%4 != 0:
		return fmt.Errorf("SPIR-V of %d bytes, want a whole number of 32-bit words with a 5-word header", len(s.SPIRV))
	case binary.LittleEndian.Uint32(s.SPIRV) != spirvMagic:
		return fmt.Errorf("not SPIR-V: first word %#08x, want %#08x (little-endian)", binary.LittleEndian.Uint32(s.SPIRV), spirvMagic)
	case s.Bindings < 0 || s.Bindings > 64:
		return fmt.Errorf("%d bindings, want 0..64", s.Bindings)
	case s.PushSize < 0 || s.PushSize%4 != 0:
		return fmt.Errorf("push constants of %d bytes, want a multiple of 4", s.PushSize)
	case s.PushSize > int(d.info.MaxPushConstants):
		return fmt.Errorf("push constants of %d bytes, beyond the device's %d", s.PushSize, d.info.MaxPushConstants)
	}
	return nil
}

// Batch records commands for one submission. Recording errors (a wrong
// number of buffers, a push block of the wrong size, a range outside a
// buffer) are kept and the first is returned by Run.
type Batch struct {
	dev *Device
	ops []op
	err error
}

type opKind int

const (
	opDispatch opKind = iota
	opFill
	opCopy
)

// op is one recorded command.
type op struct {
	kind   opKind
	kernel *Kernel
	groups [3]uint32
	push   []byte
	bufs   []*Buffer // dispatch: its bindings; fill: [buf]; copy: [dst, src]
	off    int64     // fill, copy: destination offset
	srcOff int64     // copy
	size   int64     // fill, copy
	value  uint32    // fill
}

func (o *op) String() string {
	switch o.kind {
	case opDispatch:
		return "dispatch " + o.kernel.name
	case opFill:
		return "fill"
	}
	return "copy"
}

// NewBatch starts an empty batch.
func (d *Device) NewBatch() *Batch { return &Batch{dev: d} }

// Len is the number of recorded commands.
func (b *Batch) Len() int { return len(b.ops) }

func (b *Batch) fail(format string, a ...any) {
	if b.err == nil {
		b.err = fmt.Errorf("vulkan: batch command %d: "+format, append([]any{len(b.ops)}, a...)...)
	}
}

// Dispatch records k over groups workgroups with push constants push
// (exactly the kernel's PushSize bytes, copied) and bufs bound to bindings
// 0..n-1. A barrier separates it from the commands before it.
func (b *Batch) Dispatch(k *Kernel, groups [3]uint32, push []byte, bufs ...*Buffer) {
	switch {
	case k == nil:
		b.fail("dispatch of a nil kernel")
		return
	case k.dev != b.dev:
		b.fail("dispatch %s: kernel of %v in a batch of %v", k.name, k.dev, b.dev)
		return
	case len(bufs) != k.bindings:
		b.fail("dispatch %s: %d buffers, the kernel binds %d", k.name, len(bufs), k.bindings)
		return
	case len(push) != k.pushSize:
		b.fail("dispatch %s: %d bytes of push constants, the kernel takes %d", k.name, len(push), k.pushSize)
		return
	}
	for i, m := range b.dev.info.MaxWorkgroupCount {
		if m > 0 && groups[i] > m {
			b.fail("dispatch %s: %d workgroups in dimension %d, beyond the device's %d", k.name, groups[i], i, m)
			return
		}
	}
	for i, buf := range bufs {
		if err := b.dev.checkRange(fmt.Sprintf("dispatch %s binding %d", k.name, i), buf, 0, 0); err != nil {
			b.fail("%v", err)
			return
		}
	}
	b.ops = append(b.ops, op{kind: opDispatch, kernel: k, groups: groups, push: append([]byte(nil), push...), bufs: append([]*Buffer(nil), bufs...)})
}

// Fill records setting size bytes of buf from byte offset off to the 32-bit
// word v; off and size must be multiples of 4 (size 0 records nothing).
func (b *Batch) Fill(buf *Buffer, off, size int64, v uint32) {
	if err := b.dev.checkRange("fill", buf, off, size); err != nil {
		b.fail("%v", err)
		return
	}
	if off%4 != 0 || size%4 != 0 {
		b.fail("fill of bytes [%d, %d): offset and size must be multiples of 4", off, off+size)
		return
	}
	if size == 0 {
		return
	}
	b.ops = append(b.ops, op{kind: opFill, bufs: []*Buffer{buf}, off: off, size: size, value: v})
}

// Copy records copying size bytes from src at srcOff to dst at dstOff; the
// ranges must not overlap when src is dst (size 0 records nothing).
func (b *Batch) Copy(dst *Buffer, dstOff int64, src *Buffer, srcOff int64, size int64) {
	if err := b.dev.checkRange("copy destination", dst, dstOff, size); err != nil {
		b.fail("%v", err)
		return
	}
	if err := b.dev.checkRange("copy source", src, srcOff, size); err != nil {
		b.fail("%v", err)
		return
	}
	if dst == src && dstOff < srcOff+size && srcOff < dstOff+size {
		b.fail("copy within one buffer: bytes [%d, %d) and [%d, %d) overlap", srcOff, srcOff+size, dstOff, dstOff+size)
		return
	}
	if size == 0 {
		return
	}
	b.ops = append(b.ops, op{kind: opCopy, bufs: []*Buffer{dst, src}, off: dstOff, srcOff: srcOff, size: size})
}

// Run submits the batch, waits for it and frees its descriptor sets. It
// returns the first recording error, if any, without submitting. The
// recording is kept: the batch may be Run again.
func (b *Batch) Run() error {
	_, err := b.run(false)
	return err
}

// RunTimed is Run returning the GPU time between the batch's first and last
// command, from timestamp queries (the wall time of the submission where
// the queue has no timestamps).
func (b *Batch) RunTimed() (time.Duration, error) { return b.run(true) }

func (b *Batch) run(timed bool) (time.Duration, error) {
	if b.err != nil {
		return 0, b.err
	}
	d := b.dev
	if err := d.lock("vulkan: batch Run"); err != nil {
		return 0, err
	}
	defer d.mu.Unlock()
	for i := range b.ops {
		o := &b.ops[i]
		for _, buf := range o.bufs {
			if buf.freed {
				return 0, fmt.Errorf("vulkan: batch command %d (%v): a buffer of %d bytes was freed", i, o, buf.size)
			}
		}
	}
	if len(b.ops) == 0 {
		return 0, nil
	}
	var dt time.Duration
	err := d.call("vkQueueSubmit", func() (err error) {
		dt, err = d.impl.run(d, b.ops, timed)
		return err
	})
	return dt, err
}

// deviceTypeName names VkPhysicalDeviceType.
func deviceTypeName(t uint32) string {
	switch t {
	case 1:
		return "integrated-gpu"
	case 2:
		return "discrete-gpu"
	case 3:
		return "virtual-gpu"
	case 4:
		return "cpu"
	}
	return "other"
}

// versionString renders a VK_MAKE_API_VERSION number.
func versionString(v uint32) string {
	return fmt.Sprintf("%d.%d.%d", v>>22&0x7f, v>>12&0x3ff, v&0xfff)
}

// cString is the NUL-terminated prefix of b.
func cString(b []byte) string {
	if i := strings.IndexByte(string(b), 0); i >= 0 {
		return string(b[:i])
	}
	return string(b)
}
