//go:build vulkan

package vulkan

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"time"
	"unsafe"
)

const (
	descriptorStorageBuffer = 7    // VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
	shaderStageCompute      = 0x20 // VK_SHADER_STAGE_COMPUTE_BIT
	bindPointCompute        = 1    // VK_PIPELINE_BIND_POINT_COMPUTE
)

// kernelImpl is a compute pipeline and its layouts.
type kernelImpl struct {
	setLayout uint64
	layout    uint64
	pipeline  uint64
}

// kernelKey identifies a pipeline: its SPIR-V, constants and interface.
func kernelKey(s KernelSpec) string {
	h := sha256.New()
	h.Write(s.SPIRV)
	var w [4]byte
	for _, v := range append([]uint32{uint32(s.Bindings), uint32(s.PushSize), uint32(len(s.Spec))}, s.Spec...) {
		binary.LittleEndian.PutUint32(w[:], v)
		h.Write(w[:])
	}
	return string(h.Sum(nil))
}

func (d *deviceImpl) kernel(dev *Device, s KernelSpec) (*Kernel, error) {
	key := kernelKey(s)
	if k, ok := d.kernels[key]; ok {
		return k, nil
	}
	k := &Kernel{dev: dev, name: s.Name, bindings: s.Bindings, pushSize: s.PushSize}
	if err := d.createPipeline(&k.impl, s); err != nil {
		k.impl.destroy(d)
		return nil, fmt.Errorf("vulkan: kernel %s: %w", s.Name, err)
	}
	d.kernels[key] = k
	d.pipeline = append(d.pipeline, &k.impl)
	return k, nil
}

// createPipeline makes the shader module (freed again), the descriptor set
// layout of s.Bindings storage buffers, the pipeline layout with the push
// constant range and the compute pipeline with the specialization
// constants.
func (d *deviceImpl) createPipeline(k *kernelImpl, s KernelSpec) error {
	code := make([]uint32, len(s.SPIRV)/4) // 4-byte aligned, as pCode must be
	for i := range code {
		code[i] = binary.LittleEndian.Uint32(s.SPIRV[4*i:])
	}
	smi := &vkShaderModuleCreateInfo{sType: stShaderModuleCreateInfo, codeSize: uintptr(len(s.SPIRV)), pCode: unsafe.Pointer(&code[0])}
	var module uint64
	if err := check("vkCreateShaderModule", call(d.fn.CreateShaderModule, d.handle, uintptr(unsafe.Pointer(smi)), 0, uintptr(unsafe.Pointer(&module)))); err != nil {
		return err
	}
	defer call(d.fn.DestroyShaderModule, d.handle, uintptr(module), 0)

	dsl := &vkDescriptorSetLayoutCreateInfo{sType: stDescriptorSetLayoutCreateInfo, bindingCount: uint32(s.Bindings)}
	if s.Bindings > 0 {
		binds := make([]vkDescriptorSetLayoutBinding, s.Bindings)
		for i := range binds {
			binds[i] = vkDescriptorSetLayoutBinding{binding: uint32(i), descriptorType: descriptorStorageBuffer, descriptorCount: 1, stageFlags: shaderStageCompute}
		}
		dsl.pBindings = unsafe.Pointer(&binds[0])
	}
	if err := check("vkCreateDescriptorSetLayout", call(d.fn.CreateDescriptorSetLayout, d.handle, uintptr(unsafe.Pointer(dsl)), 0, uintptr(unsafe.Pointer(&k.setLayout)))); err != nil {
		return err
	}
	layouts := []uint64{k.setLayout}
	pli := &vkPipelineLayoutCreateInfo{sType: stPipelineLayoutCreateInfo, setLayoutCount: 1, pSetLayouts: unsafe.Pointer(&layouts[0])}
	if s.PushSize > 0 {
		pli.pushConstantRangeCount = 1
		pli.pPushConstantRanges = unsafe.Pointer(&vkPushConstantRange{stageFlags: shaderStageCompute, size: uint32(s.PushSize)})
	}
	if err := check("vkCreatePipelineLayout", call(d.fn.CreatePipelineLayout, d.handle, uintptr(unsafe.Pointer(pli)), 0, uintptr(unsafe.Pointer(&k.layout)))); err != nil {
		return err
	}
	stage := vkPipelineShaderStageCreateInfo{sType: stPipelineShaderStageCreateInfo, stage: shaderStageCompute, module: module, pName: unsafe.Pointer(cstr("main"))}
	if len(s.Spec) > 0 {
		entries := make([]vkSpecializationMapEntry, len(s.Spec))
		for i := range entries {
			entries[i] = vkSpecializationMapEntry{constantID: uint32(i), offset: uint32(4 * i), size: 4}
		}
		data := append([]uint32(nil), s.Spec...)
		stage.pSpecializationInfo = unsafe.Pointer(&vkSpecializationInfo{mapEntryCount: uint32(len(entries)), pMapEntries: unsafe.Pointer(&entries[0]),
			dataSize: uintptr(4 * len(data)), pData: unsafe.Pointer(&data[0])})
	}
	cpi := &vkComputePipelineCreateInfo{sType: stComputePipelineCreateInfo, stage: stage, layout: k.layout, basePipelineIndex: -1}
	return check("vkCreateComputePipelines", call(d.fn.CreateComputePipelines, d.handle, 0, 1, uintptr(unsafe.Pointer(cpi)), 0, uintptr(unsafe.Pointer(&k.pipeline))))
}

