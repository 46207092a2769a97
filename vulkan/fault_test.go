//go:build vulkan

package vulkan_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/vulkan"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// TestInjectFault: an injected out-of-memory fails the next call only
// (the device stays usable); an injected device loss fails the next call
// and every later one, as a real VK_ERROR_DEVICE_LOST does; 0 cancels.
func TestInjectFault(t *testing.T) {
	d := vulkantest.Open(t)
	b := alloc(t, d, 16)
	vulkan.InjectFault(vulkan.FaultOutOfMemory)
	if _, err := d.Alloc(64); !errors.Is(err, vulkan.ErrOutOfDeviceMemory) || errors.Is(err, vulkan.ErrDeviceLost) ||
		!strings.Contains(err.Error(), "vkAllocateMemory") {
		t.Errorf("Alloc after an injected out-of-memory: %v", err)
	}
	if err := d.Upload(b, 0, []byte{1, 2, 3, 4}); err != nil {
		t.Errorf("the device after an out-of-memory: %v", err)
	}
	vulkan.InjectFault(vulkan.FaultDeviceLost)
	vulkan.InjectFault(0)
	if err := d.Upload(b, 0, []byte{5}); err != nil {
		t.Errorf("a cancelled fault was taken: %v", err)
	}
	vulkan.InjectFault(vulkan.FaultDeviceLost)
	got := make([]byte, 4)
	if err := d.Download(b, 0, got); !errors.Is(err, vulkan.ErrDeviceLost) || !strings.Contains(err.Error(), "vkQueueSubmit: device lost") {
		t.Errorf("Download after an injected loss: %v", err)
	}
	if _, err := d.Alloc(16); !errors.Is(err, vulkan.ErrDeviceLost) || !strings.Contains(err.Error(), "lost earlier") {
		t.Errorf("Alloc after the loss: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Errorf("Close after the loss: %v", err)
	}
}
