package main

import (
	"github.com/densitykv/densitykv/device"
	"github.com/densitykv/densitykv/gpu"
)

// deviceUsage is the --device flag's help text.
const deviceUsage = "where the models compute: " + device.Values + " (auto: a Vulkan GPU if there is one, else the CPU; Vulkan needs a build with -tags vulkan)"

// openDevice resolves and opens a --device value (gpu.Open); a value the
// machine cannot honour is a usage error.
func openDevice(spec device.Spec) (*gpu.Opened, error) {
	o, err := gpu.Open(spec)
	if err != nil {
		return nil, usagef("%v", err)
	}
	return o, nil
}
