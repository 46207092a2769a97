//go:build vulkan

package vulkan

import (
	"fmt"
	"os"
	"reflect"
	"runtime"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Built reports whether this binary was built with the Vulkan runtime
// (-tags vulkan).
const Built = true

// loaderEnv names a Vulkan loader library to open instead of the
// platform's default (e.g. a libvulkan.so.1 carried to a machine without
// one installed).
const loaderEnv = "DENSITYKV_VULKAN_LOADER"

// loaderNames lists the libraries tried in order.
func loaderNames() []string {
	if p := os.Getenv(loaderEnv); p != "" {
		return []string{p}
	}
	switch runtime.GOOS {
	case "darwin":
		return []string{"libvulkan.1.dylib", "libvulkan.dylib", "libMoltenVK.dylib"}
	case "windows":
		return []string{"vulkan-1.dll"}
	}
	return []string{"libvulkan.so.1", "libvulkan.so"}
}

// call calls the C function fn and returns its result's low 32 bits (a
// VkResult, where it returns one). Go pointers among args (converted with
// uintptr(unsafe.Pointer(p)) in the call expression) are moved to the heap
// and kept alive for the call: go:uintptrescapes; objects they point to
// are reached through unsafe.Pointer fields and so stay alive too.
//
//go:uintptrescapes
func call(fn uintptr, args ...uintptr) int32 {
	r, _, _ := purego.SyscallN(fn, args...)
	return int32(r)
}

// callPtr is call returning the whole result (a pointer or handle).
//
//go:uintptrescapes
func callPtr(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}

// cstr returns s as a NUL-terminated C string in Go memory.
func cstr(s string) *byte {
	b := append([]byte(s), 0)
	return &b[0]
}

// loader is the opened Vulkan loader.
type loader struct {
	name                string // the library opened
	getInstanceProcAddr uintptr
}

func openLoader() (*loader, error) {
	var errs []string
	for _, name := range loaderNames() {
		h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		sym, err := purego.Dlsym(h, "vkGetInstanceProcAddr")
		if err != nil {
			purego.Dlclose(h)
			errs = append(errs, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		return &loader{name: name, getInstanceProcAddr: sym}, nil
	}
	return nil, fmt.Errorf("%w (%s; install the Vulkan loader, e.g. Debian's libvulkan1, or name one in %s)", ErrNoLoader, strings.Join(errs, "; "), loaderEnv)
}

// instanceProc returns an instance-level (or, with instance 0, a global)
// function, 0 when the loader has none.
func (l *loader) instanceProc(instance uintptr, name string) uintptr {
	return callPtr(l.getInstanceProcAddr, instance, uintptr(unsafe.Pointer(cstr(name))))
}

// loadProcs fills the uintptr fields of the struct *fns, each field Foo
// with the function vkFoo found by get; optional fields (tag
// `vk:"optional"`) may stay 0, a missing required one is an error.
func loadProcs(fns any, get func(name string) uintptr) error {
	v := reflect.ValueOf(fns).Elem()
	t := v.Type()
	for i := range t.NumField() {
		name := "vk" + t.Field(i).Name
		p := get(name)
		if p == 0 && t.Field(i).Tag.Get("vk") != "optional" {
			return fmt.Errorf("vulkan: the driver has no %s", name)
		}
		v.Field(i).SetUint(uint64(p))
	}
	return nil
}
