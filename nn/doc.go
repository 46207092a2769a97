// Package nn is the compute vocabulary the models share: the layers of the
// causal DiT (package wan), the VAE decoder (vae), the umT5 encoder (t5)
// and LongLive-RAG's autoencoder (ragae), so that a model package holds
// only its architecture — structs named after the checkpoint, forwards that
// read like the paper — and calls these for the arithmetic (as ollama's
// model/ packages call ml/nn).
//
//   - Linear: y = x·Wᵀ + b on package gemm, weights packed once per
//     precision (Pack, Apply) or streamed (Scratch.PackInput, Stream);
//     float32 or bfloat16 weights, one result either way.
//   - Norms: RMSNorm (rows, float64 statistic: wan's q/k norms, umT5),
//     LayerNorm (wan), GroupNorm (ragae), RMSNormChannels (the VAE's,
//     over the channels of [ch][P] tensors, with its SiLU fused).
//   - Activations, one float32 definition each on the one exponential
//     vmath.Exp32: GELUTanh32 (GELU, tanh form; GELUTanh on a slice: the
//     DiT's and umT5's FFNs) and SiLU32 (SiLU on a slice: wan's time
//     embedding; fused into RMSNormChannels for the VAE and GroupNorm for
//     ragae).
//   - Attention: multi-head softmax attention (package attn).
//   - The steps of the VAE's convolutions: AddBias, WidenBF16, GatherRows.
//
// Tensors are flat []float32, row-major, shapes in the doc comments. Each
// function has one numerical definition, written in pure Go with every
// product rounded before it is added (explicit conversions: no fused
// multiply-add at any GOAMD64 level), so a model's outputs are the same
// bits on every CPU and build; the models' pinned hashes depend on them.
// Every model computes a layer with the same definition: the GELU, the
// SiLU and the softmaxes all use vmath.Exp32 (internal/vmath), the one
// exponential a second backend has to reproduce (until issue #24 the
// models kept five exponentials and three SiLUs; merging them was one
// deliberate, re-pinned change). Changing a definition changes the
// models' bits: re-pin once and say why.
//
// Kernels: GELUTanh and the VAE's operations (RMSNormChannels with its
// SiLU, AddBias, WidenBF16, GatherRows) also exist as generated AVX-512
// assembly (gelu_amd64.s from gen_gelu.go, ops_amd64.s from gen_ops.go,
// written through internal/asmtext), chosen once at start-up on CPUs that
// have it, computing their Go definition's bits (TestGELUKernelBitIdentical,
// TestNormKernelBitIdentical, TestBiasAndWidenBitIdentical; the
// generated-file tests keep each .s in sync with its generator). With
// -tags noasm, or on other CPUs, the Go definitions run. The model
// packages hold no SIMD.
package nn
