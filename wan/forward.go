package wan

import (
	"fmt"
	"math"

	"github.com/densitykv/densitykv/attn"
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
	L, d := c.TextLen, c.Dim
	pad := make([]float32, L*c.TextDim)
	copy(pad, ctx)
	h := make([]float32, L*d)
	m.TextEmbedding0.apply(h, pad, L)
	geluTanh(h)
	t := &Text{Rows: rows, Embed: make([]float32, L*d), K: make([][]float32, c.Layers), V: make([][]float32, c.Layers)}
	m.TextEmbedding2.apply(t.Embed, h, L)
	for l := range m.Blocks {
		ca := &m.Blocks[l].CrossAttn
		t.K[l] = make([]float32, L*d)
		t.V[l] = make([]float32, L*d)
		ca.K.apply(t.K[l], t.Embed, L)
		rmsNorm(t.K[l], L, d, c.Eps, ca.NormK)
		ca.V.apply(t.V[l], t.Embed, L)
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

type workspace struct {
	T                        int
	x, y, q, k, v, att, o    []float32
	h, patches, out, mods, e []float32
	e0, sin, tmp             []float32
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

// Forward runs the model on one block and writes the flow prediction
// [F][OutDim][Height][Width] into flow. It calls pol.Begin(c.Mem), then
// pol.Attend for every layer in order, then pol.End(). Inputs are validated
// before Begin, so an input error leaves the policy untouched; an error
// returned by the policy itself leaves the call open, and that policy
// should then be discarded.
func (m *Model) Forward(flow []float32, c Call, pol memory.Policy) error {
	cfg := m.Cfg
	F := len(c.Timesteps)
	ph, pw := cfg.Patch[1], cfg.Patch[2]
	if F == 0 || c.Height <= 0 || c.Width <= 0 || c.Height%ph != 0 || c.Width%pw != 0 {
		return fmt.Errorf("wan: forward block %d: %d frames of %d×%d latents (must be positive multiples of the patch %d×%d)", c.Mem.Block, F, c.Height, c.Width, ph, pw)
	}
	H, W, C := c.Height, c.Width, cfg.InDim
	if len(c.Latent) != F*C*H*W {
		return fmt.Errorf("wan: forward block %d: latent has %d values, want %d frames × %d × %d × %d", c.Mem.Block, len(c.Latent), F, C, H, W)
	}
	if len(flow) != F*cfg.OutDim*H*W {
		return fmt.Errorf("wan: forward block %d: output has %d values, want %d", c.Mem.Block, len(flow), F*cfg.OutDim*H*W)
	}
	if i := finite.First(c.Latent); i >= 0 {
		return fmt.Errorf("wan: forward block %d: latent has %v at index %d", c.Mem.Block, c.Latent[i], i)
	}
	if i := finite.First(c.Timesteps); i >= 0 {
		return fmt.Errorf("wan: forward block %d: timestep %d is %v", c.Mem.Block, i, c.Timesteps[i])
	}
	if c.Text == nil || len(c.Text.K) != cfg.Layers || len(c.Text.Embed) != cfg.TextLen*cfg.Dim {
		return fmt.Errorf("wan: forward block %d: text is missing or was embedded by another model", c.Mem.Block)
	}
	if want := cfg.Layout(H, W, F); pol.Layout() != want {
		return fmt.Errorf("wan: forward block %d: memory policy %s has layout %+v, the model needs %+v", c.Mem.Block, pol.Name(), pol.Layout(), want)
	}
	// A policy that reports its configuration (every memory package policy)
	// must rotate with the model's RoPE base.
	if pc, ok := pol.(interface{ Config() memory.Config }); ok {
		if th := pc.Config().RoPETheta; th != cfg.RoPEBase {
			return fmt.Errorf("wan: forward block %d: memory policy %s applies RoPE with base %v, the model's rope_theta is %v", c.Mem.Block, pol.Name(), th, cfg.RoPEBase)
		}
	}
	gh, gw := H/ph, W/pw
	tpf := gh * gw
	T := F * tpf
	d, nh, hd := cfg.Dim, cfg.Heads, cfg.HeadDim()
	ws := m.workspace(T, F)
	trace := func(name string, x []float32) {
		if c.Trace != nil {
			c.Trace(name, x)
		}
	}

	// Patch embedding: patch vector (c, q, r) of token (f, h, w).
	pl := cfg.PatchLen()
	for f := 0; f < F; f++ {
		for hh := 0; hh < gh; hh++ {
			for ww := 0; ww < gw; ww++ {
				p := ws.patches[((f*gh+hh)*gw+ww)*pl:]
				for ch := 0; ch < C; ch++ {
					for q := 0; q < ph; q++ {
						row := c.Latent[((f*C+ch)*H+hh*ph+q)*W+ww*pw:]
						for r := 0; r < pw; r++ {
							p[(ch*ph+q)*pw+r] = row[r]
						}
					}
				}
			}
		}
	}
	x := ws.x
	m.PatchEmbedding.apply(x, ws.patches, T)
	trace("patch_embed_tokens", x)

	// Time embedding e and per-frame modulation offsets e0.
	for f, t := range c.Timesteps {
		Sinusoid(ws.sin[f*cfg.FreqDim:(f+1)*cfg.FreqDim], float64(t))
	}
	trace("time_sinusoid", ws.sin)
	m.TimeEmbedding0.apply(ws.tmp[:F*d], ws.sin, F)
	silu(ws.tmp[:F*d], ws.tmp[:F*d])
	m.TimeEmbedding2.apply(ws.e, ws.tmp[:F*d], F)
	trace("e", ws.e)
	silu(ws.tmp[:F*d], ws.e)
	m.TimeProjection.apply(ws.e0, ws.tmp[:F*d], F)
	trace("e0", ws.e0)

	if err := pol.Begin(c.Mem); err != nil {
		return fmt.Errorf("wan: forward block %d step %d: %w", c.Mem.Block, c.Mem.Step, err)
	}
	scale := float32(1 / math.Sqrt(float64(hd)))
	mod := func(i int) func(f int) []float32 {
		return func(f int) []float32 { return ws.mods[(f*6+i)*d : (f*6+i+1)*d] }
	}
	for l := range m.Blocks {
		b := &m.Blocks[l]
		for f := 0; f < F; f++ {
			for i := 0; i < 6*d; i++ {
				ws.mods[f*6*d+i] = b.Modulation[i] + ws.e0[f*6*d+i]
			}
		}
		// Self-attention.
		layerNorm(ws.y, x, T, d, cfg.Eps, nil, nil)
		modulate(ws.y, T, d, tpf, mod(0), mod(1))
		sa := &b.SelfAttn
		sa.Q.apply(ws.q, ws.y, T)
		sa.K.apply(ws.k, ws.y, T)
		sa.V.apply(ws.v, ws.y, T)
		rmsNorm(ws.q, T, d, cfg.Eps, sa.NormQ)
		rmsNorm(ws.k, T, d, cfg.Eps, sa.NormK)
		ctx, err := pol.Attend(l, ws.q, ws.k, ws.v)
		if err != nil {
			return fmt.Errorf("wan: forward block %d step %d layer %d: %w", c.Mem.Block, c.Mem.Step, l, err)
		}
		S := ctx.Parts.Total()
		if len(ctx.Q) != T*d || len(ctx.K) != S*d || len(ctx.V) != S*d || S < T {
			return fmt.Errorf("wan: forward block %d layer %d: policy %s returned q %d, k %d, v %d values for %d keys (want q %d, k = v = keys × %d)", c.Mem.Block, l, pol.Name(), len(ctx.Q), len(ctx.K), len(ctx.V), S, T*d, d)
		}
		if c.Trace != nil {
			trace(fmt.Sprintf("block%d_selfattn_q_roped", l), ctx.Q)
			trace(fmt.Sprintf("block%d_selfattn_k_roped", l), ctx.K[(S-T)*d:])
			trace(fmt.Sprintf("block%d_selfattn_v", l), ws.v)
		}
		attn.Attention(ws.att, ctx.Q, ctx.K, ctx.V, T, S, nh, hd, scale)
		sa.O.apply(ws.o, ws.att, T)
		for t := 0; t < T; t++ {
			g := mod(2)(t / tpf)
			xr, or := x[t*d:(t+1)*d], ws.o[t*d:(t+1)*d]
			for j := range xr {
				xr[j] += or[j] * g[j]
			}
		}
		// Cross-attention over the text.
		layerNorm(ws.y, x, T, d, cfg.Eps, b.Norm3W, b.Norm3B)
		ca := &b.CrossAttn
		ca.Q.apply(ws.q, ws.y, T)
		rmsNorm(ws.q, T, d, cfg.Eps, ca.NormQ)
		attn.Attention(ws.att, ws.q, c.Text.K[l], c.Text.V[l], T, cfg.TextLen, nh, hd, scale)
		ca.O.apply(ws.o, ws.att, T)
		for i, v := range ws.o {
			x[i] += v
		}
		// Feed-forward.
		layerNorm(ws.y, x, T, d, cfg.Eps, nil, nil)
		modulate(ws.y, T, d, tpf, mod(3), mod(4))
		b.FFN0.apply(ws.h, ws.y, T)
		geluTanh(ws.h)
		b.FFN2.apply(ws.o, ws.h, T)
		for t := 0; t < T; t++ {
			g := mod(5)(t / tpf)
			xr, or := x[t*d:(t+1)*d], ws.o[t*d:(t+1)*d]
			for j := range xr {
				xr[j] += or[j] * g[j]
			}
		}
		trace(fmt.Sprintf("block_out.%d", l), x)
	}
	if err := pol.End(); err != nil {
		return fmt.Errorf("wan: forward block %d step %d: %w", c.Mem.Block, c.Mem.Step, err)
	}

	// Head: modulation from e (not e0).
	layerNorm(ws.y, x, T, d, cfg.Eps, nil, nil)
	hm := m.HeadModulation
	sh := make([]float32, F*2*d)
	for f := 0; f < F; f++ {
		for i := 0; i < 2*d; i++ {
			sh[f*2*d+i] = hm[i] + ws.e[f*d+i%d]
		}
	}
	modulate(ws.y, T, d, tpf,
		func(f int) []float32 { return sh[f*2*d : f*2*d+d] },
		func(f int) []float32 { return sh[f*2*d+d : (f+1)*2*d] })
	ol := cfg.OutLen()
	m.Head.apply(ws.out, ws.y, T)
	trace("head_out", ws.out)

	// Unpatchify: output index (q·pw + r)·C + c of token (f, h, w).
	Co := cfg.OutDim
	for f := 0; f < F; f++ {
		for hh := 0; hh < gh; hh++ {
			for ww := 0; ww < gw; ww++ {
				o := ws.out[((f*gh+hh)*gw+ww)*ol:]
				for q := 0; q < ph; q++ {
					for r := 0; r < pw; r++ {
						for ch := 0; ch < Co; ch++ {
							flow[((f*Co+ch)*H+hh*ph+q)*W+ww*pw+r] = o[(q*pw+r)*Co+ch]
						}
					}
				}
			}
		}
	}
	return nil
}
