// Package vae is the decoding half of the Wan2.1 VAE (Wan-Video/Wan2.1
// wan/modules/vae.py), streaming: latent frames go in as the
// generator finishes them and pixel frames come out, with the feature
// caches carried across chunks (as the DensityKV release drives Wan's
// cached_decode), so memory stays bounded however long the video.
//
// Decoding one video of latents z [16][T][60][104] (Wan2.1 at 480×832):
//
//	x       = z / (1/std) + mean                 per channel (WanStats, or the caller's)
//	x       = conv2(x)                           1×1×1, z_dim → z_dim
//	per latent frame k (a decoder call with the feature cache):
//	  x     = decoder.conv1(x_k)                 causal 3×3×3, z_dim → 384
//	  x     = middle.0 → middle.1 (attention) → middle.2
//	  x     = upsamples.0 … upsamples.14         3 stages of 3 residual blocks, each but the
//	                                             last closed by an upsample (3d, 3d, 2d)
//	  frame = clamp(head(x), −1, 1)              RMS norm, SiLU, causal 3×3×3 → RGB
//	video   = [3][1 + 4(T−1)][480][832]
//
// Building blocks (Wan's names): CausalConv3d (stride 1, kt−1 zero frames
// before the first, "same" zero padding in space), RMS_norm
// (x / max(‖x‖₂, 1e-12) · √C · γ over the channels of each pixel),
// ResidualBlock (shortcut(x) + conv(SiLU(norm(conv(SiLU(norm(x))))))),
// AttentionBlock (one head over each frame's pixels), and Resample: nearest
// 2× upsampling and a 3×3 conv that halves the width, preceded in an
// upsample3d by a causal (3,1,1) time_conv to 2C channels whose halves
// become two consecutive frames (interleaved in time).
//
// Time structure. Every causal 3-tap conv is a causal conv over its own
// time sequence with zero frames before the start; the reference computes
// it one latent frame per call, each conv keeping its last two input
// frames (CACHE_T = 2). An upsample3d skips its time_conv for the stream's
// first frame (one frame out instead of two), and that frame is no
// temporal context for the later ones (the reference's "Rep" marker means
// zero padding). So latent frame 0 gives 1 pixel frame and every later one
// 4, and chunk boundaries change nothing: a stream's frames equal the
// whole-video decode. Resetting the caches between chunks (a naive port)
// would restart the first-frame rule in every chunk; Decoder never does.
//
// Layouts: activations are channel-first frames [C][h][w] (the
// reference's), latents given to Decode are frame-major [T][C][h][w] (the
// rollout's; FrameMajor converts [C][T][h][w]), videos are [3][F][H][W]
// in [−1, 1], and Uint8 / RGB24 / VideoUint8 give the bytes the authors
// feed ffmpeg (truncating, not rounding).
//
// Backends: the decoder is written once, against package compute's
// Backend (Model.UseBackend; the CPU by default): its frames are the
// backend's tensors and every convolution (compute.VAEOps: nn.Conv's
// products, the fused upsampling, the bias and the residual), RMS norm
// with SiLU, transpose and the attention is the backend's operation, the
// weights loaded once per backend and precision. The host de-normalises
// the latents and clamps the pixels it hands out (reading them back from
// a device). On package gpu's Backend every operation is an exact kernel
// with the CPU's bits (TestBackendGPU: a stream of chunks, 0 differing
// bits at fp32 and bf16); there the bf16 caches are float32 frames (the
// convolution rounds them to the same operands), on the CPU bfloat16 bits.
//
// Compute on the CPU: the convolutions are GEMMs on package gemm with an
// implicit, tiled im2col (nn.Conv): no whole-frame im2col, which at
// 480×832 would need ~16 GB. The decoder runs each latent frame depth first, one frame
// of activations per module at a time, so beyond the weights (73 M
// parameters, kept twice: as loaded and packed) its memory is the feature
// caches (two frames per causal conv: 3.5 GiB in float32 at 480×832)
// plus a few working frames per resolution (0.97 GiB at 480×832): a
// real-size decode peaked at 5.1 GiB resident, weights included
// (BenchmarkDecodeReal). At bf16 the caches are held as bfloat16 (1.75
// GiB at 480×832): the convolutions round every input frame to bfloat16
// at that precision, so a cached frame rounded once when it joins the
// cache gives the same bits (Decoder.causalBF16).
//
// Precision (Options.Precision, per decoder): fp32 (float32 products, the
// golden tests' mode, within 1e-4 of the float64 reference) or bf16 (the
// weights, the shifted input panels and the attention's q, k, v and
// probabilities rounded to bfloat16, gemm's bfloat16 product with float32
// accumulation, each convolution's tap groups padded to 32 depths; norms,
// SiLU and softmax in float32; within 8·2^-8 relative L2 of the float64
// reference). The model keeps its float32 weights and packs them once per
// precision used. Results are the same bits for every thread count, gemm
// kernel, build and CPU (the tests force each kernel and pin a hash). The
// RMS norm and its SiLU, the convolution's bias and its other element-wise
// steps are package nn's (nn.RMSNormChannels, nn.SiLU32 on vmath.Exp32,
// the one exponential of every model, nn.AddBias): one definition each
// and, on AVX-512 CPUs in the default build, a generated kernel with the
// same bits.
//
// Parameters mirror the checkpoint names ("decoder.upsamples.3.time_conv.weight",
// see Model.Params); Load reads Wan2.1_VAE.pth (the encoder's keys are
// ignored), a safetensors file or diffusers' AutoencoderKLWan (package
// weights) and infers the configuration from the tensor shapes.
package vae
