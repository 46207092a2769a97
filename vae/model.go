package vae

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/nn"
	"github.com/densitykv/densitykv/weights"
)

// Conv is a convolution with stride 1: Wan's CausalConv3d (KT frames of
// temporal context, KT−1 zero frames before the first, "same" zero padding
// in space) or, with KT = 1, an nn.Conv2d applied to every frame.
type Conv struct {
	Cin, Cout  int
	KT, KH, KW int
	Weight     []float32 // "weight" [Cout][Cin][KT][KH][KW] (Conv2d: [Cout][Cin][KH][KW])
	Bias       []float32 // "bias" [Cout]

	is2D bool    // the checkpoint weight is 4-D
	slot int     // feature-cache slot (KT = 3), −1 otherwise
	conv nn.Conv // the convolution on package nn, its packed operands (see op)
}

// RMSNorm is Wan's RMS_norm: x / max(‖x‖₂, 1e-12) · √C · γ over the
// channels of every pixel (an L2 normalisation; no mean, no bias).
type RMSNorm struct {
	Gamma []float32 // "gamma" [C][1][1][1] ([C][1][1] in the attention block)

	images bool // gamma is [C][1][1]
}

// ResidualBlock is x ↦ shortcut(x) + conv6(SiLU(norm3(conv2(SiLU(norm0(x)))))),
// keys "residual.<0|2|3|6>" (1 and 4 are SiLU, 5 dropout) and "shortcut".
type ResidualBlock struct {
	Norm0    RMSNorm // residual.0
	Conv2    Conv    // residual.2, causal 3×3×3
	Norm3    RMSNorm // residual.3
	Conv6    Conv    // residual.6, causal 3×3×3
	Shortcut *Conv   // shortcut, 1×1×1, only when the width changes
}

// AttentionBlock is single-head self-attention over the pixels of each
// frame: x + proj(softmax(q·kᵀ/√C)·v) with (q, k, v) = to_qkv(norm(x)).
type AttentionBlock struct {
	Norm  RMSNorm // norm
	ToQKV Conv    // to_qkv, 1×1 Conv2d, C → 3C (q, k, v in that order)
	Proj  Conv    // proj, 1×1 Conv2d
}

// Resample is an upsample2d (nearest 2× then a 3×3 Conv2d halving the
// width) or, with TimeConv, an upsample3d whose causal (3,1,1) time_conv
// first doubles the frames (skipped for the stream's first frame).
type Resample struct {
	TimeConv *Conv // time_conv, C → 2C, nil for upsample2d
	Conv     Conv  // resample.1, 3×3 Conv2d on the upsampled frame, C → C/2

	idx int // index among the upsample3d modules (their first-frame flags)
}

// UpBlock is one entry of decoder.upsamples: a residual block or a resample.
type UpBlock struct {
	Res *ResidualBlock
	Up  *Resample
}

// Decoder3d is Wan's Decoder3d ("decoder."): conv1, the middle blocks, the
// upsampling stages and the head.
type Decoder3d struct {
	Conv1     Conv           // conv1, causal 3×3×3, z_dim → dims[0]
	Middle0   ResidualBlock  // middle.0
	Middle1   AttentionBlock // middle.1
	Middle2   ResidualBlock  // middle.2
	Upsamples []UpBlock      // upsamples.<i>
	HeadNorm  RMSNorm        // head.0 (head.1 is SiLU)
	HeadConv  Conv           // head.2, causal 3×3×3, dim → 3
}

// Model is the decoding half of a Wan2.1 VAE: the latent conv2 and the
// decoder. Its parameters are immutable once built, so any number of
// Decoders (one per video stream) may share it. It keeps the float32
// weights as loaded and packs them for the matrix engine once per
// precision a decoder asks for (Options.Precision): 4 bytes per weight at
// fp32, 2 at bf16 on the AVX512_BF16 and AMX kernels.
type Model struct {
	Cfg     Config
	Conv2   Conv // conv2, 1×1×1, z_dim → z_dim, applied to the de-normalised latents
	Decoder Decoder3d

	slots     int      // causal convolutions (feature-cache slots): 32 for Wan2.1
	upsample3 int      // upsample3d modules
	upNames   []string // "upsamples.<i>"

	packMu sync.Mutex
	packed [2]bool         // per gemm.Precision: the convolutions are packed
	be     compute.Backend // the decoders' backend (nil: the CPU)
	on     [2]*onBackend   // per gemm.Precision: the weights on be, once loaded

	// Loaded says what Load read (weights.Source.Describe; "" for a model
	// built otherwise).
	Loaded string
}

