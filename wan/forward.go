package wan

import (
	"cmp"
	"fmt"
	"math"
	"sync"

	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/internal/finite"
	"github.com/densitykv/densitykv/memory"
)

// Text is an embedded prompt: the text embedding of all TextLen rows and
// each layer's cross-attention keys (after norm_k) and values, computed once
// per prompt by EmbedText. A prompt switch only replaces the Text.
type Text struct {
	Rows  int         // non-padded rows supplied
	Embed []float32   // [TextLen][dim] text_embedding output
	K, V  [][]float32 // per layer [TextLen][dim]

	mu sync.Mutex
	on *textOn // K and V on a device backend, uploaded once
}

// textOn is a Text's keys and values on a backend.
type textOn struct {
	be   compute.Backend
	k, v []compute.Tensor
}

// Release frees what the Text holds on a device backend (its keys and
// values, kept there by EmbedText or the first Forward); a later Forward
// uploads them again.
func (t *Text) Release() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.on.free()
	t.on = nil
}

// free frees the keys and values (nil: nothing).
func (o *textOn) free() {
	if o != nil {
		for i := range o.k {
			o.be.Free(o.k[i])
			o.be.Free(o.v[i])
		}
	}
}

// EmbedText embeds a text-encoder output ctx [rows][TextDim] (rows ≤
// TextLen). Rows beyond rows are zero-padded and, as in Wan2.1, embedded and
// attended (text_embedding(0) ≠ 0).
func (m *Model) EmbedText(ctx []float32, rows int) (*Text, error) {
	c := m.Cfg
	if rows < 0 || rows > c.TextLen {
		return nil, fmt.Errorf("wan: embed text: %d rows, want 0..%d", rows, c.TextLen)
	}
	if len(ctx) != rows*c.TextDim {
		return nil, fmt.Errorf("wan: embed text: %d values, want %d rows × %d", len(ctx), rows, c.TextDim)
	}
	if i := finite.First(ctx); i >= 0 {
		return nil, fmt.Errorf("wan: embed text: value %v at row %d column %d", ctx[i], i/c.TextDim, i%c.TextDim)
	}
	m.repack()
	w := m.weights()
	be, L, d := w.be, c.TextLen, c.Dim
	t := &Text{Rows: rows, Embed: make([]float32, L*d), K: make([][]float32, c.Layers), V: make([][]float32, c.Layers)}
	pad := make([]float32, L*c.TextDim)
	copy(pad, ctx)
	io := newHostIO(be)
	x, h := io.in(pad), be.New(L*d)
	defer io.free(x, h)
	be.Linear(h, w.text0, x, L)
	be.GELUTanh(h)
	embed := io.out(t.Embed)
	defer io.free(embed)
	be.Linear(embed, w.text2, h, L)
	on := &textOn{be: be, k: make([]compute.Tensor, c.Layers), v: make([]compute.Tensor, c.Layers)}
	for l := range m.Blocks {
		cw := &w.blocks[l].cross
		t.K[l], t.V[l] = make([]float32, L*d), make([]float32, L*d)
		on.k[l], on.v[l] = io.out(t.K[l]), io.out(t.V[l])
		be.Linear(on.k[l], cw.k, embed, L)
		be.RMSNorm(on.k[l], on.k[l], L, d, c.Eps, cw.normK)
		be.Linear(on.v[l], cw.v, embed, L)
	}
	err := io.read(t.Embed, embed)
	for l := 0; l < c.Layers && err == nil; l++ {
		if err = io.read(t.K[l], on.k[l]); err == nil {
			err = io.read(t.V[l], on.v[l])
		}
	}
	if !io.host {
		t.on = on
		if err != nil {
			t.Release()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("wan: embed text on %v: %w", be, err)
	}
	return t, nil
}

// onBackend returns the text's keys and values on be: the host slices
// themselves on host memory, else uploaded once and kept.
func (t *Text) onBackend(be compute.Backend) *textOn {
	io := newHostIO(be)
	send := func() *textOn {
		on := &textOn{be: be, k: make([]compute.Tensor, len(t.K)), v: make([]compute.Tensor, len(t.V))}
		for l := range t.K {
			on.k[l], on.v[l] = io.in(t.K[l]), io.in(t.V[l])
		}
		return on
	}
	if io.host {
		return send()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.on == nil || t.on.be != be {
		t.on.free()
		t.on = send()
	}
	return t.on
}

// Call is one forward call on one block of latent frames.
type Call struct {
	// Latent is the block's noisy latents [F][C][Height][Width].
	Latent        []float32
	Height, Width int
	// Timesteps holds one timestep per frame (len F).
	Timesteps []float32
	Text      *Text
	// Mem describes the call to the memory policy (block, step, clean, first).
	Mem memory.Call
	// Trace, when set, receives intermediate tensors by name:
	// patch_embed_tokens [T][dim], time_sinusoid [F][freq], e [F][dim],
	// e0 [F][6][dim], block{l}_selfattn_q_roped, block{l}_selfattn_k_roped
	// (the current block's keys after RoPE, the last T context rows) and
	// block{l}_selfattn_v [T][H][D], block_out.{l} [T][dim], head_out
	// [T][out_len]. The slices are only valid during the callback.
	Trace func(name string, data []float32)
}

// Sinusoid writes the freq-dim sinusoidal embedding of t into dst:
// [cos(t·ω_k), sin(t·ω_k)], ω_k = 10000^(−k/(freq/2)), computed in float64
// and rounded to float32.
func Sinusoid(dst []float32, t float64) {
	half := len(dst) / 2
	for k := 0; k < half; k++ {
		a := t * math.Pow(10000, -float64(k)/float64(half))
		s, c := math.Sincos(a)
		dst[k], dst[half+k] = float32(c), float32(s)
	}
}

// pass is the state of one Forward call that the steps share: the block's
// geometry, the backend, the weights and tensors on it, the text, the
// memory policy and the trace.
type pass struct {
	m       *Model
	be      compute.Backend
	w       *weightsOn
	ws      *workspace
	text    *textOn
	c       *Call
	pol     memory.Policy
	F, H, W int // frames, latent height and width
	gh, gw  int // token grid of a frame
	tpf, T  int // tokens per frame, tokens
	scale   float32
	err     error // a trace's read-back error
}

// trace hands x's values to the call's Trace, if any (read back from a
// device backend).
func (p *pass) trace(name string, x compute.Tensor) {
	if p.c.Trace == nil {
		return
	}
	if p.ws.io.host {
		p.c.Trace(name, p.ws.io.mem.Host(x))
		return
	}
	v := make([]float32, x.Len())
	if err := p.be.Download(v, x); err != nil {
		if p.err == nil {
			p.err = fmt.Errorf("trace %s: %w", name, err)
		}
		return
	}
	p.c.Trace(name, v)
}

// Forward runs the model on one block and writes the flow prediction
// [F][OutDim][Height][Width] into flow:
//
//	x = patchify(latent)                      PatchEmbedding
//	e, e0 = timeEmbedding(timesteps)
//	x = Block.Forward(x) for every layer      (memory policy per layer)
//	flow = unpatchify(head(x, e))
//
// on the model's backend (UseBackend): the latents go in, the flow comes
// out, and per layer the memory policy's q, k, v and context cross (see
// Attention.self).
//
// It calls pol.Begin(c.Mem), then pol.Attend for every layer in order,
// then pol.End(). Inputs are validated before Begin, so an input error
// leaves the policy untouched; an error returned by the policy itself, or
// by the backend, leaves the call open, and that policy should then be
// discarded.
func (m *Model) Forward(flow []float32, c Call, pol memory.Policy) error {
	p, err := m.newPass(flow, &c, pol)
	if err != nil {
		return err
	}
	x := p.patchify()
	p.timeEmbedding()
	if err := pol.Begin(c.Mem); err != nil {
		return fmt.Errorf("wan: forward block %d step %d: %w", c.Mem.Block, c.Mem.Step, err)
	}
	for l := range m.Blocks {
		if err := m.Blocks[l].Forward(p, l, x); err != nil {
			return fmt.Errorf("wan: forward block %d step %d layer %d on %v: %w", c.Mem.Block, c.Mem.Step, l, p.be, err)
		}
		p.trace(fmt.Sprintf("block_out.%d", l), x)
	}
	if err := pol.End(); err != nil {
		return fmt.Errorf("wan: forward block %d step %d: %w", c.Mem.Block, c.Mem.Step, err)
	}
	if c.Mem.Clean {
		p.ws.releaseHistory() // the next block's history is another
	}
	p.head(x)
	if err := cmp.Or(p.ws.io.read(p.ws.hout, p.ws.out), p.err); err != nil {
		return fmt.Errorf("wan: forward block %d step %d on %v: %w", c.Mem.Block, c.Mem.Step, p.be, err)
	}
	p.unpatchify(flow)
	return nil
}

// newPass validates a call (shapes, finite inputs, text, the policy's
// layout and RoPE base) and sets up its state.
func (m *Model) newPass(flow []float32, c *Call, pol memory.Policy) (*pass, error) {
	cfg := m.Cfg
	F := len(c.Timesteps)
	ph, pw := cfg.Patch[1], cfg.Patch[2]
	if F == 0 || c.Height <= 0 || c.Width <= 0 || c.Height%ph != 0 || c.Width%pw != 0 {
		return nil, fmt.Errorf("wan: forward block %d: %d frames of %d×%d latents (must be positive multiples of the patch %d×%d)", c.Mem.Block, F, c.Height, c.Width, ph, pw)
	}
	H, W, C := c.Height, c.Width, cfg.InDim
	if len(c.Latent) != F*C*H*W {
		return nil, fmt.Errorf("wan: forward block %d: latent has %d values, want %d frames × %d × %d × %d", c.Mem.Block, len(c.Latent), F, C, H, W)
	}
	if len(flow) != F*cfg.OutDim*H*W {
		return nil, fmt.Errorf("wan: forward block %d: output has %d values, want %d", c.Mem.Block, len(flow), F*cfg.OutDim*H*W)
	}
	if i := finite.First(c.Latent); i >= 0 {
		return nil, fmt.Errorf("wan: forward block %d: latent has %v at index %d", c.Mem.Block, c.Latent[i], i)
	}
	if i := finite.First(c.Timesteps); i >= 0 {
		return nil, fmt.Errorf("wan: forward block %d: timestep %d is %v", c.Mem.Block, i, c.Timesteps[i])
	}
	if c.Text == nil || len(c.Text.K) != cfg.Layers || len(c.Text.Embed) != cfg.TextLen*cfg.Dim {
		return nil, fmt.Errorf("wan: forward block %d: text is missing or was embedded by another model", c.Mem.Block)
	}
	if want := cfg.Layout(H, W, F); pol.Layout() != want {
		return nil, fmt.Errorf("wan: forward block %d: memory policy %s has layout %+v, the model needs %+v", c.Mem.Block, pol.Name(), pol.Layout(), want)
	}
	// A policy that reports its configuration (every memory package policy)
	// must rotate with the model's RoPE base.
	if pc, ok := pol.(interface{ Config() memory.Config }); ok {
		if th := pc.Config().RoPETheta; th != cfg.RoPEBase {
			return nil, fmt.Errorf("wan: forward block %d: memory policy %s applies RoPE with base %v, the model's rope_theta is %v", c.Mem.Block, pol.Name(), th, cfg.RoPEBase)
		}
	}
	m.repack()
	p := &pass{m: m, w: m.weights(), c: c, pol: pol, F: F, H: H, W: W, gh: H / ph, gw: W / pw}
	p.be = p.w.be
	p.tpf = p.gh * p.gw
	p.T = F * p.tpf
	p.scale = float32(1 / math.Sqrt(float64(cfg.HeadDim())))
	p.ws = m.workspace(p.T, F)
	p.text = c.Text.onBackend(p.be)
	if p.ws.rope == nil {
		var err error
		if p.ws.rope, err = newRope(cfg); err != nil {
			return nil, fmt.Errorf("wan: forward block %d: %w", c.Mem.Block, err)
		}
	}
	return p, nil
}

// patchify embeds the latent's patches (PatchEmbedding, a Conv3d with
// stride = kernel = the patch, as a Linear over patch vectors (c, q, r))
// and returns the tokens x [T][dim], token (f, h, w) at (f·gh + h)·gw + w.
// The patches are gathered on the host (the call's input) and sent.
func (p *pass) patchify() compute.Tensor {
	cfg, ws, lat := p.m.Cfg, p.ws, p.c.Latent
	ph, pw, C := cfg.Patch[1], cfg.Patch[2], cfg.InDim
	pl := cfg.PatchLen()
	for f := 0; f < p.F; f++ {
		for hh := 0; hh < p.gh; hh++ {
			for ww := 0; ww < p.gw; ww++ {
				v := ws.hpatches[((f*p.gh+hh)*p.gw+ww)*pl:]
				for ch := 0; ch < C; ch++ {
					for q := 0; q < ph; q++ {
						row := lat[((f*C+ch)*p.H+hh*ph+q)*p.W+ww*pw:]
						for r := 0; r < pw; r++ {
							v[(ch*ph+q)*pw+r] = row[r]
						}
					}
				}
			}
		}
	}
	ws.io.send(ws.patches, ws.hpatches)
	p.be.Linear(ws.x, p.w.patch, ws.patches, p.T)
	p.trace("patch_embed_tokens", ws.x)
	return ws.x
}

// timeEmbedding computes, per frame f with timestep t_f,
//
//	e[f]  = TimeEmbedding2(SiLU(TimeEmbedding0(sinusoid(t_f))))   [dim]
//	e0[f] = TimeProjection(SiLU(e[f]))                            [6][dim]
func (p *pass) timeEmbedding() {
	be, w, ws, F := p.be, p.w, p.ws, p.F
	fd := p.m.Cfg.FreqDim
	for f, t := range p.c.Timesteps {
		Sinusoid(ws.hsin[f*fd:(f+1)*fd], float64(t))
	}
	ws.io.send(ws.sin, ws.hsin)
	p.trace("time_sinusoid", ws.sin)
	be.Linear(ws.tmp, w.time0, ws.sin, F)
	be.SiLU(ws.tmp, ws.tmp)
	be.Linear(ws.e, w.time2, ws.tmp, F)
	p.trace("e", ws.e)
	be.SiLU(ws.tmp, ws.e)
	be.Linear(ws.e0, w.timeProj, ws.tmp, F)
	p.trace("e0", ws.e0)
}

// mod returns modulation row i (0…5) of every frame: m_i = modulation +
// e0[f], row i of mods [F][6][dim].
func (p *pass) mod(i int) compute.Vec {
	d := p.m.Cfg.Dim
	return compute.Vec{T: p.ws.mods, Off: i * d, Stride: 6 * d}
}

// Forward runs layer l on the tokens x [T][dim] in place, with
// (m0…m5) = modulation + e0[frame]:
//
//	x += SelfAttn(LN(x)·(1+m1) + m0) · m2     (keys and values from the memory policy)
//	x += CrossAttn(LN_affine(x), text)
//	x += FFN(LN(x)·(1+m4) + m3) · m5
func (b *Block) Forward(p *pass, l int, x compute.Tensor) error {
	be, ws, w := p.be, p.ws, &p.w.blocks[l]
	T, d, eps, F, tpf := p.T, p.m.Cfg.Dim, p.m.Cfg.Eps, p.F, p.tpf
	be.Copy(ws.mods, 0, ws.e0, 0, F*6*d)
	be.AddBias(ws.mods, F, 6*d, w.mod)

	compute.LayerNormModulate(be, ws.y, x, T, d, eps, tpf, p.mod(0), p.mod(1))
	if err := b.SelfAttn.self(p, l, ws.y, ws.o); err != nil {
		return err
	}
	be.GatedAdd(x, ws.o, T, d, tpf, p.mod(2))

	be.LayerNorm(ws.y, x, T, d, eps, w.norm3W, w.norm3B)
	b.CrossAttn.cross(p, l, ws.y, ws.o)
	be.Add(x, ws.o)

	compute.LayerNormModulate(be, ws.y, x, T, d, eps, tpf, p.mod(3), p.mod(4))
	be.Linear(ws.h, w.ffn0, ws.y, T)
	be.GELUTanh(ws.h)
	be.Linear(ws.o, w.ffn2, ws.h, T)
	be.GatedAdd(x, ws.o, T, d, tpf, p.mod(5))
	return nil
}

// self is the self-attention of layer l: out [T][dim] = O(attention of
// the RMS-normed q and k of y [T][dim] and v, against the keys and values
// the memory policy returns for this layer (which rotates them with RoPE).
//
// The memory policy runs on the host. On the CPU its context is used
// where it is (nothing is copied). On a device backend a policy that
// plans (memory.Planner) keeps its history on the device and the context
// is assembled there (selfPlanned, history.go); any other policy, or a
// traced call, has q, k and v read back and its context sent, once per
// layer.
func (a *Attention) self(p *pass, l int, y, out compute.Tensor) error {
	cfg, be, ws, w, T := p.m.Cfg, p.be, p.ws, &p.w.blocks[l].self, p.T
	d := cfg.Dim
	be.Linear(ws.q, w.q, y, T)
	be.Linear(ws.k, w.k, y, T)
	be.Linear(ws.v, w.v, y, T)
	be.RMSNorm(ws.q, ws.q, T, d, cfg.Eps, w.normQ)
	be.RMSNorm(ws.k, ws.k, T, d, cfg.Eps, w.normK)
	if pol, ok := p.planned(); ok {
		if err := a.selfPlanned(p, l, pol); err != nil {
			return err
		}
		be.Linear(out, w.o, ws.att, T)
		return nil
	}
	err := ws.io.read(ws.hq, ws.q)
	if err == nil {
		err = ws.io.read(ws.hk, ws.k)
	}
	if err == nil {
		err = ws.io.read(ws.hv, ws.v)
	}
	if err != nil {
		return err
	}
	ctx, err := p.pol.Attend(l, ws.hq, ws.hk, ws.hv)
	if err != nil {
		return err
	}
	S := ctx.Parts.Total()
	if len(ctx.Q) != T*d || len(ctx.K) != S*d || len(ctx.V) != S*d || S < T {
		return fmt.Errorf("policy %s returned q %d, k %d, v %d values for %d keys (want q %d, k = v = keys × %d)", p.pol.Name(), len(ctx.Q), len(ctx.K), len(ctx.V), S, T*d, d)
	}
	if p.c.Trace != nil {
		p.c.Trace(fmt.Sprintf("block%d_selfattn_q_roped", l), ctx.Q)
		p.c.Trace(fmt.Sprintf("block%d_selfattn_k_roped", l), ctx.K[(S-T)*d:])
		p.c.Trace(fmt.Sprintf("block%d_selfattn_v", l), ws.hv)
	}
	c := ws.context(ctx.Q, ctx.K, ctx.V)
	be.Attention(p.m.Precision, ws.att, c[0], c[1], c[2], T, S, cfg.Heads, cfg.HeadDim(), p.scale)
	be.Linear(out, w.o, ws.att, T)
	return nil
}

// cross is the cross-attention of layer l over the text: out [T][dim] =
// O(attention of the RMS-normed q of y to the text's keys and values).
func (a *Attention) cross(p *pass, l int, y, out compute.Tensor) {
	cfg, be, ws, w, T := p.m.Cfg, p.be, p.ws, &p.w.blocks[l].cross, p.T
	be.Linear(ws.q, w.q, y, T)
	be.RMSNorm(ws.q, ws.q, T, cfg.Dim, cfg.Eps, w.normQ)
	be.Attention(p.m.Precision, ws.att, ws.q, p.text.k[l], p.text.v[l], T, cfg.TextLen, cfg.Heads, cfg.HeadDim(), p.scale)
	be.Linear(out, w.o, ws.att, T)
}

// head computes the output projection of the tokens x into ws.out
// [T][out_len]: Head(LN(x)·(1+s1) + s0) with (s0, s1) = head.modulation +
// e[frame] (e, not e0).
func (p *pass) head(x compute.Tensor) {
	be, ws, d := p.be, p.ws, p.m.Cfg.Dim
	for f := 0; f < p.F; f++ {
		be.Copy(ws.headMods, 2*f*d, ws.e, f*d, d)
		be.Copy(ws.headMods, (2*f+1)*d, ws.e, f*d, d)
	}
	be.AddBias(ws.headMods, p.F, 2*d, p.w.headMod)
	compute.LayerNormModulate(be, ws.y, x, p.T, d, p.m.Cfg.Eps, p.tpf,
		compute.Vec{T: ws.headMods, Stride: 2 * d}, compute.Vec{T: ws.headMods, Off: d, Stride: 2 * d})
	be.Linear(ws.out, p.w.head, ws.y, p.T)
	p.trace("head_out", ws.out)
}

// unpatchify writes the head's outputs as latents flow [F][OutDim][H][W]:
// output index (q·pw + r)·OutDim + c of token (f, h, w) is channel c at
// pixel (h·ph + q, w·pw + r) of frame f.
func (p *pass) unpatchify(flow []float32) {
	cfg := p.m.Cfg
	ph, pw, Co, ol := cfg.Patch[1], cfg.Patch[2], cfg.OutDim, cfg.OutLen()
	for f := 0; f < p.F; f++ {
		for hh := 0; hh < p.gh; hh++ {
			for ww := 0; ww < p.gw; ww++ {
				o := p.ws.hout[((f*p.gh+hh)*p.gw+ww)*ol:]
				for q := 0; q < ph; q++ {
					for r := 0; r < pw; r++ {
						for ch := 0; ch < Co; ch++ {
							flow[((f*Co+ch)*p.H+hh*ph+q)*p.W+ww*pw+r] = o[(q*pw+r)*Co+ch]
						}
					}
				}
			}
		}
	}
}
