package vae

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/nn"
)

// wanMean and wanStd are Wan2.1's latent statistics (wan/modules/vae.py,
// WanVAE). The reference holds them as float32 tensors, so the values used
// are the float32 roundings of these float64 values (see WanStats).
var (
	wanMean = [16]float64{-0.7571, -0.7089, -0.9113, 0.1075, -0.1745, 0.9653, -0.1517, 1.5508,
		0.4134, -0.0715, 0.5517, -0.3632, -0.1922, -0.9497, 0.2503, -0.2921}
	wanStd = [16]float64{2.8184, 1.4541, 2.3275, 2.6558, 1.2196, 1.7708, 2.6052, 2.0743,
		3.2687, 2.1526, 2.8652, 1.5579, 1.6382, 1.1253, 2.8251, 1.9160}
)

// WanStats returns Wan2.1's 16-channel latent mean and std as the
// reference uses them (float32).
func WanStats() (mean, std []float32) {
	mean, std = make([]float32, 16), make([]float32, 16)
	for i := range wanMean {
		mean[i], std[i] = float32(wanMean[i]), float32(wanStd[i])
	}
	return mean, std
}

// TraceFunc receives the output of a decoder module for one frame during
// the decoder call for latent frame call of the stream: module is the
// reference's name ("z_denorm", "conv2_out", "conv1", "middle.0",
// "middle.1", "middle.2", "upsamples.<i>", "upsamples.<i>.time_conv",
// "head"; the head's output is before the clamp) and data is [c][h][w],
// valid only during the call. Calls come in time order per module.
type TraceFunc func(call int, module string, c, h, w int, data []float32)

// Options configures a Decoder.
type Options struct {
	// Mean and Std de-normalise the latents per channel, x = z·Std + Mean
	// (computed as the reference does, z / (1/Std) + Mean in float32).
	// Both nil means Wan2.1's statistics (WanStats), which need z_dim 16.
	Mean, Std []float32
	// Trace, when set, sees every module's output (see TraceFunc).
	Trace TraceFunc
	// Precision is the precision of the convolutions and the attention
	// (the zero value is gemm.F32, "fp32"; gemm.BF16, "bf16", rounds
	// weights, activations and attention inputs to bfloat16 for the
	// products, with float32 accumulation; norms, SiLU and softmax stay
	// float32). The model packs its weights once per precision.
	Precision gemm.Precision
}

// frame is one frame of activations, [c][h][w], a tensor of the
// decoder's backend; data is its values on a backend of host memory (the
// CPU), nil on a device.
type frame struct {
	c, h, w int
	t       compute.Tensor
	data    []float32
}

// Decoder decodes one video stream: latent frames go in chunk after chunk
// (a generation block's 3 as soon as they are final) and pixel frames come
// out, with every causal convolution's feature cache (its last two input
// frames, Wan's CACHE_T = 2) and every upsample3d's first-frame flag
// carried from chunk to chunk. Memory stays bounded however long the
// video: the state is two frames per causal convolution. The frames of a
// stream equal the whole-video decode of its latents, whatever the
// chunking. A Decoder must not be used by two goroutines at once; Reset
// starts a new video.
//
// Each latent frame runs through the decoder depth first, one frame of
// activations per module at a time (an upsample3d turns each of its input
// frames but the stream's first into two), as Wan's per-latent-frame
// decoder calls do, so only a few frames beyond the caches are alive.
type Decoder struct {
	m      *Model
	mean   []float32
	invStd []float32
	trace  TraceFunc

	h, w    int // latent size of the stream; 0 before its first frame
	latents int // latent frames decoded
	pixels  int // pixel frames decoded

	hist [][2]*frame // per causal conv: its last two input frames, oldest first (nil = zero frame)
	// hist16 replaces hist at bf16: the cached frames as bfloat16 bits
	// (see causalBF16).
	hist16  [][2][]uint16
	started []bool   // per upsample3d: its first frame has passed
	out     []*frame // pixel frames of the latent frame being decoded

	be    compute.Backend
	host  compute.HostMemory // be's, nil on a device
	prec  gemm.Precision
	on    *onBackend // the model's weights on be
	stage []float32  // host copy of a frame read back from a device
	err   error      // the backend's first error in the chunk, kept until DecodeFunc returns it
	flops int64
	pool  map[int][]*frame
	bytes int64 // frame buffers allocated (live, cached or pooled)
}