// Param is one named parameter: its checkpoint name, shape and slice.
type Param struct {
	Name  string
	Shape []int
	Data  *[]float32
	// Kind drives random initialisation: "weight" (N(0,1)/√FanIn),
	// "bias" (0.05·N), "gamma" (1 + 0.1·N).
	Kind  string
	FanIn int
}

// build lays out the module tree of cfg (shapes, no parameter values).
func build(cfg Config) *Model {
	m := &Model{Cfg: cfg}
	d := cfg.dims()
	conv := func(c *Conv, cin, cout, kt, kh, kw int, is2D bool) {
		*c = Conv{Cin: cin, Cout: cout, KT: kt, KH: kh, KW: kw, is2D: is2D, slot: -1}
		if kt == 3 {
			c.slot = m.slots
			m.slots++
		}
	}
	res := func(cin, cout int) *ResidualBlock {
		b := &ResidualBlock{}
		if cin != cout {
			b.Shortcut = &Conv{}
			conv(b.Shortcut, cin, cout, 1, 1, 1, false)
		}
		conv(&b.Conv2, cin, cout, 3, 3, 3, false)
		conv(&b.Conv6, cout, cout, 3, 3, 3, false)
		return b
	}
	conv(&m.Conv2, cfg.ZDim, cfg.ZDim, 1, 1, 1, false)
	dec := &m.Decoder
	conv(&dec.Conv1, cfg.ZDim, d[0], 3, 3, 3, false)
	dec.Middle0 = *res(d[0], d[0])
	dec.Middle1 = AttentionBlock{Norm: RMSNorm{images: true}}
	conv(&dec.Middle1.ToQKV, d[0], 3*d[0], 1, 1, 1, true)
	conv(&dec.Middle1.Proj, d[0], d[0], 1, 1, 1, true)
	dec.Middle2 = *res(d[0], d[0])
	for i := 0; i+1 < len(d); i++ {
		in, out := d[i], d[i+1]
		if i > 0 {
			in /= 2 // the previous stage's resample halved the width
		}
		for r := 0; r <= cfg.NumResBlocks; r++ {
			dec.Upsamples = append(dec.Upsamples, UpBlock{Res: res(in, out)})
			in = out
		}
		if i < len(cfg.TemporalUpsample) {
			u := &Resample{idx: -1}
			if cfg.TemporalUpsample[i] {
				u.TimeConv = &Conv{}
				conv(u.TimeConv, out, 2*out, 3, 1, 1, false)
				u.idx = m.upsample3
				m.upsample3++
			}
			conv(&u.Conv, out, out/2, 1, 3, 3, true)
			dec.Upsamples = append(dec.Upsamples, UpBlock{Up: u})
		}
	}
	for i := range dec.Upsamples {
		m.upNames = append(m.upNames, "upsamples."+strconv.Itoa(i))
	}
	conv(&dec.HeadConv, d[len(d)-1], 3, 3, 3, 3, false)
	return m
}

// Params lists every parameter in the order of the module tree; the
// slices alias the model's.
func (m *Model) Params() []Param {
	var ps []Param
	conv := func(name string, c *Conv) {
		shape := []int{c.Cout, c.Cin, c.KT, c.KH, c.KW}
		if c.is2D {
			shape = []int{c.Cout, c.Cin, c.KH, c.KW}
		}
		fan := c.Cin * c.KT * c.KH * c.KW
		ps = append(ps, Param{name + ".weight", shape, &c.Weight, "weight", fan},
			Param{name + ".bias", []int{c.Cout}, &c.Bias, "bias", fan})
	}
	norm := func(name string, n *RMSNorm, ch int) {
		shape := []int{ch, 1, 1, 1}
		if n.images {
			shape = []int{ch, 1, 1}
		}
		ps = append(ps, Param{name + ".gamma", shape, &n.Gamma, "gamma", 0})
	}
	res := func(name string, b *ResidualBlock) {
		norm(name+".residual.0", &b.Norm0, b.Conv2.Cin)
		conv(name+".residual.2", &b.Conv2)
		norm(name+".residual.3", &b.Norm3, b.Conv6.Cin)
		conv(name+".residual.6", &b.Conv6)
		if b.Shortcut != nil {
			conv(name+".shortcut", b.Shortcut)
		}
	}
	conv("conv2", &m.Conv2)
	dec := &m.Decoder
	conv("decoder.conv1", &dec.Conv1)
	res("decoder.middle.0", &dec.Middle0)
	norm("decoder.middle.1.norm", &dec.Middle1.Norm, dec.Middle1.ToQKV.Cin)
	conv("decoder.middle.1.to_qkv", &dec.Middle1.ToQKV)
	conv("decoder.middle.1.proj", &dec.Middle1.Proj)
	res("decoder.middle.2", &dec.Middle2)
	for i := range dec.Upsamples {
		p := "decoder.upsamples." + strconv.Itoa(i)
		if u := dec.Upsamples[i]; u.Res != nil {
			res(p, u.Res)
		} else {
			if u.Up.TimeConv != nil {
				conv(p+".time_conv", u.Up.TimeConv)
			}
			conv(p+".resample.1", &u.Up.Conv)
		}
	}
	norm("decoder.head.0", &dec.HeadNorm, dec.HeadConv.Cin)
	conv("decoder.head.2", &dec.HeadConv)
	return ps
}

