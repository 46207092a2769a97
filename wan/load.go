package wan

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/internal/finite"
	"github.com/densitykv/densitykv/weights"
)

// LoadOptions configures Load.
type LoadOptions struct {
	// Entry selects the entry of a PyTorch checkpoint ("" = generator,
	// then generator_ema, then model; see checkpoint.TorchOptions).
	Entry string
	// LoRA is an optional LoRA (LongLive's longlive_lora.pt, whose
	// "generator_lora" entry is read, or a PEFT, diffusers or ComfyUI
	// file or folder: weights.OpenLoRA) merged into the weights.
	LoRA string
	// LoRAAlpha is the LoRA alpha: each adapter is scaled by alpha/r with r
	// its rank (A's first dimension). 0 means the alpha the file states
	// (weights.LoRAFile.Alpha), else alpha = the rank (scale 1), which
	// needs every adapter to have the same rank. LongLive uses rank 256,
	// alpha 256.
	LoRAAlpha float64
	// Precision is the model's precision (the zero value is gemm.F32,
	// "fp32"); the adapters are merged in float32 before the weights are
	// packed (and, at bf16, rounded once).
	Precision gemm.Precision
	// Progress, when set, is called after each tensor read with the
	// bytes read so far and the total (the checkpoint's, then the LoRA's).
	Progress func(done, total int64)
}

// Loaded says what Load read.
type Loaded struct {
	// Source describes the checkpoint (weights.Source.Describe).
	Source string
	// LoRA describes the merged adapters ("" without).
	LoRA string
}

// Load reads a DiT checkpoint in any layout package weights recognises
// (the official names in a .pt/.pth/.safetensors file, a diffusers
// transformer folder or file, sharded safetensors, a ComfyUI file with
// fp16/bf16/fp8 weights) into a model of configuration cfg, merging LoRA
// adapters when opt.LoRA is set: every Linear of every block (self/cross
// q, k, v, o; ffn.0, ffn.2) must then have one. Every tensor is checked
// (names, shapes, floating dtypes) before any is read; then they are
// read one at a time, converted to float32 (fp8 × its scale), merged
// with their adapter and packed at opt.Precision, through one reused
// float32 buffer, so that memory holds the packed model and one float32
// tensor (a bf16 model: 2 bytes per weight; a real-size bf16 file of
// 2.64 GiB peaks at 2.7 GiB of RSS). A NaN or infinite value is an
// error naming the tensor.
// Model.Loaded says what was read.
func Load(path string, cfg Config, opt LoadOptions) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := checkPrecision(opt.Precision); err != nil {
		return nil, err
	}
	src, err := weights.Open(path, weights.DiT, weights.Options{Entry: opt.Entry})
	if err != nil {
		return nil, fmt.Errorf("wan: load: %w", err)
	}
	defer src.Close()
	if err := Check(src, cfg); err != nil {
		return nil, err
	}
	var lora *loraPlan
	if opt.LoRA != "" {
		if lora, err = planLoRA(opt.LoRA, cfg, opt.LoRAAlpha); err != nil {
			return nil, err
		}
		defer lora.file.Close()
	}
	m := &Model{Cfg: cfg, Precision: opt.Precision, Blocks: make([]Block, cfg.Layers), be: compute.NewCPU()}
	byName := make(map[string]checkpoint.RawTensor, len(src.Tensors))
	for _, t := range src.Tensors {
		byName[t.Name] = t
	}
	total := src.Bytes()
	if lora != nil {
		total += lora.bytes()
	}
	var done int64
	buf := make([]byte, 1<<20)
	var scratch []float32 // the Linear weights' float32 values, one at a time: packing copies them
	for _, p := range m.Params() {
		t := byName[p.Name]
		var d []float32
		if p.isWeight() {
			scratch = grow(scratch, prod(p.Shape))
			d = scratch
		} else {
			d = make([]float32, prod(p.Shape))
		}
		if err := t.ReadFloat32(d, buf); err != nil {
			return nil, fmt.Errorf("wan: load: %w", err)
		}
		if i := finite.First(d); i >= 0 {
			return nil, fmt.Errorf("wan: parameter %s has %v at index %d (tensor %s of %s)", p.Name, d[i], i, t.StoredName(), t.File())
		}
		done += t.Bytes()
		if a, ok := lora.adapter(p.Name); ok {
			if err := lora.merge(a, d, p.Shape, buf); err != nil {
				return nil, err
			}
			done += a.A.Bytes() + a.B.Bytes()
		}
		*p.Data = d
		if p.isWeight() {
			p.lin.Pack(opt.Precision)
		}
		if opt.Progress != nil {
			opt.Progress(done, total)
		}
	}
	m.Loaded.Source = src.Describe()
	if lora != nil {
		m.Loaded.LoRA = lora.String()
	}
	return m, nil
}

