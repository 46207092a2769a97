package nn

import (
	"math"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/internal/parallel"
)

// normBlock is the number of pixels normalised together (their sums of
// squares stay in registers/L1 while the channels stream by).
const normBlock = 256

// The channel-major operations of the VAE decoder (package vae), tensors
// [ch][P] (P pixels per channel): its RMS norm with the SiLU after it,
// and the steps of its convolutions (AddBias, WidenBF16, GatherRows). Each
// has one definition in Go here and, on AVX-512 CPUs in the default
// build, a generated kernel with the same bits (ops_amd64.s, from
// gen_ops.go; TestNormKernelBitIdentical, TestBiasAndWidenBitIdentical).

// RMSNormChannels writes the VAE's RMS_norm (F.normalize over the
// channels, times √ch and gamma; then SiLU32 when act) of src [ch][P]
// into dst (which may be src):
//
//	dst[c][p] = act(src[c][p] / max(‖src[:, p]‖₂, 1e-12) · √ch · gamma[c])
//
// every operation a float32 operation rounded to nearest even (normBlockGo
// gives the order). The sum of squares of each pixel runs over the
// channels in order. Blocks of normBlock pixels run on normBlockAsm where
// the CPU has it (the same bits as normBlockGo, which takes the rest).
func RMSNormChannels(dst, src []float32, ch, P int, gamma []float32, act bool) {
	scale := float32(math.Sqrt(float64(ch)))
	parallel.For(P, 4*normBlock, func(lo, hi int) {
		var nrm [normBlock]float32
		for b := lo; b < hi; b += normBlock {
			n := min(normBlock, hi-b)
			if n == normBlock && normBlockAsm != nil {
				normBlockAsm(dst[b:], src[b:], ch, P, gamma, scale, act, &nrm)
				continue
			}
			normBlockGo(dst[b:], src[b:], ch, P, n, gamma, scale, act, nrm[:n])
		}
	})
}

// normBlockAsm, when not nil, is normBlockGo on a whole block of
// normBlock pixels (ops_amd64.s).
var normBlockAsm func(dst, src []float32, ch, P int, gamma []float32, scale float32, act bool, nrm *[normBlock]float32)

// normBlockGo is RMSNormChannels on the n pixels starting at src[0] and dst[0]
// (channels P apart), with scale = √ch and scratch s (n values). Every
// operation is a float32 operation rounded to nearest even, in this order.
func normBlockGo(dst, src []float32, ch, P, n int, gamma []float32, scale float32, act bool, s []float32) {
	clear(s)
	for c := 0; c < ch; c++ {
		for j, v := range src[c*P : c*P+n] {
			s[j] += float32(v * v) // rounded before the sum: no fused multiply-add at any GOAMD64 level
		}
	}
	for j, v := range s {
		s[j] = max(float32(math.Sqrt(float64(v))), 1e-12)
	}
	for c := 0; c < ch; c++ {
		g := gamma[c]
		d := dst[c*P : c*P+n]
		for j, v := range src[c*P : c*P+n] {
			y := v / s[j] * scale * g
			if act {
				y = SiLU32(y)
			}
			d[j] = y
		}
	}
}

// AddBias writes dst[j] = src[j] + b, or (src[j] + b) + res[j] when res is
// not nil (a convolution's bias and the residual shortcut); dst may be
// src.
func AddBias(dst, src, res []float32, b float32) {
	n := 0
	if addBiasAsm != nil {
		n = len(src) &^ 63
		addBiasAsm(dst[:n], src[:n], res, b)
	}
	addBiasGo(dst[n:len(src)], src[n:], res, b, n)
}

// addBiasGo is AddBias's definition on src, with res read from offset off.
func addBiasGo(dst, src, res []float32, b float32, off int) {
	if res != nil {
		r := res[off : off+len(src)]
		for j, v := range src {
			dst[j] = v + b + r[j]
		}
		return
	}
	for j, v := range src {
		dst[j] = v + b
	}
}

// WidenBF16 sets dst[i] to the float32 value of the bfloat16 bits src[i].
func WidenBF16(dst []float32, src []uint16) {
	n := 0
	if widenBF16Asm != nil {
		n = len(src) &^ 63
		widenBF16Asm(dst[:n], src[:n])
	}
	for i, h := range src[n:] {
		dst[n+i] = gemm.BF16ToFloat32(h)
	}
}

// GatherRows copies rows rows of gemm.NR float32 from src, stride apart,
// to dst back to back (whole rows of a gemm.PackedB panel: package vae's
// convolution gathers one per input channel).
func GatherRows(dst, src []float32, stride, rows int) {
	if gatherRowsAsm != nil {
		gatherRowsAsm(dst, src, stride, rows)
		return
	}
	const nr = gemm.NR
	for r := 0; r < rows; r++ {
		*(*[nr]float32)(dst[r*nr:]) = *(*[nr]float32)(src[r*stride:])
	}
}

// The assembly versions of AddBias and WidenBF16 on multiples of 64 values,
// and of GatherRows (ops_amd64.s), or nil.
var (
	addBiasAsm    func(dst, src, res []float32, b float32)
	widenBF16Asm  func(dst []float32, src []uint16)
	gatherRowsAsm func(dst, src []float32, stride, rows int)
)
