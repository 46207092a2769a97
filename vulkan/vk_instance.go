//go:build vulkan

package vulkan

import (
	"fmt"
	"slices"
	"sync"
	"unsafe"
)

// Structure types, flags and limits of vulkan_core.h used here.
const (
	stApplicationInfo                 = 0
	stInstanceCreateInfo              = 1
	stDeviceQueueCreateInfo           = 2
	stDeviceCreateInfo                = 3
	stSubmitInfo                      = 4
	stMemoryAllocateInfo              = 5
	stFenceCreateInfo                 = 8
	stQueryPoolCreateInfo             = 11
	stBufferCreateInfo                = 12
	stShaderModuleCreateInfo          = 16
	stPipelineShaderStageCreateInfo   = 18
	stComputePipelineCreateInfo       = 29
	stPipelineLayoutCreateInfo        = 30
	stDescriptorSetLayoutCreateInfo   = 32
	stDescriptorPoolCreateInfo        = 33
	stDescriptorSetAllocateInfo       = 34
	stWriteDescriptorSet              = 35
	stCommandPoolCreateInfo           = 39
	stCommandBufferAllocateInfo       = 40
	stCommandBufferBeginInfo          = 42
	stMemoryBarrier                   = 46
	stPhysicalDeviceVulkan11Features  = 49
	stPhysicalDeviceVulkan11Props     = 50
	stPhysicalDeviceVulkan12Features  = 51
	stPhysicalDeviceVulkan12Props     = 52
	stPhysicalDeviceFeatures2         = 1000059000
	stPhysicalDeviceProperties2       = 1000059001
	stCoopMatrixFeaturesKHR           = 1000506000
	stCoopMatrixPropertiesKHR         = 1000506001
	stCoopMatrixFeaturesNV            = 1000249000
	stCoopMatrixPropertiesNV          = 1000249001
	instanceCreateEnumeratePortablity = 0x1 // VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR

	queueCompute = 0x2 // VK_QUEUE_COMPUTE_BIT

	memDeviceLocal  = 0x1 // VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
	memHostVisible  = 0x2
	memHostCoherent = 0x4
	heapDeviceLocal = 0x1 // VK_MEMORY_HEAP_DEVICE_LOCAL_BIT

	extPortabilityEnumeration = "VK_KHR_portability_enumeration"
	extPortabilitySubset      = "VK_KHR_portability_subset"
	extCooperativeMatrix      = "VK_KHR_cooperative_matrix"
	extCooperativeMatrixNV    = "VK_NV_cooperative_matrix"
)

func makeVersion(major, minor, patch uint32) uint32 { return major<<22 | minor<<12 | patch }

// minAPI is the oldest Vulkan densitykv runs on: 1.2 makes float controls,
// the driver properties and 8/16-bit storage core.
var minAPI = makeVersion(1, 2, 0)

// instanceFuncs are the instance-level functions used.
type instanceFuncs struct {
	EnumeratePhysicalDevices                        uintptr
	GetPhysicalDeviceProperties                     uintptr
	GetPhysicalDeviceProperties2                    uintptr
	GetPhysicalDeviceFeatures2                      uintptr
	GetPhysicalDeviceMemoryProperties               uintptr
	GetPhysicalDeviceQueueFamilyProperties          uintptr
	EnumerateDeviceExtensionProperties              uintptr
	CreateDevice                                    uintptr
	GetDeviceProcAddr                               uintptr
	GetPhysicalDeviceCooperativeMatrixPropertiesKHR uintptr `vk:"optional"`
	GetPhysicalDeviceCooperativeMatrixPropertiesNV  uintptr `vk:"optional"`
}

