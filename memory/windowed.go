package memory

import (
	"fmt"
)

// selector is the historical-memory strategy of a windowed policy: it
// receives the frames that leave the local window and provides the memory
// part of the context.
type selector interface {
	// offer hands over the committed frames (raw keys) that left the window
	// at the first call of block, oldest first (possibly none), and updates
	// the memory. It records its per-layer stats into st. An error leaves
	// the selector (every layer of it) unchanged.
	offer(block int, frames []*frame, st *Stats) error
	// memory schedules layer's memory part of the context (core.ctxFrame,
	// core.ctxFill): keys rotated at temporal position 0 and native spatial
	// position, and values, [n][H][D]; it returns n.
	memory(layer int) int
	// occupancy returns the memory entries per head of layer.
	occupancy(layer int, dst []int)
	// bytes returns the persistent bytes of the memory (sink and window
	// excluded).
	bytes() int64
}

// windowed is the family of policies that attend
// [sink (t = 0) | memory (t = 0) | local window] with the local window
// holding the last WindowFrames frames including the current block:
// DensityKV, LongLive-RAG, FullHistory, FIFO and uniform stride. Frames that
// leave the window are offered to the selector at the first call of the
// next block ("logical precommit"): block b offers frames
// [SinkFrames + seen, b·F + F − WindowFrames). A selector may offer later
// (offerBefore: LongLive-RAG's physical pool takes frames once they leave
// the CacheFrames cache); the frames between the window and that limit
// stay in recent, held but not attended.
//
// Positions follow the golden rollout's latent-memory cache: keys are stored
// raw (after qk-norm, before RoPE); window frames and queries sit at their
// slot in a CacheFrames rolling cache (absolute until it is full, then
// block-relative: queries at 9, 10, 11 and the window at 7…11 for Wan).
// Committed sink frames are memory keys: every one of them sits at temporal
// position 0 with its native spatial grid, like the bank and retrieved
// frames (the project's rule that memory keys — bank, sink, retrieved
// frames — use temporal position 0; the golden rollout's one-frame sink is
// at τ = 0, which is also its slot). A sink frame that is still being generated (the
// current block, e.g. block 0) sits at its slot with its queries, like the
// rest of the block. With SinkFrames = 1 the two readings of the golden
// README (τ = 0, or τ = slot index) coincide; with more sink frames this
// choice keeps every nonlocal key at τ = 0.
type windowed struct {
	*core
	sel    selector
	sink   []*frame // committed sink frames, raw keys
	recent []*frame // committed non-sink frames not yet offered, oldest first
	seen   int      // non-sink frames offered so far
	// describe, when set, computes frame descriptors at commit.
	describe func(fr []*frame, latent []float32) error
}

// Begin starts one forward call; the first call of a block offers the
// frames that left the window to the memory.
func (p *windowed) Begin(c Call) error {
	if err := p.checkBegin(c); err != nil {
		return err
	}
	var leaving []*frame
	if c.First {
		F, W := p.lay.FramesPerBlock, p.cfg.WindowFrames
		lim := c.Block*F + F - W // first frame of the window
		if o, ok := p.sel.(interface{ offerBefore(block int) int }); ok {
			lim = o.offerBefore(c.Block) // the selector holds frames longer (LongLive-RAG's physical pool)
		}
		for _, f := range p.recent {
			if f.ID < lim {
				leaving = append(leaving, f)
			}
		}
	}
	st, call, layer := p.stats, p.call, p.layer
	p.openCall(c)
	if c.First {
		p.startUpdate()
		err := p.sel.offer(c.Block, leaving, &p.stats)
		p.stopUpdate()
		if err != nil {
			// Undo the call: a selector that returns an error has left its
			// state unchanged (DensityKV checks every layer's bank block
			// before updating any).
			p.open, p.stats, p.call, p.layer = false, st, call, layer
			p.started--
			return err
		}
		clear(p.recent[:len(leaving)]) // offered: not reachable through the slice's array
		p.recent = p.recent[len(leaving):]
		p.seen += len(leaving)
	}
	for l := range p.stats.Occupancy {
		p.sel.occupancy(l, p.stats.Occupancy[l])
	}
	return nil
}

