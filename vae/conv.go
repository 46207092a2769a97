package vae

import (
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/nn"
)

// The convolutions are package nn's (nn.Conv: GEMMs on package gemm with
// an implicit im2col, each output value computed in a fixed order, taps
// in order then gemm's depth order); a Conv holds its nn.Conv, which
// shares its weights and keeps the packed operands.

// engine runs convolutions at one precision (an nn.ConvEngine: worker
// scratch reused across calls) and counts their floating-point operations:
// the tests' and benchmarks' direct calls (apply), beside the decoder's
// through its backend (compute.VAEOps.Conv, the same nn.Conv.Apply on the
// CPU).
type engine struct {
	prec  gemm.Precision
	flops int64
	ce    nn.ConvEngine
}

// release drops the scratch buffers.
func (e *engine) release() { e.ce.Release() }

// op returns c as package nn's convolution, its shape and weights c's.
func (c *Conv) op() *nn.Conv {
	o := &c.conv
	o.Cin, o.Cout, o.KT, o.KH, o.KW, o.Weight, o.Bias = c.Cin, c.Cout, c.KT, c.KH, c.KW, c.Weight, c.Bias
	return o
}

// pack packs the weights for fp32 products.
func (c *Conv) pack() { c.op().Pack(gemm.F32) }

// packBF16 packs the weights for bf16 products.
func (c *Conv) packBF16() { c.op().Pack(gemm.BF16) }

// apply computes one output frame of c (nn.Conv.Apply at e's precision):
//
//	out[co][y][x] = bias[co] + Σ_{dt<KT, dy<KH, dx<KW, ci<Cin} W[co][ci][dt][dy][dx] · in[dt][ci][y+dy−KH/2][x+dx−KW/2]  (+ res[co][y][x])
//
// in holds the KT input frames [Cin][hs][ws], oldest first (nil is a zero
// frame); with up, each input frame is first upsampled 2× nearest. res
// (nil, or the output's shape) is added; it may be out itself.
func (c *Conv) apply(e *engine, out []float32, in [][]float32, hs, ws int, up bool, res []float32) {
	e.ce.Prec = e.prec
	f0 := e.ce.Flops
	c.op().Apply(&e.ce, out, in, hs, ws, up, res)
	e.flops += e.ce.Flops - f0
}