// physical is a physical device as enumerated.
type physical struct {
	handle        uintptr
	info          DeviceInfo
	extensions    []string
	queueFamily   int // the compute queue family used; -1 when none
	timestamps    bool
	timestampBits uint32                     // timestampValidBits of the queue family
	feat          *vkPhysicalDeviceFeatures2 // features (chain: 1.1, 1.2), nil before 1.2
	feat11        *vkPhysicalDeviceVulkan11Features
	feat12        *vkPhysicalDeviceVulkan12Features
	coop          *vkPhysicalDeviceCooperativeMatrixFeaturesKHR // nil without VK_KHR_cooperative_matrix
	coopNV        *vkPhysicalDeviceCooperativeMatrixFeaturesNV  // nil without VK_NV_cooperative_matrix
	mem           vkPhysicalDeviceMemoryProperties
}

// instance is the process's Vulkan instance, created on first use and kept.
type instance struct {
	loader  *loader
	handle  uintptr
	fn      instanceFuncs
	devices []*physical
}

var theInstance struct {
	once sync.Once
	v    *instance
	err  error
}

func getInstance() (*instance, error) {
	theInstance.once.Do(func() { theInstance.v, theInstance.err = newInstance() })
	return theInstance.v, theInstance.err
}

func enumerate() ([]DeviceInfo, error) {
	in, err := getInstance()
	if err != nil {
		return nil, err
	}
	var out []DeviceInfo
	for _, p := range in.devices {
		out = append(out, p.info)
	}
	return out, nil
}

func newInstance() (*instance, error) {
	l, err := openLoader()
	if err != nil {
		return nil, err
	}
	ver := uint32(makeVersion(1, 0, 0))
	if f := l.instanceProc(0, "vkEnumerateInstanceVersion"); f != 0 {
		if err := check("vkEnumerateInstanceVersion", call(f, uintptr(unsafe.Pointer(&ver)))); err != nil {
			return nil, err
		}
	}
	if ver < minAPI {
		return nil, fmt.Errorf("vulkan: the loader %s supports Vulkan %s; densitykv needs 1.2: %w", l.name, versionString(ver), ErrNoLoader)
	}
	exts, err := enumerateNames(func(count *uint32, props unsafe.Pointer) int32 {
		return call(l.instanceProc(0, "vkEnumerateInstanceExtensionProperties"), 0, uintptr(unsafe.Pointer(count)), uintptr(props))
	}, "vkEnumerateInstanceExtensionProperties")
	if err != nil {
		return nil, err
	}
	app := &vkApplicationInfo{sType: stApplicationInfo, pApplicationName: unsafe.Pointer(cstr("densitykv")), pEngineName: unsafe.Pointer(cstr("densitykv")),
		apiVersion: min(ver&^0xfff, makeVersion(1, 3, 0))}
	ci := &vkInstanceCreateInfo{sType: stInstanceCreateInfo, pApplicationInfo: unsafe.Pointer(app)}
	var enabled []unsafe.Pointer
	if slices.Contains(exts, extPortabilityEnumeration) {
		enabled = append(enabled, unsafe.Pointer(cstr(extPortabilityEnumeration)))
		ci.flags |= instanceCreateEnumeratePortablity
	}
	if len(enabled) > 0 {
		ci.enabledExtensionCount = uint32(len(enabled))
		ci.ppEnabledExtensionNames = unsafe.Pointer(&enabled[0])
	}
	in := &instance{loader: l}
	create := l.instanceProc(0, "vkCreateInstance")
	if create == 0 {
		return nil, fmt.Errorf("vulkan: the loader %s has no vkCreateInstance: %w", l.name, ErrNoLoader)
	}
	if err := check("vkCreateInstance", call(create, uintptr(unsafe.Pointer(ci)), 0, uintptr(unsafe.Pointer(&in.handle)))); err != nil {
		if e, ok := err.(*ResultError); ok && e.Result == -9 { // VK_ERROR_INCOMPATIBLE_DRIVER: no driver
			return nil, fmt.Errorf("%w (%v)", ErrNoDevice, err)
		}
		return nil, err
	}
	if err := loadProcs(&in.fn, func(name string) uintptr { return l.instanceProc(in.handle, name) }); err != nil {
		return nil, err
	}
	var n uint32
	if err := check("vkEnumeratePhysicalDevices", call(in.fn.EnumeratePhysicalDevices, in.handle, uintptr(unsafe.Pointer(&n)), 0)); err != nil {
		return nil, err
	}
	if n == 0 {
		return in, nil
	}
	handles := make([]uintptr, n)
	if err := check("vkEnumeratePhysicalDevices", call(in.fn.EnumeratePhysicalDevices, in.handle, uintptr(unsafe.Pointer(&n)), uintptr(unsafe.Pointer(&handles[0])))); err != nil {
		return nil, err
	}
	for i, h := range handles[:n] {
		p, err := in.describe(i, h)
		if err != nil {
			return nil, fmt.Errorf("vulkan: device %d: %w", i, err)
		}
		in.devices = append(in.devices, p)
	}
	return in, nil
}

