//go:build vulkan

package vulkan

import (
	"errors"
	"strings"
	"testing"
)

func TestNoLoader(t *testing.T) {
	t.Setenv(loaderEnv, "/nonexistent/libvulkan.so.1")
	_, err := openLoader()
	if !errors.Is(err, ErrNoLoader) || !strings.Contains(err.Error(), "/nonexistent/libvulkan.so.1") || !strings.Contains(err.Error(), loaderEnv) {
		t.Errorf("openLoader with a missing library: %v, want ErrNoLoader naming the library and %s", err, loaderEnv)
	}
}
