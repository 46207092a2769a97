//go:build ignore

// gen_softmax writes softmax_amd64.s, the AVX-512 row kernels of the
// online softmax. Every function computes exactly the pure-Go definition in
// softmax.go (the same IEEE float32 operations in the same order, expDef
// step by step with VFMADD*PS for vmath.FMA32, VRNDSCALEPS $0 for
// math.RoundToEven and VSCALEFPS for the scaling by 2^n), so results are
// identical bit for bit; TestRowKernelsBitIdentical checks it and
// TestGeneratedAssemblyUpToDate keeps the .s file in sync with this program.
//
//	go run gen_softmax.go [-o softmax_amd64.s]
//
// A panel row holds 32 query lanes: two ZMMs of float32. Every function
// ends with VZEROUPPER (the Go code after it is legacy SSE). Operand order
// is Go's (sources first); for VMAXP*/VMINP* the first operand is the one
// returned when either is NaN.
package main

import (
	"flag"
	"log"
	"math"
	"os"

	"github.com/densitykv/densitykv/internal/asmtext"
	"github.com/densitykv/densitykv/internal/vmath"
)

type gen struct{ asmtext.Writer }

var z = asmtext.Z

// The clamps of expDef (softmax.go), vmath.Exp32Clamped's; the
// exponential itself is vmath.Exp32.
const (
	expLo = vmath.Exp32Lo
	expHi = vmath.Exp32Hi
)

// Registers of softmaxPanelAVX512.
const (
	zScale  = 31 // scale
	zLo     = 30 // expLo
	zHi     = 29 // expHi
	zLog2e  = 28
	zNLn2Hi = 27 // −Ln2Hi32
	zNLn2Lo = 26 // −Ln2Lo32
	zC0     = 18 // Z18 … Z25 = c0 … c7
	zM      = 14 // Z14, Z15: m', lanes 0–15, 16–31
	zSum    = 12 // Z12, Z13: Σ p, lanes 0–15, 16–31
)

// exp2 computes expDef of the float32 lanes of registers a and b in place,
// using t[0..3] as scratch (ExpPS reads x only before it writes q, so x and
// q may be the same registers).
func (g *gen) exp2(a, b int, t [4]int) {
	ab := []int{a, b}
	for k := range ab {
		g.I("VMAXPS %s, %s, %s", z(ab[k]), z(zLo), z(ab[k])) // x < lo → lo; NaN kept
	}
	for k := range ab {
		g.I("VMINPS %s, %s, %s", z(ab[k]), z(zHi), z(ab[k])) // x > hi → hi; NaN kept
	}
	g.ExpPS(ab, []int{t[0], t[1]}, []int{t[2], t[3]}, ab, zLog2e, zNLn2Hi, zNLn2Lo, zC0)
}

var scratch = [4]int{5, 6, 7, 8}

func (g *gen) softmaxPanel() {
	g.Text(`
// func softmaxPanelAVX512(p *float32, cols int, scale float32, st *panelState, first bool)
//
// softmaxPanelGo on a panel of cols ≥ 0 rows of 32 lanes. st points to
// {m, l, alpha [32]float32} (offsets 0, 128, 256).
TEXT ·softmaxPanelAVX512(SB), NOSPLIT, $0-33
`)
	g.I("MOVQ p+0(FP), SI")
	g.I("MOVQ cols+8(FP), CX")
	g.I("MOVQ st+24(FP), DX")
	g.I("MOVBLZX first+32(FP), BX")
	g.I("VBROADCASTSS scale+16(FP), %s", z(zScale))
	g.Broadcast32(math.Float32bits(expLo), zLo)
	g.Broadcast32(math.Float32bits(expHi), zHi)
	g.Broadcast32(math.Float32bits(vmath.Log2e32), zLog2e)
	g.Broadcast32(math.Float32bits(-vmath.Ln2Hi32), zNLn2Hi)
	g.Broadcast32(math.Float32bits(-vmath.Ln2Lo32), zNLn2Lo)
	for c, v := range vmath.ExpTaylor32 {
		g.Broadcast32(math.Float32bits(v), zC0+c)
	}
	// Phase 1: the running maximum of scale·p over the keys, per lane.
	g.Broadcast32(math.Float32bits(-math.MaxFloat32), 0)
	g.I("VMOVAPS Z0, Z1")
	g.I("MOVQ SI, DI")
	g.I("MOVQ CX, R8")
	g.I("TESTQ R8, R8")
	g.I("JZ sp_maxdone")
	g.Label("sp_max")
	g.I("VMULPS (DI), %s, Z2", z(zScale))
	g.I("VMAXPS Z0, Z2, Z0") // sc > m → sc; NaN never wins
	g.I("VMULPS 64(DI), %s, Z3", z(zScale))
	g.I("VMAXPS Z1, Z3, Z1")
	g.I("ADDQ $128, DI")
	g.I("DECQ R8")
	g.I("JNZ sp_max")
	g.Label("sp_maxdone")
	// m' and alpha.
	g.I("TESTQ BX, BX")
	g.I("JNZ sp_first")
	g.I("VMOVUPS (DX), Z2") // m (old)
	g.I("VMOVUPS 64(DX), Z3")
	g.I("VMAXPS Z2, Z0, Z0") // mx > m → mx, else m
	g.I("VMAXPS Z3, Z1, Z1")
	// alpha = expDef(m − m') for lanes 0–15 (Z2) and 16–31 (Z3).
	g.I("VSUBPS Z0, Z2, Z2")
	g.I("VSUBPS Z1, Z3, Z3")
	g.exp2(2, 3, scratch)
	g.I("VMOVUPS Z2, 256(DX)")
	g.I("VMOVUPS Z3, 320(DX)")
	g.I("JMP sp_m")
	g.Label("sp_first")
	g.I("VPXORD Z4, Z4, Z4")
	g.I("VMOVUPS Z4, 256(DX)") // alpha = 0
	g.I("VMOVUPS Z4, 320(DX)")
	g.Label("sp_m")
	g.I("VMOVUPS Z0, (DX)") // m = m'
	g.I("VMOVUPS Z1, 64(DX)")
	g.I("VMOVAPS Z0, %s", z(zM))
	g.I("VMOVAPS Z1, %s", z(zM+1))
	// Phase 2: p = expDef(scale·p − m'), Σ p per lane.
	g.I("VPXORD %s, %s, %s", z(zSum), z(zSum), z(zSum))
	g.I("VPXORD %s, %s, %s", z(zSum+1), z(zSum+1), z(zSum+1))
	g.I("MOVQ CX, R8")
	g.I("TESTQ R8, R8")
	g.I("JZ sp_expdone")
	g.Label("sp_exp")
	for h := 0; h < 2; h++ {
		g.I("VMULPS %d(SI), %s, %s", 64*h, z(zScale), z(2+h)) // sc = scale·p
	}
	for h := 0; h < 2; h++ {
		g.I("VSUBPS %s, %s, %s", z(zM+h), z(2+h), z(2+h)) // sc − m'
	}
	g.exp2(2, 3, scratch)
	for h := 0; h < 2; h++ {
		g.I("VMOVUPS %s, %d(SI)", z(2+h), 64*h)
		g.I("VADDPS %s, %s, %s", z(2+h), z(zSum+h), z(zSum+h))
	}
	g.I("ADDQ $128, SI")
	g.I("DECQ R8")
	g.I("JNZ sp_exp")
	g.Label("sp_expdone")
	// Phase 3: l = Σ (first) or float32(l·alpha) + Σ.
	g.I("TESTQ BX, BX")
	g.I("JNZ sp_lfirst")
	for h := 0; h < 2; h++ {
		g.I("VMOVUPS %d(DX), Z2", 128+64*h)
		g.I("VMULPS %d(DX), Z2, Z2", 256+64*h)
		g.I("VADDPS %s, Z2, Z2", z(zSum+h))
		g.I("VMOVUPS Z2, %d(DX)", 128+64*h)
	}
	g.I("VZEROUPPER")
	g.I("RET")
	g.Label("sp_lfirst")
	g.I("VMOVUPS %s, 128(DX)", z(zSum))
	g.I("VMOVUPS %s, 192(DX)", z(zSum+1))
	g.I("VZEROUPPER")
	g.I("RET")
}

