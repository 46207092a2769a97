package main

import (
	"strings"

	"github.com/densitykv/densitykv/compute"
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

// fastUsage is what --precision bf16-fast means, for the flags' help.
const fastUsage = "bf16-fast: bf16 with the linears on a GPU's tensor cores, --device vulkan with VK_NV_cooperative_matrix, not the CPU's bits"

// backendFor is the backend of cd for models at precision p
// (gpu.Opened.BackendFor): nil on the CPU; bf16-fast refused on the CPU
// and on a device without a usable cooperative matrix, as a usage error
// naming the device and what it lacks.
func backendFor(cd *gpu.Opened, p compute.Precision) (compute.Backend, error) {
	be, err := cd.BackendFor(p)
	if err != nil {
		return nil, usagef("--precision %v: %v", p, err)
	}
	if be == nil {
		return nil, nil // the CPU: no typed nil in the interface
	}
	return be, nil
}

// refuseFast refuses bf16-fast for a model without fast kernels (the VAE
// decoder: its convolutions are exact on every device).
func refuseFast(value, what string) error {
	if strings.TrimSpace(value) == compute.BF16Fast.String() {
		return usagef("--precision %s: %s has no fast mode (its kernels are exact on every device); use bf16", compute.BF16Fast, what)
	}
	return nil
}
