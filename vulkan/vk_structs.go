//go:build vulkan

package vulkan

import "unsafe"

// The C structures of vulkan_core.h this package passes, with the same
// layout on 64-bit platforms (field names as in C; pointers as
// unsafe.Pointer so that the Go objects they point to stay alive). The
// layout test checks every size and offset against the numbers a C
// compiler gave for the Vulkan 1.3.239 headers.

// Non-dispatchable handles are 64-bit integers; this package supports
// 64-bit platforms only, where dispatchable handles (pointers) are too.
var _ [unsafe.Sizeof(uintptr(0)) - 8]byte

type vkExtent3D struct {
	width  uint32
	height uint32
	depth  uint32
}

type vkMemoryBarrier struct {
	sType         uint32
	pNext         unsafe.Pointer
	srcAccessMask uint32
	dstAccessMask uint32
}

type vkApplicationInfo struct {
	sType              uint32
	pNext              unsafe.Pointer
	pApplicationName   unsafe.Pointer
	applicationVersion uint32
	pEngineName        unsafe.Pointer
	engineVersion      uint32
	apiVersion         uint32
}

type vkInstanceCreateInfo struct {
	sType                   uint32
	pNext                   unsafe.Pointer
	flags                   uint32
	pApplicationInfo        unsafe.Pointer
	enabledLayerCount       uint32
	ppEnabledLayerNames     unsafe.Pointer
	enabledExtensionCount   uint32
	ppEnabledExtensionNames unsafe.Pointer
}

type vkMemoryHeap struct {
	size  uint64
	flags uint32
}

type vkMemoryType struct {
	propertyFlags uint32
	heapIndex     uint32
}

type vkPhysicalDeviceFeatures struct {
	robustBufferAccess                      uint32
	fullDrawIndexUint32                     uint32
	imageCubeArray                          uint32
	independentBlend                        uint32
	geometryShader                          uint32
	tessellationShader                      uint32
	sampleRateShading                       uint32
	dualSrcBlend                            uint32
	logicOp                                 uint32
	multiDrawIndirect                       uint32
	drawIndirectFirstInstance               uint32
	depthClamp                              uint32
	depthBiasClamp                          uint32
	fillModeNonSolid                        uint32
	depthBounds                             uint32
	wideLines                               uint32
	largePoints                             uint32
	alphaToOne                              uint32
	multiViewport                           uint32
	samplerAnisotropy                       uint32
	textureCompressionETC2                  uint32
	textureCompressionASTC_LDR              uint32
	textureCompressionBC                    uint32
	occlusionQueryPrecise                   uint32
	pipelineStatisticsQuery                 uint32
	vertexPipelineStoresAndAtomics          uint32
	fragmentStoresAndAtomics                uint32
	shaderTessellationAndGeometryPointSize  uint32
	shaderImageGatherExtended               uint32
	shaderStorageImageExtendedFormats       uint32
	shaderStorageImageMultisample           uint32
	shaderStorageImageReadWithoutFormat     uint32
	shaderStorageImageWriteWithoutFormat    uint32
	shaderUniformBufferArrayDynamicIndexing uint32
	shaderSampledImageArrayDynamicIndexing  uint32
	shaderStorageBufferArrayDynamicIndexing uint32
	shaderStorageImageArrayDynamicIndexing  uint32
	shaderClipDistance                      uint32
	shaderCullDistance                      uint32
	shaderFloat64                           uint32
	shaderInt64                             uint32
	shaderInt16                             uint32
	shaderResourceResidency                 uint32
	shaderResourceMinLod                    uint32
	sparseBinding                           uint32
	sparseResidencyBuffer                   uint32
	sparseResidencyImage2D                  uint32
	sparseResidencyImage3D                  uint32
	sparseResidency2Samples                 uint32
	sparseResidency4Samples                 uint32
	sparseResidency8Samples                 uint32
	sparseResidency16Samples                uint32
	sparseResidencyAliased                  uint32
	variableMultisampleRate                 uint32
	inheritedQueries                        uint32
}

