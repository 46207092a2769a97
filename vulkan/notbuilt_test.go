//go:build !vulkan

package vulkan_test

import (
	"errors"
	"testing"

	"github.com/densitykv/densitykv/vulkan"
)

// The default build has no Vulkan: Enumerate and Open say so.
func TestNotBuilt(t *testing.T) {
	if vulkan.Built {
		t.Fatal("Built is true without the vulkan tag")
	}
	if _, err := vulkan.Enumerate(); !errors.Is(err, vulkan.ErrNotBuilt) {
		t.Errorf("Enumerate: %v, want ErrNotBuilt", err)
	}
	if _, err := vulkan.Open(0); !errors.Is(err, vulkan.ErrNotBuilt) {
		t.Errorf("Open(0): %v, want ErrNotBuilt", err)
	}
	if got, want := vulkan.ErrNotBuilt.Error(), "built without Vulkan: rebuild with -tags vulkan"; got != want {
		t.Errorf("ErrNotBuilt says %q, want %q", got, want)
	}
}
