package memory

import (
	"math"
	"sort"

	"github.com/densitykv/densitykv/gemm"
)

// DeepForcing is the Deep Forcing baseline (persistent context, the
// DensityKV authors' adapter utils/deep_forcing.py of
// cvlab-kaist/DeepForcing): a CacheFrames cache (CacheFrames·P tokens)
// holding the sink, a compressed middle and the most recent RecentFrames
// frames (including the current block). Until the cache would overflow it
// behaves like Native. At the first call of a block that would overflow
// it, each layer scores every non-sink key that is not in the recent tail
// (the compressed middle and the history frames that leave the tail) and
// keeps the top (CacheFrames − SinkFrames − RecentFrames)·P in
// chronological order (ties to the older token); a token may survive at
// most MaxReuse compressions.
//
// Scores are per token per layer, shared by the heads: with Fusion sum,
// (Σ buffered q)·k / (H·√d), the dot product over all heads flattened
// (persistent_context_scores); with max, the largest single buffered
// query's q·k / (H·√d). The buffered queries are post-RoPE at absolute
// positions; with Queries every-call (the authors') they are the last
// RecentFrames·P query tokens of every forward call, appended before the
// call scores, so the first call of a block scores with the last clean
// frame and the block's frames at its first timestep; with clean they are
// the clean passes' queries of the last RecentFrames frames.
//
// Kept keys keep their absolute RoPE; queries and tail keys are at
// absolute positions. The sink moves after a compression: with Sink
// authors (the official code's relocation) to start − T − S, T the
// compressed cache's frames after the sink (start − 12 for the paper's
// cache), by the official bookkeeping (the first compression records the
// position without moving the sink, later ones move it by the change);
// with before-tail to just before the recent tail (start − 2).
type DeepForcing struct {
	*core
	sink []*frame // raw keys
	hist []*frame // committed non-sink frames not compressed, keys rotated at absolute positions
	mid  []dfStore
	qtok [][]float32 // per layer, the buffered post-RoPE queries [n][H][D], at most RecentFrames·P tokens
	// compressed: some compression has happened (the before-tail sink).
	compressed bool
	// The authors' sink bookkeeping per layer: sink_base_abs_start_frame
	// (valid once sinkSet) and the temporal shift of the sink keys from
	// their absolute positions.
	sinkBase  []int
	sinkSet   []bool
	sinkShift []int
	// During the first call of a block that compresses: the number of
	// history frames leaving the tail (compress is set at Begin; each
	// layer compresses in its Attend; End drops the frames from hist).
	compress bool
	leaving  int
	qrot     []float32 // scratch: a call's rotated queries
	keys     []float32 // scratch: candidate keys for the max fusion
}

// dfStore is one layer's compressed middle: tokens in chronological order.
type dfStore struct {
	K, V  []float32 // [n][H][D], keys rotated at their absolute position
	Src   []int64   // global token index
	Reuse []int32   // compressions survived
}

func newDeepForcing(cfg Config) (Policy, error) {
	c, err := newCore(NameDeepForcing, cfg)
	if err != nil {
		return nil, err
	}
	L := cfg.Layout.Layers
	return &DeepForcing{core: c, mid: make([]dfStore, L), qtok: make([][]float32, L),
		sinkBase: make([]int, L), sinkSet: make([]bool, L), sinkShift: make([]int, L)}, nil
}

// tailHist returns how many committed history frames belong to the recent
// tail of a block.
func (p *DeepForcing) tailHist() int { return p.cfg.DeepForcing.RecentFrames - p.lay.FramesPerBlock }

// Begin starts a call; the first call of a block decides whether the block
// compresses the cache (it would overflow it).
func (p *DeepForcing) Begin(c Call) error {
	if err := p.checkBegin(c); err != nil {
		return err
	}
	p.openCall(c)
	if c.First {
		p.compress, p.leaving = p.overflows(), 0
		if p.compress {
			p.leaving = len(p.hist) - min(len(p.hist), p.tailHist())
			p.compressed = true
		}
	}
	for l := range p.stats.Occupancy {
		for h := range p.stats.Occupancy[l] {
			p.stats.Occupancy[l][h] = len(p.mid[l].Src)
		}
	}
	return nil
}

// cacheTokens returns the tokens of layer l's cache (sink, middle, history).
func (p *DeepForcing) cacheTokens(l int) int {
	return (len(p.sink)+len(p.hist))*p.tpf + len(p.mid[l].Src)
}

// overflows reports whether the current (first) call's block would
// overflow the cache of some layer (should_compress_cache), unless the
// block holds sink frames.
func (p *DeepForcing) overflows() bool {
	S, C, F := p.cfg.SinkFrames, p.cfg.CacheFrames, p.lay.FramesPerBlock
	start := p.call.Block * F
	if min(S, start+F)-start > 0 {
		return false // the current block holds sink frames
	}
	for l := range p.mid {
		if p.cacheTokens(l)+F*p.tpf > C*p.tpf {
			return true
		}
	}
	return false
}