type vkPhysicalDeviceLimits struct {
	maxImageDimension1D                             uint32
	maxImageDimension2D                             uint32
	maxImageDimension3D                             uint32
	maxImageDimensionCube                           uint32
	maxImageArrayLayers                             uint32
	maxTexelBufferElements                          uint32
	maxUniformBufferRange                           uint32
	maxStorageBufferRange                           uint32
	maxPushConstantsSize                            uint32
	maxMemoryAllocationCount                        uint32
	maxSamplerAllocationCount                       uint32
	bufferImageGranularity                          uint64
	sparseAddressSpaceSize                          uint64
	maxBoundDescriptorSets                          uint32
	maxPerStageDescriptorSamplers                   uint32
	maxPerStageDescriptorUniformBuffers             uint32
	maxPerStageDescriptorStorageBuffers             uint32
	maxPerStageDescriptorSampledImages              uint32
	maxPerStageDescriptorStorageImages              uint32
	maxPerStageDescriptorInputAttachments           uint32
	maxPerStageResources                            uint32
	maxDescriptorSetSamplers                        uint32
	maxDescriptorSetUniformBuffers                  uint32
	maxDescriptorSetUniformBuffersDynamic           uint32
	maxDescriptorSetStorageBuffers                  uint32
	maxDescriptorSetStorageBuffersDynamic           uint32
	maxDescriptorSetSampledImages                   uint32
	maxDescriptorSetStorageImages                   uint32
	maxDescriptorSetInputAttachments                uint32
	maxVertexInputAttributes                        uint32
	maxVertexInputBindings                          uint32
	maxVertexInputAttributeOffset                   uint32
	maxVertexInputBindingStride                     uint32
	maxVertexOutputComponents                       uint32
	maxTessellationGenerationLevel                  uint32
	maxTessellationPatchSize                        uint32
	maxTessellationControlPerVertexInputComponents  uint32
	maxTessellationControlPerVertexOutputComponents uint32
	maxTessellationControlPerPatchOutputComponents  uint32
	maxTessellationControlTotalOutputComponents     uint32
	maxTessellationEvaluationInputComponents        uint32
	maxTessellationEvaluationOutputComponents       uint32
	maxGeometryShaderInvocations                    uint32
	maxGeometryInputComponents                      uint32
	maxGeometryOutputComponents                     uint32
	maxGeometryOutputVertices                       uint32
	maxGeometryTotalOutputComponents                uint32
	maxFragmentInputComponents                      uint32
	maxFragmentOutputAttachments                    uint32
	maxFragmentDualSrcAttachments                   uint32
	maxFragmentCombinedOutputResources              uint32
	maxComputeSharedMemorySize                      uint32
	maxComputeWorkGroupCount                        [3]uint32
	maxComputeWorkGroupInvocations                  uint32
	maxComputeWorkGroupSize                         [3]uint32
	subPixelPrecisionBits                           uint32
	subTexelPrecisionBits                           uint32
	mipmapPrecisionBits                             uint32
	maxDrawIndexedIndexValue                        uint32
	maxDrawIndirectCount                            uint32
	maxSamplerLodBias                               float32
	maxSamplerAnisotropy                            float32
	maxViewports                                    uint32
	maxViewportDimensions                           [2]uint32
	viewportBoundsRange                             [2]float32
	viewportSubPixelBits                            uint32
	minMemoryMapAlignment                           uintptr
	minTexelBufferOffsetAlignment                   uint64
	minUniformBufferOffsetAlignment                 uint64
	minStorageBufferOffsetAlignment                 uint64
	minTexelOffset                                  int32
	maxTexelOffset                                  uint32
	minTexelGatherOffset                            int32
	maxTexelGatherOffset                            uint32
	minInterpolationOffset                          float32
	maxInterpolationOffset                          float32
	subPixelInterpolationOffsetBits                 uint32
	maxFramebufferWidth                             uint32
	maxFramebufferHeight                            uint32
	maxFramebufferLayers                            uint32
	framebufferColorSampleCounts                    uint32
	framebufferDepthSampleCounts                    uint32
	framebufferStencilSampleCounts                  uint32
	framebufferNoAttachmentsSampleCounts            uint32
	maxColorAttachments                             uint32
	sampledImageColorSampleCounts                   uint32
	sampledImageIntegerSampleCounts                 uint32
	sampledImageDepthSampleCounts                   uint32
	sampledImageStencilSampleCounts                 uint32
	storageImageSampleCounts                        uint32
	maxSampleMaskWords                              uint32
	timestampComputeAndGraphics                     uint32
	timestampPeriod                                 float32
	maxClipDistances                                uint32
	maxCullDistances                                uint32
	maxCombinedClipAndCullDistances                 uint32
	discreteQueuePriorities                         uint32
	pointSizeRange                                  [2]float32
	lineWidthRange                                  [2]float32
	pointSizeGranularity                            float32
	lineWidthGranularity                            float32
	strictLines                                     uint32
	standardSampleLocations                         uint32
	optimalBufferCopyOffsetAlignment                uint64
	optimalBufferCopyRowPitchAlignment              uint64
	nonCoherentAtomSize                             uint64
}

