package memory

import (
	"fmt"
	"slices"

	"github.com/densitykv/densitykv/internal/finite"
)

// Recacher is implemented by the policies that can recompute, under a new
// prompt, the K/V they keep of the most recent frames: LongLive's recache
// after a prompt switch (NVlabs/LongLive
// InteractiveCausalInferencePipeline._recache_after_switch, with its
// global sink). Before block b (start = b·F) LongLive re-runs frames
// [start − n, start), n = min(CacheFrames, start), at the clean timestep
// with the new prompt in one forward call whose queries attend the sink
// and every recomputed frame (all of them, not causally), and the new K/V
// replace the old; the sink keeps its K/V unless the range starts at
// frame 0. Frames of the range whose K/V the policy does not keep (they
// left the cache, or a bank keeps tokens of them) are not recomputed:
// LongLive computes and discards them, so the kept frames' new K/V are the
// same. The DensityKV authors' pipeline does not recache (it only
// re-encodes the cross-attention), which is the rollout's default.
//
// The rollout calls BeginRecache(b) between blocks b−1 and b, then
// AttendRecache for every layer in order with the q, k, v of the frames
// RecacheFrames(b) returns ([n·P][H][D], n frames in that order), then
// EndRecache. Errors leave the policy unchanged.
type Recacher interface {
	// RecacheFrames returns the frames, ascending, whose K/V a recache
	// before block recomputes.
	RecacheFrames(block int) []int
	BeginRecache(block int) error
	AttendRecache(layer int, q, k, v []float32) (Context, error)
	EndRecache() error
}

// recacheRange returns the first frame of a recache before block and
// whether the sink is recomputed (the range starts at frame 0).
func (c *core) recacheRange(block int) (first int, sink bool) {
	start := block * c.lay.FramesPerBlock
	first = start - min(c.cfg.CacheFrames, start)
	return first, first == 0
}

// recacheState is an open recache call.
type recacheState struct {
	open   bool
	block  int
	frames []int
	layer  int
	// k, v are the recomputed K/V per layer ([n·P][H][D]), staged by
	// AttendRecache and committed by EndRecache.
	k, v [][]float32
}

// checkBeginRecache validates a recache before block: between blocks,
// after block−1's clean pass, with something to recompute.
func (c *core) checkBeginRecache(block int, frames []int) error {
	if c.open || c.rec.open {
		return fmt.Errorf("memory: %s: recache before block %d: a call is open", c.name, block)
	}
	if block <= 0 || block != c.started || c.committed != c.started {
		return fmt.Errorf("memory: %s: recache before block %d: blocks begun %d, committed %d (a recache runs between blocks, before the next first call)", c.name, block, c.started, c.committed)
	}
	if len(frames) == 0 {
		return fmt.Errorf("memory: %s: recache before block %d: no frame to recompute", c.name, block)
	}
	return nil
}

// checkAttendRecache validates one layer of a recache call.
func (c *core) checkAttendRecache(layer int, q, k, v []float32) error {
	r := &c.rec
	if !r.open {
		return fmt.Errorf("memory: %s: recache layer %d: no open recache (BeginRecache first)", c.name, layer)
	}
	if layer != r.layer || layer >= c.lay.Layers {
		return fmt.Errorf("memory: %s: recache before block %d: layer %d, want layer %d of %d", c.name, r.block, layer, r.layer, c.lay.Layers)
	}
	want := len(r.frames) * c.tpf * c.row
	for _, t := range []struct {
		n string
		x []float32
	}{{"q", q}, {"k", k}, {"v", v}} {
		if len(t.x) != want {
			return fmt.Errorf("memory: %s: recache before block %d layer %d: %s has %d values, want %d frames × %d tokens × %d heads × %d", c.name, r.block, layer, t.n, len(t.x), len(r.frames), c.tpf, c.lay.Heads, c.lay.HeadDim)
		}
		if i := finite.First(t.x); i >= 0 {
			tok, rem := i/c.row, i%c.row
			return fmt.Errorf("memory: %s: recache before block %d layer %d: %s has %v at token %d head %d dim %d", c.name, r.block, layer, t.n, t.x[i], tok, rem/c.lay.HeadDim, rem%c.lay.HeadDim)
		}
	}
	return nil
}

