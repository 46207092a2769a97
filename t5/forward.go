package t5

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/internal/parallel"
	"github.com/densitykv/densitykv/internal/vmath"
	"github.com/densitykv/densitykv/nn"
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
	return m.forward(ids, keep, tr), nil
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
		return m.forward(ids[:seqLen], keep[:seqLen], nil), nil
	}
	return m.forward(ids, keep, nil)[:seqLen*m.Config.Dim], nil
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

// workspace holds the buffers of one call, reused while n does not grow.
type workspace struct {
	n          int
	x, h, y    []float32 // [n][Dim]: residual stream, normed input, block output
	q, k, v, a []float32 // [n][DimAttn]: projections, attention output
	g, f       []float32 // [n][DimFFN]: gate and fc1 branches
	lin        nn.Scratch
	heads      []*headWS // one per attention worker
}

// headWS is one attention worker's scratch.
type headWS struct {
	s      []float32 // [n][n] scores, then probabilities
	bias   []float32 // [2n−1] this head's bias by relative position
	pk, pv gemm.PackedB
}

func (ws *workspace) bytes() int64 {
	n := int64(cap(ws.x)+cap(ws.h)+cap(ws.y)+cap(ws.q)+cap(ws.k)+cap(ws.v)+cap(ws.a)+cap(ws.g)+cap(ws.f)) * 4
	n += ws.lin.Bytes()
	for _, h := range ws.heads {
		n += int64(cap(h.s)+cap(h.bias))*4 + h.pk.Bytes() + h.pv.Bytes()
	}
	return n
}

// workspace returns buffers for n tokens (m.mu held).
func (m *Model) workspace(n int) *workspace {
	if m.ws != nil && m.ws.n >= n {
		return m.ws
	}
	c := m.Config
	ws := &workspace{n: n}
	if m.ws != nil {
		ws.lin = m.ws.lin
	}
	ws.x, ws.h, ws.y = make([]float32, n*c.Dim), make([]float32, n*c.Dim), make([]float32, n*c.Dim)
	ws.q, ws.k, ws.v, ws.a = make([]float32, n*c.DimAttn), make([]float32, n*c.DimAttn), make([]float32, n*c.DimAttn), make([]float32, n*c.DimAttn)
	ws.g, ws.f = make([]float32, n*c.DimFFN), make([]float32, n*c.DimFFN)
	m.ws = ws
	return ws
}

// forward runs the encoder on n = len(ids) tokens (inputs checked, m.mu
// held) and returns the final-norm output [n][Dim] in a new slice.
func (m *Model) forward(ids []int32, keep []bool, tr *Trace) []float32 {
	c := m.Config
	n, d := len(ids), c.Dim
	ws := m.workspace(n)
	x, h, y := ws.x[:n*d], ws.h[:n*d], ws.y[:n*d]
	m.embed(x, ids)
	if tr != nil {
		tr.Embedding = clone(x)
		tr.AfterAttn, tr.Blocks, tr.Probs = nil, nil, nil
	}
	bk := c.buckets(n)
	for l := range m.Blocks {
		b := &m.Blocks[l]
		nn.RMSNorm(h, x, n, d, c.Eps, b.Norm1)
		var probs []float32
		if tr != nil && tr.WantProbs {
			probs = make([]float32, c.Heads*n*n)
			tr.Probs = append(tr.Probs, probs)
		}
		b.Attn.forward(m.Precision, y, h, n, c, b.PosEmbedding, bk, keep, ws, probs)
		addInto(x, y)
		if tr != nil {
			tr.AfterAttn = append(tr.AfterAttn, clone(x))
		}
		nn.RMSNorm(h, x, n, d, c.Eps, b.Norm2)
		b.FFN.forward(m.Precision, y, h, n, ws)
		addInto(x, y)
		if tr != nil {
			tr.Blocks = append(tr.Blocks, clone(x))
		}
	}
	out := make([]float32, n*d)
	nn.RMSNorm(out, x, n, d, c.Eps, m.Norm)
	return out
}

func clone(x []float32) []float32 { return append([]float32(nil), x...) }

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

// addInto sets x += y.
func addInto(x, y []float32) {
	parallel.For(len(x), 1<<14, func(lo, hi int) {
		xs, ys := x[lo:hi], y[lo:hi]
		for i, v := range ys {
			xs[i] += v
		}
	})
}

