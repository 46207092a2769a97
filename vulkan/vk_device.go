//go:build vulkan

package vulkan

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"unsafe"
)

// deviceFuncs are the device-level functions used.
type deviceFuncs struct {
	DestroyDevice               uintptr
	GetDeviceQueue              uintptr
	DeviceWaitIdle              uintptr
	CreateBuffer                uintptr
	DestroyBuffer               uintptr
	GetBufferMemoryRequirements uintptr
	AllocateMemory              uintptr
	FreeMemory                  uintptr
	BindBufferMemory            uintptr
	MapMemory                   uintptr
	UnmapMemory                 uintptr
	CreateShaderModule          uintptr
	DestroyShaderModule         uintptr
	CreateDescriptorSetLayout   uintptr
	DestroyDescriptorSetLayout  uintptr
	CreatePipelineLayout        uintptr
	DestroyPipelineLayout       uintptr
	CreateComputePipelines      uintptr
	DestroyPipeline             uintptr
	CreateDescriptorPool        uintptr
	DestroyDescriptorPool       uintptr
	AllocateDescriptorSets      uintptr
	UpdateDescriptorSets        uintptr
	CreateCommandPool           uintptr
	DestroyCommandPool          uintptr
	AllocateCommandBuffers      uintptr
	BeginCommandBuffer          uintptr
	EndCommandBuffer            uintptr
	ResetCommandBuffer          uintptr
	CmdBindPipeline             uintptr
	CmdBindDescriptorSets       uintptr
	CmdPushConstants            uintptr
	CmdDispatch                 uintptr
	CmdPipelineBarrier          uintptr
	CmdFillBuffer               uintptr
	CmdCopyBuffer               uintptr
	CmdResetQueryPool           uintptr
	CmdWriteTimestamp           uintptr
	CreateQueryPool             uintptr
	DestroyQueryPool            uintptr
	GetQueryPoolResults         uintptr
	CreateFence                 uintptr
	DestroyFence                uintptr
	ResetFences                 uintptr
	WaitForFences               uintptr
	QueueSubmit                 uintptr
}

const (
	wholeSize = ^uint64(0) // VK_WHOLE_SIZE

	bufferUsage = 0x20 | 0x1 | 0x2 // STORAGE_BUFFER | TRANSFER_SRC | TRANSFER_DST

	stageTopOfPipe    = 0x1
	stageCompute      = 0x800
	stageTransfer     = 0x1000
	stageBottomOfPipe = 0x2000
	stageHost         = 0x4000

	accessShaderRead    = 0x20
	accessShaderWrite   = 0x40
	accessTransferRead  = 0x800
	accessTransferWrite = 0x1000
	accessHostRead      = 0x2000
)

// stagingSize bounds the staging buffer of devices whose buffers are not
// host-visible; larger transfers go through it in pieces. (A variable for
// the tests.)
var stagingSize int64 = 64 << 20

// forceStaging, set by tests, leaves host-visible buffers unmapped so that
// transfers take the staging path of discrete GPUs.
var forceStaging bool

// deviceImpl is an opened VkDevice and what every call shares.
type deviceImpl struct {
	in        *instance
	phys      *physical
	handle    uintptr // VkDevice
	queue     uintptr // VkQueue
	fn        deviceFuncs
	cmdPool   uint64
	cmd       uintptr // the one VkCommandBuffer, reused by every submission
	fence     uint64
	queryPool uint64 // two timestamps; 0 without timestamps
	tsMask    uint64 // timestampValidBits as a mask

	staging  *Buffer // host-visible, mapped; nil until needed or when buffers are mapped
	buffers  map[*Buffer]struct{}
	kernels  map[string]*Kernel
	pipeline []*kernelImpl // every pipeline, for Close
	pools    int           // live descriptor pools (tests: none outlives a Run)
}

// bufferImpl is a VkBuffer with its own memory.
type bufferImpl struct {
	buf    uint64
	mem    uint64
	mapped unsafe.Pointer // host address of the memory when host-visible, else nil
}

