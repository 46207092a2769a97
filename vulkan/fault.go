package vulkan

import "sync"

// Fault is a driver failure InjectFault makes a device call return.
type Fault int

const (
	// FaultDeviceLost is VK_ERROR_DEVICE_LOST: the device is lost from
	// that call on.
	FaultDeviceLost Fault = iota + 1
	// FaultOutOfMemory is VK_ERROR_OUT_OF_DEVICE_MEMORY, for that call
	// only: the device stays usable.
	FaultOutOfMemory
)

// injected is the fault the next device call returns (0: none).
var injected struct {
	mu sync.Mutex
	f  Fault
}

// InjectFault makes the next call into any open device — an allocation,
// a transfer, a batch's run or a kernel's creation — fail with f instead
// of calling the driver, as if the driver had returned it. It is for
// tests of how callers handle a fault in the middle of their work (a
// generate run losing its GPU between two blocks); 0 cancels a fault not
// yet taken.
func InjectFault(f Fault) {
	injected.mu.Lock()
	injected.f = f
	injected.mu.Unlock()
}

// takeFault returns the injected fault as fn's failure and clears it
// (nil when none is injected).
func takeFault(fn string) error {
	injected.mu.Lock()
	defer injected.mu.Unlock()
	f := injected.f
	injected.f = 0
	switch f {
	case FaultDeviceLost:
		return &ResultError{Func: fn, Result: -4}
	case FaultOutOfMemory:
		return &ResultError{Func: fn, Result: -2}
	}
	return nil
}

// call runs a driver call f named fn, unless a fault is injected, and
// records a lost device (failed).
func (d *Device) call(fn string, f func() error) error {
	if err := takeFault(fn); err != nil {
		return d.failed(err)
	}
	return d.failed(f())
}
