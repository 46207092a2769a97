package memory

import "github.com/densitykv/densitykv/storage"

// Native is the backbone's own rolling cache: attention reads
// [sink | the last CacheFrames−SinkFrames frames including the current
// block]. With absolute RoPE (Native) keys are stored rotated at their
// absolute frame index and queries sit at absolute positions. Infinity-RoPE
// stores raw keys and re-indexes every call: the attended frames get
// positions 0…n−1 in slot order, so queries sit at
// min(start frame, CacheFrames−FramesPerBlock) + [0, F).
type Native struct {
	*core
	reindex bool
	frames  []*frame // committed resident frames: sink first, then oldest→newest
}

func newNative(cfg Config, reindex bool) (*Native, error) {
	name := NameNative
	if reindex {
		name = NameInfinityRoPE
	}
	c, err := newCore(name, cfg)
	if err != nil {
		return nil, err
	}
	return &Native{core: c, reindex: reindex}, nil
}

// Begin starts one forward call.
func (p *Native) Begin(c Call) error {
	if err := p.checkBegin(c); err != nil {
		return err
	}
	p.openCall(c)
	return nil
}

// attended returns the committed frames the current call reads (sink frames
// and the history part of the window) and the number of current-block frames
// that are sink frames.
func (p *Native) attended() (sink, hist []*frame) {
	S, C, F := p.cfg.SinkFrames, p.cfg.CacheFrames, p.lay.FramesPerBlock
	start := p.call.Block * F
	for _, f := range p.frames {
		if f.ID < S {
			sink = append(sink, f)
		}
	}
	// Non-sink window: the last C−S frames of (history ∪ current non-sink).
	curNonSink := F
	if S > start {
		curNonSink = max(0, start+F-S)
	}
	room := max(0, C-S-curNonSink)
	var nonSink []*frame
	for _, f := range p.frames {
		if f.ID >= S {
			nonSink = append(nonSink, f)
		}
	}
	if len(nonSink) > room {
		nonSink = nonSink[len(nonSink)-room:]
	}
	return sink, nonSink
}

// Attend returns the context of one layer.
func (p *Native) Attend(layer int, q, k, v []float32) (Context, error) {
	return p.attendLaidOut(p, layer, q, k, v)
}

// checkClean: Native keeps any clean k and v.
func (p *Native) checkClean(int, []float32, []float32) error { return nil }

// headMemory: Native has no memory part.
func (p *Native) headMemory(int) []int { return nil }

// layout schedules layer's context [sink | cache] (the current block's
// frames of k and v at their places) and returns its parts and the
// current frames' temporal positions.
func (p *Native) layout(layer int, k, v []float32) (Parts, []int) {
	F, S := p.lay.FramesPerBlock, p.cfg.SinkFrames
	start := p.call.Block * F
	sink, hist := p.attended()
	p.ctxReset()
	var parts Parts
	// Positions: absolute frame index, or slot index (0..n−1) when re-indexing.
	pos := 0
	tOf := func(id int) int {
		if p.reindex {
			t := pos
			pos++
			return t
		}
		return id
	}
	for _, f := range sink {
		t := tOf(f.ID)
		if !p.reindex {
			t = -1 // stored rotated
		}
		p.ctxFrame(f.K[layer], f.V[layer], t)
		parts.Sink += p.tpf
	}
	qt := make([]int, F)
	// Sink frames inside the current block (block 0).
	for f := 0; f < F; f++ {
		if start+f < S {
			qt[f] = tOf(start + f)
			p.ctxCurrent(k, v, f, qt[f])
			parts.Sink += p.tpf
		}
	}
	for _, f := range hist {
		t := tOf(f.ID)
		if !p.reindex {
			t = -1
		}
		p.ctxFrame(f.K[layer], f.V[layer], t)
		parts.Local += p.tpf
	}
	for f := 0; f < F; f++ {
		if start+f >= S {
			qt[f] = tOf(start + f)
			p.ctxCurrent(k, v, f, qt[f])
			parts.Local += p.tpf
		}
	}
	p.stats.Parts[layer] = parts
	return parts, qt
}

// End finishes the call; a clean pass commits the block to the cache.
func (p *Native) End() error {
	if err := p.checkEnd(); err != nil {
		return err
	}
	if p.call.Clean {
		fr := p.stagedFrames()
		if !p.reindex {
			for _, f := range fr {
				for l := range f.K {
					p.rot.Frame(f.K[l].f32, p.lay.Heads, f.ID)
				}
			}
		}
		p.frames = append(p.frames, fr...)
		// Keep the sink and the last CacheFrames−SinkFrames other frames.
		S, keep := p.cfg.SinkFrames, p.cfg.CacheFrames-p.cfg.SinkFrames
		var sink, rest []*frame
		for _, f := range p.frames {
			if f.ID < S {
				sink = append(sink, f)
			} else {
				rest = append(rest, f)
			}
		}
		if len(rest) > keep {
			rest = rest[len(rest)-keep:]
		}
		p.frames = append(sink, rest...)
	}
	p.closeCall(p.Bytes())
	return nil
}

// Bytes returns S_KV of the resident frames (see package storage).
func (p *Native) Bytes() int64 {
	return p.model().KVFrames(int64(len(p.frames)))
}

func (c *core) model() storage.Model {
	return storage.Model{Layers: c.lay.Layers, Heads: c.lay.Heads, KeyDim: c.lay.HeadDim, ValueDim: c.lay.HeadDim, TokensPerFrame: c.tpf}
}
