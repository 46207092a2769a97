//go:build vulkan

package vulkan

import (
	"reflect"
	"testing"
)

// cLayouts are sizeof and the offsetof of every field, in order, of the C
// structures, printed by gcc (x86-64, Vulkan headers 1.3.239) from a
// one-off program over vulkan_core.h (VK_NV_cooperative_matrix's included);
// the VK_KHR_cooperative_matrix structures (newer than those headers)
// follow their specification's declaration.
var cLayouts = []struct {
	name    string
	size    uintptr
	offsets []uintptr
}{
	{"vkApplicationInfo", 48, []uintptr{0, 8, 16, 24, 32, 40, 44}},
	{"vkInstanceCreateInfo", 64, []uintptr{0, 8, 16, 24, 32, 40, 48, 56}},
	{"vkPhysicalDeviceLimits", 504, []uintptr{0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 48, 56, 64, 68, 72, 76, 80, 84, 88, 92, 96, 100, 104, 108, 112, 116, 120, 124, 128, 132, 136, 140, 144, 148, 152, 156, 160, 164, 168, 172, 176, 180, 184, 188, 192, 196, 200, 204, 208, 212, 216, 220, 232, 236, 248, 252, 256, 260, 264, 268, 272, 276, 280, 288, 296, 304, 312, 320, 328, 336, 340, 344, 348, 352, 356, 360, 364, 368, 372, 376, 380, 384, 388, 392, 396, 400, 404, 408, 412, 416, 420, 424, 428, 432, 436, 440, 444, 452, 460, 464, 468, 472, 480, 488, 496}},
	{"vkPhysicalDeviceSparseProperties", 20, []uintptr{0, 4, 8, 12, 16}},
	{"vkPhysicalDeviceProperties", 824, []uintptr{0, 4, 8, 12, 16, 20, 276, 296, 800}},
	{"vkPhysicalDeviceProperties2", 840, []uintptr{0, 8, 16}},
	{"vkPhysicalDeviceVulkan11Properties", 112, []uintptr{0, 8, 16, 32, 48, 56, 60, 64, 68, 72, 76, 80, 84, 88, 92, 96, 104}},
	{"vkPhysicalDeviceVulkan12Properties", 736, []uintptr{0, 8, 16, 20, 276, 532, 536, 540, 544, 548, 552, 556, 560, 564, 568, 572, 576, 580, 584, 588, 592, 596, 600, 604, 608, 612, 616, 620, 624, 628, 632, 636, 640, 644, 648, 652, 656, 660, 664, 668, 672, 676, 680, 684, 688, 692, 696, 700, 704, 708, 712, 716, 720, 728}},
	{"vkConformanceVersion", 4, []uintptr{0, 1, 2, 3}},
	{"vkPhysicalDeviceFeatures", 220, []uintptr{0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60, 64, 68, 72, 76, 80, 84, 88, 92, 96, 100, 104, 108, 112, 116, 120, 124, 128, 132, 136, 140, 144, 148, 152, 156, 160, 164, 168, 172, 176, 180, 184, 188, 192, 196, 200, 204, 208, 212, 216}},
	{"vkPhysicalDeviceFeatures2", 240, []uintptr{0, 8, 16}},
	{"vkPhysicalDeviceVulkan11Features", 64, []uintptr{0, 8, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60}},
	{"vkPhysicalDeviceVulkan12Features", 208, []uintptr{0, 8, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60, 64, 68, 72, 76, 80, 84, 88, 92, 96, 100, 104, 108, 112, 116, 120, 124, 128, 132, 136, 140, 144, 148, 152, 156, 160, 164, 168, 172, 176, 180, 184, 188, 192, 196, 200}},
	{"vkMemoryType", 8, []uintptr{0, 4}},
	{"vkMemoryHeap", 16, []uintptr{0, 8}},
	{"vkPhysicalDeviceMemoryProperties", 520, []uintptr{0, 4, 260, 264}},
	{"vkQueueFamilyProperties", 24, []uintptr{0, 4, 8, 12}},
	{"vkExtent3D", 12, []uintptr{0, 4, 8}},
	{"vkExtensionProperties", 260, []uintptr{0, 256}},
	{"vkDeviceQueueCreateInfo", 40, []uintptr{0, 8, 16, 20, 24, 32}},
	{"vkDeviceCreateInfo", 72, []uintptr{0, 8, 16, 20, 24, 32, 40, 48, 56, 64}},
	{"vkBufferCreateInfo", 56, []uintptr{0, 8, 16, 24, 32, 36, 40, 48}},
	{"vkMemoryRequirements", 24, []uintptr{0, 8, 16}},
	{"vkMemoryAllocateInfo", 32, []uintptr{0, 8, 16, 24}},
	{"vkShaderModuleCreateInfo", 40, []uintptr{0, 8, 16, 24, 32}},
	{"vkDescriptorSetLayoutBinding", 24, []uintptr{0, 4, 8, 12, 16}},
	{"vkDescriptorSetLayoutCreateInfo", 32, []uintptr{0, 8, 16, 20, 24}},
	{"vkPushConstantRange", 12, []uintptr{0, 4, 8}},
	{"vkPipelineLayoutCreateInfo", 48, []uintptr{0, 8, 16, 20, 24, 32, 40}},
	{"vkSpecializationMapEntry", 16, []uintptr{0, 4, 8}},
	{"vkSpecializationInfo", 32, []uintptr{0, 8, 16, 24}},
	{"vkPipelineShaderStageCreateInfo", 48, []uintptr{0, 8, 16, 20, 24, 32, 40}},
	{"vkComputePipelineCreateInfo", 96, []uintptr{0, 8, 16, 24, 72, 80, 88}},
	{"vkDescriptorPoolSize", 8, []uintptr{0, 4}},
	{"vkDescriptorPoolCreateInfo", 40, []uintptr{0, 8, 16, 20, 24, 32}},
	{"vkDescriptorSetAllocateInfo", 40, []uintptr{0, 8, 16, 24, 32}},
	{"vkDescriptorBufferInfo", 24, []uintptr{0, 8, 16}},
	{"vkWriteDescriptorSet", 64, []uintptr{0, 8, 16, 24, 28, 32, 36, 40, 48, 56}},
	{"vkCommandPoolCreateInfo", 24, []uintptr{0, 8, 16, 20}},
	{"vkCommandBufferAllocateInfo", 32, []uintptr{0, 8, 16, 24, 28}},
	{"vkCommandBufferBeginInfo", 32, []uintptr{0, 8, 16, 24}},
	{"vkMemoryBarrier", 24, []uintptr{0, 8, 16, 20}},
	{"vkBufferCopy", 24, []uintptr{0, 8, 16}},
	{"vkSubmitInfo", 72, []uintptr{0, 8, 16, 24, 32, 40, 48, 56, 64}},
	{"vkFenceCreateInfo", 24, []uintptr{0, 8, 16}},
	{"vkQueryPoolCreateInfo", 32, []uintptr{0, 8, 16, 20, 24, 28}},
	{"vkPhysicalDeviceCooperativeMatrixFeaturesKHR", 24, []uintptr{0, 8, 16, 20}},
	{"vkCooperativeMatrixPropertiesKHR", 56, []uintptr{0, 8, 16, 20, 24, 28, 32, 36, 40, 44, 48}},
	{"vkPhysicalDeviceCooperativeMatrixFeaturesNV", 24, []uintptr{0, 8, 16, 20}},
	{"vkCooperativeMatrixPropertiesNV", 48, []uintptr{0, 8, 16, 20, 24, 28, 32, 36, 40, 44}},
}

