package wan

import (
	"fmt"

	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/rope"
)

// On a device backend the self-attention context of a memory policy that
// describes it (memory.Planner: every policy but Deep Forcing) is
// assembled where the block's q, k and v are: each layer's history (sink,
// memory, window or cache frames, keys rotated as read) is sent when the
// policy's history key changes — once per block and layer — and kept
// until the block's clean pass (releaseHistory); every call copies it,
// the rows the policy keeps on the device itself (memory.SegDevice:
// DensityKV's banks there write their rows) and the current frames
// (their keys rotated at the plan's temporal positions by Backend.Rope)
// into the context, and rotates the queries there.
// Nothing is read back except the clean pass's k and v, which the policy
// keeps (AttendPlan's kv). The result is the host path's bits
// (memory.ExecutePlan is the reference; the tests hold the device path,
// the host path and the CPU equal).

// layerHistory is one layer's history on the backend: [rows][dim] keys
// and values, the history of key.
type layerHistory struct {
	key  memory.HistoryKey
	rows int
	k, v compute.Tensor // capacity ≥ rows·dim values
}

// free frees the tensors (nil: nothing).
func (h *layerHistory) free(be compute.Backend) {
	be.Free(h.k)
	be.Free(h.v)
	h.k, h.v, h.key, h.rows = nil, nil, 0, 0
}

// set uploads a plan's history (grown as needed).
func (h *layerHistory) set(be compute.Backend, pl memory.Plan, d int) {
	n := len(pl.K)
	if h.k == nil || h.k.Len() < n {
		h.free(be)
		h.k, h.v = be.New(max(n, 1)), be.New(max(n, 1))
	}
	if n > 0 {
		be.Upload(be.View(h.k, 0, n), pl.K)
		be.Upload(be.View(h.v, 0, n), pl.V)
	}
	h.key, h.rows = pl.Key, n/d
}

// planned reports whether layer self-attention goes through a Plan: a
// device backend, a policy that plans this call (memory.HostCaller), and
// no trace (a trace reads the rotated q and k on the host).
func (p *pass) planned() (memory.Planner, bool) {
	if p.ws.io.host || p.c.Trace != nil {
		return nil, false
	}
	pl, ok := p.pol.(memory.Planner)
	if hc, wraps := p.pol.(memory.HostCaller); ok && wraps && hc.HostCall() {
		return nil, false
	}
	return pl, ok
}

// selfPlanned is self's context from a Plan (see above): ws.q, ws.k and
// ws.v hold the block's normed q and k and raw v; the attention output
// goes to ws.att.
func (a *Attention) selfPlanned(p *pass, l int, pol memory.Planner) error {
	cfg, be, ws, T := p.m.Cfg, p.be, p.ws, p.T
	d, heads := cfg.Dim, cfg.Heads
	kv := func() ([]float32, []float32, error) {
		if err := ws.io.read(ws.hk, ws.k); err != nil {
			return nil, nil, err
		}
		if err := ws.io.read(ws.hv, ws.v); err != nil {
			return nil, nil, err
		}
		return ws.hk, ws.hv, nil
	}
	h := ws.history(l, cfg.Layers)
	pl, err := pol.AttendPlan(l, kv, h.key)
	if err != nil {
		return err
	}
	if pl.K != nil {
		if len(pl.K) != len(pl.V) || len(pl.K)%d != 0 {
			return fmt.Errorf("policy %s returned a history of %d keys and %d values (want rows × %d each)", pol.Name(), len(pl.K), len(pl.V), d)
		}
		h.set(be, pl, d)
	}
	S, err := checkPlan(pl, h, p.F, p.tpf)
	if err != nil {
		return fmt.Errorf("policy %s: %w", pol.Name(), err)
	}
	ck, cv := ws.contextKV(S * d)
	off, hoff := 0, 0
	for _, s := range pl.Segments {
		n := s.Rows * d
		switch s.Frame {
		case memory.SegHistory:
			be.Copy(ck, off, h.k, hoff, n)
			be.Copy(cv, off, h.v, hoff, n)
			hoff += n
		case memory.SegDevice:
			if err := s.Device.WriteRows(be, ck, cv, off/d, s.Rows); err != nil {
				return fmt.Errorf("policy %s: its memory rows on the device: %w", pol.Name(), err)
			}
		default:
			be.Copy(ck, off, ws.k, s.Frame*n, n)
			be.Copy(cv, off, ws.v, s.Frame*n, n)
			be.Rope(ck, off/d, heads, ws.rope, p.gh, p.gw, s.T, 1)
		}
		off += n
	}
	for f, t := range pl.QT {
		be.Rope(ws.q, f*p.tpf, heads, ws.rope, p.gh, p.gw, t, 1)
	}
	be.Attention(p.m.Precision, ws.att, ws.q, ck, cv, T, S, heads, cfg.HeadDim(), p.scale)
	return nil
}