type vkPhysicalDeviceMemoryProperties struct {
	memoryTypeCount uint32
	memoryTypes     [32]vkMemoryType
	memoryHeapCount uint32
	memoryHeaps     [16]vkMemoryHeap
}

type vkPhysicalDeviceSparseProperties struct {
	residencyStandard2DBlockShape            uint32
	residencyStandard2DMultisampleBlockShape uint32
	residencyStandard3DBlockShape            uint32
	residencyAlignedMipSize                  uint32
	residencyNonResidentStrict               uint32
}

type vkPhysicalDeviceProperties struct {
	apiVersion        uint32
	driverVersion     uint32
	vendorID          uint32
	deviceID          uint32
	deviceType        uint32
	deviceName        [256]byte
	pipelineCacheUUID [16]uint8
	limits            vkPhysicalDeviceLimits
	sparseProperties  vkPhysicalDeviceSparseProperties
}

type vkQueueFamilyProperties struct {
	queueFlags                  uint32
	queueCount                  uint32
	timestampValidBits          uint32
	minImageTransferGranularity vkExtent3D
}

type vkDeviceQueueCreateInfo struct {
	sType            uint32
	pNext            unsafe.Pointer
	flags            uint32
	queueFamilyIndex uint32
	queueCount       uint32
	pQueuePriorities unsafe.Pointer
}

type vkDeviceCreateInfo struct {
	sType                   uint32
	pNext                   unsafe.Pointer
	flags                   uint32
	queueCreateInfoCount    uint32
	pQueueCreateInfos       unsafe.Pointer
	enabledLayerCount       uint32
	ppEnabledLayerNames     unsafe.Pointer
	enabledExtensionCount   uint32
	ppEnabledExtensionNames unsafe.Pointer
	pEnabledFeatures        unsafe.Pointer
}

type vkExtensionProperties struct {
	extensionName [256]byte
	specVersion   uint32
}

type vkSubmitInfo struct {
	sType                uint32
	pNext                unsafe.Pointer
	waitSemaphoreCount   uint32
	pWaitSemaphores      unsafe.Pointer
	pWaitDstStageMask    unsafe.Pointer
	commandBufferCount   uint32
	pCommandBuffers      unsafe.Pointer
	signalSemaphoreCount uint32
	pSignalSemaphores    unsafe.Pointer
}

type vkMemoryAllocateInfo struct {
	sType           uint32
	pNext           unsafe.Pointer
	allocationSize  uint64
	memoryTypeIndex uint32
}

type vkMemoryRequirements struct {
	size           uint64
	alignment      uint64
	memoryTypeBits uint32
}

type vkFenceCreateInfo struct {
	sType uint32
	pNext unsafe.Pointer
	flags uint32
}

type vkQueryPoolCreateInfo struct {
	sType              uint32
	pNext              unsafe.Pointer
	flags              uint32
	queryType          uint32
	queryCount         uint32
	pipelineStatistics uint32
}

type vkBufferCreateInfo struct {
	sType                 uint32
	pNext                 unsafe.Pointer
	flags                 uint32
	size                  uint64
	usage                 uint32
	sharingMode           uint32
	queueFamilyIndexCount uint32
	pQueueFamilyIndices   unsafe.Pointer
}

type vkShaderModuleCreateInfo struct {
	sType    uint32
	pNext    unsafe.Pointer
	flags    uint32
	codeSize uintptr
	pCode    unsafe.Pointer
}

