package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/densitykv/densitykv/bench"
	"github.com/densitykv/densitykv/device"
	"github.com/densitykv/densitykv/gpu"
	"github.com/densitykv/densitykv/vulkan"
)

func init() { register(newDevicesCmd) }

// devicesJSON is the --json output of `densitykv devices`.
type devicesJSON struct {
	CPU    cpuJSON    `json:"cpu"`
	Vulkan vulkanJSON `json:"vulkan"`
	Auto   autoJSON   `json:"auto"` // what --device auto picks
}

type cpuJSON struct {
	Model   string               `json:"model"` // /proc/cpuinfo's model name, or the architecture
	Cores   int                  `json:"cores"` // runtime.NumCPU
	Kernels []bench.KernelChoice `json:"kernels"`
}

type vulkanJSON struct {
	Built   bool               `json:"built"`           // this binary has the Vulkan runtime (-tags vulkan)
	Error   string             `json:"error,omitempty"` // why no device is listed (no loader, no device)
	Devices []vulkanDeviceJSON `json:"devices"`
}

type vulkanDeviceJSON struct {
	vulkan.DeviceInfo
	Device           string `json:"device"` // its --device value, "vulkan:0"
	DeviceLocalBytes uint64 `json:"device_local_bytes"`
	// ExactMode: the exactness probe (gpu.CheckExact) passed, so exact
	// mode runs there; ExactError says why not (or why the probe could not
	// run). FusedFMA: the device's fma() rounds once (else the float32
	// product's fused steps run in integer arithmetic, same bits, slower).
	ExactMode  bool   `json:"exact_mode"`
	ExactError string `json:"exact_error,omitempty"`
	FusedFMA   bool   `json:"fused_fma"`
	// FastMode: fast mode (--precision bf16-fast) runs there
	// (gpu.FastSupport: VK_NV_cooperative_matrix's 16x16x16
	// float16*float16+float32 shape, float16, the Vulkan memory model,
	// 32-wide subgroups, and exact mode for the rest); FastError says why
	// not.
	FastMode  bool   `json:"fast_mode"`
	FastError string `json:"fast_error,omitempty"`
}

