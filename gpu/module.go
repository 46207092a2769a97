package gpu

import (
	"fmt"
	"strings"
	"sync"

	"github.com/densitykv/densitykv/gpu/internal/spirv"
	"github.com/densitykv/densitykv/vulkan"
)

// moduleKey identifies a module as adapted to a device's float controls.
type moduleKey struct {
	name    string
	support [6]bool // DenormPreserve, SignedZeroInfNanPreserve, RoundingModeRTE at 32 and 64 bits
}

var adapted sync.Map // moduleKey → []byte

// module returns the embedded SPIR-V of the named shader as dev may be
// given it: an exact-mode module declares the float controls (denormals
// preserved, signed zeros/Inf/NaN preserved, round to nearest even) for
// each float width it uses, and a mode the device does not offer is left
// out (Vulkan forbids declaring it). Exact mode never rests on the
// declaration alone: CheckExact runs the probe, which checks what each
// mode promises, on every device before its first exact kernel.
func module(dev *vulkan.Device, name string) ([]byte, error) {
	b, ok := modules[name]
	if !ok {
		return nil, fmt.Errorf("gpu: no shader module %q", name)
	}
	i := dev.Info()
	k := moduleKey{name, [6]bool{i.DenormPreserve32, i.SignedZeroInfNanPreserve32, i.RoundingModeRTE32,
		i.DenormPreserve64, i.SignedZeroInfNanPreserve64, i.RoundingModeRTE64}}
	if k.support == [6]bool{true, true, true, true, true, true} {
		return b, nil
	}
	if v, ok := adapted.Load(k); ok {
		return v.([]byte), nil
	}
	m, err := spirv.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("gpu: shader module %s: %w", name, err)
	}
	m.DropModes(func(mode, width uint32) bool {
		at := 0
		switch width {
		case 32:
		case 64:
			at = 3
		default:
			return false // no device property is read for other widths
		}
		switch mode {
		case spirv.ModeDenormPreserve:
		case spirv.ModeSignedZeroInfNanPreserve:
			at++
		case spirv.ModeRoundingModeRTE:
			at += 2
		}
		return k.support[at]
	})
	v, _ := adapted.LoadOrStore(k, m.Bytes())
	return v.([]byte), nil
}

// newKernel is dev.Kernel(s) with s.SPIRV the named module as dev may be
// given it (module). It refuses a fast-mode module (fast.go's
// newFastKernel creates those), so that no exact kernel runs one.
func newKernel(dev *vulkan.Device, name string, s vulkan.KernelSpec) (*vulkan.Kernel, error) {
	if strings.HasSuffix(name, "_fast") {
		return nil, fmt.Errorf("gpu: %s is a fast-mode module, not for an exact kernel", name)
	}
	b, err := module(dev, name)
	if err != nil {
		return nil, err
	}
	s.SPIRV = b
	return dev.Kernel(s)
}