type vkSpecializationMapEntry struct {
	constantID uint32
	offset     uint32
	size       uintptr
}

type vkSpecializationInfo struct {
	mapEntryCount uint32
	pMapEntries   unsafe.Pointer
	dataSize      uintptr
	pData         unsafe.Pointer
}

type vkPipelineShaderStageCreateInfo struct {
	sType               uint32
	pNext               unsafe.Pointer
	flags               uint32
	stage               uint32
	module              uint64
	pName               unsafe.Pointer
	pSpecializationInfo unsafe.Pointer
}

type vkComputePipelineCreateInfo struct {
	sType              uint32
	pNext              unsafe.Pointer
	flags              uint32
	stage              vkPipelineShaderStageCreateInfo
	layout             uint64
	basePipelineHandle uint64
	basePipelineIndex  int32
}

type vkPushConstantRange struct {
	stageFlags uint32
	offset     uint32
	size       uint32
}

type vkPipelineLayoutCreateInfo struct {
	sType                  uint32
	pNext                  unsafe.Pointer
	flags                  uint32
	setLayoutCount         uint32
	pSetLayouts            unsafe.Pointer
	pushConstantRangeCount uint32
	pPushConstantRanges    unsafe.Pointer
}

type vkDescriptorBufferInfo struct {
	buffer uint64
	offset uint64
	range_ uint64
}

type vkDescriptorPoolSize struct {
	type_           uint32
	descriptorCount uint32
}

type vkDescriptorPoolCreateInfo struct {
	sType         uint32
	pNext         unsafe.Pointer
	flags         uint32
	maxSets       uint32
	poolSizeCount uint32
	pPoolSizes    unsafe.Pointer
}

type vkDescriptorSetAllocateInfo struct {
	sType              uint32
	pNext              unsafe.Pointer
	descriptorPool     uint64
	descriptorSetCount uint32
	pSetLayouts        unsafe.Pointer
}

type vkDescriptorSetLayoutBinding struct {
	binding            uint32
	descriptorType     uint32
	descriptorCount    uint32
	stageFlags         uint32
	pImmutableSamplers unsafe.Pointer
}

type vkDescriptorSetLayoutCreateInfo struct {
	sType        uint32
	pNext        unsafe.Pointer
	flags        uint32
	bindingCount uint32
	pBindings    unsafe.Pointer
}

type vkWriteDescriptorSet struct {
	sType            uint32
	pNext            unsafe.Pointer
	dstSet           uint64
	dstBinding       uint32
	dstArrayElement  uint32
	descriptorCount  uint32
	descriptorType   uint32
	pImageInfo       unsafe.Pointer
	pBufferInfo      unsafe.Pointer
	pTexelBufferView unsafe.Pointer
}

type vkCommandPoolCreateInfo struct {
	sType            uint32
	pNext            unsafe.Pointer
	flags            uint32
	queueFamilyIndex uint32
}

type vkCommandBufferAllocateInfo struct {
	sType              uint32
	pNext              unsafe.Pointer
	commandPool        uint64
	level              uint32
	commandBufferCount uint32
}

type vkCommandBufferBeginInfo struct {
	sType            uint32
	pNext            unsafe.Pointer
	flags            uint32
	pInheritanceInfo unsafe.Pointer
}

type vkBufferCopy struct {
	srcOffset uint64
	dstOffset uint64
	size      uint64
}

type vkPhysicalDeviceFeatures2 struct {
	sType    uint32
	pNext    unsafe.Pointer
	features vkPhysicalDeviceFeatures
}

type vkPhysicalDeviceProperties2 struct {
	sType      uint32
	pNext      unsafe.Pointer
	properties vkPhysicalDeviceProperties
}

type vkPhysicalDeviceVulkan11Features struct {
	sType                              uint32
	pNext                              unsafe.Pointer
	storageBuffer16BitAccess           uint32
	uniformAndStorageBuffer16BitAccess uint32
	storagePushConstant16              uint32
	storageInputOutput16               uint32
	multiview                          uint32
	multiviewGeometryShader            uint32
	multiviewTessellationShader        uint32
	variablePointersStorageBuffer      uint32
	variablePointers                   uint32
	protectedMemory                    uint32
	samplerYcbcrConversion             uint32
	shaderDrawParameters               uint32
}

