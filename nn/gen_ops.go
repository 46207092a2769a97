//go:build ignore

// gen_ops writes ops_amd64.s, the AVX-512 kernels of package nn's
// channel-major operations (the VAE's): a convolution's bias (and
// residual) addition, the widening of bfloat16 values, the gathering of
// panel rows, and the RMS norm (with its optional SiLU) on one block of
// normBlock pixels. The norm computes exactly normBlockGo (ops.go): the
// same float32 operations in the same order on sixteen lanes (VSQRTPS is
// the correctly rounded square root that float32(math.Sqrt) gives; SiLU32
// is VMAXPS and VMINPS for vmath.Exp32Clamped's clamp, vmath.Exp32 as
// asmtext.ExpPS writes it, VADDPS and VDIVPS), so the results are
// identical bit for bit (NaN payloads aside); TestNormKernelBitIdentical
// checks it and TestNormGeneratedAssemblyUpToDate keeps the .s file in
// sync.
//
//	go run gen_ops.go [-o ops_amd64.s]
//
// Operand order is Go's (sources first, destination last); for VMAXPS and
// VMINPS the first operand is the one returned when either is NaN.
package main

import (
	"flag"
	"fmt"
	"log"
	"math"
	"os"

	"github.com/densitykv/densitykv/internal/asmtext"
	"github.com/densitykv/densitykv/internal/vmath"
)

// The block width, as ops.go's normBlock: sixteen registers of sixteen
// pixels.
const normBlock = 256

// Constant registers. Z0…Z15 hold the sums of squares during the first
// pass (Z16 is its scratch); the second pass uses Z0…Z3 as scratch, Z14
// for the channel's gamma, and Z15, Z16 for the clamps loaded after the
// first pass.
const (
	zTiny   = 31 // 1e-12, the norm's floor
	zScale  = 30 // √ch
	zSign   = 29 // 0x80000000
	zLog2e  = 28
	zNLn2Hi = 27
	zNLn2Lo = 26
	zC0     = 18 // Z18 … Z25 = 1/0! … 1/7! (1/0! = 1 is also the "1 +")
	zHi     = 16 // vmath.Exp32Hi (second pass only)
	zLo     = 15 // vmath.Exp32Lo (second pass only)
	zGamma  = 14
)

type gen struct{ asmtext.Writer }

var z = asmtext.Z

func (g *gen) broadcast(v float32, reg int) { g.Broadcast32(math.Float32bits(v), reg) }

// silu replaces Z0 (y) by SiLU32(y) = y / (1 + vmath.Exp32Clamped(−y))
// (act.go), with Z1…Z3 as scratch.
func (g *gen) silu() {
	g.I("VPXORD %s, %s, %s", z(zSign), z(0), z(1)) // x = −y
	g.I("VMAXPS %s, %s, %s", z(1), z(zLo), z(1))   // clamp, NaN kept
	g.I("VMINPS %s, %s, %s", z(1), z(zHi), z(1))
	g.ExpPS([]int{1}, []int{2}, []int{3}, []int{1}, zLog2e, zNLn2Hi, zNLn2Lo, zC0)
	g.I("VADDPS %s, %s, %s", z(zC0), z(1), z(1)) // 1 + e
	g.I("VDIVPS %s, %s, %s", z(1), z(0), z(0))
}

// normPass emits the second pass's loop over the channels: each block of
// sixteen pixels divided by its norm, times √ch, times gamma[c], then
// SiLU when act.
func (g *gen) normPass(label string, act bool) {
	g.Label(label)
	g.I("VBROADCASTSS (R8), %s", z(zGamma))
	for k := 0; k < normBlock/16; k++ {
		g.I("VMOVUPS %d(SI), %s", 64*k, z(0))
		g.I("VDIVPS %d(R9), %s, %s", 64*k, z(0), z(0))
		g.I("VMULPS %s, %s, %s", z(zScale), z(0), z(0))
		g.I("VMULPS %s, %s, %s", z(zGamma), z(0), z(0))
		if act {
			g.silu()
		}
		g.I("VMOVUPS %s, %d(DI)", z(0), 64*k)
	}
	g.I("ADDQ DX, SI")
	g.I("ADDQ DX, DI")
	g.I("ADDQ $4, R8")
	g.I("DECQ CX")
	g.I("JNZ %s", label)
	g.I("JMP norm_end")
}