// enumerateNames runs a vkEnumerate*ExtensionProperties call twice (count,
// then data) and returns the extension names.
func enumerateNames(f func(count *uint32, props unsafe.Pointer) int32, fn string) ([]string, error) {
	count := new(uint32)
	if err := check(fn, f(count, nil)); err != nil {
		return nil, err
	}
	if *count == 0 {
		return nil, nil
	}
	props := make([]vkExtensionProperties, *count)
	if r := f(count, unsafe.Pointer(&props[0])); r != 0 && r != 5 { // VK_INCOMPLETE: fewer than counted
		return nil, check(fn, r)
	}
	var names []string
	for _, p := range props[:*count] {
		names = append(names, cString(p.extensionName[:]))
	}
	return names, nil
}

// describe queries physical device h.
func (in *instance) describe(index int, h uintptr) (*physical, error) {
	p := &physical{handle: h, queueFamily: -1}
	props := &vkPhysicalDeviceProperties{}
	call(in.fn.GetPhysicalDeviceProperties, h, uintptr(unsafe.Pointer(props)))
	lim := &props.limits
	info := &p.info
	*info = DeviceInfo{Index: index, Name: cString(props.deviceName[:]), Type: deviceTypeName(props.deviceType),
		VendorID: props.vendorID, DeviceID: props.deviceID, APIVersion: versionString(props.apiVersion),
		MaxWorkgroupInvocations: lim.maxComputeWorkGroupInvocations, MaxWorkgroupSize: lim.maxComputeWorkGroupSize,
		MaxWorkgroupCount: lim.maxComputeWorkGroupCount, MaxSharedMemory: lim.maxComputeSharedMemorySize,
		MaxPushConstants: lim.maxPushConstantsSize, MaxStorageBufferRange: lim.maxStorageBufferRange}
	exts, err := enumerateNames(func(count *uint32, data unsafe.Pointer) int32 {
		return call(in.fn.EnumerateDeviceExtensionProperties, h, 0, uintptr(unsafe.Pointer(count)), uintptr(data))
	}, "vkEnumerateDeviceExtensionProperties")
	if err != nil {
		return nil, err
	}
	p.extensions = exts
	call(in.fn.GetPhysicalDeviceMemoryProperties, h, uintptr(unsafe.Pointer(&p.mem)))
	for _, hp := range p.mem.memoryHeaps[:p.mem.memoryHeapCount] {
		info.Heaps = append(info.Heaps, Heap{Size: hp.size, DeviceLocal: hp.flags&heapDeviceLocal != 0})
	}
	var nq uint32
	call(in.fn.GetPhysicalDeviceQueueFamilyProperties, h, uintptr(unsafe.Pointer(&nq)), 0)
	if nq > 0 {
		qs := make([]vkQueueFamilyProperties, nq)
		call(in.fn.GetPhysicalDeviceQueueFamilyProperties, h, uintptr(unsafe.Pointer(&nq)), uintptr(unsafe.Pointer(&qs[0])))
		for i, q := range qs[:nq] {
			if q.queueFlags&queueCompute != 0 && q.queueCount > 0 {
				p.queueFamily = i
				p.timestamps = q.timestampValidBits > 0 && props.limits.timestampPeriod > 0
				p.timestampBits = q.timestampValidBits
				break
			}
		}
	}
	if p.timestamps {
		info.TimestampPeriod = props.limits.timestampPeriod
	}
	switch {
	case props.apiVersion < minAPI:
		info.Unsupported = fmt.Sprintf("Vulkan %s; densitykv needs 1.2 (float controls)", info.APIVersion)
		return p, nil
	case p.queueFamily < 0:
		info.Unsupported = "no compute queue"
	}
	in.describe12(p)
	if slices.Contains(exts, extCooperativeMatrix) {
		shapes, err := in.coopMatrixShapes(h)
		if err != nil {
			return nil, err
		}
		info.CooperativeMatrix = shapes
	}
	if p.coopNV != nil && p.coopNV.cooperativeMatrix != 0 {
		shapes, err := in.coopMatrixShapesNV(h)
		if err != nil {
			return nil, err
		}
		info.CooperativeMatrixNV = shapes
	}
	return p, nil
}

