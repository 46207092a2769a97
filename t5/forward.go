package t5

import (
	"errors"
	"fmt"
	"strings"

	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/internal/parallel"
)

// MaxTokens bounds the sequence length of one call (Wan's text_len is
// 512). The work buffers grow as n² per worker for the attention scores
// and n·DimFFN for the feed-forward.
const MaxTokens = 4096

// ErrInput is wrapped by every error about the ids or the mask.
var ErrInput = errors.New("invalid input")

// Trace receives intermediate activations of Forward, for tests and
// debugging. Every slice is a fresh copy, [n][Dim] unless stated.
type Trace struct {
	Embedding []float32   // token_embedding(ids)
	AfterAttn [][]float32 // per block: x + attn(norm1(x))
	Blocks    [][]float32 // per block: the block's output
	// WantProbs asks for Probs: per block, the attention probabilities
	// [Heads][n][n] (query rows, key columns).
	WantProbs bool
	Probs     [][]float32
}

// Forward runs the encoder on all n = len(ids) positions, as Wan's
// T5Encoder.forward does for one prompt, and returns the final-norm output
// [n][Dim] for every position (pad rows included). Keys at positions where
// mask is 0 are excluded: their logits become the most negative float32,
// which also replaces the position bias there; a nil mask keeps every
// key. ids must lie in [0, Vocab) and mask, when given, hold len(ids)
// values, each 0 or 1; 1 ≤ n ≤ MaxTokens. tr, when non-nil, receives the
// intermediates.
func (m *Model) Forward(ids, mask []int32, tr *Trace) ([]float32, error) {
	if err := m.checkInput(ids, mask); err != nil {
		return nil, err
	}
	keep := make([]bool, len(ids))
	for i := range keep {
		keep[i] = mask == nil || mask[i] != 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkPrecision(); err != nil {
		return nil, err
	}
	return m.forward(ids, keep, tr)
}

// checkPrecision rejects a Precision that is neither fp32 nor bf16.
func (m *Model) checkPrecision() error {
	if p := m.Precision; p != gemm.F32 && p != gemm.BF16 {
		return fmt.Errorf("t5: precision %v, want %s", p, strings.Join(p.Names(), " or "))
	}
	return nil
}

// Encode returns what Wan's T5EncoderModel returns for one prompt: rows
// [0, seqLen) of Forward(ids, mask), where seqLen is the number of ones in
// mask, as a new [seqLen][Dim] slice. ids and mask are the tokenizer's
// padded outputs (text_len entries: the pieces and the EOS with mask 1,
// then pads with mask 0). For such a mask, ones then zeros, only the first
// seqLen positions are computed: the pads are masked keys and the position
// bias depends only on key − query, so the rows equal Forward's bit for
// bit at a fraction of the cost. Any other mask runs Forward on all
// positions and returns its first seqLen rows, as Wan does. A mask
// without ones is an error (the tokenizer always keeps the EOS).
func (m *Model) Encode(ids, mask []int32) ([]float32, error) {
	if err := m.checkInput(ids, mask); err != nil {
		return nil, err
	}
	if mask == nil {
		return nil, fmt.Errorf("t5: encode: no mask: %w", ErrInput)
	}
	seqLen, prefix := 0, true
	for i, v := range mask {
		if v != 0 {
			seqLen++
			if seqLen != i+1 {
				prefix = false
			}
		}
	}
	if seqLen == 0 {
		return nil, fmt.Errorf("t5: encode: the mask has no 1 (the tokenizer keeps at least the EOS): %w", ErrInput)
	}
	keep := make([]bool, len(ids))
	for i := range keep {
		keep[i] = mask[i] != 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkPrecision(); err != nil {
		return nil, err
	}
	if prefix {
		return m.forward(ids[:seqLen], keep[:seqLen], nil)
	}
	out, err := m.forward(ids, keep, nil)
	if err != nil {
		return nil, err
	}
	return out[:seqLen*m.Config.Dim], nil
}

// checkInput validates ids and mask (Forward's rules).
func (m *Model) checkInput(ids, mask []int32) error {
	if len(ids) == 0 {
		return fmt.Errorf("t5: empty input (no token ids): %w", ErrInput)
	}
	if len(ids) > MaxTokens {
		return fmt.Errorf("t5: %d tokens, more than %d: %w", len(ids), MaxTokens, ErrInput)
	}
	if mask != nil && len(mask) != len(ids) {
		return fmt.Errorf("t5: mask has %d values for %d ids: %w", len(mask), len(ids), ErrInput)
	}
	for i, id := range ids {
		if id < 0 || int(id) >= m.Config.Vocab {
			return fmt.Errorf("t5: token id %d at position %d outside the vocabulary [0, %d): %w", id, i, m.Config.Vocab, ErrInput)
		}
	}
	for i, v := range mask {
		if v != 0 && v != 1 {
			return fmt.Errorf("t5: mask value %d at position %d, want 0 or 1: %w", v, i, ErrInput)
		}
	}
	return nil
}

// forward runs the encoder on n = len(ids) tokens (inputs checked, m.mu
// held) on the model's backend and returns the final-norm output
// [n][Dim] in a new slice, or the backend's error.
func (m *Model) forward(ids []int32, keep []bool, tr *Trace) ([]float32, error) {
	c := m.Config
	n, d := len(ids), c.Dim
	be := m.backend()
	w := m.weights()
	ws := m.workspace(n)
	x, h, y := be.View(ws.x, 0, n*d), be.View(ws.h, 0, n*d), be.View(ws.y, 0, n*d)
	emb := make([]float32, n*d)
	m.embed(emb, ids)
	put(be, x, emb)
	kv := make([]float32, n)
	for i, k := range keep {
		if k {
			kv[i] = 1
		}
	}
	put(be, be.View(ws.keep, 0, n), kv)
	if tr != nil {
		tr.Embedding = emb
		tr.AfterAttn, tr.Blocks, tr.Probs = nil, nil, nil
	}
	bk := c.buckets(n)
	bias := make([]float32, c.Heads*(2*n-1))
	for l := range m.Blocks {
		b, bw := &m.Blocks[l], &w.blocks[l]
		be.RMSNorm(h, x, n, d, c.Eps, bw.norm1)
		var probs []float32
		if tr != nil && tr.WantProbs {
			probs = make([]float32, c.Heads*n*n)
			tr.Probs = append(tr.Probs, probs)
		}
		blockBias(bias, b.PosEmbedding, bk, c.Heads)
		put(be, be.View(ws.bias, 0, len(bias)), bias)
		if err := m.attention(y, h, n, bw, ws, probs); err != nil {
			return nil, err
		}
		be.Add(x, y)
		if tr != nil {
			if err := m.record(&tr.AfterAttn, x); err != nil {
				return nil, err
			}
		}
		be.RMSNorm(h, x, n, d, c.Eps, bw.norm2)
		m.feedForward(y, h, n, bw, ws)
		be.Add(x, y)
		if tr != nil {
			if err := m.record(&tr.Blocks, x); err != nil {
				return nil, err
			}
		}
	}
	be.RMSNorm(ws.out, x, n, d, c.Eps, w.norm)
	out := make([]float32, n*d)
	if err := be.Download(out, be.View(ws.out, 0, n*d)); err != nil {
		return nil, fmt.Errorf("t5: %v: %w", be, err)
	}
	return out, nil
}

// record appends a copy of x to *to (a Trace's list).
func (m *Model) record(to *[][]float32, x compute.Tensor) error {
	v := make([]float32, x.Len())
	if err := m.be.Download(v, x); err != nil {
		return fmt.Errorf("t5: %v: %w", m.be, err)
	}
	*to = append(*to, v)
	return nil
}

// blockBias writes a block's position bias by relative position into
// bias [heads][2n−1]: bias[h][r+n−1] = tab[bk[r+n−1]][h].
func blockBias(bias, tab []float32, bk []int32, heads int) {
	for hh := 0; hh < heads; hh++ {
		row := bias[hh*len(bk) : (hh+1)*len(bk)]
		for i, b := range bk {
			row[i] = tab[int(b)*heads+hh]
		}
	}
}

// embed writes the embedding rows of ids into x [n][Dim].
func (m *Model) embed(x []float32, ids []int32) {
	d := m.Config.Dim
	parallel.For(len(ids), 16, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			row := m.TokenEmbedding[int(ids[i])*d : (int(ids[i])+1)*d]
			dst := x[i*d : (i+1)*d]
			for j, v := range row {
				dst[j] = widen(v)
			}
		}
	})
}