func open(index int) (*Device, error) {
	in, err := getInstance()
	if err != nil {
		return nil, err
	}
	if index >= len(in.devices) {
		return nil, fmt.Errorf("vulkan: device %d: there are %d Vulkan devices: %w", index, len(in.devices), ErrNoDevice)
	}
	p := in.devices[index]
	if p.info.Unsupported != "" {
		return nil, fmt.Errorf("vulkan: device %d (%s): %s", index, p.info.Name, p.info.Unsupported)
	}
	d := &Device{info: p.info}
	d.info.Heaps = slices.Clone(p.info.Heaps)
	d.info.CooperativeMatrix = slices.Clone(p.info.CooperativeMatrix)
	d.info.CooperativeMatrixNV = slices.Clone(p.info.CooperativeMatrixNV)
	impl := &d.impl
	impl.in, impl.phys = in, p
	impl.buffers = map[*Buffer]struct{}{}
	impl.kernels = map[string]*Kernel{}
	if err := impl.create(); err != nil {
		impl.close()
		return nil, fmt.Errorf("vulkan: opening device %d (%s): %w", index, p.info.Name, err)
	}
	return d, nil
}

// create makes the VkDevice, its queue, command buffer, fence and
// timestamp query pool.
func (d *deviceImpl) create() error {
	p := d.phys
	prio := new(float32)
	*prio = 1
	qci := &vkDeviceQueueCreateInfo{sType: stDeviceQueueCreateInfo, queueFamilyIndex: uint32(p.queueFamily), queueCount: 1, pQueuePriorities: unsafe.Pointer(prio)}
	feat, exts := p.enabledFeatures()
	var names []unsafe.Pointer
	for _, e := range exts {
		names = append(names, unsafe.Pointer(cstr(e)))
	}
	dci := &vkDeviceCreateInfo{sType: stDeviceCreateInfo, pNext: unsafe.Pointer(feat), queueCreateInfoCount: 1, pQueueCreateInfos: unsafe.Pointer(qci)}
	if len(names) > 0 {
		dci.enabledExtensionCount = uint32(len(names))
		dci.ppEnabledExtensionNames = unsafe.Pointer(&names[0])
	}
	if err := check("vkCreateDevice", call(d.in.fn.CreateDevice, p.handle, uintptr(unsafe.Pointer(dci)), 0, uintptr(unsafe.Pointer(&d.handle)))); err != nil {
		return err
	}
	if err := loadProcs(&d.fn, func(name string) uintptr {
		return callPtr(d.in.fn.GetDeviceProcAddr, d.handle, uintptr(unsafe.Pointer(cstr(name))))
	}); err != nil {
		return err
	}
	call(d.fn.GetDeviceQueue, d.handle, uintptr(p.queueFamily), 0, uintptr(unsafe.Pointer(&d.queue)))
	pci := &vkCommandPoolCreateInfo{sType: stCommandPoolCreateInfo, flags: 0x2 /* RESET_COMMAND_BUFFER */, queueFamilyIndex: uint32(p.queueFamily)}
	if err := check("vkCreateCommandPool", call(d.fn.CreateCommandPool, d.handle, uintptr(unsafe.Pointer(pci)), 0, uintptr(unsafe.Pointer(&d.cmdPool)))); err != nil {
		return err
	}
	cai := &vkCommandBufferAllocateInfo{sType: stCommandBufferAllocateInfo, commandPool: d.cmdPool, level: 0 /* PRIMARY */, commandBufferCount: 1}
	if err := check("vkAllocateCommandBuffers", call(d.fn.AllocateCommandBuffers, d.handle, uintptr(unsafe.Pointer(cai)), uintptr(unsafe.Pointer(&d.cmd)))); err != nil {
		return err
	}
	fci := &vkFenceCreateInfo{sType: stFenceCreateInfo}
	if err := check("vkCreateFence", call(d.fn.CreateFence, d.handle, uintptr(unsafe.Pointer(fci)), 0, uintptr(unsafe.Pointer(&d.fence)))); err != nil {
		return err
	}
	if p.timestamps {
		qpi := &vkQueryPoolCreateInfo{sType: stQueryPoolCreateInfo, queryType: 2 /* TIMESTAMP */, queryCount: 2}
		if err := check("vkCreateQueryPool", call(d.fn.CreateQueryPool, d.handle, uintptr(unsafe.Pointer(qpi)), 0, uintptr(unsafe.Pointer(&d.queryPool)))); err != nil {
			return err
		}
		d.tsMask = ^uint64(0)
		if b := p.timestampBits; b < 64 {
			d.tsMask = 1<<b - 1
		}
	}
	return nil
}

