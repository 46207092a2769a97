//go:build vulkan

package vulkan

import "fmt"

// Hooks for the external tests.

// LiveDescriptorPools is the number of d's descriptor pools not yet freed.
func LiveDescriptorPools(d *Device) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.impl.pools
}

// LiveBuffers is the number of d's buffers not yet freed.
func LiveBuffers(d *Device) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.impl.buffers)
}

// ForceStaging leaves the buffers allocated until restore() unmapped, so
// that their transfers go through a staging buffer (of stagingBytes, when
// the device creates it then), as on a discrete GPU.
func ForceStaging(stagingBytes int64) (restore func()) {
	old := stagingSize
	forceStaging, stagingSize = true, stagingBytes
	return func() { forceStaging, stagingSize = false, old }
}

// Mapped reports whether b's memory is mapped (transfers without staging).
func Mapped(b *Buffer) bool { return b.impl.mapped != nil }

// LoseDevice makes d behave as after VK_ERROR_DEVICE_LOST from fn.
func LoseDevice(d *Device, fn string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failed(fmt.Errorf("batch: %w", &ResultError{Func: fn, Result: -4}))
}
