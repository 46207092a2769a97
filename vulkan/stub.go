//go:build !vulkan

package vulkan

import "time"

// The default build: no Vulkan loader is opened; Enumerate and Open return
// ErrNotBuilt, so no Device exists and the methods below are never reached.

type (
	deviceImpl struct{}
	bufferImpl struct{}
	kernelImpl struct{}
)

// Built reports whether this binary was built with the Vulkan runtime
// (-tags vulkan).
const Built = false

func enumerate() ([]DeviceInfo, error) { return nil, ErrNotBuilt }

func open(int) (*Device, error) { return nil, ErrNotBuilt }

func (deviceImpl) close() error                                { return ErrNotBuilt }
func (deviceImpl) free(*Buffer)                                {}
func (deviceImpl) alloc(*Buffer) error                         { return ErrNotBuilt }
func (deviceImpl) upload(*Buffer, int64, []byte) error         { return ErrNotBuilt }
func (deviceImpl) download(*Buffer, int64, []byte) error       { return ErrNotBuilt }
func (deviceImpl) kernel(*Device, KernelSpec) (*Kernel, error) { return nil, ErrNotBuilt }
func (deviceImpl) run(*Device, []op, bool) (time.Duration, error) {
	return 0, ErrNotBuilt
}
