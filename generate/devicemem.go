package generate

import (
	"errors"
	"fmt"
	"strings"

	"github.com/densitykv/densitykv/config"
	"github.com/densitykv/densitykv/gpu"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/vulkan"
)

// ditShape is what the estimate reads of the DiT's architecture.
type ditShape struct {
	Dim, FFNDim, TextLen, Layers int
	PatchH, PatchW               int // the patch's height and width
	PatchLen, OutLen             int // a token's input and output values
}

// deviceNeed is what the DiT holds on a device during a run (bytes): its
// weights (at the run's precision, uploaded once), every layer's text
// keys and values, one forward call's activations, and the largest
// self-attention context the memory policy can return for a layer (sent
// to the device layer by layer: one layer's at a time). Context is also
// the largest single buffer, with the largest weight.
//
// A policy that plans its context (memory.Plans: all but Deep Forcing)
// keeps every layer's history there too (History: the context's keys
// and values before the current block's, per layer; wan's history.go),
// sent once per block and layer instead of a context per call; with
// DensityKV, whose banks are on the device, without the banks' rows
// (copied from the banks there, memory.SegDevice).
//
// With the DensityKV policy the banks are on the device too (gpu.NewBank):
// Banks is every layer's bank (descriptors, norms, keys and values at the
// capacity M per head, twice: an update rebuilds a bank beside the one
// before), BankScratch the update scratch all of them share (one block of
// candidates against M, per head), both per gpu.BankBytes.
type deviceNeed struct {
	Weights, Text, Activations, Context int64
	History                             int64
	Banks, BankScratch                  int64
	Largest                             int64 // the largest single buffer
	Keys                                int   // the context's keys
}

// Total is the sum of the parts.
func (n deviceNeed) Total() int64 {
	return n.Weights + n.Text + n.Activations + n.Context + n.History + n.Banks + n.BankScratch
}

// estimateDeviceNeed computes deviceNeed for the DiT c with weights of
// weightBytes (largest tensor largestWeight bytes) at the run's geometry
// and memory policy: a policy's context is at most its budget (sink and
// window frames and the historical capacity M, or the native cache), and
// the full history's is every token of the run.
func estimateDeviceNeed(c ditShape, weightBytes, largestWeight int64, g config.GenerateSection, mc memory.Config, policy string) deviceNeed {
	tpf := (g.LatentHeight / c.PatchH) * (g.LatentWidth / c.PatchW)
	T := g.FramesPerBlock * tpf
	total := g.Blocks * T
	keys := total
	if !strings.Contains(strings.ToLower(policy), "full") { // full-history and its aliases attend everything
		keys = min(total, max(mc.CacheFrames*tpf, (mc.SinkFrames+mc.WindowFrames)*tpf+mc.Capacity))
	}
	const f32 = 4
	n := deviceNeed{
		Weights:     weightBytes,
		Text:        int64(c.Layers+1) * 2 * int64(c.TextLen*c.Dim) * f32,
		Activations: (8*int64(T*c.Dim) + 2*int64(T*c.FFNDim) + int64(T*(c.PatchLen+c.OutLen))) * f32,
		Context:     2 * int64(keys*c.Dim) * f32,
		Keys:        keys,
	}
	if memory.Plans(policy) {
		rows := keys - T
		if policy == memory.NameDensityKV {
			rows -= min(mc.Capacity, rows) // the banks' rows are copied from the banks on the device
		}
		n.History = int64(c.Layers) * 2 * int64(rows*c.Dim) * f32
	}
	n.Largest = max(largestWeight, int64(keys*c.Dim)*f32, int64(T*c.FFNDim)*f32)
	if policy == memory.NameDensityKV {
		if bc, err := memory.DensityKVBankConfig(mc); err == nil { // else the policy's build refuses it
			per, scratch := gpu.BankBytes(bc, T)
			n.Banks, n.BankScratch = int64(c.Layers)*per, scratch
			// The largest of a bank's buffers: the candidate×bank
			// interactions of a head.
			n.Largest = max(n.Largest, int64(T)*int64(bc.Capacity)*f32*9/8, int64(bc.Capacity)*int64(max(bc.KeyDim, bc.DescDim))*f32)
		}
	}
	return n
}

// checkDeviceMemory refuses, before anything runs, a run whose DiT does
// not fit the device: the total against its device-local heaps, the
// largest buffer against what one binding may see (maxStorageBufferRange)
// and one allocation may be (maxMemoryAllocationSize).
func checkDeviceMemory(n deviceNeed, d vulkan.DeviceInfo) error {
	gib := func(b int64) string { return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30)) }
	parts := fmt.Sprintf("weights %s, text keys and values %s, activations %s, attention context of %d keys %s",
		gib(n.Weights), gib(n.Text), gib(n.Activations), n.Keys, gib(n.Context))
	if n.History > 0 {
		parts += fmt.Sprintf(", every layer's history %s", gib(n.History))
	}
	if n.Banks > 0 {
		parts += fmt.Sprintf(", DensityKV banks %s and their update scratch %s", gib(n.Banks), gib(n.BankScratch))
	}
	what := "the DiT needs"
	if n.Banks > 0 {
		what = "the DiT and DensityKV's banks need"
	}
	if have := int64(d.DeviceLocalBytes()); have > 0 && n.Total() > have {
		return fmt.Errorf("%s %s on %s, which has %s of device-local memory (%s); use --device cpu, a shorter or smaller run, or a larger device",
			what, gib(n.Total()), d.Name, gib(have), parts)
	}
	if r := int64(d.MaxStorageBufferRange); r > 0 && n.Largest > r {
		return fmt.Errorf("the DiT's largest buffer is %s, and %s lets a shader see at most %s of one (maxStorageBufferRange; %s); use --device cpu",
			gib(n.Largest), d.Name, gib(r), parts)
	}
	if a := int64(d.MaxAllocation); a > 0 && n.Largest > a {
		return fmt.Errorf("the DiT's largest buffer is %s, and %s allocates at most %s at once (maxMemoryAllocationSize); use --device cpu", gib(n.Largest), d.Name, gib(a))
	}
	return nil
}

// deviceFault adds to a run's failure, when the device failed (lost, out
// of memory), how to go on: from the run's checkpoint after block
// snapAt−1 (snapAt < 0: none yet), which --resume continues on this
// device or another with the same bits.
func deviceFault(err error, gc config.GenerateConfig, snapAt int) error {
	if !errors.Is(err, vulkan.ErrDeviceLost) && !errors.Is(err, vulkan.ErrOutOfDeviceMemory) {
		return err
	}
	if snapAt <= 0 {
		return fmt.Errorf("%w\nthe device failed before the run's first checkpoint (one every %d blocks: --snapshot-every): run it again, on this device or with --device cpu", err, gc.Run.SnapshotEvery)
	}
	return fmt.Errorf("%w\nthe device failed; the run folder keeps its checkpoint after block %d: densitykv generate --out %s --name %s --resume continues from it (with --device cpu, or another device, if this one stays unusable; the results are the same bits)",
		err, snapAt-1, gc.Run.Out, gc.Run.Name)
}