// Attend returns [sink | memory | window] for one layer.
func (p *windowed) Attend(layer int, q, k, v []float32) (Context, error) {
	return p.attendLaidOut(p, layer, q, k, v)
}

// checkClean runs the selector's check of a clean pass's k and v
// (DensityKV's bank payload), if it has one.
func (p *windowed) checkClean(layer int, k, v []float32) error {
	if cc, ok := p.sel.(interface {
		checkClean(layer int, k, v []float32) error
	}); ok && p.call.Clean {
		return cc.checkClean(layer, k, v)
	}
	return nil
}

// layout schedules layer's context [sink | memory | window] (the current
// block's frames of k and v at their places) and returns its parts and
// the current frames' temporal positions.
func (p *windowed) layout(layer int, k, v []float32) (Parts, []int) {
	F, S, W := p.lay.FramesPerBlock, p.cfg.SinkFrames, p.cfg.WindowFrames
	start := p.call.Block * F
	end := start + F
	p.ctxReset()
	var parts Parts
	qt := make([]int, F)
	for _, f := range p.sink {
		p.ctxFrame(f.K[layer], f.V[layer], 0) // committed sink frames: memory keys at t = 0
		parts.Sink += p.tpf
	}
	for f := 0; f < F; f++ {
		if start+f < S {
			qt[f] = p.frameSlot(start+f, end)
			p.ctxCurrent(k, v, f, qt[f])
			parts.Sink += p.tpf
		}
	}
	parts.Memory = p.sel.memory(layer)
	for _, f := range p.recent {
		if f.ID >= end-W {
			p.ctxFrame(f.K[layer], f.V[layer], p.frameSlot(f.ID, end))
			parts.Local += p.tpf
		}
	}
	for f := 0; f < F; f++ {
		if start+f >= S {
			qt[f] = p.frameSlot(start+f, end)
			p.ctxCurrent(k, v, f, qt[f])
			parts.Local += p.tpf
		}
	}
	p.stats.Parts[layer] = parts
	return parts, qt
}

// headMemory returns the per-head memory lengths when heads differ (nil
// otherwise; Context.HeadMemory).
func (p *windowed) headMemory(layer int) []int {
	if hs, ok := p.sel.(interface{ ragged(layer int) []int }); ok {
		return hs.ragged(layer)
	}
	return nil
}

// End finishes the call; a clean pass commits the block's raw K/V.
func (p *windowed) End() error {
	if err := p.checkEnd(); err != nil {
		return err
	}
	if p.call.Clean {
		fr := p.stagedFrames()
		if p.describe != nil {
			if err := p.describe(fr, p.call.Latent); err != nil {
				return err
			}
		}
		for _, f := range fr {
			if f.ID < p.cfg.SinkFrames {
				p.sink = append(p.sink, f)
			} else {
				p.recent = append(p.recent, f)
			}
		}
		// The frames that leave the window at the next block only wait to
		// be offered: a selector may keep them in the form it reads.
		if w, ok := p.sel.(interface{ waiting(f *frame) }); ok {
			F := p.lay.FramesPerBlock
			lim := (p.call.Block+1)*F + F - p.cfg.WindowFrames
			for _, f := range p.recent {
				if f.ID < lim {
					w.waiting(f)
				}
			}
		}
	}
	p.closeCall(p.Bytes())
	return nil
}

// Bytes returns the sink and window K/V (S_KV) plus the memory's bytes.
func (p *windowed) Bytes() int64 {
	return p.model().KVFrames(int64(len(p.sink)+len(p.recent))) + p.sel.bytes()
}

// memKeys returns a frame's keys of layer rotated at temporal position 0.
func (c *core) memKeys(f *frame, layer int) []float32 {
	return c.memKeysInto(make([]float32, f.K[layer].len()), f, layer)
}

// memKeysInto is memKeys into dst (len ≥ the frame's values). The frame
// holds raw keys (not Ready).
func (c *core) memKeysInto(dst []float32, f *frame, layer int) []float32 {
	k := f.K[layer].into(dst)
	c.rot.Frame(k, c.lay.Heads, 0)
	return k
}

