// Package wan is the causal Wan2.1 text-to-video DiT (the autoregressive
// backbone of Self-Forcing, Causal-Forcing and LongLive) in float32, shaped
// by a Config (Wan2.1-T2V-1.3B by default, TinyConfig for the golden data).
//
// One Forward call denoises one block of latent frames [F][C][H][W]:
//
//	tokens   = PatchEmbed(x)                         [T][dim], T = F·(H/2)·(W/2), order (f, h, w)
//	e        = TimeEmbedding(sinusoid(t_f))           [F][dim]   (float64 sinusoid, cos then sin)
//	e0       = TimeProjection(SiLU(e))                [F][6][dim]
//	per layer, with (m0..m5) = modulation + e0[f]:
//	  x += SelfAttn(LN(x)(1+m1)+m0)·m2               (context from the memory.Policy)
//	  x += CrossAttn(LN_affine(x), text)
//	  x += FFN(LN(x)(1+m4)+m3)·m5                    (GELU, tanh approximation)
//	out      = Head(LN(x)(1+s1)+s0), (s0,s1) = head.modulation + e[f]
//	flow     = unpatchify(out)                        64 outputs per token laid out (p, q, r, c)
//
// Self-attention q and k are RMS-normalised over the full dim before the
// head split; the memory.Policy receives them before RoPE ([T][H][D]) and
// returns the rotated queries and the keys/values to attend (sink | memory
// | local), so every memory policy of the runtime can drive the model.
// Cross-attention reads per-layer text keys/values computed once per prompt
// (EmbedText); zero-padded text rows are attended, not masked.
//
// Parameters mirror the checkpoint names ("blocks.3.self_attn.q.weight",
// see Model.Params); Load reads safetensors and PyTorch checkpoints and
// merges LongLive LoRA.
package wan