// destroy frees whatever of k was created.
func (k *kernelImpl) destroy(d *deviceImpl) {
	if k.pipeline != 0 {
		call(d.fn.DestroyPipeline, d.handle, uintptr(k.pipeline), 0)
	}
	if k.layout != 0 {
		call(d.fn.DestroyPipelineLayout, d.handle, uintptr(k.layout), 0)
	}
	if k.setLayout != 0 {
		call(d.fn.DestroyDescriptorSetLayout, d.handle, uintptr(k.setLayout), 0)
	}
	*k = kernelImpl{}
}

// descriptorSets allocates from a new pool one descriptor set per dispatch
// that binds buffers and points it at the dispatch's buffers; sets[i] is
// op i's set. The caller destroys the pool (0 when no op binds).
func (d *deviceImpl) descriptorSets(ops []op) (pool uint64, sets []uint64, err error) {
	var layouts []uint64
	var owners []int
	nbind := 0
	for i := range ops {
		if o := &ops[i]; o.kind == opDispatch && o.kernel.bindings > 0 {
			layouts = append(layouts, o.kernel.impl.setLayout)
			owners = append(owners, i)
			nbind += o.kernel.bindings
		}
	}
	sets = make([]uint64, len(ops))
	if len(layouts) == 0 {
		return 0, sets, nil
	}
	size := &vkDescriptorPoolSize{type_: descriptorStorageBuffer, descriptorCount: uint32(nbind)}
	dpi := &vkDescriptorPoolCreateInfo{sType: stDescriptorPoolCreateInfo, maxSets: uint32(len(layouts)), poolSizeCount: 1, pPoolSizes: unsafe.Pointer(size)}
	if err := check("vkCreateDescriptorPool", call(d.fn.CreateDescriptorPool, d.handle, uintptr(unsafe.Pointer(dpi)), 0, uintptr(unsafe.Pointer(&pool)))); err != nil {
		return 0, nil, err
	}
	d.pools++
	got := make([]uint64, len(layouts))
	dai := &vkDescriptorSetAllocateInfo{sType: stDescriptorSetAllocateInfo, descriptorPool: pool, descriptorSetCount: uint32(len(layouts)), pSetLayouts: unsafe.Pointer(&layouts[0])}
	if err := check("vkAllocateDescriptorSets", call(d.fn.AllocateDescriptorSets, d.handle, uintptr(unsafe.Pointer(dai)), uintptr(unsafe.Pointer(&got[0])))); err != nil {
		return pool, nil, err
	}
	infos := make([]vkDescriptorBufferInfo, 0, nbind)
	writes := make([]vkWriteDescriptorSet, 0, nbind)
	for j, i := range owners {
		sets[i] = got[j]
		for b, buf := range ops[i].bufs {
			infos = append(infos, vkDescriptorBufferInfo{buffer: buf.impl.buf, range_: wholeSize})
			writes = append(writes, vkWriteDescriptorSet{sType: stWriteDescriptorSet, dstSet: got[j], dstBinding: uint32(b), descriptorCount: 1,
				descriptorType: descriptorStorageBuffer, pBufferInfo: unsafe.Pointer(&infos[len(infos)-1])})
		}
	}
	call(d.fn.UpdateDescriptorSets, d.handle, uintptr(len(writes)), uintptr(unsafe.Pointer(&writes[0])), 0, 0)
	return pool, sets, nil
}