// tokenStore is a per-layer list of memory tokens shared by all heads:
// keys rotated at t = 0, values, and the global token index of each.
type tokenStore struct {
	k, v [][]float32 // [layer] → [n][H][D]
	src  []int64     // [n] global token index f·P + p
	adm  []int32     // [n] block that admitted the token
}

func (s *tokenStore) len() int { return len(s.src) }

// keep retains the tokens whose index satisfies keep, in order.
func (s *tokenStore) filter(row int, keep func(i int) bool) {
	j := 0
	for i := range s.src {
		if !keep(i) {
			continue
		}
		for l := range s.k {
			copy(s.k[l][j*row:(j+1)*row], s.k[l][i*row:(i+1)*row])
			copy(s.v[l][j*row:(j+1)*row], s.v[l][i*row:(i+1)*row])
		}
		s.src[j], s.adm[j] = s.src[i], s.adm[i]
		j++
	}
	for l := range s.k {
		s.k[l], s.v[l] = s.k[l][:j*row], s.v[l][:j*row]
	}
	s.src, s.adm = s.src[:j], s.adm[:j]
}

// reserve returns x with capacity for n values (exactly n when it grows).
func reserve(x []float32, n int) []float32 {
	if cap(x) >= n {
		return x
	}
	y := make([]float32, len(x), n)
	copy(y, x)
	return y
}

// selectorKind names the token-level control strategies.
type tokenSelector struct {
	c     *core
	kind  string
	cap   int // M tokens per head (FIFO, stride)
	store tokenStore
	// stride state: token ordinal of the next offered token, current stride.
	ordinal int64
	stride  int64
	ords    []int64 // ordinal of each stored token (stride)
	// arch keeps FullHistory's tokens (whole frames, in offer order) in a
	// file instead of store.k and store.v (UseArchive).
	arch *archive
}

func newSelector(cfg Config, name string) (Policy, error) {
	c, err := newCore(name, cfg)
	if err != nil {
		return nil, err
	}
	c.compactFrames = true
	s := &tokenSelector{c: c, kind: name, cap: cfg.Capacity, stride: 1}
	s.store.k = make([][]float32, cfg.Layout.Layers)
	s.store.v = make([][]float32, cfg.Layout.Layers)
	if name != NameFullHistory && cfg.Capacity == 0 {
		return nil, fmt.Errorf("memory: %s: capacity must be positive", name)
	}
	return &Controls{windowed{core: c, sel: s}, s}, nil
}

// Controls is FullHistory (every historical token, unbounded: the
// reference), FIFO (the Capacity most recent historical tokens) or uniform
// stride (every s-th historical token, s doubling whenever more than
// Capacity would be kept, so between Capacity/2 and Capacity tokens evenly
// spread over the whole history). All attend [sink | memory (t = 0) |
// window] like DensityKV, with identical selections in every head.
type Controls struct {
	windowed
	s *tokenSelector
}

// Sources returns the global token index (frame·TokensPerFrame + h·Width + w)
// of every memory entry, in memory order (the same in every layer and head).
func (p *Controls) Sources() []int64 { return append([]int64(nil), p.s.store.src...) }