// biasAdd emits addBiasAVX512: dst = src + b, or (src + b) + res, as
// addBias (ops.go) computes them, 64 values per iteration.
func (g *gen) biasAdd() {
	g.Text(`
// func addBiasAVX512(dst, src, res *float32, b float32, n int)
//
// addBiasGo (ops.go) on n values, n a multiple of 64; res may be nil.
TEXT ·addBiasAVX512(SB), NOSPLIT, $0-40
`)
	g.I("MOVQ dst+0(FP), DI")
	g.I("MOVQ src+8(FP), SI")
	g.I("MOVQ res+16(FP), DX")
	g.I("VBROADCASTSS b+24(FP), Z31")
	g.I("MOVQ n+32(FP), CX")
	g.I("SHRQ $6, CX")
	g.I("JZ bias_end")
	g.I("TESTQ DX, DX")
	g.I("JNZ bias_res")
	g.Label("bias_plain")
	for k := 0; k < 4; k++ {
		g.I("VADDPS %d(SI), Z31, %s", 64*k, z(k))
	}
	for k := 0; k < 4; k++ {
		g.I("VMOVUPS %s, %d(DI)", z(k), 64*k)
	}
	g.I("ADDQ $256, SI")
	g.I("ADDQ $256, DI")
	g.I("DECQ CX")
	g.I("JNZ bias_plain")
	g.I("JMP bias_end")
	g.Label("bias_res")
	for k := 0; k < 4; k++ {
		g.I("VMOVUPS %d(SI), %s", 64*k, z(k))
		g.I("VADDPS Z31, %s, %s", z(k), z(k)) // v + b
		g.I("VADDPS %d(DX), %s, %s", 64*k, z(k), z(k))
	}
	for k := 0; k < 4; k++ {
		g.I("VMOVUPS %s, %d(DI)", z(k), 64*k)
	}
	g.I("ADDQ $256, SI")
	g.I("ADDQ $256, DX")
	g.I("ADDQ $256, DI")
	g.I("DECQ CX")
	g.I("JNZ bias_res")
	g.Label("bias_end")
	g.I("VZEROUPPER")
	g.I("RET")
}

// widen emits widenBF16AVX512: dst[i] = float32 of the bfloat16 bits
// src[i] (the bits shifted up), 64 values per iteration.
func (g *gen) widen() {
	g.Text(`
// func widenBF16AVX512(dst *float32, src *uint16, n int)
//
// widenBF16Go (ops.go) on n values, n a multiple of 64.
TEXT ·widenBF16AVX512(SB), NOSPLIT, $0-24
`)
	g.I("MOVQ dst+0(FP), DI")
	g.I("MOVQ src+8(FP), SI")
	g.I("MOVQ n+16(FP), CX")
	g.I("SHRQ $6, CX")
	g.I("JZ widen_end")
	g.Label("widen_loop")
	for k := 0; k < 4; k++ {
		g.I("VPMOVZXWD %d(SI), %s", 32*k, z(k))
		g.I("VPSLLD $16, %s, %s", z(k), z(k))
	}
	for k := 0; k < 4; k++ {
		g.I("VMOVUPS %s, %d(DI)", z(k), 64*k)
	}
	g.I("ADDQ $128, SI")
	g.I("ADDQ $256, DI")
	g.I("DECQ CX")
	g.I("JNZ widen_loop")
	g.Label("widen_end")
	g.I("VZEROUPPER")
	g.I("RET")
}

