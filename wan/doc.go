// Package wan is the causal Wan2.1 text-to-video DiT (the autoregressive
// backbone of Self-Forcing, Causal-Forcing and LongLive), shaped by a Config
// (Wan2.1-T2V-1.3B by default, TinyConfig for the golden data).
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
// The code reads like the equations: Model.Forward is patchify, the time
// embedding, Block.Forward per layer (self-attention, cross-attention,
// FFN, each a few lines) and the head.
//
// # Backends
//
// The forward is written once against compute.Backend (Model.UseBackend):
// the CPU by default (package nn's functions, the bits pinned in
// testdata/bits.json), or a Vulkan device (gpu.NewBackend), which gives
// the same bits, its weights uploaded once and every operation recorded
// into one command batch. The memory policy decides on the host. On the
// CPU its context is used where it is. On a device, a policy that plans
// (memory.Planner: all but Deep Forcing) has each layer's history sent
// once per block and kept there, and the context assembled on the device
// (history.go): a call reads back its flow only, the clean pass also its
// k and v for the policy. Any other policy, or a traced call, has q, k
// and v read back per layer for Policy.Attend and its context sent.
//
// # Precision
//
// A model has one precision (Model.Precision, chosen when it is built:
// LoadOptions.Precision, FromStateDict, Random), a gemm.Precision spelled
// "fp32" or "bf16":
//
//   - fp32: every matrix product is gemm's float32 product; the golden
//     tests' mode (within 1e-4 of the float64 reference).
//   - bf16: what the authors run on GPUs in bfloat16. The Linear weights
//     are rounded to bfloat16 once and kept packed in bfloat16 (half the
//     weight memory on the AVX512_BF16 and AMX kernels); each Linear's
//     input and the attention's q, k, v are rounded to bfloat16 and the
//     products are gemm's bfloat16 product with float32 accumulation; the
//     attention probabilities are rounded to bfloat16 for PV, as flash
//     attention does (package attn), while the softmax and its row sums,
//     the norms, modulations, GELU and SiLU, the biases and the residual
//     stream stay float32. Within 4·2^-8 of the float64 reference on the
//     golden forwards (the tests derive that bound).
//
// Either way the results are the same bits on every CPU, every gemm
// kernel and every build (the tests force each kernel and pin a hash of
// the outputs): the products have one definition per precision, the
// element-wise steps are written so that no multiply-add can be fused
// (explicit conversions), and the GELU, the SiLU and the attention's
// softmax compute in float32 on the one exponential of every model,
// vmath.Exp32 (pure Go, reproduced bit for bit by nn's and attn's
// kernels). The time embedding's sinusoid uses math.Pow and math.Sincos
// from the standard library: on amd64, math.Exp (under Pow) is assembly
// that uses FMA on CPUs with AVX and FMA, so a CPU without them could
// differ in the last bit of a float64 sinusoid value before its rounding
// to float32.
//
// Parameters mirror the checkpoint names ("blocks.3.self_attn.q.weight",
// see Model.Params); Load reads them in every layout package weights
// recognises (official .pt/.pth/.safetensors, diffusers, sharded,
// ComfyUI with fp16/bf16/fp8 values), tensor by tensor, and merges LoRA
// adapters (LongLive's, PEFT, diffusers, ComfyUI; in float32, before the
// weights are packed).
package wan
