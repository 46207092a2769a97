package vulkan

import "fmt"

// ResultError is a failed Vulkan call: the function and its VkResult.
type ResultError struct {
	Func   string // "vkAllocateMemory"
	Result int32  // VkResult, e.g. -2 (VK_ERROR_OUT_OF_DEVICE_MEMORY)
}

func (e *ResultError) Error() string {
	name, what := resultName(e.Result)
	return fmt.Sprintf("vulkan: %s: %s (%s)", e.Func, what, name)
}

// Is matches ErrDeviceLost and ErrOutOfDeviceMemory.
func (e *ResultError) Is(target error) bool {
	switch target {
	case ErrDeviceLost:
		return e.Result == -4
	case ErrOutOfDeviceMemory:
		return e.Result == -2
	}
	return false
}

// resultName returns a VkResult's name and a short description.
func resultName(r int32) (name, what string) {
	switch r {
	case 0:
		return "VK_SUCCESS", "success"
	case 1:
		return "VK_NOT_READY", "not ready"
	case 2:
		return "VK_TIMEOUT", "timeout"
	case 3:
		return "VK_EVENT_SET", "event set"
	case 4:
		return "VK_EVENT_RESET", "event reset"
	case 5:
		return "VK_INCOMPLETE", "incomplete"
	case -1:
		return "VK_ERROR_OUT_OF_HOST_MEMORY", "out of host memory"
	case -2:
		return "VK_ERROR_OUT_OF_DEVICE_MEMORY", "out of device memory"
	case -3:
		return "VK_ERROR_INITIALIZATION_FAILED", "initialization failed"
	case -4:
		return "VK_ERROR_DEVICE_LOST", "device lost"
	case -5:
		return "VK_ERROR_MEMORY_MAP_FAILED", "memory map failed"
	case -6:
		return "VK_ERROR_LAYER_NOT_PRESENT", "layer not present"
	case -7:
		return "VK_ERROR_EXTENSION_NOT_PRESENT", "extension not present"
	case -8:
		return "VK_ERROR_FEATURE_NOT_PRESENT", "feature not present"
	case -9:
		return "VK_ERROR_INCOMPATIBLE_DRIVER", "incompatible driver"
	case -10:
		return "VK_ERROR_TOO_MANY_OBJECTS", "too many objects"
	case -11:
		return "VK_ERROR_FORMAT_NOT_SUPPORTED", "format not supported"
	case -12:
		return "VK_ERROR_FRAGMENTED_POOL", "fragmented pool"
	case -13:
		return "VK_ERROR_UNKNOWN", "unknown error"
	case -1000069000:
		return "VK_ERROR_OUT_OF_POOL_MEMORY", "out of pool memory"
	case -1000072003:
		return "VK_ERROR_INVALID_EXTERNAL_HANDLE", "invalid external handle"
	case -1000161000:
		return "VK_ERROR_FRAGMENTATION", "fragmentation"
	case -1000257000:
		return "VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS", "invalid opaque capture address"
	case -1000011001:
		return "VK_ERROR_VALIDATION_FAILED_EXT", "validation failed"
	case -1000012000:
		return "VK_ERROR_INVALID_SHADER_NV", "invalid shader"
	case -1000174001:
		return "VK_ERROR_NOT_PERMITTED_KHR", "not permitted"
	case -1000338000:
		return "VK_ERROR_COMPRESSION_EXHAUSTED_EXT", "compression exhausted"
	}
	return fmt.Sprintf("VkResult %d", r), "unknown result"
}

// check turns a VkResult into nil (VK_SUCCESS) or a *ResultError naming fn.
func check(fn string, r int32) error {
	if r == 0 {
		return nil
	}
	return &ResultError{Func: fn, Result: r}
}