// enabledFeatures returns the feature chain and extensions to enable: the
// 64-, 16- and 8-bit types, 16/8-bit storage, scalar block layout, the
// Vulkan memory model and cooperative matrices (KHR and NV), each where
// supported.
func (p *physical) enabledFeatures() (*vkPhysicalDeviceFeatures2, []string) {
	s, s11, s12 := &p.feat.features, p.feat11, p.feat12
	f12 := &vkPhysicalDeviceVulkan12Features{sType: stPhysicalDeviceVulkan12Features,
		storageBuffer8BitAccess: s12.storageBuffer8BitAccess, uniformAndStorageBuffer8BitAccess: s12.uniformAndStorageBuffer8BitAccess,
		storagePushConstant8: s12.storagePushConstant8, shaderFloat16: s12.shaderFloat16, shaderInt8: s12.shaderInt8,
		scalarBlockLayout: s12.scalarBlockLayout, shaderSubgroupExtendedTypes: s12.shaderSubgroupExtendedTypes,
		vulkanMemoryModel: s12.vulkanMemoryModel, vulkanMemoryModelDeviceScope: s12.vulkanMemoryModelDeviceScope}
	f11 := &vkPhysicalDeviceVulkan11Features{sType: stPhysicalDeviceVulkan11Features, pNext: unsafe.Pointer(f12),
		storageBuffer16BitAccess: s11.storageBuffer16BitAccess, uniformAndStorageBuffer16BitAccess: s11.uniformAndStorageBuffer16BitAccess,
		storagePushConstant16: s11.storagePushConstant16}
	f := &vkPhysicalDeviceFeatures2{sType: stPhysicalDeviceFeatures2, pNext: unsafe.Pointer(f11)}
	f.features.shaderFloat64, f.features.shaderInt64, f.features.shaderInt16 = s.shaderFloat64, s.shaderInt64, s.shaderInt16
	var exts []string
	if slices.Contains(p.extensions, extPortabilitySubset) {
		exts = append(exts, extPortabilitySubset) // required where offered (MoltenVK)
	}
	if p.coop != nil && p.coop.cooperativeMatrix != 0 {
		exts = append(exts, extCooperativeMatrix)
		f12.pNext = unsafe.Pointer(&vkPhysicalDeviceCooperativeMatrixFeaturesKHR{sType: stCoopMatrixFeaturesKHR, cooperativeMatrix: 1})
	}
	if p.coopNV != nil && p.coopNV.cooperativeMatrix != 0 {
		// Fast mode's tensor-core kernel (package gpu) is written for it.
		exts = append(exts, extCooperativeMatrixNV)
		f12.pNext = unsafe.Pointer(&vkPhysicalDeviceCooperativeMatrixFeaturesNV{sType: stCoopMatrixFeaturesNV, pNext: f12.pNext, cooperativeMatrix: 1})
	}
	return f, exts
}

// close frees everything of the device; it tolerates a partly created one.
func (d *deviceImpl) close() error {
	if d.handle == 0 {
		return nil
	}
	err := check("vkDeviceWaitIdle", call(d.fn.DeviceWaitIdle, d.handle))
	for b := range d.buffers {
		d.free(b)
		b.freed = true
	}
	if d.staging != nil {
		d.free(d.staging)
	}
	for _, k := range d.pipeline {
		k.destroy(d)
	}
	destroy := func(f uintptr, h uint64) {
		if h != 0 {
			call(f, d.handle, uintptr(h), 0)
		}
	}
	destroy(d.fn.DestroyQueryPool, d.queryPool)
	destroy(d.fn.DestroyFence, d.fence)
	destroy(d.fn.DestroyCommandPool, d.cmdPool)
	call(d.fn.DestroyDevice, d.handle, 0)
	d.handle = 0
	return err
}

// memoryType chooses the memory type for buffers among typeBits: one of
// the largest device-local heap, host-visible and coherent where there is
// such a type (unified memory, lavapipe, resizable BAR), so that transfers
// need no staging; host-visible coherent memory for staging (host true).
func (p *physical) memoryType(typeBits uint32, host bool) (int, error) {
	m := &p.mem
	types := m.memoryTypes[:m.memoryTypeCount]
	const hostFlags = memHostVisible | memHostCoherent
	if host {
		for i, t := range types {
			if typeBits&(1<<i) != 0 && t.propertyFlags&hostFlags == hostFlags {
				return i, nil
			}
		}
		return -1, errors.New("no host-visible coherent memory for staging")
	}
	best, bestHeap := -1, uint64(0)
	for i, t := range types {
		if typeBits&(1<<i) == 0 || t.propertyFlags&memDeviceLocal == 0 {
			continue
		}
		size := m.memoryHeaps[t.heapIndex].size
		better := size > bestHeap || size == bestHeap && t.propertyFlags&hostFlags == hostFlags && types[best].propertyFlags&hostFlags != hostFlags
		if best < 0 || better {
			best, bestHeap = i, size
		}
	}
	if best < 0 {
		return -1, errors.New("no device-local memory type for storage buffers")
	}
	return best, nil
}

