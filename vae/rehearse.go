package vae

import (
	"fmt"

	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/nn"
)

// RehearseFrames is the number of latent frames after which a decoder's
// memory no longer grows: the first (no time_conv), the second (every
// upsample3d past its first frame: each time_conv's first input), the
// third (after which every cache is full: a time_conv at the latents'
// resolution gets one input a latent frame) and one with every cache full
// from its start; the frames after it take the same buffers.
const RehearseFrames = 4

// Rehearse makes on be the calls a decoder of m makes on its backend to
// decode a stream of frames latent frames of h×w at precision prec — the
// weights loaded once (LoadConv, Param), every frame buffer it takes
// (New), every operation and every read (Download) — with latents of
// zeros, without m's weights or its backend (m's decoders are not
// touched). It is for a backend that computes nothing and counts what it
// would allocate (gpu.Meter: the device memory of a decode, known before
// it runs), so be must not be a backend of host memory (the CPU's).
// Its LoadConv sees the convolutions' shapes only (nn.Conv without
// weights); its Param sees the norms' gammas. Sizes the decoder refuses
// are refused, before anything is made.
func (m *Model) Rehearse(be compute.Backend, h, w, frames int, prec gemm.Precision) error {
	if _, ok := be.(compute.HostMemory); ok {
		return fmt.Errorf("vae: rehearse on %v: a backend of host memory computes (use a backend that only counts)", be)
	}
	if p := prec; p != gemm.F32 && p != gemm.BF16 {
		return fmt.Errorf("vae: rehearse: precision %v, want fp32 or bf16", p)
	}
	if h <= 0 || w <= 0 || h > MaxLatentSide || w > MaxLatentSide {
		return fmt.Errorf("%w: latent size %d×%d outside [1, %d]", ErrInput, h, w, MaxLatentSide)
	}
	if cb := m.CacheBytes(h, w); cb > MaxCacheBytes {
		return fmt.Errorf("%w: latents of %d×%d need %.1f GiB of feature caches, more than %d GiB", ErrInput, h, w, float64(cb)/(1<<30), MaxCacheBytes>>30)
	}
	c := m.Cfg.ZDim
	d := &Decoder{m: m, mean: make([]float32, c), invStd: make([]float32, c), prec: prec, be: be}
	for i := range d.invStd {
		d.invStd[i] = 1
	}
	d.Reset()
	z := make([]float32, max(frames, 0)*c*h*w)
	if err := d.check(z, frames, c, h, w); err != nil {
		return err
	}
	on := &onBackend{be: be, convs: map[*Conv]compute.ConvWeights{}, gamma: map[*RMSNorm]compute.Tensor{}}
	m.eachConv(func(cv *Conv) {
		on.convs[cv] = be.LoadConv(&nn.Conv{Cin: cv.Cin, Cout: cv.Cout, KT: cv.KT, KH: cv.KH, KW: cv.KW}, prec)
	})
	m.eachNorm(func(n *RMSNorm) { on.gamma[n] = be.Param(n.Gamma) })
	defer on.release()
	if err := be.Flush(); err != nil {
		return fmt.Errorf("vae: rehearse: loading the weights on %v: %w", be, err)
	}
	d.h, d.w, d.on = h, w, on
	return d.decode(z, frames, c*h*w, func(int, []float32) error { return nil })
}