func (s *tokenSelector) offer(block int, frames []*frame, st *Stats) error {
	c := s.c
	row := c.row
	added := 0
	if s.kind != NameFullHistory {
		// FIFO and stride hold at most Capacity tokens between offers:
		// room for this offer exactly, not append's growth.
		need := (s.store.len() + len(frames)*c.tpf) * row
		for l := range s.store.k {
			s.store.k[l] = reserve(s.store.k[l], need)
			s.store.v[l] = reserve(s.store.v[l], need)
		}
	}
	var kbuf []float32
	if s.arch != nil { // FullHistory: every token of every frame
		kbuf = make([]float32, c.tpf*row)
		if err := s.arch.add(frames, func(f *frame, l int) []float32 { return c.memKeysInto(kbuf, f, l) }, (*frame).values); err != nil {
			return fmt.Errorf("memory: %s: block %d: %w", s.kind, block, err)
		}
		for _, f := range frames {
			for p := 0; p < c.tpf; p++ {
				s.store.src = append(s.store.src, int64(f.ID*c.tpf+p))
				s.store.adm = append(s.store.adm, int32(block))
				s.ords = append(s.ords, s.ordinal+int64(p))
			}
			s.ordinal += int64(c.tpf)
		}
		added := len(frames) * c.tpf
		for l := range st.Offered {
			st.Offered[l], st.Admitted[l] = added, added
		}
		return nil
	}
	for _, f := range frames {
		for l := 0; l < c.lay.Layers; l++ {
			kbuf = grow(kbuf, f.K[l].len())
			k := c.memKeysInto(kbuf, f, l)
			v := f.values(l)
			for p := 0; p < c.tpf; p++ {
				ord := s.ordinal + int64(p)
				if s.kind == NameUniformStride && ord%s.stride != 0 {
					continue
				}
				s.store.k[l] = append(s.store.k[l], k[p*row:(p+1)*row]...)
				s.store.v[l] = append(s.store.v[l], v[p*row:(p+1)*row]...)
				if l == 0 {
					s.store.src = append(s.store.src, int64(f.ID*c.tpf+p))
					s.store.adm = append(s.store.adm, int32(block))
					s.ords = append(s.ords, ord)
					added++
				}
			}
		}
		s.ordinal += int64(c.tpf)
	}
	evicted := 0
	switch s.kind {
	case NameFIFO:
		if n := s.store.len(); n > s.cap {
			drop := n - s.cap
			s.store.filter(row, func(i int) bool { return i >= drop })
			s.ords = s.ords[drop:]
			evicted = drop
		}
	case NameUniformStride:
		for s.store.len() > s.cap {
			s.stride *= 2
			n := s.store.len()
			ords := s.ords
			s.store.filter(row, func(i int) bool { return ords[i]%s.stride == 0 })
			j := 0
			for _, o := range ords {
				if o%s.stride == 0 {
					ords[j] = o
					j++
				}
			}
			s.ords = ords[:j]
			evicted += n - j
		}
	}
	for l := range st.Offered {
		st.Offered[l] = len(frames) * c.tpf
		st.Admitted[l] = added
		st.EvictedCapacity[l] = evicted * c.lay.Heads
	}
	return nil
}

func (s *tokenSelector) memory(layer int) int {
	if s.arch != nil {
		for i := 0; i < s.arch.len(); i++ {
			s.c.ctxFill(s.c.tpf, s.c.tpf, func(dk, dv []float32, _, _ int) error { return s.arch.read(i, layer, dk, dv) })
		}
		return s.store.len()
	}
	s.c.ctxFrame(f32Tensor(s.store.k[layer]), f32Tensor(s.store.v[layer]), -1)
	return s.store.len()
}

// UseArchive keeps FullHistory's tokens in the file at path (see
// Archiver); FIFO and uniform stride hold a bounded memory and do not
// archive.
func (p *Controls) UseArchive(path string) error {
	if p.s.kind != NameFullHistory {
		return fmt.Errorf("memory: %s: archive %s: only %s and %s archive their frames", p.name, path, NameFullHistory, NameLongLiveRAG)
	}
	if p.started > 0 || p.s.arch != nil {
		return fmt.Errorf("memory: %s: archive %s: set it before the first call, once", p.name, path)
	}
	a, err := openArchive(path, p.lay.Layers, p.tpf*p.row)
	if err != nil {
		return err
	}
	p.s.arch = a
	return nil
}

// CloseArchive closes the archive file (Archiver).
func (p *Controls) CloseArchive(remove bool) error {
	if p.s.arch == nil {
		return nil
	}
	return p.s.arch.close(remove)
}

func (s *tokenSelector) occupancy(_ int, dst []int) {
	for h := range dst {
		dst[h] = s.store.len()
	}
}

func (s *tokenSelector) bytes() int64 {
	m := s.c.model()
	if s.kind == NameFullHistory {
		return m.KV(int64(s.store.len()))
	}
	return m.Provenance(int64(s.store.len()))
}