// gather emits gatherRowsAVX512: rows rows of 32 float32 from src, stride
// float32s apart, to dst back to back (the im2col's whole panel rows).
func (g *gen) gather() {
	g.Text(`
// func gatherRowsAVX512(dst, src *float32, stride, rows int)
//
// dst[r·32 + i] = src[r·stride + i] for r < rows, i < 32; rows ≥ 1.
TEXT ·gatherRowsAVX512(SB), NOSPLIT, $0-32
`)
	g.I("MOVQ dst+0(FP), DI")
	g.I("MOVQ src+8(FP), SI")
	g.I("MOVQ stride+16(FP), DX")
	g.I("SHLQ $2, DX")
	g.I("MOVQ rows+24(FP), CX")
	g.Label("gather_loop")
	g.I("VMOVUPS (SI), Z0")
	g.I("VMOVUPS 64(SI), Z1")
	g.I("VMOVUPS Z0, (DI)")
	g.I("VMOVUPS Z1, 64(DI)")
	g.I("ADDQ DX, SI")
	g.I("ADDQ $128, DI")
	g.I("DECQ CX")
	g.I("JNZ gather_loop")
	g.I("VZEROUPPER")
	g.I("RET")
}

func main() {
	out := flag.String("o", "ops_amd64.s", "output file")
	flag.Parse()
	var g gen
	g.Text(fmt.Sprintf(`// Code generated by gen_ops.go; DO NOT EDIT.

//go:build amd64 && !noasm

#include "textflag.h"

// func rmsNormAVX512(dst, src *float32, ch, stride int, gamma *float32, scale float32, act bool, s *float32)
//
// normBlockGo (ops.go) on one block of %d pixels: src and dst point at the
// block's first pixel of channel 0, channels stride float32s apart; s is
// %d float32s of scratch (the norms). ch ≥ 1.
TEXT ·rmsNormAVX512(SB), NOSPLIT, $0-56
`, normBlock, normBlock))
	g.I("MOVQ dst+0(FP), DI")
	g.I("MOVQ src+8(FP), SI")
	g.I("MOVQ ch+16(FP), CX")
	g.I("MOVQ stride+24(FP), DX")
	g.I("SHLQ $2, DX")
	g.I("MOVQ gamma+32(FP), R8")
	g.I("MOVQ s+48(FP), R9")
	g.I("MOVQ SI, R10 // the block's start, for the second pass")
	g.I("MOVQ CX, R11")
	g.broadcast(1e-12, zTiny)
	g.I("VBROADCASTSS scale+40(FP), %s", z(zScale))
	g.Broadcast32(0x80000000, zSign)
	g.broadcast(vmath.Log2e32, zLog2e)
	g.broadcast(-vmath.Ln2Hi32, zNLn2Hi)
	g.broadcast(-vmath.Ln2Lo32, zNLn2Lo)
	for k, c := range vmath.ExpTaylor32 {
		g.broadcast(c, zC0+k)
	}
	// First pass: the sums of squares over the channels, in order.
	for k := 0; k < normBlock/16; k++ {
		g.I("VPXORD %s, %s, %s", z(k), z(k), z(k))
	}
	g.Label("norm_sum")
	for k := 0; k < normBlock/16; k++ {
		g.I("VMOVUPS %d(SI), Z16", 64*k)
		g.I("VMULPS Z16, Z16, Z16")
		g.I("VADDPS Z16, %s, %s", z(k), z(k))
	}
	g.I("ADDQ DX, SI")
	g.I("DECQ CX")
	g.I("JNZ norm_sum")
	for k := 0; k < normBlock/16; k++ {
		g.I("VSQRTPS %s, %s", z(k), z(k))
		g.I("VMAXPS %s, %s, %s", z(k), z(zTiny), z(k))
		g.I("VMOVUPS %s, %d(R9)", z(k), 64*k)
	}
	g.broadcast(vmath.Exp32Lo, zLo)
	g.broadcast(vmath.Exp32Hi, zHi)
	g.I("MOVQ R10, SI")
	g.I("MOVQ R11, CX")
	g.I("MOVBLZX act+44(FP), AX")
	g.I("TESTL AX, AX")
	g.I("JNZ norm_act")
	g.normPass("norm_plain", false)
	g.normPass("norm_act", true)
	g.Label("norm_end")
	g.I("VZEROUPPER")
	g.I("RET")
	g.biasAdd()
	g.widen()
	g.gather()
	if err := os.WriteFile(*out, []byte(g.String()), 0o644); err != nil {
		log.Fatal(err)
	}
}
