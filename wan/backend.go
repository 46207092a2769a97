package wan

import (
	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/nn"
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
