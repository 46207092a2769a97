package compute

import (
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/nn"
)

// VAEOps are the VAE decoder's operations (package vae; their CPU
// definitions in cpu_vae.go), on channel-major frames [ch][h][w]. A
// backend that computes the VAE implements them beside Backend (the CPU
// backend and package gpu's do).
type VAEOps interface {
	// LoadConv uploads c's weights and bias once for its products at prec
	// (c packed at prec: nn.Conv.Pack).
	LoadConv(c *nn.Conv, prec gemm.Precision) ConvWeights
	// FreeConv releases what LoadConv uploaded; nil is ignored.
	FreeConv(w ConvWeights)
	// Conv sets out [Cout][ho][wo] to nn.Conv.Apply of the KT input frames
	// in (oldest first, each [Cin][hs][ws]; nil is a zero frame, at least
	// one is not), the fused nearest 2× upsampling when up (ho, wo = 2hs,
	// 2ws; else hs, ws), plus res (nil, or out's shape; it may be out
	// itself), at the precision w was loaded for.
	Conv(out Tensor, w ConvWeights, in []Tensor, hs, ws int, up bool, res Tensor)
	// RMSNormChannels sets dst [ch][P] to nn.RMSNormChannels(dst, src,
	// ch, P, gamma, act) of src [ch][P] (dst may be src), gamma [ch].
	RMSNormChannels(dst, src Tensor, ch, P int, gamma Tensor, act bool)
	// Transpose sets dst [cols][rows] to the transpose of src [rows][cols].
	Transpose(dst, src Tensor, rows, cols int)
}

// ConvWeights is a backend's handle of an nn.Conv's weights and bias,
// uploaded once by LoadConv for products at one precision.
type ConvWeights interface {
	Shape() (cin, cout, kt, kh, kw int)
	Precision() gemm.Precision
}

// ConvFLOPs returns the floating-point operations (2 per multiply-add) of
// one output frame of out pixels when present of the KT input frames are
// not zero frames (nn.ConvEngine's count).
func ConvFLOPs(w ConvWeights, present, pixels int) int64 {
	cin, cout, _, kh, kw := w.Shape()
	return 2 * int64(cout) * int64(cin) * int64(present*kh*kw) * int64(pixels)
}
