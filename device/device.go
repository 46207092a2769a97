// Package device is the --device value of the commands (cpu, vulkan,
// vulkan:N, auto; YAML device:) and its resolution into the device a run
// uses: the CPU or one Vulkan device (package vulkan), with the reason.
//
//   - cpu: the CPU.
//   - auto: the first Vulkan GPU (discrete, integrated or virtual) that
//     densitykv can open, never a CPU implementation such as lavapipe;
//     the CPU when there is none, or when the binary has no Vulkan.
//   - vulkan: the first device that can be opened, GPU types before CPU
//     types (lavapipe when there is no GPU); an error when there is none.
//   - vulkan:N: device N of Vulkan's enumeration (densitykv devices lists
//     them); an error when it is missing or cannot be opened.
package device

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/densitykv/densitykv/vulkan"
)

// Kind is what a Spec asks for.
type Kind int

const (
	KindCPU    Kind = iota // the CPU
	KindVulkan             // a Vulkan device: Spec.Index, or the first (AnyIndex)
	KindAuto               // a Vulkan GPU if there is one, else the CPU
)

// AnyIndex is Spec.Index of "vulkan": the first device, GPU types first.
const AnyIndex = -1

// Spec is a --device value. The zero Spec is the CPU.
type Spec struct {
	Kind  Kind
	Index int // KindVulkan: the device index, or AnyIndex
}

// The specs without an index.
var (
	CPU    = Spec{Kind: KindCPU}
	Auto   = Spec{Kind: KindAuto}
	Vulkan = Spec{Kind: KindVulkan, Index: AnyIndex}
)

// VulkanIndex is the spec vulkan:n.
func VulkanIndex(n int) Spec { return Spec{Kind: KindVulkan, Index: n} }

// Values is the list of forms a spec takes, for help texts.
const Values = "cpu, vulkan, vulkan:N or auto"

// Parse reads cpu, vulkan, vulkan:N (N >= 0) or auto.
func Parse(s string) (Spec, error) {
	switch s {
	case "cpu":
		return CPU, nil
	case "auto":
		return Auto, nil
	case "vulkan":
		return Vulkan, nil
	}
	if rest, ok := strings.CutPrefix(s, "vulkan:"); ok {
		n, err := strconv.Atoi(rest)
		if err != nil || n < 0 || strings.HasPrefix(rest, "+") {
			return Spec{}, fmt.Errorf("device %q: want vulkan:N with N a device index >= 0 (densitykv devices lists them)", s)
		}
		return VulkanIndex(n), nil
	}
	return Spec{}, fmt.Errorf("unknown device %q: want %s", s, Values)
}

// String is the spec as Parse reads it.
func (s Spec) String() string {
	switch s.Kind {
	case KindCPU:
		return "cpu"
	case KindAuto:
		return "auto"
	case KindVulkan:
		if s.Index == AnyIndex {
			return "vulkan"
		}
		return "vulkan:" + strconv.Itoa(s.Index)
	}
	return fmt.Sprintf("device-kind-%d", int(s.Kind))
}

// MarshalText writes String.
func (s Spec) MarshalText() ([]byte, error) {
	if _, err := Parse(s.String()); err != nil {
		return nil, err
	}
	return []byte(s.String()), nil
}

// UnmarshalText reads what Parse reads.
func (s *Spec) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// Set and Type make *Spec a command-line flag value (pflag.Value).
func (s *Spec) Set(v string) error { return s.UnmarshalText([]byte(v)) }

// Type names the flag's values in help texts.
func (s *Spec) Type() string { return "device" }

// Choice is a resolved spec: the CPU or one Vulkan device, and why.
type Choice struct {
	Spec   Spec
	Vulkan bool              // false: the CPU
	Device vulkan.DeviceInfo // the Vulkan device, when Vulkan
	Reason string            // "--device cpu", "the first Vulkan GPU", "no Vulkan GPU found (…)"
}

// String is "cpu (no Vulkan GPU found …)" or "vulkan:0 NVIDIA H200
// (discrete-gpu, …)".
func (c Choice) String() string {
	if !c.Vulkan {
		return "cpu (" + c.Reason + ")"
	}
	return fmt.Sprintf("vulkan:%d %s (%s, %s)", c.Device.Index, c.Device.Name, c.Device.Type, c.Reason)
}