// Expected returns the parameter names and shapes a state dict must hold.
func (m *Model) Expected() []checkpoint.Expect {
	ps := m.Params()
	out := make([]checkpoint.Expect, len(ps))
	for i, p := range ps {
		out[i] = checkpoint.Expect{Name: p.Name, Shape: p.Shape}
	}
	return out
}

// NumParams returns the number of parameters.
func (m *Model) NumParams() int64 {
	var n int64
	for _, p := range m.Params() {
		n += int64(numel(p.Shape))
	}
	return n
}

func numel(s []int) int {
	n := 1
	for _, v := range s {
		n *= v
	}
	return n
}

// IsDecoderKey reports whether a (normalised) state-dict key belongs to
// the decoding path; the encoder ("encoder.*") and its latent conv
// ("conv1.*", 2·z_dim channels) do not.
func IsDecoderKey(k string) bool {
	return !strings.HasPrefix(k, "encoder.") && !strings.HasPrefix(k, "conv1.")
}

// FromStateDict builds a model from the decoder tensors of sd (encoder
// keys are ignored), inferring the configuration from their shapes (see
// InferConfig). Missing, unexpected and mis-shaped tensors are named in
// one error; so is a NaN or infinite value. The model takes ownership of
// sd's slices.
func FromStateDict(sd checkpoint.StateDict) (*Model, error) {
	dec := make(checkpoint.StateDict, len(sd))
	for k, t := range sd {
		if IsDecoderKey(k) {
			dec[k] = t
		}
	}
	cfg, err := InferConfig(dec)
	if err != nil {
		return nil, err
	}
	m := build(cfg)
	if err := dec.Check(m.Expected()); err != nil {
		return nil, fmt.Errorf("vae: %w", err)
	}
	for _, p := range m.Params() {
		t := dec[p.Name]
		if len(t.Data) != numel(p.Shape) {
			return nil, fmt.Errorf("vae: parameter %s has %d values for shape %v", p.Name, len(t.Data), p.Shape)
		}
		for i, v := range t.Data {
			if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
				return nil, fmt.Errorf("vae: parameter %s has %v at index %d", p.Name, v, i)
			}
		}
		*p.Data = t.Data
	}
	return m, nil
}

// LoadOptions configures LoadWith.
type LoadOptions struct {
	// Progress, when set, is called after each tensor read with the
	// bytes read so far and the total.
	Progress func(done, total int64)
}

// Load reads the decoder of a Wan2.1 VAE in any layout package weights
// recognises: Wan2.1_VAE.pth (a PyTorch zip holding the whole VAE's state
// dict; encoder keys are ignored), a .safetensors file (ComfyUI's
// wan_2.1_vae.safetensors; fp16, bf16 and fp8 values are widened
// exactly), or diffusers' AutoencoderKLWan (a vae/ folder, its file, or a
// diffusers model folder), with the configuration inferred from the
// tensor shapes. Every tensor is checked before any is read, and read
// one at a time. Errors name the file and the tensor at fault.
func Load(path string) (*Model, error) { return LoadWith(path, LoadOptions{}) }