// bufferQueries appends rotated queries [n][H][D] to layer's buffer and
// keeps its last RecentFrames·P tokens (update_recent_queries).
func (p *DeepForcing) bufferQueries(layer int, qr []float32) {
	keep := p.cfg.DeepForcing.RecentFrames * p.tpf * p.row
	b := append(p.qtok[layer], qr...)
	if len(b) > keep {
		b = append(b[:0:0], b[len(b)-keep:]...)
	}
	p.qtok[layer] = b
}

// compressLayer replaces layer l's middle by the top-scoring candidates
// (the middle and the leaving history frames) and, for the authors' sink,
// updates the layer's sink bookkeeping.
func (p *DeepForcing) compressLayer(l int) {
	S, C, R := p.cfg.SinkFrames, p.cfg.CacheFrames, p.cfg.DeepForcing.RecentFrames
	budget := (C - S - R) * p.tpf
	H, D, row := p.lay.Heads, p.lay.HeadDim, p.row
	m := &p.mid[l]
	type cand struct {
		k, v  []float32
		src   int64
		reuse int32
	}
	var cs []cand
	for i := range m.Src {
		cs = append(cs, cand{m.K[i*row : (i+1)*row], m.V[i*row : (i+1)*row], m.Src[i], m.Reuse[i]})
	}
	for _, f := range p.hist[:p.leaving] {
		for t := 0; t < p.tpf; t++ {
			cs = append(cs, cand{f.K[l][t*row : (t+1)*row], f.V[l][t*row : (t+1)*row], int64(f.ID*p.tpf + t), 0})
		}
	}
	norm := float64(H) * math.Sqrt(float64(D))
	score := make([]float64, len(cs))
	q := p.qtok[l]
	switch p.cfg.DeepForcing.Fusion {
	case DFFusionMax:
		// max over buffered query tokens of q·k: C = K·Qᵀ, one row per
		// candidate, reduced per row (independent of the thread count).
		p.keys = grow(p.keys, len(cs)*row)
		for i, c := range cs {
			copy(p.keys[i*row:(i+1)*row], c.k)
		}
		nq := len(q) / row
		best := make([]float32, len(cs))
		for i := range best {
			best[i] = float32(math.Inf(-1))
		}
		gemm.NTFuncParallel(len(cs), nq, row, p.keys, row, q, row, func(_, i0, _, rows, cols int, tile []float32, ldt int) {
			for r := 0; r < rows; r++ {
				b := best[i0+r]
				for _, v := range tile[r*ldt : r*ldt+cols] {
					b = max(b, v)
				}
				best[i0+r] = b
			}
		})
		for i, b := range best {
			score[i] = float64(b) / norm
		}
	default:
		qs := make([]float64, row) // Σ of the buffered queries
		for t := 0; t < len(q)/row; t++ {
			for i, v := range q[t*row : (t+1)*row] {
				qs[i] += float64(v)
			}
		}
		for i := range cs {
			var s float64
			for j, v := range cs[i].k {
				s += qs[j] * float64(v)
			}
			score[i] = s / norm
		}
	}
	var elig []int
	for i := range cs {
		if int(cs[i].reuse) < p.cfg.DeepForcing.MaxReuse {
			elig = append(elig, i)
		}
	}
	sort.SliceStable(elig, func(a, b int) bool { return score[elig[a]] > score[elig[b]] })
	if len(elig) > budget {
		elig = elig[:budget]
	}
	sort.Ints(elig)
	nm := dfStore{K: make([]float32, 0, len(elig)*row), V: make([]float32, 0, len(elig)*row),
		Src: make([]int64, 0, len(elig)), Reuse: make([]int32, 0, len(elig))}
	for _, i := range elig {
		nm.K = append(nm.K, cs[i].k...)
		nm.V = append(nm.V, cs[i].v...)
		nm.Src = append(nm.Src, cs[i].src)
		nm.Reuse = append(nm.Reuse, cs[i].reuse+1)
	}
	*m = nm
	p.stats.Offered[l] = len(cs)
	p.stats.Admitted[l] = len(elig)
	p.stats.EvictedCapacity[l] = (len(cs) - len(elig)) * H
	for h := range p.stats.Occupancy[l] {
		p.stats.Occupancy[l][h] = len(nm.Src)
	}
	// The official relocation (prepare_deep_forcing_cache): the packed
	// cache is sink | selected | recent, its tail after the sink is
	// ⌊(selected + R·P)/P⌋ frames, and the sink's desired start frame is
	// start − tail − S. The first compression only records it (its delta
	// is the physical minus the configured cache frames, 0); later ones
	// move the sink by the change.
	start := p.call.Block * p.lay.FramesPerBlock
	desired := start - (len(nm.Src)+R*p.tpf)/p.tpf - S
	if p.sinkSet[l] {
		p.sinkShift[l] += desired - p.sinkBase[l]
	}
	p.sinkBase[l], p.sinkSet[l] = desired, true
}

