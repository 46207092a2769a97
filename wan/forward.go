package wan

import (
	"fmt"
	"math"

	"github.com/densitykv/densitykv/internal/finite"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/nn"
)

// Text is an embedded prompt: the text embedding of all TextLen rows and
// each layer's cross-attention keys (after norm_k) and values, computed once
// per prompt by EmbedText. A prompt switch only replaces the Text.
type Text struct {
	Rows  int         // non-padded rows supplied
	Embed []float32   // [TextLen][dim] text_embedding output
	K, V  [][]float32 // per layer [TextLen][dim]
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
	L, d := c.TextLen, c.Dim
	pad := make([]float32, L*c.TextDim)
	copy(pad, ctx)
	h := make([]float32, L*d)
	m.TextEmbedding0.Apply(h, pad, L)
	nn.GELUTanh(h)
	t := &Text{Rows: rows, Embed: make([]float32, L*d), K: make([][]float32, c.Layers), V: make([][]float32, c.Layers)}
	m.TextEmbedding2.Apply(t.Embed, h, L)
	for l := range m.Blocks {
		ca := &m.Blocks[l].CrossAttn
		t.K[l] = make([]float32, L*d)
		t.V[l] = make([]float32, L*d)
		ca.K.Apply(t.K[l], t.Embed, L)
		nn.RMSNorm(t.K[l], t.K[l], L, d, c.Eps, ca.NormK)
		ca.V.Apply(t.V[l], t.Embed, L)
	}
	return t, nil
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

// workspace holds the buffers of Forward, reused while the block's shape
// does not change.
type workspace struct {
	T                     int
	x, y, q, k, v, att, o []float32 // [T][dim]
	h                     []float32 // [T][ffn_dim]
	patches, out          []float32 // [T][patch_len], [T][out_len]
	mods, e0              []float32 // [F][6][dim]
	e, sin, tmp, headMods []float32 // [F][dim], [F][freq], scratch, [F][2][dim]
}

func (m *Model) workspace(T, F int) *workspace {
	c := m.Cfg
	d := c.Dim
	if w := m.ws; w != nil && w.T == T && len(w.e) == F*d {
		return w
	}
	w := &workspace{T: T}
	for _, b := range []*[]float32{&w.x, &w.y, &w.q, &w.k, &w.v, &w.att, &w.o} {
		*b = make([]float32, T*d)
	}
	w.h = make([]float32, T*c.FFNDim)
	w.patches = make([]float32, T*c.PatchLen())
	w.out = make([]float32, T*c.OutLen())
	w.mods = make([]float32, F*6*d)
	w.e = make([]float32, F*d)
	w.e0 = make([]float32, F*6*d)
	w.sin = make([]float32, F*c.FreqDim)
	w.tmp = make([]float32, F*max(d, c.FreqDim))
	w.headMods = make([]float32, F*2*d)
	m.ws = w
	return w
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
// geometry, the buffers, the text, the memory policy and the trace.
type pass struct {
	m       *Model
	ws      *workspace
	c       *Call
	pol     memory.Policy
	F, H, W int // frames, latent height and width
	gh, gw  int // token grid of a frame
	tpf, T  int // tokens per frame, tokens
	scale   float32
}

func (p *pass) trace(name string, x []float32) {
	if p.c.Trace != nil {
		p.c.Trace(name, x)
	}
}

// Forward runs the model on one block and writes the flow prediction
// [F][OutDim][Height][Width] into flow:
//
//	x = patchify(latent)                      PatchEmbedding
//	e, e0 = timeEmbedding(timesteps)
//	x = Block.Forward(x) for every layer      (memory policy per layer)
//	flow = unpatchify(head(x, e))
//
// It calls pol.Begin(c.Mem), then pol.Attend for every layer in order,
// then pol.End(). Inputs are validated before Begin, so an input error
// leaves the policy untouched; an error returned by the policy itself
// leaves the call open, and that policy should then be discarded.
func (m *Model) Forward(flow []float32, c Call, pol memory.Policy) error {
	p, err := m.newPass(flow, &c, pol)
	if err != nil {
		return err
	}
	m.repack()
	x := p.patchify()
	p.timeEmbedding()
	if err := pol.Begin(c.Mem); err != nil {
		return fmt.Errorf("wan: forward block %d step %d: %w", c.Mem.Block, c.Mem.Step, err)
	}
	for l := range m.Blocks {
		if err := m.Blocks[l].Forward(p, l, x); err != nil {
			return fmt.Errorf("wan: forward block %d step %d layer %d: %w", c.Mem.Block, c.Mem.Step, l, err)
		}
		p.trace(fmt.Sprintf("block_out.%d", l), x)
	}
	if err := pol.End(); err != nil {
		return fmt.Errorf("wan: forward block %d step %d: %w", c.Mem.Block, c.Mem.Step, err)
	}
	p.head(x)
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
	p := &pass{m: m, c: c, pol: pol, F: F, H: H, W: W, gh: H / ph, gw: W / pw}
	p.tpf = p.gh * p.gw
	p.T = F * p.tpf
	p.scale = float32(1 / math.Sqrt(float64(cfg.HeadDim())))
	p.ws = m.workspace(p.T, F)
	return p, nil
}

// patchify embeds the latent's patches (PatchEmbedding, a Conv3d with
// stride = kernel = the patch, as a Linear over patch vectors (c, q, r))
// and returns the tokens x [T][dim], token (f, h, w) at (f·gh + h)·gw + w.
func (p *pass) patchify() []float32 {
	cfg, ws, lat := p.m.Cfg, p.ws, p.c.Latent
	ph, pw, C := cfg.Patch[1], cfg.Patch[2], cfg.InDim
	pl := cfg.PatchLen()
	for f := 0; f < p.F; f++ {
		for hh := 0; hh < p.gh; hh++ {
			for ww := 0; ww < p.gw; ww++ {
				v := ws.patches[((f*p.gh+hh)*p.gw+ww)*pl:]
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
	p.m.PatchEmbedding.Apply(ws.x, ws.patches, p.T)
	p.trace("patch_embed_tokens", ws.x)
	return ws.x
}

// timeEmbedding computes, per frame f with timestep t_f,
//
//	e[f]  = TimeEmbedding2(SiLU(TimeEmbedding0(sinusoid(t_f))))   [dim]
//	e0[f] = TimeProjection(SiLU(e[f]))                            [6][dim]
func (p *pass) timeEmbedding() {
	m, ws, F := p.m, p.ws, p.F
	fd, d := m.Cfg.FreqDim, m.Cfg.Dim
	for f, t := range p.c.Timesteps {
		Sinusoid(ws.sin[f*fd:(f+1)*fd], float64(t))
	}
	p.trace("time_sinusoid", ws.sin)
	m.TimeEmbedding0.Apply(ws.tmp[:F*d], ws.sin, F)
	nn.SiLU(ws.tmp[:F*d], ws.tmp[:F*d])
	m.TimeEmbedding2.Apply(ws.e, ws.tmp[:F*d], F)
	p.trace("e", ws.e)
	nn.SiLU(ws.tmp[:F*d], ws.e)
	m.TimeProjection.Apply(ws.e0, ws.tmp[:F*d], F)
	p.trace("e0", ws.e0)
}

// mod returns modulation row i (0…5) of frame f: m_i = modulation + e0[f].
func (p *pass) mod(i int) func(f int) []float32 {
	d := p.m.Cfg.Dim
	return func(f int) []float32 { return p.ws.mods[(f*6+i)*d : (f*6+i+1)*d] }
}

// Forward runs layer l on the tokens x [T][dim] in place, with
// (m0…m5) = modulation + e0[frame]:
//
//	x += SelfAttn(LN(x)·(1+m1) + m0) · m2     (keys and values from the memory policy)
//	x += CrossAttn(LN_affine(x), text)
//	x += FFN(LN(x)·(1+m4) + m3) · m5
func (b *Block) Forward(p *pass, l int, x []float32) error {
	cfg, ws := p.m.Cfg, p.ws
	T, d := p.T, cfg.Dim
	for f := 0; f < p.F; f++ {
		for i := 0; i < 6*d; i++ {
			ws.mods[f*6*d+i] = b.Modulation[i] + ws.e0[f*6*d+i]
		}
	}
	nn.LayerNorm(ws.y, x, T, d, cfg.Eps, nil, nil)
	modulate(ws.y, T, d, p.tpf, p.mod(0), p.mod(1))
	if err := b.SelfAttn.self(p, l, ws.y, ws.o); err != nil {
		return err
	}
	gatedAdd(x, ws.o, T, d, p.tpf, p.mod(2))

	nn.LayerNorm(ws.y, x, T, d, cfg.Eps, b.Norm3W, b.Norm3B)
	b.CrossAttn.cross(p, l, ws.y, ws.o)
	addInto(x, ws.o)

	nn.LayerNorm(ws.y, x, T, d, cfg.Eps, nil, nil)
	modulate(ws.y, T, d, p.tpf, p.mod(3), p.mod(4))
	b.FFN0.Apply(ws.h, ws.y, T)
	nn.GELUTanh(ws.h)
	b.FFN2.Apply(ws.o, ws.h, T)
	gatedAdd(x, ws.o, T, d, p.tpf, p.mod(5))
	return nil
}

// self is the self-attention of layer l: out [T][dim] = O(attention of
// the RMS-normed q and k of y [T][dim] and v, against the keys and values
// the memory policy returns for this layer (which rotates them with RoPE).
func (a *Attention) self(p *pass, l int, y, out []float32) error {
	cfg, ws, T := p.m.Cfg, p.ws, p.T
	d := cfg.Dim
	a.Q.Apply(ws.q, y, T)
	a.K.Apply(ws.k, y, T)
	a.V.Apply(ws.v, y, T)
	nn.RMSNorm(ws.q, ws.q, T, d, cfg.Eps, a.NormQ)
	nn.RMSNorm(ws.k, ws.k, T, d, cfg.Eps, a.NormK)
	ctx, err := p.pol.Attend(l, ws.q, ws.k, ws.v)
	if err != nil {
		return err
	}
	S := ctx.Parts.Total()
	if len(ctx.Q) != T*d || len(ctx.K) != S*d || len(ctx.V) != S*d || S < T {
		return fmt.Errorf("policy %s returned q %d, k %d, v %d values for %d keys (want q %d, k = v = keys × %d)", p.pol.Name(), len(ctx.Q), len(ctx.K), len(ctx.V), S, T*d, d)
	}
	if p.c.Trace != nil {
		p.trace(fmt.Sprintf("block%d_selfattn_q_roped", l), ctx.Q)
		p.trace(fmt.Sprintf("block%d_selfattn_k_roped", l), ctx.K[(S-T)*d:])
		p.trace(fmt.Sprintf("block%d_selfattn_v", l), ws.v)
	}
	nn.Attention(p.m.Precision, ws.att, ctx.Q, ctx.K, ctx.V, T, S, cfg.Heads, cfg.HeadDim(), p.scale)
	a.O.Apply(out, ws.att, T)
	return nil
}

// cross is the cross-attention of layer l over the text: out [T][dim] =
// O(attention of the RMS-normed q of y to the text's keys and values).
func (a *Attention) cross(p *pass, l int, y, out []float32) {
	cfg, ws, T := p.m.Cfg, p.ws, p.T
	a.Q.Apply(ws.q, y, T)
	nn.RMSNorm(ws.q, ws.q, T, cfg.Dim, cfg.Eps, a.NormQ)
	nn.Attention(p.m.Precision, ws.att, ws.q, p.c.Text.K[l], p.c.Text.V[l], T, cfg.TextLen, cfg.Heads, cfg.HeadDim(), p.scale)
	a.O.Apply(out, ws.att, T)
}

// head computes the output projection of the tokens x into ws.out
// [T][out_len]: Head(LN(x)·(1+s1) + s0) with (s0, s1) = head.modulation +
// e[frame] (e, not e0).
func (p *pass) head(x []float32) {
	m, ws := p.m, p.ws
	cfg := m.Cfg
	d := cfg.Dim
	nn.LayerNorm(ws.y, x, p.T, d, cfg.Eps, nil, nil)
	hm, sh := m.HeadModulation, ws.headMods
	for f := 0; f < p.F; f++ {
		for i := 0; i < 2*d; i++ {
			sh[f*2*d+i] = hm[i] + ws.e[f*d+i%d]
		}
	}
	modulate(ws.y, p.T, d, p.tpf,
		func(f int) []float32 { return sh[f*2*d : f*2*d+d] },
		func(f int) []float32 { return sh[f*2*d+d : (f+1)*2*d] })
	m.Head.Apply(ws.out, ws.y, p.T)
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
				o := p.ws.out[((f*p.gh+hh)*p.gw+ww)*ol:]
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