// describe12 reads the Vulkan 1.1 and 1.2 properties and features.
func (in *instance) describe12(p *physical) {
	info := &p.info
	v12 := &vkPhysicalDeviceVulkan12Properties{sType: stPhysicalDeviceVulkan12Props}
	v11 := &vkPhysicalDeviceVulkan11Properties{sType: stPhysicalDeviceVulkan11Props, pNext: unsafe.Pointer(v12)}
	props2 := &vkPhysicalDeviceProperties2{sType: stPhysicalDeviceProperties2, pNext: unsafe.Pointer(v11)}
	call(in.fn.GetPhysicalDeviceProperties2, p.handle, uintptr(unsafe.Pointer(props2)))
	info.DriverName = cString(v12.driverName[:])
	info.DriverInfo = cString(v12.driverInfo[:])
	info.SubgroupSize = v11.subgroupSize
	info.MaxAllocation = v11.maxMemoryAllocationSize
	info.DenormPreserve32 = v12.shaderDenormPreserveFloat32 != 0
	info.DenormFlushToZero32 = v12.shaderDenormFlushToZeroFloat32 != 0
	info.RoundingModeRTE32 = v12.shaderRoundingModeRTEFloat32 != 0
	info.SignedZeroInfNanPreserve32 = v12.shaderSignedZeroInfNanPreserveFloat32 != 0
	info.DenormPreserve64 = v12.shaderDenormPreserveFloat64 != 0
	info.RoundingModeRTE64 = v12.shaderRoundingModeRTEFloat64 != 0
	info.SignedZeroInfNanPreserve64 = v12.shaderSignedZeroInfNanPreserveFloat64 != 0

	p.feat12 = &vkPhysicalDeviceVulkan12Features{sType: stPhysicalDeviceVulkan12Features}
	if slices.Contains(p.extensions, extCooperativeMatrix) {
		p.coop = &vkPhysicalDeviceCooperativeMatrixFeaturesKHR{sType: stCoopMatrixFeaturesKHR}
		p.feat12.pNext = unsafe.Pointer(p.coop)
	}
	if slices.Contains(p.extensions, extCooperativeMatrixNV) {
		p.coopNV = &vkPhysicalDeviceCooperativeMatrixFeaturesNV{sType: stCoopMatrixFeaturesNV, pNext: p.feat12.pNext}
		p.feat12.pNext = unsafe.Pointer(p.coopNV)
	}
	p.feat11 = &vkPhysicalDeviceVulkan11Features{sType: stPhysicalDeviceVulkan11Features, pNext: unsafe.Pointer(p.feat12)}
	p.feat = &vkPhysicalDeviceFeatures2{sType: stPhysicalDeviceFeatures2, pNext: unsafe.Pointer(p.feat11)}
	call(in.fn.GetPhysicalDeviceFeatures2, p.handle, uintptr(unsafe.Pointer(p.feat)))
	f := &p.feat.features
	info.Float64 = f.shaderFloat64 != 0
	info.Int64 = f.shaderInt64 != 0
	info.Int16 = f.shaderInt16 != 0
	info.Float16 = p.feat12.shaderFloat16 != 0
	info.Int8 = p.feat12.shaderInt8 != 0
	info.Storage16Bit = p.feat11.storageBuffer16BitAccess != 0
	info.Storage8Bit = p.feat12.storageBuffer8BitAccess != 0
	info.MemoryModel = p.feat12.vulkanMemoryModel != 0
}