func (g *gen) scaleCols() {
	g.Text(`
// func scaleColsAVX512(o *float32, rows, ld int, alpha *[32]float32)
//
// scaleColsGo on rows ≥ 0 rows of 32 values at o, stride ld values.
TEXT ·scaleColsAVX512(SB), NOSPLIT, $0-32
`)
	g.I("MOVQ o+0(FP), DI")
	g.I("MOVQ rows+8(FP), CX")
	g.I("MOVQ ld+16(FP), R8")
	g.I("SHLQ $2, R8")
	g.I("MOVQ alpha+24(FP), AX")
	g.I("VMOVUPS (AX), Z0")
	g.I("VMOVUPS 64(AX), Z1")
	g.I("TESTQ CX, CX")
	g.I("JZ sc_end")
	g.Label("sc_loop")
	g.I("VMULPS (DI), Z0, Z2")
	g.I("VMULPS 64(DI), Z1, Z3")
	g.I("VMOVUPS Z2, (DI)")
	g.I("VMOVUPS Z3, 64(DI)")
	g.I("ADDQ R8, DI")
	g.I("DECQ CX")
	g.I("JNZ sc_loop")
	g.Label("sc_end")
	g.I("VZEROUPPER")
	g.I("RET")
}

func (g *gen) addRows() {
	g.Text(`
// func addRowsAVX512(p *float32, n int, acc *[32]float32)
//
// addRowsGo on the n ≥ 0 panel rows at p.
TEXT ·addRowsAVX512(SB), NOSPLIT, $0-24
`)
	g.I("MOVQ p+0(FP), SI")
	g.I("MOVQ n+8(FP), CX")
	g.I("MOVQ acc+16(FP), AX")
	g.I("VMOVUPS (AX), Z0")
	g.I("VMOVUPS 64(AX), Z1")
	g.I("TESTQ CX, CX")
	g.I("JZ ar_end")
	g.Label("ar_loop")
	g.I("VADDPS (SI), Z0, Z0")
	g.I("VADDPS 64(SI), Z1, Z1")
	g.I("ADDQ $128, SI")
	g.I("DECQ CX")
	g.I("JNZ ar_loop")
	g.Label("ar_end")
	g.I("VMOVUPS Z0, (AX)")
	g.I("VMOVUPS Z1, 64(AX)")
	g.I("VZEROUPPER")
	g.I("RET")
}

func main() {
	out := flag.String("o", "softmax_amd64.s", "output file")
	flag.Parse()
	var g gen
	g.Text(`// Code generated by gen_softmax.go; DO NOT EDIT.

//go:build amd64 && !noasm

#include "textflag.h"

// The AVX-512 row kernels of package attn; each computes its pure-Go
// definition in softmax.go bit for bit (see gen_softmax.go).
`)
	g.softmaxPanel()
	g.scaleCols()
	g.addRows()
	if err := os.WriteFile(*out, []byte(g.String()), 0o644); err != nil {
		log.Fatal(err)
	}
}