// LoadWith is Load with options.
func LoadWith(path string, opt LoadOptions) (*Model, error) {
	src, err := weights.Open(path, weights.VAE, weights.Options{})
	if err != nil {
		return nil, fmt.Errorf("vae: load: %w", err)
	}
	defer src.Close()
	m, err := fromSource(src, opt)
	if err != nil {
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	m.Loaded = src.Describe()
	return m, nil
}

// fromSource builds the model from the decoder tensors of src.
func fromSource(src *weights.Source, opt LoadOptions) (*Model, error) {
	shell := make(checkpoint.StateDict, len(src.Tensors))
	byName := map[string]checkpoint.RawTensor{}
	for _, t := range src.Tensors {
		if IsDecoderKey(t.Name) {
			shell[t.Name] = &checkpoint.Tensor{Shape: t.Shape}
			byName[t.Name] = t
		}
	}
	cfg, err := InferConfig(shell)
	if err != nil {
		return nil, err
	}
	m := build(cfg)
	if err := shell.Check(m.Expected()); err != nil {
		return nil, fmt.Errorf("vae: %w", err)
	}
	var total, done int64
	for _, p := range m.Params() {
		t := byName[p.Name]
		if !t.DType.IsFloat() {
			return nil, fmt.Errorf("vae: tensor %s has dtype %s, want a floating-point type", t.StoredName(), t.DType)
		}
		total += t.Bytes()
	}
	buf := make([]byte, 1<<20)
	for _, p := range m.Params() {
		t := byName[p.Name]
		d := make([]float32, numel(p.Shape))
		if err := t.ReadFloat32(d, buf); err != nil {
			return nil, fmt.Errorf("vae: %w", err)
		}
		for i, v := range d {
			if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
				return nil, fmt.Errorf("vae: parameter %s has %v at index %d", p.Name, v, i)
			}
		}
		*p.Data = d
		done += t.Bytes()
		if opt.Progress != nil {
			opt.Progress(done, total)
		}
	}
	return m, nil
}

// Random returns a model of configuration cfg with seeded random
// parameters in the golden data's scheme (conv weights N(0,1)/√fan_in, the
// head conv's × 0.8; biases 0.05·N(0,1); norm gammas 1 + 0.1·N(0,1)), for
// benchmarks and tests. It works at any valid configuration, the real one
// included (73 M parameters).
func Random(cfg Config, seed uint64) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := build(cfg)
	r := rand.New(rand.NewPCG(seed, 0x766165))
	for _, p := range m.Params() {
		d := make([]float32, numel(p.Shape))
		for i := range d {
			z := r.NormFloat64()
			switch p.Kind {
			case "weight":
				z /= math.Sqrt(float64(p.FanIn))
				if p.Name == "decoder.head.2.weight" {
					z *= 0.8
				}
			case "bias":
				z *= 0.05
			default:
				z = 1 + 0.1*z
			}
			d[i] = float32(z)
		}
		*p.Data = d
	}
	return m, nil
}

// prepare packs every convolution's weights for products at precision
// prec, the first time that precision is asked for, re-packs bf16
// operands whose layout is not the selected kernel's (after gemm.Force),
// and returns the weights on be, loaded the first time (be must be the
// model's backend). Decoders call it before each chunk; it must not run
// while another decoder of the model is decoding at a precision not
// packed yet or during a gemm.Force.
func (m *Model) prepare(be compute.Backend, prec gemm.Precision) (*onBackend, error) {
	m.packMu.Lock()
	defer m.packMu.Unlock()
	if !m.packed[prec] {
		if prec == gemm.BF16 {
			m.eachConv(func(c *Conv) { c.packBF16() })
		} else {
			m.eachConv(func(c *Conv) { c.pack() })
		}
		m.packed[prec] = true
	} else if prec == gemm.BF16 {
		m.eachConv(func(c *Conv) { c.op().Repack() })
	}
	if be != m.backend() {
		return nil, fmt.Errorf("vae: the decoder began on %v, the model is now on %v (UseBackend): start a new decoder", be, m.be)
	}
	if on := m.on[prec]; on != nil {
		return on, nil
	}
	on := &onBackend{be: be, convs: map[*Conv]compute.ConvWeights{}, gamma: map[*RMSNorm]compute.Tensor{}}
	m.eachConv(func(c *Conv) { on.convs[c] = be.LoadConv(c.op(), prec) })
	m.eachNorm(func(n *RMSNorm) { on.gamma[n] = be.Param(n.Gamma) })
	if err := be.Flush(); err != nil {
		on.release()
		return nil, fmt.Errorf("vae: loading the weights on %v: %w", be, err)
	}
	m.on[prec] = on
	return on, nil
}