type vkPhysicalDeviceVulkan11Properties struct {
	sType                             uint32
	pNext                             unsafe.Pointer
	deviceUUID                        [16]uint8
	driverUUID                        [16]uint8
	deviceLUID                        [8]uint8
	deviceNodeMask                    uint32
	deviceLUIDValid                   uint32
	subgroupSize                      uint32
	subgroupSupportedStages           uint32
	subgroupSupportedOperations       uint32
	subgroupQuadOperationsInAllStages uint32
	pointClippingBehavior             uint32
	maxMultiviewViewCount             uint32
	maxMultiviewInstanceIndex         uint32
	protectedNoFault                  uint32
	maxPerSetDescriptors              uint32
	maxMemoryAllocationSize           uint64
}

type vkPhysicalDeviceVulkan12Features struct {
	sType                                              uint32
	pNext                                              unsafe.Pointer
	samplerMirrorClampToEdge                           uint32
	drawIndirectCount                                  uint32
	storageBuffer8BitAccess                            uint32
	uniformAndStorageBuffer8BitAccess                  uint32
	storagePushConstant8                               uint32
	shaderBufferInt64Atomics                           uint32
	shaderSharedInt64Atomics                           uint32
	shaderFloat16                                      uint32
	shaderInt8                                         uint32
	descriptorIndexing                                 uint32
	shaderInputAttachmentArrayDynamicIndexing          uint32
	shaderUniformTexelBufferArrayDynamicIndexing       uint32
	shaderStorageTexelBufferArrayDynamicIndexing       uint32
	shaderUniformBufferArrayNonUniformIndexing         uint32
	shaderSampledImageArrayNonUniformIndexing          uint32
	shaderStorageBufferArrayNonUniformIndexing         uint32
	shaderStorageImageArrayNonUniformIndexing          uint32
	shaderInputAttachmentArrayNonUniformIndexing       uint32
	shaderUniformTexelBufferArrayNonUniformIndexing    uint32
	shaderStorageTexelBufferArrayNonUniformIndexing    uint32
	descriptorBindingUniformBufferUpdateAfterBind      uint32
	descriptorBindingSampledImageUpdateAfterBind       uint32
	descriptorBindingStorageImageUpdateAfterBind       uint32
	descriptorBindingStorageBufferUpdateAfterBind      uint32
	descriptorBindingUniformTexelBufferUpdateAfterBind uint32
	descriptorBindingStorageTexelBufferUpdateAfterBind uint32
	descriptorBindingUpdateUnusedWhilePending          uint32
	descriptorBindingPartiallyBound                    uint32
	descriptorBindingVariableDescriptorCount           uint32
	runtimeDescriptorArray                             uint32
	samplerFilterMinmax                                uint32
	scalarBlockLayout                                  uint32
	imagelessFramebuffer                               uint32
	uniformBufferStandardLayout                        uint32
	shaderSubgroupExtendedTypes                        uint32
	separateDepthStencilLayouts                        uint32
	hostQueryReset                                     uint32
	timelineSemaphore                                  uint32
	bufferDeviceAddress                                uint32
	bufferDeviceAddressCaptureReplay                   uint32
	bufferDeviceAddressMultiDevice                     uint32
	vulkanMemoryModel                                  uint32
	vulkanMemoryModelDeviceScope                       uint32
	vulkanMemoryModelAvailabilityVisibilityChains      uint32
	shaderOutputViewportIndex                          uint32
	shaderOutputLayer                                  uint32
	subgroupBroadcastDynamicId                         uint32
}

type vkConformanceVersion struct {
	major    uint8
	minor    uint8
	subminor uint8
	patch    uint8
}

