package t5

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"

	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/internal/parallel"
	"github.com/densitykv/densitykv/nn"
)

// Attention is one block's self-attention ("blocks.<i>.attn"): q, k, v
// [DimAttn][Dim] and o [Dim][DimAttn], no biases.
type Attention struct {
	Q, K, V, O nn.Linear[uint16]
}

// FFN is the gated-GELU feed-forward ("blocks.<i>.ffn"):
// fc2(fc1(h) ⊙ gelu_tanh(gate(h))), with gate ("gate.0") and fc1
// [DimFFN][Dim] and fc2 [Dim][DimFFN], no biases.
type FFN struct {
	Gate, FC1, FC2 nn.Linear[uint16]
}

// Block is one encoder layer ("blocks.<i>", Wan's T5SelfAttention with
// shared_pos=False): x += attn(norm1(x)); x += ffn(norm2(x)).
type Block struct {
	Norm1 []float32 // "norm1.weight" [Dim]
	Attn  Attention // "attn"
	Norm2 []float32 // "norm2.weight" [Dim]
	FFN   FFN       // "ffn"
	// PosEmbedding is this layer's own relative-position table
	// ("pos_embedding.embedding.weight" [Buckets][Heads]).
	PosEmbedding []float32
}

// Model is Wan2.1's umT5 text encoder (T5Encoder, encoder only). The
// matrices (the embedding and every Linear) are held as bfloat16 bits; the
// norm weights and position tables, a few MB, as float32. Forward and
// Encode compute at Precision. A Model may be used from several
// goroutines; calls run one at a time (they share the model's work
// buffers).
type Model struct {
	Config Config
	// Precision is the precision of the matrix products: gemm.F32
	// ("fp32", the zero value: the weights widened, activations and
	// probabilities float32) or gemm.BF16 ("bf16": activations and
	// attention probabilities rounded to bfloat16, gemm's bfloat16
	// product with float32 accumulation). Norms, softmax and GELU are
	// float32 either way. Set it before the first call (Load does, from
	// LoadOptions.Precision), not during one.
	Precision gemm.Precision
	// TokenEmbedding is "token_embedding.weight" [Vocab][Dim] as bfloat16
	// bits.
	TokenEmbedding []uint16
	Blocks         []Block   // "blocks.<i>"
	Norm           []float32 // "norm.weight" [Dim]: the final RMSNorm
	// Rounded counts the matrix weights that Load found not to be
	// bfloat16 values (in a float32, float16 or float64 checkpoint) and
	// rounded to the nearest one (ties to even). 0 for a bfloat16 file.
	Rounded int64
	// Loaded says what Load read (weights.Source.Describe; "" for a model
	// built otherwise).
	Loaded string

	mu sync.Mutex
	be compute.Backend // UseBackend's; nil: the CPU
	w  *weightsOn      // the weights on a device backend
	ws *workspace
}

// param is one checkpoint tensor of the model: a matrix held as bfloat16
// (bf) or a vector/table held as float32 (f32), with the standard
// deviation of its random initialisation (0: ones, the norm weights).
type param struct {
	name  string
	shape []int
	bf    *[]uint16
	f32   *[]float32
	std   float64
}

func (p param) elems() int { return p.shape[0] * p.shapeTail() }

func (p param) shapeTail() int {
	n := 1
	for _, s := range p.shape[1:] {
		n *= s
	}
	return n
}

// params lists the model's tensors in checkpoint order (the module order
// of Wan's T5Encoder), binding them to m's fields and setting the Linear
// sizes. The standard deviations are Wan's init_weights.
func (m *Model) params() []param {
	c := m.Config
	d, da, df, h := c.Dim, c.DimAttn, c.DimFFN, c.Heads
	var ps []param
	lin := func(name string, l *nn.Linear[uint16], in, out int, std float64) {
		l.In, l.Out = in, out
		ps = append(ps, param{name + ".weight", []int{out, in}, &l.W, nil, std})
	}
	ps = append(ps, param{"token_embedding.weight", []int{c.Vocab, d}, &m.TokenEmbedding, nil, 1})
	for i := range m.Blocks {
		b := &m.Blocks[i]
		p := "blocks." + strconv.Itoa(i) + "."
		ps = append(ps, param{p + "norm1.weight", []int{d}, nil, &b.Norm1, 0})
		lin(p+"attn.q", &b.Attn.Q, d, da, 1/math.Sqrt(float64(d)*float64(da)))
		lin(p+"attn.k", &b.Attn.K, d, da, 1/math.Sqrt(float64(d)))
		lin(p+"attn.v", &b.Attn.V, d, da, 1/math.Sqrt(float64(d)))
		lin(p+"attn.o", &b.Attn.O, da, d, 1/math.Sqrt(float64(h)*float64(da)))
		ps = append(ps, param{p + "norm2.weight", []int{d}, nil, &b.Norm2, 0})
		lin(p+"ffn.gate.0", &b.FFN.Gate, d, df, 1/math.Sqrt(float64(d)))
		lin(p+"ffn.fc1", &b.FFN.FC1, d, df, 1/math.Sqrt(float64(d)))
		lin(p+"ffn.fc2", &b.FFN.FC2, df, d, 1/math.Sqrt(float64(df)))
		ps = append(ps, param{p + "pos_embedding.embedding.weight", []int{c.Buckets, h}, nil, &b.PosEmbedding,
			1 / math.Sqrt(2*float64(c.Buckets)*float64(h))})
	}
	ps = append(ps, param{"norm.weight", []int{d}, nil, &m.Norm, 0})
	return ps
}

