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
//     LayerNorm (wan), GroupNorm (ragae).
//   - Activations: SiLU (wan's time embedding), SiLU64 (ragae's
//     GroupNorm), GELUTanh32 (umT5's FFN).
//   - Attention: multi-head softmax attention (package attn).
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
package nn
