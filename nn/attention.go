package nn

import (
	"github.com/densitykv/densitykv/attn"
	"github.com/densitykv/densitykv/gemm"
)

// Attention computes multi-head softmax attention at precision prec:
//
//	out[t][h] = Σ_s softmax_s(scale · q[t][h]·k[s][h]) · v[s][h]
//
// with q, out [T][H][D] (T queries, H heads of D values) and k, v
// [S][H][D] (S keys), no mask. It is attn.AttentionAs (the online softmax
// of package attn, the products on gemm; at bf16 q, k, v and the
// probabilities rounded to bfloat16): the DiT's self- and cross-attention
// (package wan) and the VAE's middle attention (package vae, H = 1).
// It panics with an "attn:" message on bad sizes; out must not overlap
// the inputs.
func Attention(prec gemm.Precision, out, q, k, v []float32, T, S, H, D int, scale float32) {
	attn.AttentionAs(prec, out, q, k, v, T, S, H, D, scale)
}
