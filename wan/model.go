package wan

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/densitykv/densitykv/checkpoint"
	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/internal/finite"
	"github.com/densitykv/densitykv/nn"
)

// Attention holds one attention module's parameters ("self_attn",
// "cross_attn"): q, k, v, o projections and the q/k RMSNorm weights over
// the full dim.
type Attention struct {
	Q, K, V, O   nn.Linear[float32]
	NormQ, NormK []float32 // [dim]
}

// Block is one transformer layer ("blocks.<i>").
type Block struct {
	SelfAttn   Attention
	CrossAttn  Attention
	Norm3W     []float32          // "norm3.weight" [dim] (the affine LayerNorm before cross-attention)
	Norm3B     []float32          // "norm3.bias"
	FFN0, FFN2 nn.Linear[float32] // "ffn.0" [ffn][dim], "ffn.2" [dim][ffn]
	Modulation []float32          // "modulation" [1][6][dim]
}

// Model is a Wan2.1 causal DiT. It computes on a compute.Backend
// (UseBackend; the CPU by default), every backend with the same bits.
// Forward reuses buffers held by the model, so one Model must not run two
// Forward calls at once.
type Model struct {
	Cfg Config
	// Precision is the precision of every matrix product and attention
	// (gemm.F32, "fp32", or gemm.BF16, "bf16"; see Precision in the
	// package documentation), fixed when the model is built.
	Precision      gemm.Precision
	PatchEmbedding nn.Linear[float32] // "patch_embedding": Conv3d [dim][C][pt][ph][pw] as a Linear over (c, p, q, r)
	TextEmbedding0 nn.Linear[float32] // "text_embedding.0" [dim][text_dim]
	TextEmbedding2 nn.Linear[float32] // "text_embedding.2" [dim][dim]
	TimeEmbedding0 nn.Linear[float32] // "time_embedding.0" [dim][freq_dim]
	TimeEmbedding2 nn.Linear[float32] // "time_embedding.2" [dim][dim]
	TimeProjection nn.Linear[float32] // "time_projection.1" [6·dim][dim]
	Blocks         []Block
	Head           nn.Linear[float32] // "head.head" [out_len][dim]
	HeadModulation []float32          // "head.modulation" [1][2][dim]
	// Loaded says what Load read (empty for a model built otherwise).
	Loaded Loaded

	be compute.Backend // nil: the CPU (UseBackend)
	w  *weightsOn      // the parameters on be
	ws *workspace
}

// Param is one named parameter: its checkpoint name (without the "model."
// wrapper prefix), shape, and the slice holding it.
type Param struct {
	Name  string
	Shape []int
	Data  *[]float32
	// Kind drives random initialisation: "weight" (N(0,1)/√fan_in),
	// "bias" (0.01·N), "norm" (1+0.1·N), "modulation" (0.1·N).
	Kind  string
	FanIn int

	lin *nn.Linear[float32] // the Linear whose weight or bias this is
}

// Values returns the parameter's values: *Data, or for a Linear weight of
// a built model (packed, Data nil) the values the products use
// (nn.Linear.Weight).
func (p Param) Values() []float32 {
	if p.isWeight() && *p.Data == nil {
		return p.lin.Weight()
	}
	return *p.Data
}

// isWeight reports whether p is a Linear's weight.
func (p Param) isWeight() bool { return p.lin != nil && p.Data == &p.lin.W }

// New returns a model of configuration cfg and precision prec with zero
// parameters.
func New(cfg Config, prec gemm.Precision) (*Model, error) {
	m, err := newRaw(cfg, prec, true)
	if err != nil {
		return nil, err
	}
	m.pack()
	return m, nil
}

// newRaw returns a model whose parameters are not packed: zero with
// alloc, else nil.
func newRaw(cfg Config, prec gemm.Precision, alloc bool) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := checkPrecision(prec); err != nil {
		return nil, err
	}
	m := &Model{Cfg: cfg, Precision: prec, Blocks: make([]Block, cfg.Layers), be: compute.NewCPU()}
	for _, p := range m.Params() {
		if alloc {
			*p.Data = make([]float32, prod(p.Shape))
		}
	}
	return m, nil
}

func checkPrecision(prec gemm.Precision) error {
	if prec != gemm.F32 && prec != gemm.BF16 {
		return fmt.Errorf("wan: precision %v, want %s", prec, strings.Join(prec.Names(), " or "))
	}
	return nil
}