// coopMatrixShapes lists the VK_KHR_cooperative_matrix shapes of h.
func (in *instance) coopMatrixShapes(h uintptr) ([]CoopMatrixShape, error) {
	f := in.fn.GetPhysicalDeviceCooperativeMatrixPropertiesKHR
	if f == 0 {
		return nil, nil
	}
	const fn = "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"
	var n uint32
	if err := check(fn, call(f, h, uintptr(unsafe.Pointer(&n)), 0)); err != nil || n == 0 {
		return nil, err
	}
	props := make([]vkCooperativeMatrixPropertiesKHR, n)
	for i := range props {
		props[i].sType = stCoopMatrixPropertiesKHR
	}
	if r := call(f, h, uintptr(unsafe.Pointer(&n)), uintptr(unsafe.Pointer(&props[0]))); r != 0 && r != 5 {
		return nil, check(fn, r)
	}
	var out []CoopMatrixShape
	for _, p := range props[:n] {
		out = append(out, CoopMatrixShape{M: p.MSize, N: p.NSize, K: p.KSize,
			A: componentName(p.AType), B: componentName(p.BType), C: componentName(p.CType), Result: componentName(p.ResultType),
			Saturating: p.saturatingAccumulation != 0, Scope: scopeName(p.scope)})
	}
	return out, nil
}

// coopMatrixShapesNV lists the VK_NV_cooperative_matrix shapes of h
// (VkCooperativeMatrixPropertiesNV: its component types and scopes have
// the KHR values; it has no saturating accumulation).
func (in *instance) coopMatrixShapesNV(h uintptr) ([]CoopMatrixShape, error) {
	f := in.fn.GetPhysicalDeviceCooperativeMatrixPropertiesNV
	if f == 0 {
		return nil, nil
	}
	const fn = "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV"
	var n uint32
	if err := check(fn, call(f, h, uintptr(unsafe.Pointer(&n)), 0)); err != nil || n == 0 {
		return nil, err
	}
	props := make([]vkCooperativeMatrixPropertiesNV, n)
	for i := range props {
		props[i].sType = stCoopMatrixPropertiesNV
	}
	if r := call(f, h, uintptr(unsafe.Pointer(&n)), uintptr(unsafe.Pointer(&props[0]))); r != 0 && r != 5 {
		return nil, check(fn, r)
	}
	var out []CoopMatrixShape
	for _, p := range props[:n] {
		out = append(out, CoopMatrixShape{M: p.MSize, N: p.NSize, K: p.KSize,
			A: componentName(p.AType), B: componentName(p.BType), C: componentName(p.CType), Result: componentName(p.DType),
			Scope: scopeName(p.scope)})
	}
	return out, nil
}

// componentName names a VkComponentTypeKHR.
func componentName(t uint32) string {
	names := []string{"float16", "float32", "float64", "sint8", "sint16", "sint32", "sint64", "uint8", "uint16", "uint32", "uint64"}
	switch {
	case int(t) < len(names):
		return names[t]
	case t == 1000141000:
		return "bfloat16"
	case t == 1000491000:
		return "sint8-packed"
	case t == 1000491001:
		return "uint8-packed"
	case t == 1000491002:
		return "float-e4m3"
	case t == 1000491003:
		return "float-e5m2"
	}
	return fmt.Sprintf("component-%d", t)
}

// scopeName names a VkScopeKHR.
func scopeName(s uint32) string {
	switch s {
	case 1:
		return "device"
	case 2:
		return "workgroup"
	case 3:
		return "subgroup"
	case 5:
		return "queue-family"
	}
	return fmt.Sprintf("scope-%d", s)
}
