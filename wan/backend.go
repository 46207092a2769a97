package wan

import (
	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/nn"
	"github.com/densitykv/densitykv/rope"
)

// UseBackend makes the model compute on b (nil: the CPU, the default):
// its weights are uploaded once, at the next call, and what it held on the
// previous backend is freed. Every backend computes the same bits (package
// compute's contract); the public API does not change.
//
// On the CPU, EmbedText may run while a Forward runs, as before backends;
// on a device backend the model runs one call at a time.
func (m *Model) UseBackend(b compute.Backend) {
	m.release()
	if b == nil {
		b = compute.NewCPU()
	}
	m.be = b
}

// Backend returns the backend the model computes on.
func (m *Model) Backend() compute.Backend {
	if m.be == nil { // a Model built field by field
		m.be = compute.NewCPU()
	}
	return m.be
}

// release frees the weights and buffers the model holds on its backend.
func (m *Model) release() {
	m.releaseWeights()
	m.ws.free()
	m.ws = nil
}

// releaseWeights frees the weights the model holds on its backend.
func (m *Model) releaseWeights() {
	if w := m.w; w != nil {
		for _, l := range w.linears() {
			w.be.FreeLinear(*l)
		}
		for _, t := range w.params() {
			w.be.Free(*t)
		}
	}
	m.w = nil
}

// weightsOn are the model's parameters on a backend, field by field as in
// Model and Block.
type weightsOn struct {
	be                                compute.Backend
	patch, text0, text2, time0, time2 compute.Linear
	timeProj, head                    compute.Linear
	headMod                           compute.Tensor
	blocks                            []blockWeights
	host                              bool // handles of host memory: made afresh per call
}

// blockWeights are a Block's parameters on a backend.
type blockWeights struct {
	self, cross         attnWeights
	norm3W, norm3B, mod compute.Tensor
	ffn0, ffn2          compute.Linear
}

// attnWeights are an Attention's parameters on a backend.
type attnWeights struct {
	q, k, v, o   compute.Linear
	normQ, normK compute.Tensor
}

func (w *weightsOn) linears() []*compute.Linear {
	ls := []*compute.Linear{&w.patch, &w.text0, &w.text2, &w.time0, &w.time2, &w.timeProj, &w.head}
	for i := range w.blocks {
		b := &w.blocks[i]
		ls = append(ls, &b.self.q, &b.self.k, &b.self.v, &b.self.o, &b.cross.q, &b.cross.k, &b.cross.v, &b.cross.o, &b.ffn0, &b.ffn2)
	}
	return ls
}

func (w *weightsOn) params() []*compute.Tensor {
	ts := []*compute.Tensor{&w.headMod}
	for i := range w.blocks {
		b := &w.blocks[i]
		ts = append(ts, &b.self.normQ, &b.self.normK, &b.cross.normQ, &b.cross.normK, &b.norm3W, &b.norm3B, &b.mod)
	}
	return ts
}

// weights returns the model's parameters on its backend: uploaded at the
// first call on a device and kept; on a backend of host memory (the CPU)
// handles of the parameters themselves, made afresh each call and not
// kept (so that a parameter changed in place between calls is seen, and
// the call writes nothing in the model, as before backends).
func (m *Model) weights() *weightsOn {
	be := m.Backend()
	_, host := be.(compute.HostMemory)
	if w := m.w; !host && w != nil && w.be == be {
		return w
	}
	if !host {
		m.releaseWeights()
	}
	w := &weightsOn{be: be, host: host, blocks: make([]blockWeights, len(m.Blocks))}
	lin := func(l *nn.Linear[float32]) compute.Linear { return be.LoadLinear(l, m.Precision) }
	w.patch, w.text0, w.text2 = lin(&m.PatchEmbedding), lin(&m.TextEmbedding0), lin(&m.TextEmbedding2)
	w.time0, w.time2, w.timeProj = lin(&m.TimeEmbedding0), lin(&m.TimeEmbedding2), lin(&m.TimeProjection)
	w.head, w.headMod = lin(&m.Head), be.Param(m.HeadModulation)
	attn := func(a *Attention) attnWeights {
		return attnWeights{q: lin(&a.Q), k: lin(&a.K), v: lin(&a.V), o: lin(&a.O), normQ: be.Param(a.NormQ), normK: be.Param(a.NormK)}
	}
	for i := range m.Blocks {
		b := &m.Blocks[i]
		w.blocks[i] = blockWeights{self: attn(&b.SelfAttn), cross: attn(&b.CrossAttn),
			norm3W: be.Param(b.Norm3W), norm3B: be.Param(b.Norm3B), mod: be.Param(b.Modulation),
			ffn0: lin(&b.FFN0), ffn2: lin(&b.FFN2)}
	}
	if !host {
		m.w = w
	}
	return w
}

// hostIO moves values between the host and a backend: on a backend of
// host memory (the CPU) a tensor is the host slice itself and nothing is
// copied; elsewhere in and out make tensors of their own, which read and
// Upload fill.
type hostIO struct {
	be   compute.Backend
	mem  compute.HostMemory
	host bool
}

