package vulkan

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

//go:generate glslc --target-env=vulkan1.2 -O -o testdata/add.spv testdata/add.comp

// TestShadersInSync compiles testdata/*.comp with glslc (as go generate
// does) and compares the result with the checked-in .spv.
func TestShadersInSync(t *testing.T) {
	glslc, err := exec.LookPath("glslc")
	if err != nil {
		t.Skip("glslc not installed (Debian: apt-get install glslc): the checked-in testdata/*.spv are not checked")
	}
	srcs, err := filepath.Glob("testdata/*.comp")
	if err != nil || len(srcs) == 0 {
		t.Fatalf("no testdata/*.comp: %v", err)
	}
	for _, src := range srcs {
		out := filepath.Join(t.TempDir(), "out.spv")
		if msg, err := exec.Command(glslc, "--target-env=vulkan1.2", "-O", "-o", out, src).CombinedOutput(); err != nil {
			t.Fatalf("glslc %s: %v\n%s", src, err, msg)
		}
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		spv := strings.TrimSuffix(src, ".comp") + ".spv"
		want, err := os.ReadFile(spv)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is out of date with %s: run go generate ./vulkan", spv, src)
		}
	}
}

func TestResultError(t *testing.T) {
	err := fmt.Errorf("Alloc: %w", check("vkAllocateMemory", -2))
	if got, want := err.Error(), "Alloc: vulkan: vkAllocateMemory: out of device memory (VK_ERROR_OUT_OF_DEVICE_MEMORY)"; got != want {
		t.Errorf("error %q, want %q", got, want)
	}
	if !errors.Is(err, ErrOutOfDeviceMemory) || errors.Is(err, ErrDeviceLost) {
		t.Errorf("%v: want ErrOutOfDeviceMemory only", err)
	}
	lost := check("vkWaitForFences", -4)
	if !errors.Is(lost, ErrDeviceLost) || errors.Is(lost, ErrOutOfDeviceMemory) {
		t.Errorf("%v: want ErrDeviceLost only", lost)
	}
	if check("vkQueueSubmit", 0) != nil {
		t.Error("VK_SUCCESS is an error")
	}
	if got := check("vkFoo", -424242).Error(); !strings.Contains(got, "VkResult -424242") {
		t.Errorf("unknown result: %q", got)
	}
	var re *ResultError
	if !errors.As(err, &re) || re.Func != "vkAllocateMemory" || re.Result != -2 {
		t.Errorf("errors.As: %+v", re)
	}
}