// Check checks that src holds exactly the parameters of a model of
// configuration cfg with their shapes and floating-point dtypes, without
// reading the weights. A checkpoint of another architecture is named by
// its width and depth; the missing, unexpected and mis-shaped tensors
// are counted and the first named.
func Check(src *weights.Source, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	sd := make(checkpoint.StateDict, len(src.Tensors))
	var bad []error
	for _, t := range src.Tensors {
		sd[t.Name] = &checkpoint.Tensor{Shape: t.Shape}
		if !t.DType.IsFloat() {
			bad = append(bad, fmt.Errorf("tensor %s has dtype %s, want a floating-point type", t.StoredName(), t.DType))
		}
	}
	if err := sd.Check(mustModel(cfg).Expected()); err != nil {
		bad = append([]error{fmt.Errorf("%s%w", archHint(sd, cfg), err)}, bad...)
	}
	if err := errors.Join(bad...); err != nil {
		return fmt.Errorf("wan: checkpoint %s (%s): %w", src.Path, src.Layout, err)
	}
	return nil
}

// archHint says, when the tensors describe a DiT of another width or
// depth than cfg, which ("" otherwise).
func archHint(sd checkpoint.StateDict, cfg Config) string {
	t, ok := sd["patch_embedding.weight"]
	if !ok || len(t.Shape) == 0 {
		return ""
	}
	layers := 0
	for k := range sd {
		if rest, ok := strings.CutPrefix(k, "blocks."); ok {
			num, _, _ := strings.Cut(rest, ".")
			if i, err := strconv.Atoi(num); err == nil && i+1 > layers && i < 1<<12 {
				layers = i + 1
			}
		}
	}
	if t.Shape[0] == cfg.Dim && layers == cfg.Layers {
		return ""
	}
	return fmt.Sprintf("it is a DiT of width %d with %d blocks, the model asked for (--arch) has width %d and %d blocks (Wan2.1's 1.3B: 1536 × 30, 14B: 5120 × 40): ", t.Shape[0], layers, cfg.Dim, cfg.Layers)
}

// CheckLoRA checks the LoRA at path against a model of configuration cfg
// as Load will, without reading the factors' values: every adapter a
// Linear weight's with composing shapes, every block Linear adapted, the
// alpha (0: the file's, else the rank) usable. It returns what Load would
// merge ("…: 300 adapters (PEFT naming), rank 256, alpha 256: scale 1").
func CheckLoRA(path string, cfg Config, alpha float64) (string, error) {
	if err := cfg.Validate(); err != nil {
		return "", err
	}
	pl, err := planLoRA(path, cfg, alpha)
	if err != nil {
		return "", err
	}
	defer pl.file.Close()
	return pl.String(), nil
}

func mustModel(cfg Config) *Model {
	return &Model{Cfg: cfg, Blocks: make([]Block, cfg.Layers)}
}

// blockLoRA are the Linear layers of a block LongLive adapts, all of
// which a LoRA must adapt.
var blockLoRA = []string{"self_attn.q", "self_attn.k", "self_attn.v", "self_attn.o",
	"cross_attn.q", "cross_attn.k", "cross_attn.v", "cross_attn.o", "ffn.0", "ffn.2"}

// loraPlan is a LoRA checked against the model, ready to merge.
type loraPlan struct {
	file    *weights.LoRAFile
	byTgt   map[string]weights.Adapter
	alpha   float64 // the alpha used (0: each adapter's rank)
	from    string  // where alpha comes from
	delta   []float32
	a, b    []float32
	targets int
}