// NewDecoder returns a decoder for a new video stream.
func (m *Model) NewDecoder(opt Options) (*Decoder, error) {
	mean, std := opt.Mean, opt.Std
	z := m.Cfg.ZDim
	if mean == nil && std == nil {
		if z != len(wanMean) {
			return nil, fmt.Errorf("vae: the model has z_dim %d: pass its latent mean and std (Wan2.1's statistics have %d channels)", z, len(wanMean))
		}
		mean, std = WanStats()
	}
	if len(mean) != z || len(std) != z {
		return nil, fmt.Errorf("vae: latent mean has %d values and std %d, want z_dim = %d each", len(mean), len(std), z)
	}
	if p := opt.Precision; p != gemm.F32 && p != gemm.BF16 {
		return nil, fmt.Errorf("vae: precision %v, want %s", p, strings.Join(p.Names(), " or "))
	}
	d := &Decoder{m: m, mean: append([]float32(nil), mean...), invStd: make([]float32, z), trace: opt.Trace, prec: opt.Precision}
	d.be = m.Backend()
	d.host, _ = d.be.(compute.HostMemory)
	for i := range z {
		if f := float64(mean[i]); math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("vae: latent mean[%d] = %v is not finite", i, mean[i])
		}
		if s := float64(std[i]); !(s > 0) || math.IsInf(s, 0) {
			return nil, fmt.Errorf("vae: latent std[%d] = %v must be positive and finite", i, std[i])
		}
		d.invStd[i] = 1 / std[i]
	}
	d.Reset()
	return d, nil
}

// Reset starts a new video: it clears the feature caches and the
// first-frame flags and frees the decoder's buffers.
func (d *Decoder) Reset() {
	d.h, d.w, d.latents, d.pixels = 0, 0, 0, 0
	d.hist = make([][2]*frame, d.m.slots)
	d.hist16 = make([][2][]uint16, d.m.slots)
	d.started = make([]bool, d.m.upsample3)
	d.out = nil
	d.pool = map[int][]*frame{}
	d.bytes = 0
	d.stage = nil
}

// Precision returns the decoder's precision (Options.Precision).
func (d *Decoder) Precision() gemm.Precision { return d.prec }

// LatentFrames returns the number of latent frames decoded since the
// stream began.
func (d *Decoder) LatentFrames() int { return d.latents }

// PixelFrames returns the number of pixel frames decoded since the stream
// began.
func (d *Decoder) PixelFrames() int { return d.pixels }

// Bytes returns the memory of the decoder's frame buffers: the feature
// caches plus the pooled working frames (the largest part of its memory at
// video sizes), on the host or the device. At bf16 on the CPU the caches
// are held as bfloat16, half the bytes of Model.CacheBytes.
func (d *Decoder) Bytes() int64 { return d.bytes }

// FLOPs returns the floating-point operations (2 per multiply-add) of the
// convolutions and the attention run since the stream began.
func (d *Decoder) FLOPs() int64 { return d.flops }

// Size limits of a chunk: latent sides, frames per call, and the memory of
// the decoder's feature caches (Model.CacheBytes; 3.5 GiB at 480×832, 8.1 GiB
// at 720×1280).
const (
	MaxLatentSide   = 4096
	MaxChunkFrames  = 1 << 16
	MaxCacheBytes   = 64 << 30
	maxOutputValues = 1 << 34
)

// ErrInput is wrapped by every error about a chunk of latents.
var ErrInput = errors.New("vae: bad latents")

