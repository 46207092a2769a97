package memory

import (
	"math"
	"sort"
)

// DeepForcing is the Deep Forcing baseline: a CacheFrames cache
// (CacheFrames·P tokens) holding the sink, a compressed middle and the most
// recent RecentFrames frames (including the current block). Until the
// cache would overflow it behaves like Native. When adding a block would
// overflow it, each layer scores every non-sink key that is not in the
// recent tail (the compressed middle and the history frames that left the
// tail) by (Σ buffered q)·k / (H·√d) — the buffered queries are the
// post-RoPE clean-pass queries of the last RecentFrames frames, summed per
// head, and the dot product runs over all heads flattened, one score per
// token per layer — and keeps the top (CacheFrames − SinkFrames −
// RecentFrames)·P in chronological order (ties to the older token). A token
// may survive at most MaxReuse compressions. Kept keys keep their absolute
// RoPE; once the cache has been compressed the sink's temporal position is
// shifted to sit just before the recent tail (tail start − 1). Queries and
// tail keys are at absolute positions.
type DeepForcing struct {
	*core
	sink       []*frame // raw keys
	hist       []*frame // committed non-sink frames not compressed, keys rotated at absolute positions
	mid        []dfStore
	qbuf       [][]qframe // per layer, the last RecentFrames clean-pass query frames (post-RoPE)
	compressed bool
}

// dfStore is one layer's compressed middle: tokens in chronological order.
type dfStore struct {
	K, V  []float32 // [n][H][D], keys rotated at their absolute position
	Src   []int64   // global token index
	Reuse []int32   // compressions survived
}

type qframe struct {
	ID int
	Q  []float32
}

func newDeepForcing(cfg Config) (Policy, error) {
	c, err := newCore(NameDeepForcing, cfg)
	if err != nil {
		return nil, err
	}
	return &DeepForcing{core: c, mid: make([]dfStore, cfg.Layout.Layers), qbuf: make([][]qframe, cfg.Layout.Layers)}, nil
}

// tailHist returns how many committed history frames belong to the recent
// tail of a block.
func (p *DeepForcing) tailHist() int { return p.cfg.DeepForcing.RecentFrames - p.lay.FramesPerBlock }