// newShell returns a model of configuration cfg with its Linear sizes set
// and no weights.
func newShell(cfg Config) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m := &Model{Config: cfg, Blocks: make([]Block, cfg.Layers)}
	m.params()
	return m, nil
}

// randChunk is the number of values drawn from one random stream by
// NewRandom (streams are filled in parallel).
const randChunk = 1 << 20

// NewRandom returns a model of configuration cfg with random weights, for
// benchmarks and tests: every matrix and position table N(0, std²) with
// Wan's init_weights deviations (embedding 1, q (Dim·DimAttn)^−½, k and v
// Dim^−½, o (Heads·DimAttn)^−½, gate and fc1 Dim^−½, fc2 DimFFN^−½, tables
// (2·Buckets·Heads)^−½), rounded to bfloat16; norm weights 1. The values
// depend only on cfg and seed. umT5-XXL's configuration needs 11.4 GB.
func NewRandom(cfg Config, seed uint64) (*Model, error) {
	m, err := newShell(cfg)
	if err != nil {
		return nil, err
	}
	type job struct {
		p      param
		stream uint64
		lo, hi int
	}
	var jobs []job
	for i, p := range m.params() {
		n := p.elems()
		if p.bf != nil {
			*p.bf = make([]uint16, n)
		} else {
			*p.f32 = make([]float32, n)
		}
		for lo := 0; lo < n; lo += randChunk {
			jobs = append(jobs, job{p, uint64(i)<<32 | uint64(lo/randChunk), lo, min(n, lo+randChunk)})
		}
	}
	parallel.For(len(jobs), 1, func(a, b int) {
		for _, j := range jobs[a:b] {
			r := rand.New(rand.NewPCG(seed, j.stream))
			for k := j.lo; k < j.hi; k++ {
				v := float32(1)
				if j.p.std != 0 {
					v = float32(r.NormFloat64() * j.p.std)
				}
				if j.p.bf != nil {
					(*j.p.bf)[k] = roundBF16(v)
				} else {
					(*j.p.f32)[k] = v
				}
			}
		}
	})
	return m, nil
}

// WeightBytes returns the memory held by the weights: 2 bytes per matrix
// element (bfloat16) and 4 per norm weight and position-table entry.
func (m *Model) WeightBytes() int64 {
	var n int64
	for _, p := range m.params() {
		if p.bf != nil {
			n += 2 * int64(len(*p.bf))
		} else {
			n += 4 * int64(len(*p.f32))
		}
	}
	return n
}

// WorkspaceBytes returns the memory held by the work buffers of the last
// Forward or Encode on the model's backend (activations, the position
// bias and mask); it grows with the longest input seen. ReleaseWorkspace
// frees it. The per-call scratch of the CPU's products and attention
// (packed panels, a head's scores) is pooled by packages compute and nn
// and not counted.
func (m *Model) WorkspaceBytes() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ws == nil {
		return 0
	}
	return m.ws.bytes()
}

// ReleaseWorkspace drops the work buffers (the next call allocates them
// again).
func (m *Model) ReleaseWorkspace() {
	m.mu.Lock()
	m.ws.free()
	m.ws = nil
	m.mu.Unlock()
}

// Check validates the weights against the configuration: every tensor
// present with its size, every value finite. Errors name the tensor.
func (m *Model) Check() error {
	for _, p := range m.params() {
		n := p.elems()
		if p.bf != nil {
			if len(*p.bf) != n {
				return fmt.Errorf("t5: %s has %d values, want %d for %v", p.name, len(*p.bf), n, p.shape)
			}
			for i, h := range *p.bf {
				if !finiteBF16(h) {
					return fmt.Errorf("t5: %s has %v at %s", p.name, widen(h), index(p.shape, i))
				}
			}
			continue
		}
		if len(*p.f32) != n {
			return fmt.Errorf("t5: %s has %d values, want %d for %v", p.name, len(*p.f32), n, p.shape)
		}
		for i, v := range *p.f32 {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("t5: %s has %v at %s", p.name, v, index(p.shape, i))
			}
		}
	}
	return nil
}

// index formats flat index i of a tensor of shape as [i0, i1, ...].
func index(shape []int, i int) string {
	idx := make([]int, len(shape))
	for d := len(shape) - 1; d >= 0; d-- {
		if shape[d] > 0 {
			idx[d] = i % shape[d]
			i /= shape[d]
		}
	}
	return fmt.Sprint(idx)
}