// check validates a chunk without touching the state.
func (d *Decoder) check(z []float32, t, c, h, w int) error {
	if t <= 0 {
		return fmt.Errorf("%w: empty chunk (%d latent frames)", ErrInput, t)
	}
	if t > MaxChunkFrames {
		return fmt.Errorf("%w: chunk of %d latent frames exceeds %d", ErrInput, t, MaxChunkFrames)
	}
	if c != d.m.Cfg.ZDim {
		return fmt.Errorf("%w: latents have %d channels, the model decodes z_dim = %d", ErrInput, c, d.m.Cfg.ZDim)
	}
	if h <= 0 || w <= 0 || h > MaxLatentSide || w > MaxLatentSide {
		return fmt.Errorf("%w: latent size %d×%d outside [1, %d]", ErrInput, h, w, MaxLatentSide)
	}
	if cb := d.m.CacheBytes(h, w); cb > MaxCacheBytes {
		return fmt.Errorf("%w: latents of %d×%d need %.1f GiB of feature caches, more than %d GiB", ErrInput, h, w, float64(cb)/(1<<30), MaxCacheBytes>>30)
	}
	if d.latents > 0 && (h != d.h || w != d.w) {
		return fmt.Errorf("%w: latent size %d×%d differs from the stream's %d×%d (Reset starts a new video)", ErrInput, h, w, d.h, d.w)
	}
	if want := int64(t) * int64(c) * int64(h) * int64(w); int64(len(z)) != want {
		return fmt.Errorf("%w: %d values for %d frames × %d channels × %d×%d = %d", ErrInput, len(z), t, c, h, w, want)
	}
	s := d.m.Cfg.SpatialScale()
	if int64(3)*int64(d.m.Cfg.PixelFrames(d.latents, t))*int64(h*s)*int64(w*s) > maxOutputValues {
		return fmt.Errorf("%w: chunk of %d latent frames of %d×%d decodes to more than %d values", ErrInput, t, h, w, int64(maxOutputValues))
	}
	for i, v := range z {
		if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
			k, r := i/(c*h*w), i%(c*h*w)
			return fmt.Errorf("%w: latent frame %d of the chunk (stream frame %d), channel %d, position (%d, %d) is %v",
				ErrInput, k, d.latents+k, r/(h*w), r%(h*w)/w, r%w, v)
		}
	}
	return nil
}

