package gpu

import (
	"fmt"

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/device"
	"github.com/densitykv/densitykv/vulkan"
)

// Opened is where a --device value put the models: the CPU, or a Vulkan
// device with its exact-mode Backend.
type Opened struct {
	Choice  device.Choice
	Backend *Backend // nil on the CPU
	dev     *vulkan.Device
	fast    *Backend // BackendFor's fast-mode backend, made on first use
}

// Open resolves spec (cpu, vulkan, vulkan:N, auto; device.Resolve) and,
// for a Vulkan device, opens it and returns its backend, refusing a device
// that fails the exactness probe (NewBackend). Close releases it.
func Open(spec device.Spec) (*Opened, error) { return OpenFor(spec, compute.FP32) }

// OpenFor is Open for models at precision p: in exact mode (fp32, bf16)
// the same; in fast mode (bf16-fast) the backend is NewFastBackend's, and
// the CPU (--device cpu, or auto finding no GPU) and a device without a
// usable cooperative matrix (FastSupport) are refused, naming why.
func OpenFor(spec device.Spec, p compute.Precision) (*Opened, error) {
	c, err := device.Resolve(spec)
	if err != nil {
		return nil, err // names the --device value
	}
	if !c.Vulkan {
		if err := p.CheckCPU(); err != nil {
			if spec == device.Auto {
				return nil, fmt.Errorf("--device auto chose the CPU (%s): %w", c.Reason, err)
			}
			return nil, fmt.Errorf("--device %s: %w", spec, err)
		}
		return &Opened{Choice: c}, nil
	}
	if p.Mode == compute.Fast {
		if err := FastSupport(c.Device); err != nil {
			return nil, fmt.Errorf("--device %s: %w", spec, err)
		}
	}
	dev, err := c.Open()
	if err != nil {
		return nil, fmt.Errorf("--device %s: %w", spec, err)
	}
	newBackend := NewBackend
	if p.Mode == compute.Fast {
		newBackend = NewFastBackend
	}
	be, err := newBackend(dev)
	if err != nil {
		dev.Close()
		return nil, fmt.Errorf("--device %s: %w", spec, err)
	}
	return &Opened{Choice: c, Backend: be, dev: dev}, nil
}

// BackendFor returns the backend for models at precision p: Backend in
// exact mode (nil on the CPU), or where the device opened in exact mode
// is asked for bf16-fast, a fast-mode backend of the same device
// (NewFastBackend, made once; for commands that run several precisions
// in turn, such as bench wan). Fast mode is refused on the CPU
// (compute.ErrFastOnCPU) and on a device FastSupport refuses.
func (o *Opened) BackendFor(p compute.Precision) (*Backend, error) {
	if p.Mode != compute.Fast {
		if o == nil {
			return nil, nil
		}
		return o.Backend, nil
	}
	if o == nil || o.dev == nil {
		return nil, p.CheckCPU()
	}
	if o.Backend.Mode() == compute.Fast {
		return o.Backend, nil
	}
	if o.fast == nil {
		be, err := NewFastBackend(o.dev)
		if err != nil {
			return nil, err
		}
		o.fast = be
	}
	return o.fast, nil
}

// Mode is the backend's mode: compute.Fast when opened for bf16-fast,
// else (the CPU included) compute.Exact.
func (o *Opened) Mode() compute.Mode {
	if o == nil || o.Backend == nil {
		return compute.Exact
	}
	return o.Backend.Mode()
}

// Compute is the backend for a model's UseBackend: nil on the CPU (the
// models' default).
func (o *Opened) Compute() compute.Backend {
	if o == nil || o.Backend == nil {
		return nil
	}
	return o.Backend
}

// Label names the place for printing and records: "cpu", or
// "vulkan:N NAME (DRIVER, DRIVER INFO)" (the driver and its version, as
// generation.json records where a run started).
func (o *Opened) Label() string {
	if o == nil || o.Backend == nil {
		return "cpu"
	}
	d := o.Choice.Device
	if d.DriverInfo != "" {
		return fmt.Sprintf("%s %s (%s, %s)", device.VulkanIndex(d.Index), d.Name, d.DriverName, d.DriverInfo)
	}
	return fmt.Sprintf("%s %s (%s)", device.VulkanIndex(d.Index), d.Name, d.DriverName)
}

// BankFactory returns a builder of DensityKV banks whose passes and states
// are on the device (NewBank; memory.Options.NewBank), or nil on the CPU.
// The caller frees a bank's device buffers (its Passes, a *BankPasses)
// when done; Close frees them all with the device.
func (o *Opened) BankFactory() func(bank.Config) (*bank.Bank, error) {
	if o == nil || o.dev == nil {
		return nil
	}
	return func(cfg bank.Config) (*bank.Bank, error) { return NewBank(o.dev, cfg) }
}

// Close releases the device (nothing on the CPU).
func (o *Opened) Close() {
	if o != nil && o.dev != nil {
		o.dev.Close()
		o.dev = nil
	}
}