// checkPlan checks a plan against the history held and the block (F
// frames of tpf tokens) and returns its keys S.
func checkPlan(pl memory.Plan, h *layerHistory, F, tpf int) (int, error) {
	if pl.Key != h.key {
		return 0, fmt.Errorf("plan of history %d, %d held", pl.Key, h.key)
	}
	if hr := pl.HistoryRows(); hr != h.rows {
		return 0, fmt.Errorf("plan reads %d history rows, the history has %d", hr, h.rows)
	}
	if len(pl.QT) != F {
		return 0, fmt.Errorf("plan has query positions for %d frames, the block %d", len(pl.QT), F)
	}
	S, seen := 0, make([]bool, F)
	for _, s := range pl.Segments {
		bad := s.Rows < 0 || s.Frame < memory.SegDevice || (s.Frame == memory.SegDevice && s.Device == nil) ||
			(s.Frame >= 0 && (s.Frame >= F || seen[s.Frame] || s.Rows != tpf || s.T < 0))
		if bad {
			return 0, fmt.Errorf("plan segment %+v (block of %d frames × %d tokens)", s, F, tpf)
		}
		if s.Frame >= 0 {
			seen[s.Frame] = true
		}
		S += s.Rows
	}
	for f, t := range pl.QT {
		if !seen[f] || t < 0 {
			return 0, fmt.Errorf("plan has no keys of the block's frame %d (queries at %d)", f, t)
		}
	}
	if S != pl.Parts.Total() {
		return 0, fmt.Errorf("plan segments give %d keys, its parts %+v", S, pl.Parts)
	}
	return S, nil
}

// releaseHistory frees every layer's history: after a clean pass, whose
// frames the policy commits, the next call's history is another (a
// policy's key changes when a block is committed), so holding it would
// only keep device memory from the VAE, which decodes between blocks.
func (w *workspace) releaseHistory() {
	for i := range w.hist {
		w.hist[i].free(w.io.be)
	}
}

// history returns layer l's history holder.
func (w *workspace) history(l, layers int) *layerHistory {
	if w.hist == nil {
		w.hist = make([]layerHistory, layers)
	}
	return &w.hist[l]
}

// contextKV returns the context's key and value tensors of n values
// (views of buffers grown as needed).
func (w *workspace) contextKV(n int) (k, v compute.Tensor) {
	be := w.io.be
	for i := 1; i <= 2; i++ {
		if w.ctx[i] == nil || w.ctx[i].Len() < n {
			be.Free(w.ctx[i])
			w.ctx[i] = be.New(max(n, 1))
		}
	}
	return be.View(w.ctx[1], 0, n), be.View(w.ctx[2], 0, n)
}

// newRope returns the model's RoPE table (rope_theta, head dim).
func newRope(c Config) (*rope.Table, error) {
	return rope.New(c.HeadDim(), c.RoPEBase)
}