// Decode decodes the stream's next chunk of t latent frames z, laid out
// [t][c][h][w] (frame-major, as the rollout produces them; FrameMajor
// converts [c][t][h][w]), and returns its pixel frames [3][F][8h][8w]
// clamped to [−1, 1]: F = 4t, or 1 + 4(t−1) for the stream's first chunk.
// A chunk with the wrong channel count, size or length, no frames, or a
// NaN or infinite value is an error that leaves the decoder unchanged.
// Decode allocates the chunk's video; over a long stream, DecodeFunc keeps
// memory flat (it allocates no frame buffers once the stream is under way).
func (d *Decoder) Decode(z []float32, t, c, h, w int) ([]float32, error) {
	if err := d.check(z, t, c, h, w); err != nil {
		return nil, err
	}
	s := d.m.Cfg.SpatialScale()
	H, W := h*s, w*s
	F := d.m.Cfg.PixelFrames(d.latents, t)
	video := make([]float32, 3*F*H*W)
	f0 := d.pixels
	err := d.DecodeFunc(z, t, c, h, w, func(i int, rgb []float32) error {
		for ch := 0; ch < 3; ch++ {
			copy(video[(ch*F+i-f0)*H*W:(ch*F+i-f0+1)*H*W], rgb[ch*H*W:(ch+1)*H*W])
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return video, nil
}

// DecodeFunc is Decode handing out the pixel frames one by one: emit gets
// the stream index of each frame and its values [3][8h][8w] (clamped to
// [−1, 1], valid only during the call), in order, as soon as the latent
// frame that makes them is decoded. Bad input is an error that leaves the
// decoder unchanged. When emit returns an error, DecodeFunc stops and
// returns it; the latent frame whose pixel frames were being handed out
// and those before it have been consumed (LatentFrames says how many). An
// error of the backend (a device's) is returned too; the decoder must
// then be Reset.
func (d *Decoder) DecodeFunc(z []float32, t, c, h, w int, emit func(index int, rgb []float32) error) error {
	if err := d.check(z, t, c, h, w); err != nil {
		return err
	}
	on, err := d.m.prepare(d.be, d.prec)
	if err != nil {
		return err
	}
	d.h, d.w, d.on = h, w, on
	return d.decode(z, t, c*h*w, emit)
}

// decode runs the decoder (its size and weights set) on the t latent
// frames z of n values each, handing out their pixel frames (DecodeFunc).
func (d *Decoder) decode(z []float32, t, n int, emit func(index int, rgb []float32) error) error {
	for k := 0; k < t; k++ {
		d.latentFrame(z[k*n : (k+1)*n])
		out := d.out
		d.out = d.out[:0]
		if d.host != nil { // a device reports its errors as each frame is read back
			d.fail(d.be.Flush())
		}
		err := d.err
		for _, f := range out {
			if err == nil {
				var rgb []float32
				if rgb, err = d.read(f); err == nil && d.err == nil {
					for i, v := range rgb {
						rgb[i] = min(max(v, -1), 1)
					}
					if err = emit(d.pixels, rgb); err != nil {
						err = fmt.Errorf("vae: decode: emitting pixel frame %d (latent frame %d): %w", d.pixels, d.latents-1, err)
					}
				}
				d.pixels++
			}
			d.put(f)
		}
		d.pixels = d.m.Cfg.PixelFrames(0, d.latents)
		if err == nil {
			err = d.err
		}
		if err != nil {
			d.err = nil
			return err
		}
	}
	return nil
}

// fail keeps a backend's first error (nil is ignored), naming the backend.
func (d *Decoder) fail(err error) {
	if err != nil && d.err == nil {
		d.err = fmt.Errorf("vae: decode on %v: %w", d.be, err)
	}
}

// read returns f's values: themselves on a host backend, else a copy
// downloaded from the device (valid until the next read); a backend error
// is kept (fail) and returned.
func (d *Decoder) read(f *frame) ([]float32, error) {
	if f.data != nil {
		return f.data, nil
	}
	n := f.c * f.h * f.w
	d.stage = grow(d.stage, n)
	d.fail(d.be.Download(d.stage, f.t))
	return d.stage, d.err
}

// Decode decodes a whole video of t latent frames z [t][c][h][w] with a
// fresh decoder and returns its pixel frames [3][1+4(t−1)][8h][8w].
func (m *Model) Decode(z []float32, t, c, h, w int, opt Options) ([]float32, error) {
	d, err := m.NewDecoder(opt)
	if err != nil {
		return nil, err
	}
	return d.Decode(z, t, c, h, w)
}

// get returns a frame buffer of c×h×w (contents undefined).
func (d *Decoder) get(c, h, w int) *frame {
	n := c * h * w
	if fs := d.pool[n]; len(fs) > 0 {
		f := fs[len(fs)-1]
		d.pool[n] = fs[:len(fs)-1]
		f.c, f.h, f.w = c, h, w
		return f
	}
	d.bytes += int64(n) * 4
	f := &frame{c: c, h: h, w: w, t: d.be.New(n)}
	if d.host != nil {
		f.data = d.host.Host(f.t)
	}
	return f
}

// put returns a frame buffer to the pool.
func (d *Decoder) put(f *frame) {
	if f != nil {
		n := f.t.Len()
		d.pool[n] = append(d.pool[n], f)
	}
}

func (d *Decoder) emitTrace(module string, f *frame) {
	if d.trace != nil {
		if v, err := d.read(f); err == nil { // else DecodeFunc returns the error
			d.trace(d.latents, module, f.c, f.h, f.w, v)
		}
	}
}

// conv runs c on the input frames in (nil: a zero frame) of hs×ws into
// out (upsampled 2× first with up), plus res (nil, or out's shape), on the
// decoder's backend, and counts its operations.
func (d *Decoder) conv(c *Conv, out *frame, in []compute.Tensor, hs, ws int, up bool, res *frame) {
	w := d.on.convs[c]
	var r compute.Tensor
	if res != nil {
		r = res.t
	}
	d.be.Conv(out.t, w, in, hs, ws, up, r)
	present := 0
	for _, f := range in {
		if f != nil {
			present++
		}
	}
	d.flops += compute.ConvFLOPs(w, present, out.h*out.w)
}

// latentFrame runs the decoder on the stream's next latent frame z
// [c][h][w] (Wan's decode: de-normalise on the host, conv2, then one
// decoder call), appending its pixel frames (unclamped) to d.out.
func (d *Decoder) latentFrame(z []float32) {
	m, dec := d.m, &d.m.Decoder
	c, h, w := m.Cfg.ZDim, d.h, d.w
	P := h * w
	x := d.get(c, h, w)
	xv := x.data
	if xv == nil {
		d.stage = grow(d.stage, c*P)
		xv = d.stage
	}
	for ch := 0; ch < c; ch++ {
		inv, mu := d.invStd[ch], d.mean[ch]
		dst := xv[ch*P : (ch+1)*P]
		for i, v := range z[ch*P : (ch+1)*P] {
			dst[i] = v/inv + mu
		}
	}
	if x.data == nil {
		d.be.Upload(x.t, xv)
	}
	d.emitTrace("z_denorm", x)
	y := d.get(c, h, w)
	d.conv(&m.Conv2, y, []compute.Tensor{x.t}, h, w, false, nil)
	d.put(x)
	d.emitTrace("conv2_out", y)

	x = d.get(dec.Conv1.Cout, h, w)
	d.causal(&dec.Conv1, y, x, nil)
	d.emitTrace("conv1", x)
	x = d.residual(&dec.Middle0, x)
	d.emitTrace("middle.0", x)
	d.attention(&dec.Middle1, x)
	d.emitTrace("middle.1", x)
	x = d.residual(&dec.Middle2, x)
	d.emitTrace("middle.2", x)
	d.upsamples(0, x)
	d.latents++
}

// causal runs the causal convolution c (KT = 3) on its stream's next input
// frame x, which then joins c's feature cache: out = c(cache₀, cache₁, x)
// (+ res). The frame leaving the cache goes back to the pool. On a device
// the cache holds the float32 frames at bf16 too: the convolution rounds
// its input frames to bfloat16 operands, so they give the bits of
// causalBF16's cache.
func (d *Decoder) causal(c *Conv, x, out, res *frame) {
	if d.prec == gemm.BF16 && d.host != nil {
		d.causalBF16(c, x, out, res)
		return
	}
	h := &d.hist[c.slot]
	in := []compute.Tensor{nil, nil, x.t}
	for i, f := range h {
		if f != nil {
			in[i] = f.t
		}
	}
	d.conv(c, out, in, x.h, x.w, false, res)
	d.put(h[0])
	h[0], h[1] = h[1], x
}

// causalBF16 is causal at bf16 on a host backend with the feature cache
// held as bfloat16 bits: at this precision the convolution rounds each of
// its input frames to bfloat16 operands (ties to even, denormals read as
// zero) before its products and reads them nowhere else, so a cached
// frame rounded that way when it joins the cache (gemm.BF16OperandBits)
// and widened back to float32 for the product gives the same bits, at
// half the memory (1.75 GiB instead of 3.5 at 480×832). The float32 input
// frame goes back to the pool; the caller reads only its dimensions
// afterwards.
func (d *Decoder) causalBF16(c *Conv, x, out, res *frame) {
	h := &d.hist16[c.slot]
	in := []compute.Tensor{nil, nil, x.t}
	var wide [2]*frame
	for i, b := range h {
		if b != nil {
			wide[i] = d.get(x.c, x.h, x.w)
			nn.WidenBF16(wide[i].data, b)
			in[i] = wide[i].t
		}
	}
	d.conv(c, out, in, x.h, x.w, false, res)
	d.put(wide[0])
	d.put(wide[1])
	b := h[0] // the oldest frame's buffer holds the newest
	if len(b) != len(x.data) {
		b = make([]uint16, len(x.data))
		d.bytes += int64(len(b)) * 2
	}
	gemm.BF16OperandBits(b, x.data)
	h[0], h[1] = h[1], b
	d.put(&frame{t: x.t, data: x.data}) // a new header: x keeps its dimensions for the caller
	x.t, x.data = nil, nil
}

// residual runs a ResidualBlock on x and returns its output (x itself,
// updated in place, when the width does not change).
func (d *Decoder) residual(b *ResidualBlock, x *frame) *frame {
	P := x.h * x.w
	a := d.get(x.c, x.h, x.w)
	d.be.RMSNormChannels(a.t, x.t, x.c, P, d.on.gamma[&b.Norm0], true) // residual.0, residual.1 (SiLU)
	hid := d.get(b.Conv2.Cout, x.h, x.w)
	d.causal(&b.Conv2, a, hid, nil)                                          // residual.2
	d.be.RMSNormChannels(hid.t, hid.t, hid.c, P, d.on.gamma[&b.Norm3], true) // residual.3, residual.4 (SiLU); 5 is dropout
	out := x
	if b.Shortcut != nil {
		out = d.get(b.Shortcut.Cout, x.h, x.w)
		d.conv(b.Shortcut, out, []compute.Tensor{x.t}, x.h, x.w, false, nil)
		d.put(x)
	}
	d.causal(&b.Conv6, hid, out, out) // residual.6, plus the shortcut
	return out
}

// attention runs the AttentionBlock on x in place: each frame's h·w
// pixels attend to each other with one head of width C.
func (d *Decoder) attention(a *AttentionBlock, x *frame) {
	C, P := x.c, x.h*x.w
	n := d.get(C, x.h, x.w)
	d.be.RMSNormChannels(n.t, x.t, C, P, d.on.gamma[&a.Norm], false)
	qkv := d.get(3*C, x.h, x.w)
	d.conv(&a.ToQKV, qkv, []compute.Tensor{n.t}, x.h, x.w, false, nil)
	// q, k, v are channels [0, C), [C, 2C), [2C, 3C); token p = y·w + x.
	q, k, v, o := d.get(C, x.h, x.w), d.get(C, x.h, x.w), d.get(C, x.h, x.w), d.get(C, x.h, x.w)
	d.be.Transpose(q.t, d.be.View(qkv.t, 0, C*P), C, P)
	d.be.Transpose(k.t, d.be.View(qkv.t, C*P, C*P), C, P)
	d.be.Transpose(v.t, d.be.View(qkv.t, 2*C*P, C*P), C, P)
	d.be.Attention(d.prec, o.t, q.t, k.t, v.t, P, P, 1, C, float32(1/math.Sqrt(float64(C))))
	d.flops += 4 * int64(P) * int64(P) * int64(C)
	d.be.Transpose(n.t, o.t, P, C)
	d.conv(&a.Proj, x, []compute.Tensor{n.t}, x.h, x.w, false, x) // proj, plus the block input
	for _, f := range []*frame{n, qkv, q, k, v, o} {
		d.put(f)
	}
}

// upsamples runs decoder.upsamples[i:] and the head on frame x, depth
// first: an upsample3d's two output frames go through the rest of the
// decoder one after the other.
func (d *Decoder) upsamples(i int, x *frame) {
	ups := d.m.Decoder.Upsamples
	for ; i < len(ups); i++ {
		if b := ups[i].Res; b != nil {
			x = d.residual(b, x)
			d.emitTrace(d.m.upNames[i], x)
			continue
		}
		r := ups[i].Up
		if r.TimeConv == nil || !d.started[r.idx] {
			// upsample2d, or the stream's first frame at an upsample3d:
			// no time_conv, and the frame is no temporal context for the
			// ones after it (the reference's "Rep" marker).
			if r.TimeConv != nil {
				d.started[r.idx] = true
			}
			y := d.spatial(r, x.t, x.c, x.h, x.w)
			d.put(x)
			x = y
			d.emitTrace(d.m.upNames[i], x)
			continue
		}
		t := d.get(r.TimeConv.Cout, x.h, x.w)
		d.causal(r.TimeConv, x, t, nil) // x joins time_conv's cache
		if d.trace != nil {
			d.emitTrace(d.m.upNames[i]+".time_conv", t)
		}
		// Output frame t becomes two: channels [0, C), then [C, 2C).
		half := x.c * x.h * x.w
		for s := 0; s < 2; s++ {
			y := d.spatial(r, d.be.View(t.t, s*half, half), x.c, x.h, x.w)
			d.emitTrace(d.m.upNames[i], y)
			d.upsamples(i+1, y)
		}
		d.put(t)
		return
	}
	d.head(x)
}

// spatial is a resample's spatial step on one frame src [c][h][w]: nearest
// 2× upsampling and the 3×3 resample.1 conv, fused.
func (d *Decoder) spatial(r *Resample, src compute.Tensor, c, h, w int) *frame {
	y := d.get(r.Conv.Cout, 2*h, 2*w)
	d.conv(&r.Conv, y, []compute.Tensor{src}, h, w, true, nil)
	return y
}

// head runs decoder.head (RMS norm, SiLU, causal conv to RGB) on x and
// queues the pixel frame.
func (d *Decoder) head(x *frame) {
	dec := &d.m.Decoder
	a := d.get(x.c, x.h, x.w)
	d.be.RMSNormChannels(a.t, x.t, x.c, x.h*x.w, d.on.gamma[&dec.HeadNorm], true)
	d.put(x)
	o := d.get(3, x.h, x.w)
	d.causal(&dec.HeadConv, a, o, nil)
	d.emitTrace("head", o)
	d.out = append(d.out, o)
}

// grow returns s with length n, reusing its storage when large enough.
func grow(s []float32, n int) []float32 {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]float32, n)
}