// Open opens the chosen Vulkan device; it is an error for the CPU.
func (c Choice) Open() (*vulkan.Device, error) {
	if !c.Vulkan {
		return nil, fmt.Errorf("device %s resolved to the CPU (%s), not a Vulkan device", c.Spec, c.Reason)
	}
	return vulkan.Open(c.Device.Index)
}

// Enumerator lists the Vulkan devices (vulkan.Enumerate; tests inject
// their own).
type Enumerator func() ([]vulkan.DeviceInfo, error)

// Resolve resolves s against the Vulkan devices of this machine.
func Resolve(s Spec) (Choice, error) { return ResolveWith(s, vulkan.Enumerate) }

// ResolveWith resolves s against the devices enumerate lists.
func ResolveWith(s Spec, enumerate Enumerator) (Choice, error) {
	switch s.Kind {
	case KindCPU:
		return Choice{Spec: s, Reason: "--device cpu"}, nil
	case KindAuto:
		return resolveAuto(s, enumerate), nil
	case KindVulkan:
		return resolveVulkan(s, enumerate)
	}
	return Choice{}, fmt.Errorf("device %v: unknown kind", s)
}

func resolveAuto(s Spec, enumerate Enumerator) Choice {
	cpu := func(why string) Choice { return Choice{Spec: s, Reason: why} }
	infos, err := enumerate()
	switch {
	case errors.Is(err, vulkan.ErrNotBuilt):
		return cpu("no Vulkan in this build (static binary; rebuild with -tags vulkan)")
	case errors.Is(err, vulkan.ErrNoLoader):
		return cpu("no Vulkan loader")
	case errors.Is(err, vulkan.ErrNoDevice):
		return cpu("no Vulkan device")
	case err != nil:
		return cpu(fmt.Sprintf("Vulkan unavailable: %v", err))
	}
	var skipped []string
	for _, d := range infos {
		switch {
		case !d.IsGPU():
			skipped = append(skipped, fmt.Sprintf("%s is a %s device", d.Name, strings.ToUpper(d.Type)))
		case d.Unsupported != "":
			skipped = append(skipped, fmt.Sprintf("%s: %s", d.Name, d.Unsupported))
		default:
			return Choice{Spec: s, Vulkan: true, Device: d, Reason: "the first Vulkan GPU"}
		}
	}
	if len(skipped) == 0 {
		return cpu("no Vulkan device")
	}
	return cpu("no Vulkan GPU found (" + strings.Join(skipped, "; ") + ")")
}

func resolveVulkan(s Spec, enumerate Enumerator) (Choice, error) {
	infos, err := enumerate()
	if err != nil {
		return Choice{}, fmt.Errorf("--device %v: %w", s, err)
	}
	if s.Index != AnyIndex {
		if s.Index >= len(infos) {
			return Choice{}, fmt.Errorf("--device %v: there are %d Vulkan devices%s: %w", s, len(infos), list(infos), vulkan.ErrNoDevice)
		}
		d := infos[s.Index]
		if d.Unsupported != "" {
			return Choice{}, fmt.Errorf("--device %v: %s: %s", s, d.Name, d.Unsupported)
		}
		return Choice{Spec: s, Vulkan: true, Device: d, Reason: "--device " + s.String()}, nil
	}
	for _, gpu := range []bool{true, false} {
		for _, d := range infos {
			if d.IsGPU() == gpu && d.Unsupported == "" {
				why := "the first Vulkan GPU"
				if !gpu {
					why = "no Vulkan GPU; the first Vulkan device"
				}
				return Choice{Spec: s, Vulkan: true, Device: d, Reason: why}, nil
			}
		}
	}
	return Choice{}, fmt.Errorf("--device vulkan: no usable Vulkan device%s: %w", list(infos), vulkan.ErrNoDevice)
}

// list is " (0: name; 1: name: why unsupported)", or "" for none.
func list(infos []vulkan.DeviceInfo) string {
	if len(infos) == 0 {
		return ""
	}
	var s []string
	for _, d := range infos {
		e := fmt.Sprintf("%d: %s", d.Index, d.Name)
		if d.Unsupported != "" {
			e += ": " + d.Unsupported
		}
		s = append(s, e)
	}
	return " (" + strings.Join(s, "; ") + ")"
}