// attention computes one block's attention: y [n][Dim] = o(attention of
// q, k, v = h·Wq,k,vᵀ), with logits q·k + bias (no 1/√head_dim) and masked
// keys set to −MaxFloat32 (compute.Backend.BiasedAttention, the bias in
// ws.bias, the mask in ws.keep); probs, when non-nil, receives the
// probabilities [Heads][n][n]. The products run at the model's
// precision: at bf16, q, k, v and the probabilities are rounded to
// bfloat16 as they are packed (the softmax itself stays float32).
func (m *Model) attention(y, h compute.Tensor, n int, bw *blockWeights, ws *workspace, probs []float32) error {
	c, be := m.Config, m.be
	da := c.DimAttn
	q, k, v, att := be.View(ws.q, 0, n*da), be.View(ws.k, 0, n*da), be.View(ws.v, 0, n*da), be.View(ws.a, 0, n*da)
	be.Linear(q, bw.q, h, n)
	be.Linear(k, bw.k, h, n)
	be.Linear(v, bw.v, h, n)
	var pt compute.Tensor
	if probs != nil {
		pt = be.New(len(probs))
		defer be.Free(pt)
	}
	be.BiasedAttention(m.Precision, att, q, k, v, n, c.Heads, c.HeadDim(), be.View(ws.bias, 0, c.Heads*(2*n-1)), be.View(ws.keep, 0, n), pt)
	be.Linear(y, bw.o, att, n)
	if pt != nil {
		if err := be.Download(probs, pt); err != nil {
			return fmt.Errorf("t5: %v: %w", be, err)
		}
	}
	return nil
}

// feedForward computes y [n][Dim] = fc2(fc1(h) ⊙ gelu_tanh(gate(h)))
// with the products at the model's precision.
func (m *Model) feedForward(y, h compute.Tensor, n int, bw *blockWeights, ws *workspace) {
	be, df := m.be, m.Config.DimFFN
	g, u := be.View(ws.g, 0, n*df), be.View(ws.f, 0, n*df)
	be.Linear(g, bw.gate, h, n)
	be.Linear(u, bw.fc1, h, n)
	be.GELUTanh(g)
	be.Mul(u, g)
	be.Linear(y, bw.fc2, u, n)
}