// alloc creates b's VkBuffer and memory, maps it when host-visible and
// zeroes it.
func (d *deviceImpl) alloc(b *Buffer) error {
	if err := d.allocBuffer(b, false); err != nil {
		return err
	}
	if b.impl.mapped != nil {
		clear(unsafe.Slice((*byte)(b.impl.mapped), b.size))
	} else if err := d.submit(func(cb uintptr) {
		call(d.fn.CmdFillBuffer, cb, uintptr(b.impl.buf), 0, uintptr(wholeSize), 0)
	}); err != nil {
		d.free(b)
		return err
	}
	d.buffers[b] = struct{}{}
	return nil
}

// allocBuffer creates the VkBuffer and memory of b (device-local, or the
// staging type when host), mapping host-visible coherent memory.
func (d *deviceImpl) allocBuffer(b *Buffer, host bool) error {
	bci := &vkBufferCreateInfo{sType: stBufferCreateInfo, size: uint64(b.size+3) &^ 3, usage: bufferUsage}
	if err := check("vkCreateBuffer", call(d.fn.CreateBuffer, d.handle, uintptr(unsafe.Pointer(bci)), 0, uintptr(unsafe.Pointer(&b.impl.buf)))); err != nil {
		return err
	}
	req := &vkMemoryRequirements{}
	call(d.fn.GetBufferMemoryRequirements, d.handle, uintptr(b.impl.buf), uintptr(unsafe.Pointer(req)))
	ti, err := d.phys.memoryType(req.memoryTypeBits, host)
	if err == nil {
		heap := d.phys.mem.memoryHeaps[d.phys.mem.memoryTypes[ti].heapIndex].size
		if req.size > heap {
			err = fmt.Errorf("%d bytes needed, beyond the memory heap of %d bytes: %w", req.size, heap, ErrOutOfDeviceMemory)
		}
	}
	if err == nil {
		mai := &vkMemoryAllocateInfo{sType: stMemoryAllocateInfo, allocationSize: req.size, memoryTypeIndex: uint32(ti)}
		err = check("vkAllocateMemory", call(d.fn.AllocateMemory, d.handle, uintptr(unsafe.Pointer(mai)), 0, uintptr(unsafe.Pointer(&b.impl.mem))))
	}
	if err == nil {
		err = check("vkBindBufferMemory", call(d.fn.BindBufferMemory, d.handle, uintptr(b.impl.buf), uintptr(b.impl.mem), 0))
	}
	const hostFlags = memHostVisible | memHostCoherent
	if err == nil && d.phys.mem.memoryTypes[ti].propertyFlags&hostFlags == hostFlags && (host || !forceStaging) {
		var p unsafe.Pointer
		err = check("vkMapMemory", call(d.fn.MapMemory, d.handle, uintptr(b.impl.mem), 0, uintptr(wholeSize), 0, uintptr(unsafe.Pointer(&p))))
		b.impl.mapped = p
	}
	if err != nil {
		d.free(b)
	}
	return err
}

// free destroys b's VkBuffer and memory.
func (d *deviceImpl) free(b *Buffer) {
	delete(d.buffers, b)
	if b.impl.mapped != nil {
		call(d.fn.UnmapMemory, d.handle, uintptr(b.impl.mem))
	}
	if b.impl.buf != 0 {
		call(d.fn.DestroyBuffer, d.handle, uintptr(b.impl.buf), 0)
	}
	if b.impl.mem != 0 {
		call(d.fn.FreeMemory, d.handle, uintptr(b.impl.mem), 0)
	}
	b.impl = bufferImpl{}
}

