// Package vmath holds the elementwise functions whose exact bits the
// project's packages define and reproduce in assembly, each with one
// definition: the one exponential of every model and layer, Exp32 (float32,
// a Cody–Waite reduction and a degree-7 Taylor polynomial by fused
// multiply-adds; Exp32Clamped for any float32 argument), and the exactly
// rounded float32 steps FMA32 and Round32 (the oracles of the kernels and
// of package gemm's products).
//
// Exp32 is the exponential of attn's softmax, umT5's softmax, and, through
// package nn, the GELU (tanh form) of the DiT and umT5 and the SiLU of the
// DiT's time embedding, the VAE and LongLive-RAG's autoencoder. A second
// backend (a GPU port) reproduces the models' bits by porting this one
// definition. Until 2026-11-29 the project kept five exponentials (a
// float64 Taylor one, fdlibm's, Cephes' expf and Exp32 with and without
// fused steps), each fixing some model's pinned bits; issue #24 merged them
// into Exp32 and re-pinned the models once.
package vmath

// Log2e and Ln2 in full precision; the float32 constants of Exp32 and the
// generators of the assembly versions derive from the same Go constant
// expressions.
const (
	Log2e = 1.4426950408889634073599246810018921374266459541529859
	Ln2   = 0.6931471805599453094172321214581765680755001343602552
)