// goStructs are the Go mirrors of cLayouts' structures.
var goStructs = map[string]any{
	"vkApplicationInfo":                            vkApplicationInfo{},
	"vkInstanceCreateInfo":                         vkInstanceCreateInfo{},
	"vkPhysicalDeviceLimits":                       vkPhysicalDeviceLimits{},
	"vkPhysicalDeviceSparseProperties":             vkPhysicalDeviceSparseProperties{},
	"vkPhysicalDeviceProperties":                   vkPhysicalDeviceProperties{},
	"vkPhysicalDeviceProperties2":                  vkPhysicalDeviceProperties2{},
	"vkPhysicalDeviceVulkan11Properties":           vkPhysicalDeviceVulkan11Properties{},
	"vkPhysicalDeviceVulkan12Properties":           vkPhysicalDeviceVulkan12Properties{},
	"vkConformanceVersion":                         vkConformanceVersion{},
	"vkPhysicalDeviceFeatures":                     vkPhysicalDeviceFeatures{},
	"vkPhysicalDeviceFeatures2":                    vkPhysicalDeviceFeatures2{},
	"vkPhysicalDeviceVulkan11Features":             vkPhysicalDeviceVulkan11Features{},
	"vkPhysicalDeviceVulkan12Features":             vkPhysicalDeviceVulkan12Features{},
	"vkMemoryType":                                 vkMemoryType{},
	"vkMemoryHeap":                                 vkMemoryHeap{},
	"vkPhysicalDeviceMemoryProperties":             vkPhysicalDeviceMemoryProperties{},
	"vkQueueFamilyProperties":                      vkQueueFamilyProperties{},
	"vkExtent3D":                                   vkExtent3D{},
	"vkExtensionProperties":                        vkExtensionProperties{},
	"vkDeviceQueueCreateInfo":                      vkDeviceQueueCreateInfo{},
	"vkDeviceCreateInfo":                           vkDeviceCreateInfo{},
	"vkBufferCreateInfo":                           vkBufferCreateInfo{},
	"vkMemoryRequirements":                         vkMemoryRequirements{},
	"vkMemoryAllocateInfo":                         vkMemoryAllocateInfo{},
	"vkShaderModuleCreateInfo":                     vkShaderModuleCreateInfo{},
	"vkDescriptorSetLayoutBinding":                 vkDescriptorSetLayoutBinding{},
	"vkDescriptorSetLayoutCreateInfo":              vkDescriptorSetLayoutCreateInfo{},
	"vkPushConstantRange":                          vkPushConstantRange{},
	"vkPipelineLayoutCreateInfo":                   vkPipelineLayoutCreateInfo{},
	"vkSpecializationMapEntry":                     vkSpecializationMapEntry{},
	"vkSpecializationInfo":                         vkSpecializationInfo{},
	"vkPipelineShaderStageCreateInfo":              vkPipelineShaderStageCreateInfo{},
	"vkComputePipelineCreateInfo":                  vkComputePipelineCreateInfo{},
	"vkDescriptorPoolSize":                         vkDescriptorPoolSize{},
	"vkDescriptorPoolCreateInfo":                   vkDescriptorPoolCreateInfo{},
	"vkDescriptorSetAllocateInfo":                  vkDescriptorSetAllocateInfo{},
	"vkDescriptorBufferInfo":                       vkDescriptorBufferInfo{},
	"vkWriteDescriptorSet":                         vkWriteDescriptorSet{},
	"vkCommandPoolCreateInfo":                      vkCommandPoolCreateInfo{},
	"vkCommandBufferAllocateInfo":                  vkCommandBufferAllocateInfo{},
	"vkCommandBufferBeginInfo":                     vkCommandBufferBeginInfo{},
	"vkMemoryBarrier":                              vkMemoryBarrier{},
	"vkBufferCopy":                                 vkBufferCopy{},
	"vkSubmitInfo":                                 vkSubmitInfo{},
	"vkFenceCreateInfo":                            vkFenceCreateInfo{},
	"vkQueryPoolCreateInfo":                        vkQueryPoolCreateInfo{},
	"vkPhysicalDeviceCooperativeMatrixFeaturesKHR": vkPhysicalDeviceCooperativeMatrixFeaturesKHR{},
	"vkCooperativeMatrixPropertiesKHR":             vkCooperativeMatrixPropertiesKHR{},
	"vkPhysicalDeviceCooperativeMatrixFeaturesNV":  vkPhysicalDeviceCooperativeMatrixFeaturesNV{},
	"vkCooperativeMatrixPropertiesNV":              vkCooperativeMatrixPropertiesNV{},
}

// TestStructLayouts checks every structure handed to Vulkan against the C
// layout: its size, its number of fields and each field's offset.
func TestStructLayouts(t *testing.T) {
	if len(goStructs) != len(cLayouts) {
		t.Errorf("%d Go structures, %d C layouts", len(goStructs), len(cLayouts))
	}
	for _, c := range cLayouts {
		v, ok := goStructs[c.name]
		if !ok {
			t.Errorf("%s: no Go structure", c.name)
			continue
		}
		typ := reflect.TypeOf(v)
		if typ.Size() != c.size {
			t.Errorf("%s: size %d, C says %d", c.name, typ.Size(), c.size)
		}
		if typ.NumField() != len(c.offsets) {
			t.Errorf("%s: %d fields, C has %d", c.name, typ.NumField(), len(c.offsets))
			continue
		}
		for i, off := range c.offsets {
			if f := typ.Field(i); f.Offset != off {
				t.Errorf("%s.%s: offset %d, C says %d", c.name, f.Name, f.Offset, off)
			}
		}
	}
}
