package main

import (
	"math"
	"sort"

	"github.com/densitykv/densitykv/attn"
	"github.com/densitykv/densitykv/memory"
)

// attentionTracer wraps a memory policy and, on one denoising step of every
// block (Step == step; the paper's trace uses the 4th pass, step 3),
// measures the attention mass each query frame puts on each source frame,
// summed over layers, heads and the frame's query tokens.
//
// Key provenance: sink rows belong to the sink frames in order; local rows
// to the frames ending with the current block; memory rows of DensityKV to
// their bank entry's source frame (per head). Memory rows of other policies
// and partial-frame parts have no frame and are counted in the last column
// ("memory, frame unknown").
type attentionTracer struct {
	memory.Policy
	step   int
	frames int // total frames of the rollout

	call memory.Call
	// Mass[qf·(frames+1) + sf]: attention mass of query frame qf on source
	// frame sf (sf = frames: unknown), summed over layers, heads, queries.
	Mass []float64

	qh, kh, vh, oh []float32
	rowsByFrame    [][]int
}

func newAttentionTracer(p memory.Policy, step, frames int) *attentionTracer {
	return &attentionTracer{Policy: p, step: step, frames: frames, Mass: make([]float64, frames*(frames+1))}
}

// LastStats forwards to the wrapped policy.
func (t *attentionTracer) LastStats() memory.Stats { return statsOf(t.Policy) }

// Begin records the call and forwards it.
func (t *attentionTracer) Begin(c memory.Call) error {
	if err := t.Policy.Begin(c); err != nil {
		return err
	}
	t.call = c
	return nil
}

// Attend forwards and, on the traced step, measures the context.
func (t *attentionTracer) Attend(layer int, q, k, v []float32) (memory.Context, error) {
	ctx, err := t.Policy.Attend(layer, q, k, v)
	if err != nil || t.call.Clean || t.call.Step != t.step {
		return ctx, err
	}
	t.measure(layer, ctx)
	return ctx, nil
}

func (t *attentionTracer) measure(layer int, ctx memory.Context) {
	l := t.Policy.Layout()
	H, D, P, F := l.Heads, l.HeadDim, l.TokensPerFrame(), l.FramesPerBlock
	T := F * P
	S := ctx.Parts.Total()
	if S == 0 || len(ctx.Q) < T*H*D || len(ctx.K) < S*H*D {
		return
	}
	end := (t.call.Block + 1) * F
	unknown := t.frames
	var entries [][]int64 // per head, DensityKV memory sources
	if d, ok := t.Policy.(*memory.DensityKV); ok && layer < len(d.Banks()) {
		bk := d.Banks()[layer]
		for h := 0; h < H; h++ {
			es := bk.Entries(h)
			src := make([]int64, len(es))
			for i, e := range es {
				src[i] = e.Source
			}
			entries = append(entries, src)
		}
	}
	frameOf := func(h, s int) int {
		switch {
		case s < ctx.Parts.Sink:
			return s / P
		case s < ctx.Parts.Sink+ctx.Parts.Memory:
			r := s - ctx.Parts.Sink
			if entries != nil {
				if r >= len(entries[h]) {
					return -1 // padding row of a shorter head: masked
				}
				return int(entries[h][r] / int64(P))
			}
			return unknown
		default:
			if ctx.Parts.Local%P != 0 {
				return unknown
			}
			r := s - ctx.Parts.Sink - ctx.Parts.Memory
			return end - ctx.Parts.Local/P + r/P
		}
	}
	scale := float32(1 / math.Sqrt(float64(D)))
	qb := make([]int, F+1)
	for f := range qb {
		qb[f] = f * P
	}
	t.qh = grow32(t.qh, T*D)
	t.oh = grow32(t.oh, T*D)
	for h := 0; h < H; h++ {
		// Group key rows by source frame so each frame is one segment.
		byFrame := map[int][]int{}
		for s := 0; s < S; s++ {
			f := frameOf(h, s)
			if f < 0 {
				continue
			}
			if f > unknown {
				f = unknown
			}
			byFrame[f] = append(byFrame[f], s)
		}
		keysF := make([]int, 0, len(byFrame))
		for f := range byFrame {
			keysF = append(keysF, f)
		}
		sort.Ints(keysF)
		n := 0
		for _, f := range keysF {
			n += len(byFrame[f])
		}
		if n == 0 {
			continue
		}
		t.kh = grow32(t.kh, n*D)
		t.vh = grow32(t.vh, n*D)
		kb := []int{0}
		i := 0
		for _, f := range keysF {
			for _, s := range byFrame[f] {
				copy(t.kh[i*D:(i+1)*D], ctx.K[(s*H+h)*D:(s*H+h+1)*D])
				copy(t.vh[i*D:(i+1)*D], ctx.V[(s*H+h)*D:(s*H+h+1)*D])
				i++
			}
			kb = append(kb, i)
		}
		for tok := 0; tok < T; tok++ {
			copy(t.qh[tok*D:(tok+1)*D], ctx.Q[(tok*H+h)*D:(tok*H+h+1)*D])
		}
		mass := make([]float64, F*len(keysF))
		attn.AttentionMass(t.oh[:T*D], t.qh[:T*D], t.kh[:n*D], t.vh[:n*D], T, n, 1, D, scale, qb, kb, mass)
		for qf := 0; qf < F; qf++ {
			gq := t.call.Block*F + qf
			if gq >= t.frames {
				continue
			}
			for j, f := range keysF {
				t.Mass[gq*(t.frames+1)+min(f, unknown)] += mass[qf*len(keysF)+j]
			}
		}
	}
}

func grow32(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}