// planLoRA opens the LoRA at path for a model of configuration cfg and
// checks it before anything is read: every adapter's target is a Linear
// weight of the model with A [r, in] and B [out, r] that compose with
// it, every block Linear has an adapter, and the alpha (alpha, else the
// file's, else each adapter's rank, which needs one rank) is positive.
func planLoRA(path string, cfg Config, alpha float64) (*loraPlan, error) {
	m := mustModel(cfg)
	shapes := map[string][]int{}
	var targets []string
	for _, p := range m.Params() {
		if p.isWeight() && len(p.Shape) == 2 {
			targets = append(targets, p.Name)
			shapes[p.Name] = p.Shape
		}
	}
	f, err := weights.OpenLoRA(path, targets)
	if err != nil {
		return nil, fmt.Errorf("wan: load lora: %w", err)
	}
	pl := &loraPlan{file: f, byTgt: map[string]weights.Adapter{}, alpha: alpha}
	fail := func(err error) (*loraPlan, error) {
		f.Close()
		return nil, err
	}
	for _, a := range f.Adapters {
		w := shapes[a.Target]
		if a.A.Shape[1] != w[1] || a.B.Shape[0] != w[0] {
			return fail(fmt.Errorf("wan: lora %s: %s: weight %v, A %v, B %v do not compose (want A [r,in], B [out,r])", path, a.Target, w, a.A.Shape, a.B.Shape))
		}
		pl.byTgt[a.Target] = a
	}
	var miss []string
	for i := 0; i < cfg.Layers; i++ {
		for _, s := range blockLoRA {
			if n := "blocks." + strconv.Itoa(i) + "." + s + ".weight"; pl.byTgt[n].Target == "" {
				miss = append(miss, n)
			}
		}
	}
	if len(miss) > 0 {
		return fail(fmt.Errorf("wan: load lora %s: %d block Linear layers have no adapter: %s", path, len(miss), firstNames(miss)))
	}
	if !(alpha >= 0) || math.IsInf(alpha, 0) {
		return fail(fmt.Errorf("wan: lora: alpha %v must be positive (or 0 for the file's, else the rank)", alpha))
	}
	if alpha == 0 && f.Alpha > 0 {
		pl.alpha, pl.from = f.Alpha, f.AlphaFrom
	}
	if pl.alpha == 0 {
		pl.from = "the rank"
		if rs := f.Ranks(); len(rs) > 1 {
			var lo, hi weights.Adapter
			for _, a := range f.Adapters {
				if a.Rank() == rs[0] && lo.Target == "" {
					lo = a
				}
				if a.Rank() == rs[len(rs)-1] && hi.Target == "" {
					hi = a
				}
			}
			return fail(fmt.Errorf("wan: lora: alpha 0 means alpha = the rank, but the adapters disagree: %s has rank %d, %s rank %d (give alpha)",
				lo.Target, lo.Rank(), hi.Target, hi.Rank()))
		}
	}
	pl.targets = len(pl.byTgt)
	return pl, nil
}

// firstNames joins the first 10 names, counting the rest.
func firstNames(s []string) string {
	if len(s) <= 10 {
		return strings.Join(s, ", ")
	}
	return fmt.Sprintf("%s, … (%d more)", strings.Join(s[:10], ", "), len(s)-10)
}

// adapter returns the adapter of weight name (none for a nil plan).
func (pl *loraPlan) adapter(name string) (weights.Adapter, bool) {
	if pl == nil {
		return weights.Adapter{}, false
	}
	a, ok := pl.byTgt[name]
	return a, ok
}

// bytes is the size of the factors.
func (pl *loraPlan) bytes() int64 {
	var n int64
	for _, a := range pl.byTgt {
		n += a.A.Bytes() + a.B.Bytes()
	}
	return n
}

// merge adds (alpha/r)·B·A to w [out][in]: B·A in float32 (gemm.NN),
// scaled and added in float32, as checkpoint.MergeLoRA does.
func (pl *loraPlan) merge(a weights.Adapter, w []float32, shape []int, buf []byte) error {
	out, in, r := shape[0], shape[1], a.Rank()
	pl.a = grow(pl.a, r*in)
	pl.b = grow(pl.b, out*r)
	if err := a.A.ReadFloat32(pl.a, buf); err != nil {
		return fmt.Errorf("wan: lora: %w", err)
	}
	if err := a.B.ReadFloat32(pl.b, buf); err != nil {
		return fmt.Errorf("wan: lora: %w", err)
	}
	for _, f := range [][]float32{pl.a, pl.b} {
		if i := finite.First(f); i >= 0 {
			return fmt.Errorf("wan: lora %s: adapter %s has %v at index %d", pl.file.Path, a.Module, f[i], i)
		}
	}
	alpha := pl.alpha
	if alpha == 0 {
		alpha = float64(r)
	}
	scale := float32(alpha / float64(r))
	pl.delta = grow(pl.delta, out*in)
	gemm.NN(out, in, r, pl.b, r, pl.a, in, pl.delta, in)
	for i, v := range pl.delta {
		w[i] += float32(scale * v)
	}
	return nil
}

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// String says what is merged: "longlive_lora.pt: 300 adapters (PEFT
// naming), rank 256, alpha 256: scale 1" (where the file states the
// alpha, it says where).
func (pl *loraPlan) String() string {
	f := pl.file
	rank := "ranks " + fmt.Sprint(f.Ranks())
	if r := f.Rank(); r > 0 {
		rank = "rank " + strconv.Itoa(r)
	}
	scale := "scale alpha/rank"
	alpha := "alpha = the rank"
	if pl.alpha > 0 {
		alpha = fmt.Sprintf("alpha %g", pl.alpha)
		if pl.from != "" {
			alpha += " (" + pl.from + ")"
		}
		if r := f.Rank(); r > 0 {
			scale = fmt.Sprintf("scale %g", pl.alpha/float64(r))
		}
	} else {
		scale = "scale 1"
	}
	return fmt.Sprintf("%s: %d adapters (%s naming), %s, %s: %s", f.Path, pl.targets, f.Naming, rank, alpha, scale)
}
