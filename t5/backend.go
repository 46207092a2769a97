package t5

import (
	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/nn"
)

// UseBackend makes the model compute on b (nil: the CPU, the default):
// its weights are uploaded once, at the next call (the matrices as
// LoadLinearBF16 takes them: bfloat16 at bf16), and what it held on the
// previous backend is freed. Every backend computes the same bits
// (package compute's contract); the public API does not change. The
// token embedding stays in host memory: each call gathers its n rows on
// the host and uploads them.
func (m *Model) UseBackend(b compute.Backend) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.release()
	if b == nil {
		b = compute.NewCPU()
	}
	m.be = b
}

// Backend returns the backend the model computes on.
func (m *Model) Backend() compute.Backend {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.backend()
}

// backend returns m.be, the CPU for a model built field by field (m.mu
// held).
func (m *Model) backend() compute.Backend {
	if m.be == nil {
		m.be = compute.NewCPU()
	}
	return m.be
}

// release frees the weights and buffers the model holds on its backend
// (m.mu held).
func (m *Model) release() {
	if w := m.w; w != nil {
		for _, l := range w.linears() {
			w.be.FreeLinear(*l)
		}
		for _, t := range w.params() {
			w.be.Free(*t)
		}
	}
	m.w = nil
	m.ws.free()
	m.ws = nil
}

// weightsOn are the model's parameters on a backend, field by field as in
// Model and Block.
type weightsOn struct {
	be     compute.Backend
	norm   compute.Tensor
	blocks []blockWeights
}

// blockWeights are a Block's parameters on a backend.
type blockWeights struct {
	norm1, norm2   compute.Tensor
	q, k, v, o     compute.Linear
	gate, fc1, fc2 compute.Linear
}

func (w *weightsOn) linears() []*compute.Linear {
	var ls []*compute.Linear
	for i := range w.blocks {
		b := &w.blocks[i]
		ls = append(ls, &b.q, &b.k, &b.v, &b.o, &b.gate, &b.fc1, &b.fc2)
	}
	return ls
}

func (w *weightsOn) params() []*compute.Tensor {
	ts := []*compute.Tensor{&w.norm}
	for i := range w.blocks {
		ts = append(ts, &w.blocks[i].norm1, &w.blocks[i].norm2)
	}
	return ts
}

// weights returns the model's parameters on its backend (m.mu held):
// uploaded at the first call on a device and kept; on a backend of host
// memory (the CPU) handles of the parameters themselves, made afresh
// each call and not kept (a parameter changed in place between calls is
// seen, as before backends).
func (m *Model) weights() *weightsOn {
	be := m.backend()
	_, host := be.(compute.HostMemory)
	if w := m.w; !host && w != nil && w.be == be {
		return w
	}
	w := &weightsOn{be: be, norm: be.Param(m.Norm), blocks: make([]blockWeights, len(m.Blocks))}
	lin := func(l *nn.Linear[uint16]) compute.Linear { return be.LoadLinearBF16(l, m.Precision) }
	for i := range m.Blocks {
		b := &m.Blocks[i]
		w.blocks[i] = blockWeights{norm1: be.Param(b.Norm1), norm2: be.Param(b.Norm2),
			q: lin(&b.Attn.Q), k: lin(&b.Attn.K), v: lin(&b.Attn.V), o: lin(&b.Attn.O),
			gate: lin(&b.FFN.Gate), fc1: lin(&b.FFN.FC1), fc2: lin(&b.FFN.FC2)}
	}
	if !host {
		m.w = w
	}
	return w
}

// workspace holds the backend tensors of one call, reused while n does
// not grow; views of the first n rows are taken per call.
type workspace struct {
	be         compute.Backend
	n          int
	x, h, y    compute.Tensor // [n][Dim]: residual stream, normed input, block output
	q, k, v, a compute.Tensor // [n][DimAttn]: projections, attention output
	g, f       compute.Tensor // [n][DimFFN]: gate and fc1 branches
	keep       compute.Tensor // [n]: 1 for a kept key, 0 for a masked one
	bias       compute.Tensor // [Heads][2n−1]: a block's position bias
	out        compute.Tensor // [n][Dim]: the final norm
}

func (ws *workspace) tensors() []*compute.Tensor {
	return []*compute.Tensor{&ws.x, &ws.h, &ws.y, &ws.q, &ws.k, &ws.v, &ws.a, &ws.g, &ws.f, &ws.keep, &ws.bias, &ws.out}
}

func (ws *workspace) bytes() int64 {
	var n int64
	for _, t := range ws.tensors() {
		n += 4 * int64((*t).Len())
	}
	return n
}

// free releases the tensors (nil is ignored).
func (ws *workspace) free() {
	if ws == nil {
		return
	}
	for _, t := range ws.tensors() {
		ws.be.Free(*t)
	}
}

// workspace returns tensors for n tokens on the model's backend (m.mu
// held).
func (m *Model) workspace(n int) *workspace {
	be := m.backend()
	if m.ws != nil && m.ws.n >= n && m.ws.be == be {
		return m.ws
	}
	m.ws.free()
	c := m.Config
	ws := &workspace{be: be, n: n}
	ws.x, ws.h, ws.y, ws.out = be.New(n*c.Dim), be.New(n*c.Dim), be.New(n*c.Dim), be.New(n*c.Dim)
	ws.q, ws.k, ws.v, ws.a = be.New(n*c.DimAttn), be.New(n*c.DimAttn), be.New(n*c.DimAttn), be.New(n*c.DimAttn)
	ws.g, ws.f = be.New(n*c.DimFFN), be.New(n*c.DimFFN)
	ws.keep, ws.bias = be.New(n), be.New(c.Heads*(2*n-1))
	m.ws = ws
	return ws
}

// put writes v into t: in place on a backend of host memory, else
// uploaded.
func put(be compute.Backend, t compute.Tensor, v []float32) {
	if mem, ok := be.(compute.HostMemory); ok {
		copy(mem.Host(t), v)
		return
	}
	be.Upload(t, v)
}
