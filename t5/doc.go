// Package t5 is Wan2.1's text encoder: the encoder of umT5-XXL
// (wan/modules/t5.py, T5Encoder built by umt5_xxl with encoder_only=True,
// wrapped by T5EncoderModel), which turns a tokenised prompt into the
// context the DiT's cross-attention reads.
//
// Per prompt of n tokens (ids [n], mask [n]):
//
//	x = token_embedding[ids]                                   [n][Dim]
//	for each block i:
//	    h = RMSNorm₁(x)                                        x / √(mean(x²) + 1e-6) · w
//	    q, k, v = h·Wqᵀ, h·Wkᵀ, h·Wvᵀ                          [n][Heads][HeadDim]
//	    logits[h][i][j] = q_i·k_j + bias_i[h][i][j]            no 1/√HeadDim (T5)
//	    logits[h][i][j] = −MaxFloat32 where mask[j] = 0        keys only
//	    x += (softmax_j(logits)·v)·Woᵀ
//	    x += fc2(fc1(RMSNorm₂(x)) ⊙ gelu_tanh(gate(RMSNorm₂(x))))
//	out = RMSNorm(x)                                            [n][Dim]
//
// where bias_i is block i's own relative-position table (umT5:
// shared_pos=False) indexed by Config.RelativeBucket(j − i). Encode
// returns out's first seqLen rows (seqLen = the number of ones in the
// mask), as T5EncoderModel returns u[:v]; the DiT pads them back to
// text_len rows with zeros.
//
// The weights stay in bfloat16 (umT5-XXL: 11.4 GB). Every matrix product
// goes through package gemm at the model's Precision: a Linear
// (nn.Linear, streamed) packs its weights one block of 128 output columns
// at a time, so a packed copy never exists whole — at fp32 widened to
// float32 panels with float32 activations, at bf16 natively in the
// kernel's bfloat16 layout (gemm.PackNTBF16) with the activations rounded
// to bfloat16 — and multiplies with gemm.MulPacked; attention runs per head (scores q·kᵀ,
// softmax with bias and mask, then p·v) on gemm's packed products, at bf16
// with q, k, v and the probabilities rounded to bfloat16. The RMS
// statistics and the softmax sums are accumulated in float64; the GELU
// (nn.GELUTanh) and the softmax's exponential are float32, on the one
// exponential of every model, vmath.Exp32 (internal/vmath). Results are
// deterministic and the same bits on every CPU, gemm kernel, build and
// thread count: every output element is computed by one goroutine in a
// fixed order with one definition per product. Against Wan's float64
// reference fp32 stays within 3e-6 relative L2 on the golden prompts, bf16
// within 4·2^-8 (about half the error of Wan's own bf16 code, which also
// rounds the activations between the products).
//
// # Backends
//
// The forward is written once, against package compute's Backend
// (Model.UseBackend; the CPU by default), and computes the same bits on
// every backend; the CPU backend runs exactly the code described above
// (nn.Linear.Stream, nn.BiasedAttention with nn.SoftmaxBiasRow, nn.RMSNorm,
// nn.GELUTanh). What runs where on a device backend (package gpu's exact
// kernels):
//
//   - on the device: the RMSNorms, every Linear (the weights uploaded
//     once as bfloat16: the bf16 product reads them as they are, the fp32
//     one widens them as it reads them), the attention (per head
//     q·kᵀ and p·v on gemm's products, the softmax with the bias and the
//     mask with its float64 row sum: gpu/shaders/t5_softmax.glsl), the
//     gated GELU (GELUTanh, Mul) and the residual adds;
//   - on the host: the token-embedding gather (the [Vocab][Dim] table
//     stays in host memory; each call uploads its n rows), the relative
//     buckets and each block's bias by relative position [Heads][2n−1]
//     (uploaded per call and block), and the key mask [n].
//
// A Trace on a device downloads each traced tensor (a round trip each).
//
// Load reads Wan's models_t5_umt5-xxl-enc-bf16.pth (PyTorch zip), a
// safetensors file with the same key names, Hugging Face's
// UMT5EncoderModel or ComfyUI's umt5_xxl files (package weights),
// inferring the configuration from the tensor shapes; NewRandom builds a
// model of any configuration for benchmarks.
package t5
