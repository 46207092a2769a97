//go:build ignore

// gen_ops writes ops_amd64.s, the AVX-512 kernels of package nn's
// channel-major operations (the VAE's): a convolution's bias (and
// residual) addition, the widening of bfloat16 values, the gathering of
// panel rows, and the RMS norm (with its optional SiLU) on one block of
// normBlock pixels. The norm computes exactly normBlockGo (ops.go): the
// same float32 operations in the same order on sixteen lanes (VSQRTPS is
// the correctly rounded square root that float32(math.Sqrt) gives;
// VSCALEFPS scales by 2^n with one rounding, as vmath.Exp32NoFMA's one or
// two exact multiplications by powers of two do), so the results are
// identical bit for bit (NaN payloads aside);
// TestNormKernelBitIdentical checks it and TestNormGeneratedAssemblyUpToDate
// keeps the .s file in sync.
//
//	go run gen_ops.go [-o ops_amd64.s]
//
// Operand order is Go's (sources first, destination last); for VMAXPS the
// first operand is the one returned when either is NaN.
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
// pass (Z16 is its scratch); the second pass uses Z0…Z10 as scratch, Z14
// for the channel's gamma, and Z15, Z16 for constants loaded after the
// first pass.
const (
	zTiny  = 31 // 1e-12, the norm's floor
	zScale = 30 // √ch
	zSign  = 29 // 0x80000000
	zLog2e = 28
	zHalf  = 27 // 0.5
	zNHalf = 26 // −0.5
	zLn2Hi = 25
	zLn2Lo = 24
	zC7    = 23 // Z23 … Z19 = 1/5040, 1/720, 1/120, 1/24, 1/6
	zOne   = 18
	zHi    = 17 // 88.7: above, e^x = +Inf
	zLo    = 16 // −87.3: below, e^x = 0 (second pass only)
	zInf   = 15 // +Inf (second pass only)
	zGamma = 14
)

// The constants of vmath.Exp32NoFMA, SiLU's exponential: poly holds the
// coefficients 1/7! … 1/3! (1/2! and 1/0! = 1/1! are zHalf and zOne).
var (
	log2e = vmath.Log2e32
	ln2hi = vmath.Ln2Hi32
	ln2lo = vmath.Ln2Lo32
	poly  = []float32{vmath.ExpTaylor32[7], vmath.ExpTaylor32[6], vmath.ExpTaylor32[5], vmath.ExpTaylor32[4], vmath.ExpTaylor32[3]}
)

type gen struct{ asmtext.Writer }

var z = asmtext.Z

func (g *gen) broadcast(v float32, reg int) { g.Broadcast32(math.Float32bits(v), reg) }

// silu replaces Z0 (y) by y / (1 + e^−y), as silu (ops.go) with
// vmath.Exp32NoFMA.
func (g *gen) silu() {
	g.I("VPXORD %s, %s, %s", z(zSign), z(0), z(2))   // x = −y
	g.I("VMULPS %s, %s, %s", z(zLog2e), z(2), z(3))  // t = x·log2e
	g.I("VADDPS %s, %s, %s", z(zHalf), z(3), z(4))   // t + 0.5
	g.I("VSUBPS %s, %s, %s", z(zHalf), z(3), z(5))   // t − 0.5
	g.I("VCMPPS $0x11, %s, %s, K1", z(zNHalf), z(3)) // t < −0.5 (ordered)
	g.I("VMOVAPS %s, K1, %s", z(5), z(4))
	g.I("VCVTTPS2DQ %s, %s", z(4), z(6)) // n, truncated
	g.I("VCVTDQ2PS %s, %s", z(6), z(6))  // float32(n)
	g.I("VMULPS %s, %s, %s", z(zLn2Hi), z(6), z(7))
	g.I("VSUBPS %s, %s, %s", z(7), z(2), z(8)) // x − n·ln2hi
	g.I("VMULPS %s, %s, %s", z(zLn2Lo), z(6), z(7))
	g.I("VSUBPS %s, %s, %s", z(7), z(8), z(8)) // r
	g.I("VMULPS %s, %s, %s", z(8), z(zC7), z(9))
	adds := []int{zC7 - 1, zC7 - 2, zC7 - 3, zC7 - 4, zHalf, zOne, zOne}
	for i, c := range adds {
		if i > 0 {
			g.I("VMULPS %s, %s, %s", z(8), z(9), z(9))
		}
		g.I("VADDPS %s, %s, %s", z(c), z(9), z(9))
	}
	g.I("VSCALEFPS %s, %s, %s", z(6), z(9), z(10)) // p·2^n
	g.I("VCMPPS $0x1e, %s, %s, K2", z(zHi), z(2))  // x > 88.7
	g.I("VMOVAPS %s, K2, %s", z(zInf), z(10))
	g.I("VCMPPS $0x11, %s, %s, K3", z(zLo), z(2)) // x < −87.3
	g.I("VPXORD %s, %s, K3, %s", z(10), z(10), z(10))
	g.I("VADDPS %s, %s, %s", z(zOne), z(10), z(10)) // 1 + e
	g.I("VDIVPS %s, %s, %s", z(10), z(0), z(0))
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
	g.broadcast(log2e, zLog2e)
	g.broadcast(0.5, zHalf)
	g.broadcast(-0.5, zNHalf)
	g.broadcast(ln2hi, zLn2Hi)
	g.broadcast(ln2lo, zLn2Lo)
	for i, c := range poly {
		g.broadcast(c, zC7-i)
	}
	g.broadcast(1, zOne)
	g.broadcast(88.7, zHi)
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
	g.broadcast(-87.3, zLo)
	g.Broadcast32(0x7f800000, zInf)
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
