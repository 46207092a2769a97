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
//   - Activations: GELUTanh (the DiT's FFN, float64), GELUTanh32 (umT5's
//     FFN, float32), SiLU (wan's time embedding), SiLU32 (the VAE's),
//     SiLU64 (ragae's GroupNorm).
//   - Attention: multi-head softmax attention (package attn).
//   - The steps of the VAE's convolutions: AddBias, WidenBF16, GatherRows.
//
// Tensors are flat []float32, row-major, shapes in the doc comments. Each
// function has one numerical definition, written in pure Go with every
// product rounded before it is added (explicit conversions: no fused
// multiply-add at any GOAMD64 level), so a model's outputs are the same
// bits on every CPU and build; the models' pinned hashes depend on them.
// Where two models compute "the same" layer differently (SiLU in float64
// with two different exponentials, GELU in float32 or float64), each
// definition is kept under its own name: merging them changes the bits of
// one model, which is a deliberate, re-pinned change, not a refactoring.
// The exponentials themselves live in internal/vmath.
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
