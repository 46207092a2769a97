// Package ragae runs LongLive-RAG's retrieval autoencoder as the DensityKV
// authors publish it (ZhaoWQQ/DensityKV: ae/model.py LatentAE.encode,
// ae/config.py AEConfig, loaded by pipeline/causal_inference.py when
// compression_method is "ae"; the paper's 1,024-d BF16 retrieval
// descriptor per frame): it turns one clean latent frame [C][H][W] into
// an L2-normalised descriptor of LatentDim values.
//
// The checkpoint (ae_latent_mem.pt) is a PyTorch zip file with two
// entries: "config", a dictionary of AEConfig fields (in_channels,
// spatial_h, spatial_w, latent_dim, hidden_dims; missing fields take
// AEConfig's defaults 16, 60, 104, 1024, [64, 128, 256], unknown ones are
// ignored, as the authors' loader does), and "model", the LatentAE state
// dict. The encoder, with ch₀ = in_channels and ch_i = hidden_dims[i−1]:
//
//	for each stage i (encoder.conv_stack modules 4i … 4i+3):
//	  x = Conv2d(ch_i → ch_{i+1}, 3×3, stride 2, padding 1)(x)   conv_stack.{4i}
//	  x = SiLU(GroupNorm(x))                                       conv_stack.{4i+1}, {4i+2}
//	  x = x + Conv(SiLU(GN(Conv(SiLU(GN(x))))))                    conv_stack.{4i+3}.block.{0,2,3,5}
//	x = SiLU(GroupNorm(x))                                         final_norm.0
//	x = mean over space                                            (AdaptiveAvgPool2d(1))
//	x = Linear(ch → latent_dim)(x)                                 fc
//	descriptor = x / max(‖x‖₂, 1e-12)                               (encode(normalize=True))
//
// Residual convolutions are 3×3, stride 1, padding 1. GroupNorm has
// affine weights, ε = 1e-5 and the authors' group count: the first of
// 32, 16, 8, 4, 1 that divides the channels. The input is the raw clean
// latent (no normalisation; the spatial size need not be spatial_h ×
// spatial_w: the encoder is convolutional with global pooling, and
// spatial_h/spatial_w only size a dummy pass in the authors' code).
//
// Differences from the authors' loader, which calls load_state_dict with
// strict=False: a tensor of the encoder that is missing, mis-shaped or
// not finite is an error naming the file and the tensor (theirs keeps the
// random initialisation of a missing one), and so is an unexpected
// encoder tensor; tensors outside the encoder (a training decoder) are
// ignored, as theirs are (AE.Ignored lists them). Keys are normalised as
// package checkpoint does (torch.compile's "_orig_mod.", a leading
// "module."), where the authors' strict=False would silently skip them.
//
// Compute is float32 with the convolutions as gemm products (im2col) and
// the normalisation statistics, pooling and norm in float64 sums in a
// fixed order, and the SiLU in float32 (nn.SiLU32 on vmath.Exp32, the one
// exponential of every model: defined bits), so a descriptor is the same
// on every CPU and thread count.
package ragae