// stageRecache copies one layer's recomputed k and v.
func (c *core) stageRecache(layer int, k, v []float32) {
	if c.rec.k == nil {
		c.rec.k, c.rec.v = make([][]float32, c.lay.Layers), make([][]float32, c.lay.Layers)
	}
	c.rec.k[layer] = append(c.rec.k[layer][:0], k...)
	c.rec.v[layer] = append(c.rec.v[layer][:0], v...)
}

// recachedFrame returns the staged new K/V of the i-th recached frame.
func (c *core) recachedFrame(i int) (k, v [][]float32) {
	n := c.tpf * c.row
	k, v = make([][]float32, c.lay.Layers), make([][]float32, c.lay.Layers)
	for l := range k {
		k[l] = append([]float32(nil), c.rec.k[l][i*n:(i+1)*n]...)
		v[l] = append([]float32(nil), c.rec.v[l][i*n:(i+1)*n]...)
	}
	return k, v
}

// checkEndRecache validates EndRecache.
func (c *core) checkEndRecache() error {
	if !c.rec.open {
		return fmt.Errorf("memory: %s: end recache: none open", c.name)
	}
	if c.rec.layer != c.lay.Layers {
		return fmt.Errorf("memory: %s: end recache before block %d: %d of %d layers attended", c.name, c.rec.block, c.rec.layer, c.lay.Layers)
	}
	return nil
}

// ---- Native / Infinity-RoPE

// RecacheFrames returns the resident non-sink frames, and the sink frames
// too when the range starts at frame 0.
func (p *Native) RecacheFrames(block int) []int {
	first, sink := p.recacheRange(block)
	var out []int
	for _, f := range p.frames {
		if f.ID >= first && (sink || f.ID >= p.cfg.SinkFrames) {
			out = append(out, f.ID)
		}
	}
	return out
}

// BeginRecache starts a recache before block.
func (p *Native) BeginRecache(block int) error {
	fr := p.RecacheFrames(block)
	if err := p.checkBeginRecache(block, fr); err != nil {
		return err
	}
	p.rec = recacheState{open: true, block: block, frames: fr}
	return nil
}

// AttendRecache returns [kept sink | recomputed frames] for one layer, keys
// and queries at absolute positions (Native) or at slots 0…n−1
// (Infinity-RoPE).
func (p *Native) AttendRecache(layer int, q, k, v []float32) (Context, error) {
	if err := p.checkAttendRecache(layer, q, k, v); err != nil {
		return Context{}, err
	}
	p.stageRecache(layer, k, v)
	n := p.tpf * p.row
	p.ctxReset()
	var parts Parts
	slot := 0
	pos := func(id int) int {
		if p.reindex {
			slot++
			return slot - 1
		}
		return id
	}
	for _, f := range p.frames {
		if f.ID < p.cfg.SinkFrames && !slices.Contains(p.rec.frames, f.ID) {
			t := pos(f.ID)
			if !p.reindex {
				t = -1 // stored rotated
			}
			p.ctxFrame(f.K[layer], f.V[layer], t)
			parts.Sink += p.tpf
		}
	}
	qt := make([]int, len(p.rec.frames))
	for i, id := range p.rec.frames {
		qt[i] = pos(id)
		p.ctxFrame(f32Tensor(k[i*n:(i+1)*n]), f32Tensor(v[i*n:(i+1)*n]), qt[i])
		if id < p.cfg.SinkFrames {
			parts.Sink += p.tpf
		} else {
			parts.Local += p.tpf
		}
	}
	qr, err := p.queries(q, qt)
	if err != nil {
		return Context{}, err
	}
	p.rec.layer++
	return Context{Q: qr, K: p.kbuf, V: p.vbuf, Parts: parts}, nil
}

// EndRecache replaces the recomputed frames' K/V.
func (p *Native) EndRecache() error {
	if err := p.checkEndRecache(); err != nil {
		return err
	}
	for i, id := range p.rec.frames {
		k, v := p.recachedFrame(i)
		for _, f := range p.frames {
			if f.ID != id {
				continue
			}
			if !p.reindex {
				for l := range k {
					p.rot.Frame(k[l], p.lay.Heads, id)
				}
			}
			for l := range k {
				f.K[l], f.V[l] = f32Tensor(k[l]), f32Tensor(v[l])
			}
		}
	}
	p.rec = recacheState{}
	p.newHistory()
	return nil
}