// submit records commands with rec into the device's command buffer
// between two barriers (the first orders them after every earlier
// submission's writes, the second makes their writes visible to the host),
// submits it and waits.
func (d *deviceImpl) submit(rec func(cb uintptr)) error {
	begin := &vkCommandBufferBeginInfo{sType: stCommandBufferBeginInfo, flags: 0x1 /* ONE_TIME_SUBMIT */}
	if err := check("vkBeginCommandBuffer", call(d.fn.BeginCommandBuffer, d.cmd, uintptr(unsafe.Pointer(begin)))); err != nil {
		return err
	}
	d.deviceBarrier()
	rec(d.cmd)
	d.barrier(stageCompute|stageTransfer, stageHost, accessShaderWrite|accessTransferWrite, accessHostRead)
	if err := check("vkEndCommandBuffer", call(d.fn.EndCommandBuffer, d.cmd)); err != nil {
		return err
	}
	cmds := []uintptr{d.cmd}
	si := &vkSubmitInfo{sType: stSubmitInfo, commandBufferCount: 1, pCommandBuffers: unsafe.Pointer(&cmds[0])}
	err := check("vkQueueSubmit", call(d.fn.QueueSubmit, d.queue, 1, uintptr(unsafe.Pointer(si)), uintptr(d.fence)))
	if err == nil {
		fences := []uint64{d.fence}
		err = check("vkWaitForFences", call(d.fn.WaitForFences, d.handle, 1, uintptr(unsafe.Pointer(&fences[0])), 1, uintptr(math.MaxUint64)))
		if err == nil {
			err = check("vkResetFences", call(d.fn.ResetFences, d.handle, 1, uintptr(unsafe.Pointer(&fences[0]))))
		}
	}
	if e := check("vkResetCommandBuffer", call(d.fn.ResetCommandBuffer, d.cmd, 0)); err == nil {
		err = e
	}
	return err
}

// deviceBarrier records a barrier between the compute and transfer
// commands before it (in submission order) and after it.
func (d *deviceImpl) deviceBarrier() {
	d.barrier(stageCompute|stageTransfer, stageCompute|stageTransfer,
		accessShaderWrite|accessTransferWrite, accessShaderRead|accessShaderWrite|accessTransferRead|accessTransferWrite)
}

// barrier records a global memory barrier into the command buffer.
func (d *deviceImpl) barrier(srcStage, dstStage, srcAccess, dstAccess uint32) {
	mb := &vkMemoryBarrier{sType: stMemoryBarrier, srcAccessMask: srcAccess, dstAccessMask: dstAccess}
	call(d.fn.CmdPipelineBarrier, d.cmd, uintptr(srcStage), uintptr(dstStage), 0, 1, uintptr(unsafe.Pointer(mb)), 0, 0, 0, 0)
}

// stagingBuffer returns the staging buffer, created on first use.
func (d *deviceImpl) stagingBuffer() (*Buffer, error) {
	if d.staging == nil {
		s := &Buffer{size: stagingSize}
		if err := d.allocBuffer(s, true); err != nil {
			return nil, fmt.Errorf("staging buffer of %d bytes: %w", stagingSize, err)
		}
		if s.impl.mapped == nil {
			d.free(s)
			return nil, errors.New("staging buffer not mapped")
		}
		d.staging = s
	}
	return d.staging, nil
}

func (d *deviceImpl) upload(dst *Buffer, off int64, src []byte) error {
	if dst.impl.mapped != nil {
		copy(unsafe.Slice((*byte)(dst.impl.mapped), dst.size)[off:], src)
		return nil
	}
	return d.staged(dst, off, src, true)
}

func (d *deviceImpl) download(src *Buffer, off int64, dst []byte) error {
	if src.impl.mapped != nil {
		copy(dst, unsafe.Slice((*byte)(src.impl.mapped), src.size)[off:])
		return nil
	}
	return d.staged(src, off, dst, false)
}

// staged moves data between buf at off and host through the staging
// buffer, a piece at a time.
func (d *deviceImpl) staged(buf *Buffer, off int64, host []byte, up bool) error {
	s, err := d.stagingBuffer()
	if err != nil {
		return err
	}
	stage := unsafe.Slice((*byte)(s.impl.mapped), s.size)
	for len(host) > 0 {
		n := min(len(host), len(stage))
		region := []vkBufferCopy{{srcOffset: 0, dstOffset: uint64(off), size: uint64(n)}}
		from, to := s.impl.buf, buf.impl.buf
		if up {
			copy(stage, host[:n])
		} else {
			region[0].srcOffset, region[0].dstOffset = uint64(off), 0
			from, to = to, from
		}
		if err := d.submit(func(cb uintptr) {
			call(d.fn.CmdCopyBuffer, cb, uintptr(from), uintptr(to), 1, uintptr(unsafe.Pointer(&region[0])))
		}); err != nil {
			return err
		}
		if !up {
			copy(host[:n], stage)
		}
		host, off = host[n:], off+int64(n)
	}
	return nil
}