type autoJSON struct {
	Device string `json:"device"` // "cpu" or "vulkan:N"
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

func newDevicesCmd() *cobra.Command {
	var jsonOut bool
	cmd := &cobra.Command{
		Use:   "devices",
		Short: "The CPU and every Vulkan device, with what densitykv uses of them, and what --device auto picks",
		Long: `devices lists the CPU (model, cores, the matrix kernels products run on) and
every Vulkan device, in Vulkan's order (its --device vulkan:N): name, type,
driver, Vulkan version, device-local memory, subgroup size, whether exact
mode runs there (the exactness probe: fused multiply-add, denormals, signed
zeros, Inf/NaN, ties to even, no contraction, each compared with Go; and
the float controls the driver declares), float64/int64, the
cooperative-matrix shapes (tensor cores) of VK_KHR_cooperative_matrix and
VK_NV_cooperative_matrix, and whether fast mode (--precision bf16-fast)
runs there, or what the device lacks for it. Last,
what --device auto picks: the first Vulkan GPU, never a CPU implementation
such as lavapipe, else the CPU.

The default build is a static binary without Vulkan; build with
-tags vulkan (go build -tags vulkan ./cmd/densitykv) for the GPU backend.`,
		Example: `  densitykv devices
  densitykv devices --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res := listDevices()
			if jsonOut {
				return printJSON(cmd.OutOrStdout(), res)
			}
			printDevices(cmd.OutOrStdout(), res)
			return nil
		},
	}
	cmd.Flags().BoolVar(&jsonOut, "json", false, "print the devices as JSON")
	return cmd
}

// listDevices gathers the CPU, the Vulkan devices and auto's choice.
func listDevices() devicesJSON {
	res := devicesJSON{CPU: cpuJSON{Model: cpuModel(), Cores: runtime.NumCPU(), Kernels: bench.Kernels()}}
	res.Vulkan.Built = vulkan.Built
	infos, err := vulkan.Enumerate()
	if err != nil && !errors.Is(err, vulkan.ErrNotBuilt) {
		res.Vulkan.Error = err.Error()
	}
	res.Vulkan.Devices = []vulkanDeviceJSON{}
	for _, d := range infos {
		dj := vulkanDeviceJSON{DeviceInfo: d, Device: device.VulkanIndex(d.Index).String(), DeviceLocalBytes: d.DeviceLocalBytes()}
		dj.ExactMode, dj.FusedFMA, dj.ExactError = probeExact(d)
		switch err := gpu.FastSupport(d); {
		case err != nil:
			dj.FastError = err.Error()
		case !dj.ExactMode:
			dj.FastError = "exact mode does not run there (fast mode runs only the linears on tensor cores)"
		default:
			dj.FastMode = true
		}
		res.Vulkan.Devices = append(res.Vulkan.Devices, dj)
	}
	c, _ := device.ResolveWith(device.Auto, func() ([]vulkan.DeviceInfo, error) { return infos, err }) // auto never fails
	res.Auto = autoJSON{Device: "cpu", Name: res.CPU.Model, Reason: c.Reason}
	if c.Vulkan {
		res.Auto.Device, res.Auto.Name = device.VulkanIndex(c.Device.Index).String(), c.Device.Name
	}
	return res
}

// probeExact opens device d and runs the exactness probe on it.
func probeExact(d vulkan.DeviceInfo) (exact, fusedFMA bool, why string) {
	if d.Unsupported != "" {
		return false, false, d.Unsupported
	}
	dev, err := vulkan.Open(d.Index)
	if err != nil {
		return false, false, err.Error()
	}
	defer dev.Close()
	props, err := gpu.CheckExact(dev)
	if err != nil {
		return false, props.FMA, err.Error()
	}
	return true, props.FMA, ""
}

// cpuModel is the model name of /proc/cpuinfo, or the OS and architecture
// where there is none.
func cpuModel() string {
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				return strings.TrimSpace(v)
			}
		}
	}
	return runtime.GOOS + "/" + runtime.GOARCH
}

func printDevices(w io.Writer, res devicesJSON) {
	var ks []string
	for _, k := range res.CPU.Kernels {
		ks = append(ks, fmt.Sprintf("%s %s", k.Precision, k.Kernel))
	}
	fmt.Fprintf(w, "cpu: %s, %d cores; matrix kernels: %s\n", res.CPU.Model, res.CPU.Cores, strings.Join(ks, ", "))
	switch {
	case !res.Vulkan.Built:
		fmt.Fprintln(w, "Vulkan: not in this build (static binary); rebuild with -tags vulkan")
	case res.Vulkan.Error != "":
		fmt.Fprintf(w, "Vulkan: %s\n", res.Vulkan.Error)
	case len(res.Vulkan.Devices) == 0:
		fmt.Fprintln(w, "Vulkan: no device")
	}
	for _, d := range res.Vulkan.Devices {
		printVulkanDevice(w, d)
	}
	fmt.Fprintf(w, "--device auto picks %s: %s\n", res.Auto.Device, res.Auto.Reason)
}

func printVulkanDevice(w io.Writer, d vulkanDeviceJSON) {
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	fmt.Fprintf(w, "%s  %s\n", d.Device, d.Name)
	row := func(k, format string, a ...any) { fmt.Fprintf(w, "  %-19s %s\n", k+":", fmt.Sprintf(format, a...)) }
	row("type", "%s", d.Type)
	row("driver", "%s, %s", d.DriverName, d.DriverInfo)
	row("Vulkan", "%s", d.APIVersion)
	if d.Unsupported != "" {
		row("unsupported", "%s", d.Unsupported)
	}
	row("device memory", "%.1f GiB", float64(d.DeviceLocalBytes)/(1<<30))
	row("subgroup size", "%d", d.SubgroupSize)
	switch {
	case d.ExactMode && d.FusedFMA:
		row("exact mode", "yes (the exactness probe passed; fma() is fused)")
	case d.ExactMode:
		row("exact mode", "yes (the exactness probe passed; fma() is not fused: the float32 product's fused steps run in integer arithmetic)")
	default:
		row("exact mode", "no: %s", d.ExactError)
	}
	row("float controls", "32-bit denormals preserved %s, round to nearest even %s, signed zero/Inf/NaN preserved %s (declared by the driver)",
		yes(d.DenormPreserve32), yes(d.RoundingModeRTE32), yes(d.SignedZeroInfNanPreserve32))
	row("float64, int64", "%s, %s", yes(d.Float64), yes(d.Int64))
	shapes := func(cs []vulkan.CoopMatrixShape) string {
		if len(cs) == 0 {
			return "none"
		}
		var s []string
		for _, c := range cs {
			s = append(s, c.String())
		}
		return strings.Join(s, "; ")
	}
	row("cooperative matrix", "%s", shapes(d.CooperativeMatrix))
	row("coop. matrix (NV)", "%s", shapes(d.CooperativeMatrixNV))
	if d.FastMode {
		row("fast mode", "yes (bf16-fast: the linears on tensor cores, VK_NV_cooperative_matrix %v)", gpu.FastShape)
	} else {
		row("fast mode", "no: %s", strings.TrimPrefix(d.FastError, gpu.ErrNoFastMode.Error()+"; "))
	}
}