// forward computes the attention of one block: y [n][Dim] = o(attention
// of q, k, v = h·Wq,k,vᵀ), with logits q·k + bias (no 1/√head_dim) and
// masked keys set to −MaxFloat32. tab is the block's position table
// [Buckets][Heads], bk the buckets by relative position; probs, when
// non-nil, receives the probabilities [Heads][n][n]. The products run at
// prec: at bf16, q, k, v and the probabilities are rounded to bfloat16 as
// they are packed (the softmax itself stays float32).
func (a *Attention) forward(prec gemm.Precision, y, h []float32, n int, c Config, tab []float32, bk []int32, keep []bool, ws *workspace, probs []float32) {
	da, hd := c.DimAttn, c.HeadDim()
	q, k, v, att := ws.q[:n*da], ws.k[:n*da], ws.v[:n*da], ws.a[:n*da]
	ws.lin.PackInput(prec, h, n, a.Q.In)
	a.Q.Stream(q, n, &ws.lin)
	a.K.Stream(k, n, &ws.lin)
	a.V.Stream(v, n, &ws.lin)
	workers := min(gemm.Threads(), c.Heads)
	for len(ws.heads) < workers {
		ws.heads = append(ws.heads, &headWS{})
	}
	// Worker w takes heads w, w + workers, …: every worker runs at least
	// one head of every call, so its scratch (and WorkspaceBytes) depends
	// on the calls' lengths only, not on how the scheduler shared the heads
	// out (the heads are independent: the results do not depend on it).
	run := func(w int) {
		hw := ws.heads[w]
		if len(hw.s) < n*n {
			hw.s = make([]float32, n*n)
			hw.bias = make([]float32, 2*n-1)
		}
		s, bias := hw.s[:n*n], hw.bias[:2*n-1]
		for hh := w; hh < c.Heads; hh += workers {
			for i, b := range bk {
				bias[i] = tab[int(b)*c.Heads+hh]
			}
			// s = q_h·k_hᵀ [n][n]
			gemm.PackNTAs(&hw.pk, prec, n, hd, k[hh*hd:], da)
			hw.pk.ProductSub(n, q[hh*hd:], da, 0, n, 0, hd, s, n, false)
			for i := 0; i < n; i++ {
				softmaxRow(s[i*n:(i+1)*n], bias[n-1-i:2*n-1-i], keep)
			}
			if probs != nil {
				copy(probs[hh*n*n:(hh+1)*n*n], s)
			}
			// att_h = p·v_h [n][head_dim]
			gemm.PackNNAs(&hw.pv, prec, hd, n, v[hh*hd:], da)
			hw.pv.ProductSub(n, s, n, 0, hd, 0, n, att[hh*hd:], da, false)
		}
	}
	if workers <= 1 {
		run(0)
	} else {
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() { defer wg.Done(); run(w) }()
		}
		wg.Wait()
	}
	ws.lin.PackInput(prec, att, n, da)
	a.O.Stream(y, n, &ws.lin)
}

// softmaxRow turns one row of logits s (q·k) into probabilities: with
// z_j = s_j + bias_j where keep[j], −MaxFloat32 elsewhere,
// p_j = e^(z_j − max z) / Σ e^(z_k − max z): the exponential
// vmath.Exp32Clamped in float32, the sum of the float32 exponentials in
// float64 in order of j (a float32 sum raised the worst golden prompt's
// relative L2 error from 2.9e-6 to 4.7e-6), rounded once to float32, then
// one float32 division 1/Σ and a float32 product per value. A row with no
// kept key is uniform, as in Wan.
func softmaxRow(s, bias []float32, keep []bool) {
	mx := float32(-math.MaxFloat32)
	for j := range s {
		z := s[j] + bias[j]
		if !keep[j] {
			z = -math.MaxFloat32
		}
		s[j] = z
		mx = max(mx, z)
	}
	var sum float64
	for j, z := range s {
		e := vmath.Exp32Clamped(z - mx)
		s[j] = e
		sum += float64(e)
	}
	inv := 1 / float32(sum)
	for j := range s {
		s[j] *= inv
	}
}

// forward computes y [n][Dim] = fc2(fc1(h) ⊙ gelu_tanh(gate(h))) with
// the products at prec.
func (f *FFN) forward(prec gemm.Precision, y, h []float32, n int, ws *workspace) {
	df := f.Gate.Out
	g, u := ws.g[:n*df], ws.f[:n*df]
	ws.lin.PackInput(prec, h, n, f.Gate.In)
	f.Gate.Stream(g, n, &ws.lin)
	f.FC1.Stream(u, n, &ws.lin)
	nn.GELUTanh(g)
	parallel.For(len(u), 1<<14, func(lo, hi int) {
		us, gs := u[lo:hi], g[lo:hi]
		for i, gv := range gs {
			us[i] *= gv
		}
	})
	ws.lin.PackInput(prec, u, n, df)
	f.FC2.Stream(y, n, &ws.lin)
}