// onBackend are the model's weights on a backend at one precision: each
// convolution's and each RMS norm's gamma.
type onBackend struct {
	be    compute.Backend
	convs map[*Conv]compute.ConvWeights
	gamma map[*RMSNorm]compute.Tensor
}

func (on *onBackend) release() {
	for _, w := range on.convs {
		on.be.FreeConv(w)
	}
	for _, g := range on.gamma {
		on.be.Free(g)
	}
}

// UseBackend makes the model's decoders compute on b (nil: the CPU, the
// default): its weights are uploaded once per precision, at a decoder's
// first chunk, and what it held on the previous backend is freed. Every
// backend computes the same bits (package compute's contract). Decoders
// made before take no further chunk (start new ones); the model must not
// be decoding while it changes backend.
func (m *Model) UseBackend(b compute.Backend) {
	m.packMu.Lock()
	defer m.packMu.Unlock()
	for i, on := range m.on {
		if on != nil {
			on.release()
		}
		m.on[i] = nil
	}
	if b == nil {
		b = compute.NewCPU()
	}
	m.be = b
}

// Backend returns the backend the model's decoders compute on.
func (m *Model) Backend() compute.Backend {
	m.packMu.Lock()
	defer m.packMu.Unlock()
	return m.backend()
}

// backend is Backend with packMu held.
func (m *Model) backend() compute.Backend {
	if m.be == nil { // a Model built field by field
		m.be = compute.NewCPU()
	}
	return m.be
}

// eachNorm calls f on every RMS norm in module order.
func (m *Model) eachNorm(f func(*RMSNorm)) {
	res := func(b *ResidualBlock) {
		f(&b.Norm0)
		f(&b.Norm3)
	}
	dec := &m.Decoder
	res(&dec.Middle0)
	f(&dec.Middle1.Norm)
	res(&dec.Middle2)
	for _, u := range dec.Upsamples {
		if u.Res != nil {
			res(u.Res)
		}
	}
	f(&dec.HeadNorm)
}

// PackedBytes returns the memory of the packed weights (per precision
// packed so far), beside the float32 weights (NumParams·4 bytes).
func (m *Model) PackedBytes() int64 {
	var n int64
	m.eachConv(func(c *Conv) { n += c.conv.PackedBytes() })
	return n
}

// eachConv calls f on every convolution in module order.
func (m *Model) eachConv(f func(*Conv)) {
	res := func(b *ResidualBlock) {
		f(&b.Conv2)
		f(&b.Conv6)
		if b.Shortcut != nil {
			f(b.Shortcut)
		}
	}
	f(&m.Conv2)
	dec := &m.Decoder
	f(&dec.Conv1)
	res(&dec.Middle0)
	f(&dec.Middle1.ToQKV)
	f(&dec.Middle1.Proj)
	res(&dec.Middle2)
	for _, u := range dec.Upsamples {
		if u.Res != nil {
			res(u.Res)
			continue
		}
		if u.Up.TimeConv != nil {
			f(u.Up.TimeConv)
		}
		f(&u.Up.Conv)
	}
	f(&dec.HeadConv)
}

// Slots returns the number of causal convolutions, each of which keeps the
// last two frames of its input between calls (Wan's feature cache; 32 for
// Wan2.1).
func (m *Model) Slots() int { return m.slots }

// CacheBytes returns the memory of a decoder's feature caches once a
// stream of h×w latents has passed its first few frames: two float32
// frames of its input per causal convolution, at that convolution's
// resolution (3.5 GiB for Wan2.1 at 480×832). The working frames a decoder
// keeps besides are a few frames per resolution (Decoder.Bytes counts
// both).
func (m *Model) CacheBytes(h, w int) int64 {
	var n int64
	frame := func(c *Conv, s int) {
		if c.slot >= 0 {
			n += 2 * int64(c.Cin) * int64(h*s) * int64(w*s) * 4
		}
	}
	res := func(b *ResidualBlock, s int) { frame(&b.Conv2, s); frame(&b.Conv6, s) }
	dec := &m.Decoder
	frame(&dec.Conv1, 1)
	res(&dec.Middle0, 1)
	res(&dec.Middle2, 1)
	s := 1
	for _, u := range dec.Upsamples {
		if u.Res != nil {
			res(u.Res, s)
			continue
		}
		if u.Up.TimeConv != nil {
			frame(u.Up.TimeConv, s)
		}
		s *= 2
	}
	frame(&dec.HeadConv, s)
	return n
}
