package generate

import (
	"fmt"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/gpu"
	"github.com/densitykv/densitykv/vae"
	"github.com/densitykv/densitykv/vulkan"
)

// vaeNeed is what the VAE decoder holds on a device while it decodes a
// stream of H×W latents, in bytes, each part at its most:
//
//   - Weights: every convolution's left operand at the decoder's
//     precision (float32, or bfloat16 with its tap groups padded), its
//     bias and every norm's gamma (float32), loaded once;
//   - Caches: the feature caches, the last two input frames of every
//     causal convolution at its resolution and width, float32 at either
//     precision (vae.Model.CacheBytes);
//   - Activations: the working frames beside the caches (the decoder
//     pools its frame buffers: a module's outputs and temporaries at each
//     resolution, each upsample3d's doubled frame while its halves run on,
//     a latent frame's pixel frames until they are read);
//   - Workspace: the convolutions' scratch, the backend's im2col of a
//     chunk of pixels, the product [Cout][pixels] and at bf16 the im2col's
//     bfloat16 operands, grown as needed (a grown buffer's predecessor is
//     freed once the batch has run).
//
// The parts come from a rehearsal of the decoder's calls on a gpu.Meter
// (vae.Model.Rehearse: the model's shapes and the run's geometry, nothing
// hard-coded) over vae.RehearseFrames latent frames, after which its
// memory is flat. Their sum bounds the peak (each part's most need not
// fall at the same moment). The decoder runs latent frame by latent
// frame, so the chunk length (frames per block) changes none of them.
type vaeNeed struct {
	Weights, Caches, Activations, Workspace int64
	Largest                                 int64 // the largest single buffer
	H, W, Scale                             int   // the latent size, and pixels per latent side
}

// Total is the sum of the parts.
func (v vaeNeed) Total() int64 { return v.Weights + v.Caches + v.Activations + v.Workspace }

// estimateVAENeed computes vaeNeed for m decoding h×w latents at prec on
// a device (gpu.Backend's buffers).
func estimateVAENeed(m *vae.Model, h, w int, prec gemm.Precision) (vaeNeed, error) {
	var meter gpu.Meter
	if err := m.Rehearse(&meter, h, w, vae.RehearseFrames, prec); err != nil {
		return vaeNeed{}, err
	}
	caches := m.CacheBytes(h, w)
	return vaeNeed{Weights: meter.Peak.Weights, Caches: caches, Activations: meter.Peak.Tensors - caches, Workspace: meter.Peak.Scratch,
		Largest: meter.Largest, H: h, W: w, Scale: m.Cfg.SpatialScale()}, nil
}

// checkVAEMemory refuses, before anything runs, a decode whose VAE does
// not fit the device: its total, with dit's beside it (generate keeps the
// DiT's weights, activations, context and banks on the device while the
// VAE decodes each block, not its attention history, freed after each
// clean pass; zero for decode), against the device-local
// heaps, its largest buffer against maxStorageBufferRange and
// maxMemoryAllocationSize. The errors name each part.
func checkVAEMemory(v vaeNeed, dit deviceNeed, d vulkan.DeviceInfo) error {
	at := fmt.Sprintf("the VAE decoder at %d×%d latents (%d×%d pixels)", v.H, v.W, v.H*v.Scale, v.W*v.Scale)
	parts := fmt.Sprintf("weights %s, feature caches %s, activations %s, convolution workspace %s",
		memSize(v.Weights), memSize(v.Caches), memSize(v.Activations), memSize(v.Workspace))
	if have := int64(d.DeviceLocalBytes()); have > 0 && v.Total()+dit.Total()-dit.History > have {
		if dit.Total() == 0 {
			return fmt.Errorf("%s needs %s on %s, which has %s of device-local memory (%s); use --device cpu or a larger device",
				at, memSize(v.Total()), d.Name, memSize(have), parts)
		}
		kept := dit.Total() - dit.History
		return fmt.Errorf("the DiT and the VAE need %s together on %s, which has %s of device-local memory: the DiT %s kept on the device while the VAE decodes each block (its attention history, %s, is freed after the block's clean pass) and %s %s (%s); use --device cpu, a shorter or smaller run, or a larger device",
			memSize(v.Total()+kept), d.Name, memSize(have), memSize(kept), memSize(dit.History), at, memSize(v.Total()), parts)
	}
	if r := int64(d.MaxStorageBufferRange); r > 0 && v.Largest > r {
		return fmt.Errorf("the largest buffer of %s is %s, and %s lets a shader see at most %s of one (maxStorageBufferRange; %s); use --device cpu",
			at, memSize(v.Largest), d.Name, memSize(r), parts)
	}
	if a := int64(d.MaxAllocation); a > 0 && v.Largest > a {
		return fmt.Errorf("the largest buffer of %s is %s, and %s allocates at most %s at once (maxMemoryAllocationSize); use --device cpu",
			at, memSize(v.Largest), d.Name, memSize(a))
	}
	return nil
}

// memSize is b in GiB (two decimals), or in MiB below 1 GiB.
func memSize(b int64) string {
	if b < 1<<30 {
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	}
	return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
}
