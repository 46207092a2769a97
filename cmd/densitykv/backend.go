package main

import (
	"fmt"

	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/device"
	"github.com/densitykv/densitykv/gpu"
)

// computeDevice is what a --device value resolved to: the CPU (backend
// nil, the models' default) or a Vulkan device's exact-mode backend, with
// its label for printing and records ("cpu", "vulkan:0 NAME (DRIVER)").
type computeDevice struct {
	Choice  device.Choice
	Backend compute.Backend // nil on the CPU
	Label   string
	close   func()
}

// Close releases the device (nothing on the CPU).
func (d *computeDevice) Close() {
	if d.close != nil {
		d.close()
	}
}

// openDevice resolves spec (cpu, vulkan, vulkan:N, auto) and opens the
// Vulkan device it names, refusing one that fails the exactness probe.
func openDevice(spec device.Spec) (*computeDevice, error) {
	c, err := device.Resolve(spec)
	if err != nil {
		return nil, err // names the --device value
	}
	if !c.Vulkan {
		return &computeDevice{Choice: c, Label: "cpu"}, nil
	}
	dev, err := c.Open()
	if err != nil {
		return nil, fmt.Errorf("--device %s: %w", spec, err)
	}
	be, err := gpu.NewBackend(dev)
	if err != nil {
		dev.Close()
		return nil, fmt.Errorf("--device %s: %w", spec, err)
	}
	label := fmt.Sprintf("%s %s (%s)", device.VulkanIndex(c.Device.Index), c.Device.Name, c.Device.DriverName)
	return &computeDevice{Choice: c, Backend: be, Label: label, close: func() { dev.Close() }}, nil
}