// ---- windowed policies (DensityKV, LongLive-RAG, FullHistory, FIFO, stride)

// RecacheFrames returns the window frames the policy keeps raw (not yet
// offered to the memory) within the range, and the sink frames too when
// the range starts at frame 0.
func (p *windowed) RecacheFrames(block int) []int {
	first, sink := p.recacheRange(block)
	var out []int
	if sink {
		for _, f := range p.sink {
			out = append(out, f.ID)
		}
	}
	for _, f := range p.recent {
		if f.ID >= first {
			out = append(out, f.ID)
		}
	}
	return out
}

// BeginRecache starts a recache before block.
func (p *windowed) BeginRecache(block int) error {
	fr := p.RecacheFrames(block)
	if err := p.checkBeginRecache(block, fr); err != nil {
		return err
	}
	p.rec = recacheState{open: true, block: block, frames: fr}
	return nil
}

// AttendRecache returns [kept sink (t = 0) | recomputed sink frames | memory
// (t = 0) | recomputed window frames] for one layer: recomputed frames and
// their queries at their slot in the CacheFrames rolling cache after the
// last committed block.
func (p *windowed) AttendRecache(layer int, q, k, v []float32) (Context, error) {
	if err := p.checkAttendRecache(layer, q, k, v); err != nil {
		return Context{}, err
	}
	if cc, ok := p.sel.(interface {
		checkClean(layer int, k, v []float32) error
	}); ok {
		if err := cc.checkClean(layer, k, v); err != nil {
			return Context{}, err
		}
	}
	p.stageRecache(layer, k, v)
	end := p.rec.block * p.lay.FramesPerBlock
	n := p.tpf * p.row
	p.ctxReset()
	var parts Parts
	qt := make([]int, len(p.rec.frames))
	for _, f := range p.sink {
		if !slices.Contains(p.rec.frames, f.ID) {
			p.ctxFrame(f.K[layer], f.V[layer], 0)
			parts.Sink += p.tpf
		}
	}
	for i, id := range p.rec.frames {
		if id < p.cfg.SinkFrames {
			qt[i] = p.frameSlot(id, end)
			p.ctxFrame(f32Tensor(k[i*n:(i+1)*n]), f32Tensor(v[i*n:(i+1)*n]), qt[i])
			parts.Sink += p.tpf
		}
	}
	parts.Memory = p.sel.memory(layer)
	for i, id := range p.rec.frames {
		if id >= p.cfg.SinkFrames {
			qt[i] = p.frameSlot(id, end)
			p.ctxFrame(f32Tensor(k[i*n:(i+1)*n]), f32Tensor(v[i*n:(i+1)*n]), qt[i])
			parts.Local += p.tpf
		}
	}
	qr, err := p.queries(q, qt)
	if err != nil {
		return Context{}, err
	}
	p.rec.layer++
	return Context{Q: qr, K: p.kbuf, V: p.vbuf, Parts: parts, HeadMemory: p.headMemory(layer)}, nil
}

// EndRecache replaces the recomputed frames' raw K/V (held as the clean
// pass holds them: bfloat16 where that is lossless and the policy allows
// it; frames waiting to be offered again as the bank reads them). Frame
// descriptors (LongLive-RAG) keep the values computed when the frames were
// committed.
func (p *windowed) EndRecache() error {
	if err := p.checkEndRecache(); err != nil {
		return err
	}
	for i, id := range p.rec.frames {
		k, v := p.recachedFrame(i)
		for _, list := range [][]*frame{p.sink, p.recent} {
			for _, f := range list {
				if f.ID != id {
					continue
				}
				for l := range k {
					if p.compactFrames {
						f.K[l], f.V[l] = compact(k[l]), compact(v[l])
					} else {
						f.K[l], f.V[l] = f32Tensor(k[l]), f32Tensor(v[l])
					}
				}
				f.Ready = false
			}
		}
	}
	if w, ok := p.sel.(interface{ waiting(f *frame) }); ok {
		lim := p.rec.block*p.lay.FramesPerBlock + p.lay.FramesPerBlock - p.cfg.WindowFrames
		for _, f := range p.recent {
			if f.ID < lim {
				w.waiting(f)
			}
		}
	}
	p.rec = recacheState{}
	return nil
}