// run records ops into the command buffer (a barrier between consecutive
// commands), submits them and waits; timed brackets them with timestamps.
func (d *deviceImpl) run(_ *Device, ops []op, timed bool) (time.Duration, error) {
	pool, sets, err := d.descriptorSets(ops)
	if pool != 0 {
		defer func() {
			call(d.fn.DestroyDescriptorPool, d.handle, uintptr(pool), 0)
			d.pools--
		}()
	}
	if err != nil {
		return 0, err
	}
	stamps := timed && d.queryPool != 0
	start := time.Now()
	err = d.submit(func(cb uintptr) {
		if stamps {
			call(d.fn.CmdResetQueryPool, cb, uintptr(d.queryPool), 0, 2)
			call(d.fn.CmdWriteTimestamp, cb, stageTopOfPipe, uintptr(d.queryPool), 0)
		}
		for i := range ops {
			if i > 0 {
				d.deviceBarrier()
			}
			d.record(cb, &ops[i], sets[i])
		}
		if stamps {
			call(d.fn.CmdWriteTimestamp, cb, stageBottomOfPipe, uintptr(d.queryPool), 1)
		}
	})
	wall := time.Since(start)
	if err != nil || !stamps {
		return wall, err
	}
	ts := make([]uint64, 2)
	const results64Wait = 0x1 | 0x2 // VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT
	if err := check("vkGetQueryPoolResults", call(d.fn.GetQueryPoolResults, d.handle, uintptr(d.queryPool), 0, 2, 16, uintptr(unsafe.Pointer(&ts[0])), 8, results64Wait)); err != nil {
		return wall, err
	}
	ticks := (ts[1] - ts[0]) & d.tsMask
	return time.Duration(float64(ticks) * float64(d.phys.info.TimestampPeriod)), nil
}

// record records one op.
func (d *deviceImpl) record(cb uintptr, o *op, set uint64) {
	switch o.kind {
	case opDispatch:
		k := &o.kernel.impl
		call(d.fn.CmdBindPipeline, cb, bindPointCompute, uintptr(k.pipeline))
		if set != 0 {
			sets := []uint64{set}
			call(d.fn.CmdBindDescriptorSets, cb, bindPointCompute, uintptr(k.layout), 0, 1, uintptr(unsafe.Pointer(&sets[0])), 0, 0)
		}
		if len(o.push) > 0 {
			call(d.fn.CmdPushConstants, cb, uintptr(k.layout), shaderStageCompute, 0, uintptr(len(o.push)), uintptr(unsafe.Pointer(&o.push[0])))
		}
		call(d.fn.CmdDispatch, cb, uintptr(o.groups[0]), uintptr(o.groups[1]), uintptr(o.groups[2]))
	case opFill:
		call(d.fn.CmdFillBuffer, cb, uintptr(o.bufs[0].impl.buf), uintptr(o.off), uintptr(o.size), uintptr(o.value))
	case opCopy:
		region := []vkBufferCopy{{srcOffset: uint64(o.srcOff), dstOffset: uint64(o.off), size: uint64(o.size)}}
		call(d.fn.CmdCopyBuffer, cb, uintptr(o.bufs[1].impl.buf), uintptr(o.bufs[0].impl.buf), 1, uintptr(unsafe.Pointer(&region[0])))
	}
}