type vkPhysicalDeviceVulkan12Properties struct {
	sType                                                uint32
	pNext                                                unsafe.Pointer
	driverID                                             uint32
	driverName                                           [256]byte
	driverInfo                                           [256]byte
	conformanceVersion                                   vkConformanceVersion
	denormBehaviorIndependence                           uint32
	roundingModeIndependence                             uint32
	shaderSignedZeroInfNanPreserveFloat16                uint32
	shaderSignedZeroInfNanPreserveFloat32                uint32
	shaderSignedZeroInfNanPreserveFloat64                uint32
	shaderDenormPreserveFloat16                          uint32
	shaderDenormPreserveFloat32                          uint32
	shaderDenormPreserveFloat64                          uint32
	shaderDenormFlushToZeroFloat16                       uint32
	shaderDenormFlushToZeroFloat32                       uint32
	shaderDenormFlushToZeroFloat64                       uint32
	shaderRoundingModeRTEFloat16                         uint32
	shaderRoundingModeRTEFloat32                         uint32
	shaderRoundingModeRTEFloat64                         uint32
	shaderRoundingModeRTZFloat16                         uint32
	shaderRoundingModeRTZFloat32                         uint32
	shaderRoundingModeRTZFloat64                         uint32
	maxUpdateAfterBindDescriptorsInAllPools              uint32
	shaderUniformBufferArrayNonUniformIndexingNative     uint32
	shaderSampledImageArrayNonUniformIndexingNative      uint32
	shaderStorageBufferArrayNonUniformIndexingNative     uint32
	shaderStorageImageArrayNonUniformIndexingNative      uint32
	shaderInputAttachmentArrayNonUniformIndexingNative   uint32
	robustBufferAccessUpdateAfterBind                    uint32
	quadDivergentImplicitLod                             uint32
	maxPerStageDescriptorUpdateAfterBindSamplers         uint32
	maxPerStageDescriptorUpdateAfterBindUniformBuffers   uint32
	maxPerStageDescriptorUpdateAfterBindStorageBuffers   uint32
	maxPerStageDescriptorUpdateAfterBindSampledImages    uint32
	maxPerStageDescriptorUpdateAfterBindStorageImages    uint32
	maxPerStageDescriptorUpdateAfterBindInputAttachments uint32
	maxPerStageUpdateAfterBindResources                  uint32
	maxDescriptorSetUpdateAfterBindSamplers              uint32
	maxDescriptorSetUpdateAfterBindUniformBuffers        uint32
	maxDescriptorSetUpdateAfterBindUniformBuffersDynamic uint32
	maxDescriptorSetUpdateAfterBindStorageBuffers        uint32
	maxDescriptorSetUpdateAfterBindStorageBuffersDynamic uint32
	maxDescriptorSetUpdateAfterBindSampledImages         uint32
	maxDescriptorSetUpdateAfterBindStorageImages         uint32
	maxDescriptorSetUpdateAfterBindInputAttachments      uint32
	supportedDepthResolveModes                           uint32
	supportedStencilResolveModes                         uint32
	independentResolveNone                               uint32
	independentResolve                                   uint32
	filterMinmaxSingleComponentFormats                   uint32
	filterMinmaxImageComponentMapping                    uint32
	maxTimelineSemaphoreValueDifference                  uint64
	framebufferIntegerColorSampleCounts                  uint32
}

// VK_KHR_cooperative_matrix (not in the 1.3.239 headers; from the
// extension's specification).
type vkPhysicalDeviceCooperativeMatrixFeaturesKHR struct {
	sType                               uint32
	pNext                               unsafe.Pointer
	cooperativeMatrix                   uint32
	cooperativeMatrixRobustBufferAccess uint32
}

type vkCooperativeMatrixPropertiesKHR struct {
	sType                  uint32
	pNext                  unsafe.Pointer
	MSize                  uint32
	NSize                  uint32
	KSize                  uint32
	AType                  uint32
	BType                  uint32
	CType                  uint32
	ResultType             uint32
	saturatingAccumulation uint32
	scope                  uint32
}

// VK_NV_cooperative_matrix (in the 1.3.239 headers).
type vkPhysicalDeviceCooperativeMatrixFeaturesNV struct {
	sType                               uint32
	pNext                               unsafe.Pointer
	cooperativeMatrix                   uint32
	cooperativeMatrixRobustBufferAccess uint32
}

type vkCooperativeMatrixPropertiesNV struct {
	sType uint32
	pNext unsafe.Pointer
	MSize uint32
	NSize uint32
	KSize uint32
	AType uint32
	BType uint32
	CType uint32
	DType uint32
	scope uint32
}