// sinkPos returns the RoPE temporal position of committed sink frame i
// (id) in layer's context; tail is the first frame of the recent tail.
func (p *DeepForcing) sinkPos(layer, i, id, tail int) int {
	if p.cfg.DeepForcing.Sink == DFSinkBeforeTail {
		if p.compressed {
			return max(0, tail-len(p.sink)+i)
		}
		return id
	}
	return id + p.sinkShift[layer]
}

// Attend buffers the call's queries (every-call), compresses the layer on
// the first call of a block that overflows the cache, and returns
// [sink | compressed middle | tail] for one layer.
func (p *DeepForcing) Attend(layer int, q, k, v []float32) (Context, error) {
	if err := p.checkAttend(layer, q, k, v); err != nil {
		return Context{}, err
	}
	p.stage(layer, q, k, v, true)
	F, S := p.lay.FramesPerBlock, p.cfg.SinkFrames
	start := p.call.Block * F
	n := p.tpf * p.row
	if p.cfg.DeepForcing.Queries == DFQueriesEveryCall {
		p.qrot = append(p.qrot[:0], q...)
		for f := 0; f < F; f++ {
			p.rot.Frame(p.qrot[f*n:(f+1)*n], p.lay.Heads, start+f)
		}
		p.bufferQueries(layer, p.qrot)
	}
	if p.call.First && p.compress {
		p.startUpdate()
		p.compressLayer(layer)
		p.stopUpdate()
	}
	hist := p.hist[p.leaving:] // the tail (all history outside a compressing call)
	p.ctxReset()
	var parts Parts
	qt := make([]int, F)
	for f := range qt {
		qt[f] = start + f
	}
	tail := start
	if len(hist) > 0 {
		tail = hist[0].ID
	}
	for i, f := range p.sink {
		p.ctxFrame(f.K[layer], f.V[layer], p.sinkPos(layer, i, f.ID, tail))
		parts.Sink += p.tpf
	}
	for f := 0; f < F; f++ {
		if start+f < S {
			p.ctxFrame(k[f*n:(f+1)*n], v[f*n:(f+1)*n], start+f)
			parts.Sink += p.tpf
		}
	}
	m := &p.mid[layer]
	p.ctxFrame(m.K, m.V, -1)
	parts.Memory = len(m.Src)
	for _, f := range hist {
		p.ctxFrame(f.K[layer], f.V[layer], -1)
		parts.Local += p.tpf
	}
	for f := 0; f < F; f++ {
		if start+f >= S {
			p.ctxFrame(k[f*n:(f+1)*n], v[f*n:(f+1)*n], start+f)
			parts.Local += p.tpf
		}
	}
	p.stats.Parts[layer] = parts
	qr := p.queries(q, qt)
	p.layer++
	return Context{Q: qr, K: p.kbuf, V: p.vbuf, Parts: parts}, nil
}

// End finishes the call: the history frames a compression took leave the
// tail; a clean pass commits the block (and, with clean queries, buffers
// its queries).
func (p *DeepForcing) End() error {
	if err := p.checkEnd(); err != nil {
		return err
	}
	if p.call.First && p.compress {
		p.hist = p.hist[p.leaving:]
		p.compress, p.leaving = false, 0
	}
	if p.call.Clean {
		F := p.lay.FramesPerBlock
		fr := p.stagedFrames()
		n := p.tpf * p.row
		for _, f := range fr {
			if f.ID < p.cfg.SinkFrames {
				p.sink = append(p.sink, f)
				continue
			}
			for l := range f.K {
				p.rot.Frame(f.K[l], p.lay.Heads, f.ID)
			}
			p.hist = append(p.hist, f)
		}
		if p.cfg.DeepForcing.Queries == DFQueriesClean {
			for l := range p.qtok {
				p.qrot = append(p.qrot[:0], p.pendQ[l]...)
				for f := 0; f < F; f++ {
					p.rot.Frame(p.qrot[f*n:(f+1)*n], p.lay.Heads, p.call.Block*F+f)
				}
				p.bufferQueries(l, p.qrot)
			}
		}
	}
	p.closeCall(p.Bytes())
	return nil
}

// Bytes returns the cache K/V, the query buffer and the per-token metadata
// (see storage.Config.DeepForcing).
func (p *DeepForcing) Bytes() int64 {
	m := p.model()
	one := m
	one.Layers = 1
	var b int64
	for l := range p.mid {
		n := int64(p.cacheTokens(l))
		b += one.KV(n) + one.DeepForcingMeta(n) + one.QueryBuffer(int64(len(p.qtok[l])/p.row))
	}
	return b
}