// Begin starts a call; the first call of a block compresses the cache when
// the block would overflow it.
func (p *DeepForcing) Begin(c Call) error {
	if err := p.checkBegin(c); err != nil {
		return err
	}
	p.openCall(c)
	if c.First {
		p.startUpdate()
		p.compress()
		p.stopUpdate()
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

func (p *DeepForcing) compress() {
	S, C := p.cfg.SinkFrames, p.cfg.CacheFrames
	F := p.lay.FramesPerBlock
	start := p.call.Block * F
	curSink := max(0, min(S, start+F)-start) // current frames that are sink frames
	capTok := C * p.tpf
	overflow := false
	for l := range p.mid {
		if p.cacheTokens(l)+F*p.tpf > capTok {
			overflow = true
		}
	}
	if !overflow || curSink > 0 {
		return
	}
	keepHist := min(len(p.hist), p.tailHist())
	leaving := p.hist[:len(p.hist)-keepHist]
	budget := (C - S - p.cfg.DeepForcing.RecentFrames) * p.tpf
	H, D := p.lay.Heads, p.lay.HeadDim
	row := p.row
	for l := range p.mid {
		m := &p.mid[l]
		// Candidates: middle tokens then the leaving frames' tokens (chronological).
		type cand struct {
			k, v  []float32
			src   int64
			reuse int32
			score float64
		}
		var cs []cand
		for i := range m.Src {
			cs = append(cs, cand{m.K[i*row : (i+1)*row], m.V[i*row : (i+1)*row], m.Src[i], m.Reuse[i], 0})
		}
		for _, f := range leaving {
			for t := 0; t < p.tpf; t++ {
				cs = append(cs, cand{f.K[l].f32[t*row : (t+1)*row], f.V[l].f32[t*row : (t+1)*row], int64(f.ID*p.tpf + t), 0, 0})
			}
		}
		// Σ of buffered queries per head.
		qs := make([]float64, row)
		for _, qf := range p.qbuf[l] {
			for t := 0; t < p.tpf; t++ {
				for i, v := range qf.Q[t*row : (t+1)*row] {
					qs[i] += float64(v)
				}
			}
		}
		norm := float64(H) * math.Sqrt(float64(D))
		var elig []int
		for i := range cs {
			var s float64
			for j, v := range cs[i].k {
				s += qs[j] * float64(v)
			}
			cs[i].score = s / norm
			if int(cs[i].reuse) < p.cfg.DeepForcing.MaxReuse {
				elig = append(elig, i)
			}
		}
		sort.SliceStable(elig, func(a, b int) bool { return cs[elig[a]].score > cs[elig[b]].score })
		if len(elig) > budget {
			elig = elig[:budget]
		}
		sort.Ints(elig)
		evicted := len(cs) - len(elig)
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
		p.stats.EvictedCapacity[l] = evicted * H
	}
	clear(leaving) // the compressed frames: not reachable through the slice's array
	p.hist = p.hist[len(leaving):]
	p.compressed = true
}

// Attend returns [sink | compressed middle | tail] for one layer.
func (p *DeepForcing) Attend(layer int, q, k, v []float32) (Context, error) {
	if err := p.checkAttend(layer, q, k, v); err != nil {
		return Context{}, err
	}
	p.stage(layer, q, k, v, true)
	F, S := p.lay.FramesPerBlock, p.cfg.SinkFrames
	start := p.call.Block * F
	n := p.tpf * p.row
	p.ctxReset()
	var parts Parts
	qt := make([]int, F)
	for f := range qt {
		qt[f] = start + f
	}
	tailStart := start
	if len(p.hist) > 0 {
		tailStart = p.hist[0].ID
	}
	for i, f := range p.sink {
		t := f.ID
		if p.compressed {
			t = max(0, tailStart-len(p.sink)+i)
		}
		p.ctxFrame(f.K[layer], f.V[layer], t)
		parts.Sink += p.tpf
	}
	for f := 0; f < F; f++ {
		if start+f < S {
			p.ctxFrame(f32Tensor(k[f*n:(f+1)*n]), f32Tensor(v[f*n:(f+1)*n]), start+f)
			parts.Sink += p.tpf
		}
	}
	m := &p.mid[layer]
	p.ctxFrame(f32Tensor(m.K), f32Tensor(m.V), -1)
	parts.Memory = len(m.Src)
	for _, f := range p.hist {
		p.ctxFrame(f.K[layer], f.V[layer], -1)
		parts.Local += p.tpf
	}
	for f := 0; f < F; f++ {
		if start+f >= S {
			p.ctxFrame(f32Tensor(k[f*n:(f+1)*n]), f32Tensor(v[f*n:(f+1)*n]), start+f)
			parts.Local += p.tpf
		}
	}
	p.stats.Parts[layer] = parts
	qr, err := p.queries(q, qt)
	if err != nil {
		return Context{}, err
	}
	p.layer++
	return Context{Q: qr, K: p.kbuf, V: p.vbuf, Parts: parts}, nil
}

// End finishes the call; a clean pass commits the block and its queries.
func (p *DeepForcing) End() error {
	if err := p.checkEnd(); err != nil {
		return err
	}
	if p.call.Clean {
		F := p.lay.FramesPerBlock
		fr := p.stagedFrames()
		for _, f := range fr {
			if f.ID < p.cfg.SinkFrames {
				p.sink = append(p.sink, f)
				continue
			}
			for l := range f.K {
				p.rot.Frame(f.K[l].f32, p.lay.Heads, f.ID)
			}
			p.hist = append(p.hist, f)
		}
		R := p.cfg.DeepForcing.RecentFrames
		for l := range p.qbuf {
			for f := 0; f < F; f++ {
				id := p.call.Block*F + f
				qf := qframe{ID: id, Q: p.pendQ[l][f]}
				p.rot.Frame(qf.Q, p.lay.Heads, id)
				p.qbuf[l] = append(p.qbuf[l], qf)
			}
			p.pendQ[l] = nil
			if len(p.qbuf[l]) > R {
				p.qbuf[l] = append([]qframe(nil), p.qbuf[l][len(p.qbuf[l])-R:]...)
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
		b += one.KV(n) + one.DeepForcingMeta(n) + one.QueryBuffer(int64(len(p.qbuf[l])*p.tpf))
	}
	return b
}