// linears returns every Linear of the model.
func (m *Model) linears() []*nn.Linear[float32] {
	ls := []*nn.Linear[float32]{&m.PatchEmbedding, &m.TextEmbedding0, &m.TextEmbedding2, &m.TimeEmbedding0, &m.TimeEmbedding2, &m.TimeProjection}
	for i := range m.Blocks {
		b := &m.Blocks[i]
		ls = append(ls, &b.SelfAttn.Q, &b.SelfAttn.K, &b.SelfAttn.V, &b.SelfAttn.O,
			&b.CrossAttn.Q, &b.CrossAttn.K, &b.CrossAttn.V, &b.CrossAttn.O, &b.FFN0, &b.FFN2)
	}
	return append(ls, &m.Head)
}

// pack packs every Linear's weights at the model's precision.
func (m *Model) pack() {
	for _, l := range m.linears() {
		l.Pack(m.Precision)
	}
}

// repack re-packs bfloat16 weights for the kernel selected now (after
// gemm.Force switched to one with another layout; a no-op otherwise).
func (m *Model) repack() {
	for _, l := range m.linears() {
		l.Repack()
	}
}

// WeightBytes returns the memory held by the layer's parameters (see
// Model.WeightBytes).
func (b *Block) WeightBytes() int64 {
	var n int64
	for _, l := range []*nn.Linear[float32]{&b.SelfAttn.Q, &b.SelfAttn.K, &b.SelfAttn.V, &b.SelfAttn.O,
		&b.CrossAttn.Q, &b.CrossAttn.K, &b.CrossAttn.V, &b.CrossAttn.O, &b.FFN0, &b.FFN2} {
		n += l.Bytes()
	}
	for _, v := range [][]float32{b.SelfAttn.NormQ, b.SelfAttn.NormK, b.CrossAttn.NormQ, b.CrossAttn.NormK, b.Norm3W, b.Norm3B, b.Modulation} {
		n += 4 * int64(len(v))
	}
	return n
}

// WeightBytes returns the memory held by the parameters: the packed
// Linear weights (gemm.PackedB.Bytes) and the float32 biases, norms and
// modulations.
func (m *Model) WeightBytes() int64 {
	var n int64
	for _, l := range m.linears() {
		n += l.Bytes()
	}
	for _, p := range m.Params() {
		if p.lin == nil {
			n += 4 * int64(len(*p.Data))
		}
	}
	return n
}

func prod(s []int) int {
	n := 1
	for _, v := range s {
		n *= v
	}
	return n
}

