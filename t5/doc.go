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
// The weights stay in bfloat16 (umT5-XXL: 11.4 GB); the compute is
// float32. Every matrix product goes through package gemm: a Linear
// widens its bfloat16 weights to float32 one block of 128 output columns
// at a time, directly into gemm's packed panels (widenPanels, the one
// place to swap for a native bfloat16 kernel), and multiplies with
// gemm.MulPacked; attention runs per head (scores q·kᵀ, softmax with bias
// and mask, then p·v) on gemm's packed products. The RMS statistics and
// the softmax sums are accumulated in float64. Results are deterministic
// and do not depend on gemm.Threads(): every output element is computed
// by one goroutine in a fixed order. They follow gemm's micro-kernel, so
// the GOEXPERIMENT=simd build (fused multiply-adds) and the pure-Go build
// differ in the last bits; against Wan's float64 reference both stay
// within 3e-6 relative L2 on the golden prompts.
//
// Load reads Wan's models_t5_umt5-xxl-enc-bf16.pth (PyTorch zip) or a
// safetensors file with the same key names, inferring the configuration
// from the tensor shapes; NewRandom builds a model of any configuration
// for benchmarks.
package t5