func newHostIO(be compute.Backend) hostIO {
	mem, host := be.(compute.HostMemory)
	return hostIO{be: be, mem: mem, host: host}
}

// in returns a tensor holding v's values (v itself on host memory).
func (io hostIO) in(v []float32) compute.Tensor {
	if io.host {
		return io.mem.Wrap(v)
	}
	t := io.be.New(len(v))
	io.be.Upload(t, v)
	return t
}

// out returns a tensor whose values read copies into v (v itself on host
// memory).
func (io hostIO) out(v []float32) compute.Tensor {
	if io.host {
		return io.mem.Wrap(v)
	}
	return io.be.New(len(v))
}

// read copies t's values into v (t made by out(v), or a tensor whose Host
// is v, on host memory) and returns the backend's first error.
func (io hostIO) read(v []float32, t compute.Tensor) error {
	if io.host {
		return io.be.Flush()
	}
	return io.be.Download(v, t)
}

// send writes v into t (made by out(v): nothing to do on host memory).
func (io hostIO) send(t compute.Tensor, v []float32) {
	if !io.host {
		io.be.Upload(t, v)
	}
}

// free frees tensors made by in or out (nothing on host memory).
func (io hostIO) free(ts ...compute.Tensor) {
	if !io.host {
		for _, t := range ts {
			io.be.Free(t)
		}
	}
}

// workspace holds the tensors of Forward on the model's backend, reused
// while the block's shape does not change, and their host sides (on a
// backend of host memory, the same values).
type workspace struct {
	io                    hostIO
	T, F                  int
	x, y, q, k, v, att, o compute.Tensor // [T][dim]
	h                     compute.Tensor // [T][ffn_dim]
	patches, out          compute.Tensor // [T][patch_len], [T][out_len]
	mods, e0              compute.Tensor // [F][6][dim]
	e, sin, tmp, headMods compute.Tensor // [F][dim], [F][freq], [F][dim], [F][2][dim]
	ctx                   [3]compute.Tensor
	hist                  []layerHistory // per layer, a Plan's history (history.go)
	rope                  *rope.Table    // the model's RoPE (Backend.Rope)
	// The host sides: q, k, v (read for the memory policy), the patches,
	// the sinusoid and the head's output.
	hq, hk, hv, hpatches, hsin, hout []float32
}

func (m *Model) workspace(T, F int) *workspace {
	c := m.Cfg
	d := c.Dim
	be := m.Backend()
	if w := m.ws; w != nil && w.io.be == be && w.T == T && w.F == F {
		return w
	}
	m.ws.free()
	w := &workspace{io: newHostIO(be), T: T, F: F}
	for _, b := range []*compute.Tensor{&w.x, &w.y, &w.q, &w.k, &w.v, &w.att, &w.o} {
		*b = be.New(T * d)
	}
	w.h = be.New(T * c.FFNDim)
	w.mods, w.e0 = be.New(F*6*d), be.New(F*6*d)
	w.e, w.tmp, w.headMods = be.New(F*d), be.New(F*d), be.New(F*2*d)
	w.hq, w.hk, w.hv = w.hostSide(w.q), w.hostSide(w.k), w.hostSide(w.v)
	w.hpatches, w.hsin, w.hout = make([]float32, T*c.PatchLen()), make([]float32, F*c.FreqDim), make([]float32, T*c.OutLen())
	w.patches, w.sin, w.out = w.io.out(w.hpatches), w.io.out(w.hsin), w.io.out(w.hout)
	m.ws = w
	return w
}

// hostSide returns t's values on host memory, else a slice of t's length.
func (w *workspace) hostSide(t compute.Tensor) []float32 {
	if w.io.host {
		return w.io.mem.Host(t)
	}
	return make([]float32, t.Len())
}

// free frees the workspace's tensors (nil: nothing).
func (w *workspace) free() {
	if w == nil {
		return
	}
	be := w.io.be
	for _, t := range []compute.Tensor{w.x, w.y, w.q, w.k, w.v, w.att, w.o, w.h, w.patches, w.out,
		w.mods, w.e0, w.e, w.sin, w.tmp, w.headMods, w.ctx[0], w.ctx[1], w.ctx[2]} {
		if t != nil {
			be.Free(t)
		}
	}
	for i := range w.hist {
		w.hist[i].free(be)
	}
}

// context returns the memory policy's q, k, v as tensors: the slices
// themselves on host memory, else uploaded into the workspace's tensors
// (grown as the context grows).
func (w *workspace) context(vs ...[]float32) [3]compute.Tensor {
	var ts [3]compute.Tensor
	for i, v := range vs {
		if w.io.host {
			ts[i] = w.io.mem.Wrap(v)
			continue
		}
		be := w.io.be
		if w.ctx[i] == nil || w.ctx[i].Len() < len(v) {
			if w.ctx[i] != nil {
				be.Free(w.ctx[i])
			}
			w.ctx[i] = be.New(len(v))
		}
		ts[i] = be.View(w.ctx[i], 0, len(v))
		be.Upload(ts[i], v)
	}
	return ts
}