// Params lists every parameter in checkpoint-name order of definition.
// The slices alias the model's parameters.
func (m *Model) Params() []Param {
	c := m.Cfg
	var ps []Param
	lin := func(name string, l *nn.Linear[float32], in, out int, wshape []int) {
		l.In, l.Out = in, out
		if wshape == nil {
			wshape = []int{out, in}
		}
		ps = append(ps, Param{name + ".weight", wshape, &l.W, "weight", in, l}, Param{name + ".bias", []int{out}, &l.B, "bias", in, l})
	}
	d := c.Dim
	lin("patch_embedding", &m.PatchEmbedding, c.PatchLen(), d, []int{d, c.InDim, c.Patch[0], c.Patch[1], c.Patch[2]})
	lin("text_embedding.0", &m.TextEmbedding0, c.TextDim, d, nil)
	lin("text_embedding.2", &m.TextEmbedding2, d, d, nil)
	lin("time_embedding.0", &m.TimeEmbedding0, c.FreqDim, d, nil)
	lin("time_embedding.2", &m.TimeEmbedding2, d, d, nil)
	lin("time_projection.1", &m.TimeProjection, d, 6*d, nil)
	for i := range m.Blocks {
		b := &m.Blocks[i]
		p := "blocks." + strconv.Itoa(i) + "."
		for _, a := range []struct {
			n string
			a *Attention
		}{{"self_attn", &b.SelfAttn}, {"cross_attn", &b.CrossAttn}} {
			lin(p+a.n+".q", &a.a.Q, d, d, nil)
			lin(p+a.n+".k", &a.a.K, d, d, nil)
			lin(p+a.n+".v", &a.a.V, d, d, nil)
			lin(p+a.n+".o", &a.a.O, d, d, nil)
			ps = append(ps, Param{p + a.n + ".norm_q.weight", []int{d}, &a.a.NormQ, "norm", 0, nil},
				Param{p + a.n + ".norm_k.weight", []int{d}, &a.a.NormK, "norm", 0, nil})
		}
		ps = append(ps, Param{p + "norm3.weight", []int{d}, &b.Norm3W, "norm", 0, nil}, Param{p + "norm3.bias", []int{d}, &b.Norm3B, "bias", 0, nil})
		lin(p+"ffn.0", &b.FFN0, d, c.FFNDim, nil)
		lin(p+"ffn.2", &b.FFN2, c.FFNDim, d, nil)
		ps = append(ps, Param{p + "modulation", []int{1, 6, d}, &b.Modulation, "modulation", 0, nil})
	}
	lin("head.head", &m.Head, d, c.OutLen(), nil)
	ps = append(ps, Param{"head.modulation", []int{1, 2, d}, &m.HeadModulation, "modulation", 0, nil})
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

// FromStateDict builds a model of configuration cfg and precision prec
// from sd (keys normalised by checkpoint.NormalizeKey). Missing,
// unexpected and mis-shaped tensors are all named in one error, and so is
// a NaN or infinite value. The model takes ownership of sd's slices; the
// Linear weights are packed at prec (bf16 rounds them to nearest even).
func FromStateDict(cfg Config, sd checkpoint.StateDict, prec gemm.Precision) (*Model, error) {
	return fromStateDict(cfg, sd, prec, false)
}

// fromStateDict is FromStateDict; with release, each Linear weight's
// tensor in sd is dropped once packed (Load: peak memory of one copy of
// the float32 weights plus the packed ones made so far).
func fromStateDict(cfg Config, sd checkpoint.StateDict, prec gemm.Precision, release bool) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := checkPrecision(prec); err != nil {
		return nil, err
	}
	m := &Model{Cfg: cfg, Precision: prec, Blocks: make([]Block, cfg.Layers), be: compute.NewCPU()}
	if err := sd.Check(m.Expected()); err != nil {
		return nil, fmt.Errorf("wan: %w", err)
	}
	ps := m.Params()
	for _, p := range ps {
		t := sd[p.Name]
		if len(t.Data) != prod(p.Shape) {
			return nil, fmt.Errorf("wan: parameter %s has %d values for shape %v", p.Name, len(t.Data), p.Shape)
		}
		if i := finite.First(t.Data); i >= 0 {
			return nil, fmt.Errorf("wan: parameter %s has %v at index %d", p.Name, t.Data[i], i)
		}
	}
	for _, p := range ps {
		t := sd[p.Name]
		*p.Data = t.Data
		if p.isWeight() {
			p.lin.Pack(prec)
			if release {
				t.Data = nil
			}
		}
	}
	return m, nil
}

// Random returns a model of precision prec with seeded random parameters
// (the golden data's scheme: weights N(0,1)/√fan_in, biases 0.01·N, norm
// weights 1+0.1·N, modulations 0.1·N; at bf16 the Linear weights are
// those values rounded), for benchmarks and tests. The float32 values
// depend only on cfg and seed.
func Random(cfg Config, seed uint64, prec gemm.Precision) (*Model, error) {
	m, err := newRaw(cfg, prec, false)
	if err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(seed, 0x77616e))
	var spare float64
	haveSpare := false
	normal := func() float64 { // Marsaglia's polar method (no math.Exp)
		if haveSpare {
			haveSpare = false
			return spare
		}
		for {
			u, v := 2*r.Float64()-1, 2*r.Float64()-1
			s := float64(u*u) + float64(v*v) // no fused multiply-add: the same bits at every GOAMD64 level
			if s > 0 && s < 1 {
				f := math.Sqrt(-2 * math.Log(s) / s)
				spare, haveSpare = v*f, true
				return u * f
			}
		}
	}
	for _, p := range m.Params() {
		*p.Data = make([]float32, prod(p.Shape))
		d := *p.Data
		for i := range d {
			z := normal()
			switch p.Kind {
			case "weight":
				d[i] = float32(z / math.Sqrt(float64(p.FanIn)))
			case "bias":
				d[i] = float32(0.01 * z)
			case "norm":
				d[i] = float32(1 + 0.1*z)
			default:
				d[i] = float32(0.1 * z)
			}
		}
		if p.isWeight() {
			p.lin.Pack(prec) // one weight's float32 copy at a time
		}
	}
	return m, nil
}

// NumParams returns the number of parameters.
func (m *Model) NumParams() int64 {
	var n int64
	for _, p := range m.Params() {
		n += int64(prod(p.Shape))
	}
	return n
}
