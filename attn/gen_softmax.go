//go:build ignore

// gen_softmax writes softmax_amd64.s, the AVX-512 row kernels of the
// online softmax. Every function computes exactly the pure-Go definition in
// softmax.go (the same IEEE operations in the same order, expDef step by
// step in float64 with VFMADD*PD for math.FMA, VRNDSCALEPD $0 for
// math.RoundToEven and VSCALEFPD for the exact scaling by 2^n), so results
// are identical bit for bit; TestRowKernelsBitIdentical checks it and
// TestGeneratedAssemblyUpToDate keeps the .s file in sync with this program.
//
//	go run gen_softmax.go [-o softmax_amd64.s]
//
// A panel row holds 32 query lanes: two ZMMs of float32, four of float64.
// Every function ends with VZEROUPPER (the Go code after it is legacy SSE).
// Operand order is Go's (sources first); for VMAXP*/VMINP* the first
// operand is the one returned when either is NaN.
package main

import (
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"strings"
)

type gen struct{ b strings.Builder }

func (g *gen) i(format string, args ...any) { fmt.Fprintf(&g.b, "\t"+format+"\n", args...) }
func (g *gen) label(l string)               { fmt.Fprintf(&g.b, "%s:\n", l) }
func (g *gen) text(s string)                { g.b.WriteString(s) }

func z(n int) string { return fmt.Sprintf("Z%d", n) }
func y(n int) string { return fmt.Sprintf("Y%d", n) }

// The constants of expDef (softmax.go), as the same Go constant
// expressions.
const (
	expLo = -104.0
	expHi = 89.0
	log2e = 1.4426950408889634073599246810018921374266459541529859
	ln2   = 0.6931471805599453094172321214581765680755001343602552
)

var coeffs = [9]float64{1.0, 1.0, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040, 1.0 / 40320}

// Registers of softmaxPanelAVX512.
const (
	zScale = 31 // scale (float32)
	zLo    = 30 // expLo
	zHi    = 29 // expHi
	zLog2e = 28
	zNLn2  = 27 // −ln2
	zC0    = 18 // Z18 … Z26 = c0 … c8
	zM64   = 14 // Z14 … Z17: m' as float64, lanes 0–7, 8–15, 16–23, 24–31
	zSum   = 12 // Z12, Z13: Σ p (float32), lanes 0–15, 16–31
)

func (g *gen) broadcast64(v float64, reg int) {
	g.i("MOVQ $0x%016x, AX", math.Float64bits(v))
	g.i("VPBROADCASTQ AX, %s", z(reg))
}

// exp2 computes expDef of the float64 lanes of registers a and b in place
// and packs the 16 float32 results into a (lanes of a low, of b high),
// using t[0..5] as scratch.
func (g *gen) exp2(a, b int, t [6]int) {
	ab := []int{a, b}
	n := []int{t[0], t[1]}
	u := []int{t[2], t[3]}
	p := []int{t[4], t[5]}
	for k := range ab {
		g.i("VMAXPD %s, %s, %s", z(ab[k]), z(zLo), z(ab[k])) // x < lo → lo; NaN kept
	}
	for k := range ab {
		g.i("VMINPD %s, %s, %s", z(ab[k]), z(zHi), z(ab[k])) // x > hi → hi; NaN kept
	}
	for k := range ab {
		g.i("VMULPD %s, %s, %s", z(zLog2e), z(ab[k]), z(n[k])) // x·log2e
	}
	for k := range ab {
		g.i("VRNDSCALEPD $0, %s, %s", z(n[k]), z(n[k])) // RoundToEven
	}
	for k := range ab {
		g.i("VMOVAPD %s, %s", z(ab[k]), z(u[k]))
		g.i("VFMADD231PD %s, %s, %s", z(zNLn2), z(n[k]), z(u[k])) // u = FMA(n, −ln2, x)
	}
	for k := range ab {
		g.i("VMOVAPD %s, %s", z(zC0+8), z(p[k])) // q = c8
	}
	for c := 7; c >= 0; c-- {
		for k := range ab {
			g.i("VFMADD213PD %s, %s, %s", z(zC0+c), z(u[k]), z(p[k])) // q = FMA(q, u, c)
		}
	}
	for k := range ab {
		g.i("VSCALEFPD %s, %s, %s", z(n[k]), z(p[k]), z(p[k])) // q·2^n, exact
	}
	for k := range ab {
		g.i("VCVTPD2PS %s, %s", z(p[k]), y(ab[k])) // one rounding to float32
	}
	g.i("VINSERTF64X4 $1, %s, %s, %s", y(b), z(a), z(a))
}

// widen converts the 16 float32 lanes of v to float64 in lo and hi.
func (g *gen) widen(v, lo, hi int) {
	g.i("VCVTPS2PD %s, %s", y(v), z(lo))
	g.i("VEXTRACTF64X4 $1, %s, %s", z(v), y(hi))
	g.i("VCVTPS2PD %s, %s", y(hi), z(hi))
}

var scratch = [6]int{5, 6, 7, 8, 9, 10}

func (g *gen) softmaxPanel() {
	g.text(`
// func softmaxPanelAVX512(p *float32, cols int, scale float32, st *panelState, first bool)
//
// softmaxPanelGo on a panel of cols ≥ 0 rows of 32 lanes. st points to
// {m, l, alpha [32]float32} (offsets 0, 128, 256).
TEXT ·softmaxPanelAVX512(SB), NOSPLIT, $0-33
`)
	g.i("MOVQ p+0(FP), SI")
	g.i("MOVQ cols+8(FP), CX")
	g.i("MOVQ st+24(FP), DX")
	g.i("MOVBLZX first+32(FP), BX")
	g.i("VBROADCASTSS scale+16(FP), %s", z(zScale))
	g.broadcast64(expLo, zLo)
	g.broadcast64(expHi, zHi)
	g.broadcast64(log2e, zLog2e)
	g.broadcast64(-ln2, zNLn2)
	for c, v := range coeffs {
		g.broadcast64(v, zC0+c)
	}
	// Phase 1: the running maximum of scale·p over the keys, per lane.
	g.i("MOVL $0x%08x, AX", math.Float32bits(-math.MaxFloat32))
	g.i("VPBROADCASTD AX, Z0")
	g.i("VMOVAPS Z0, Z1")
	g.i("MOVQ SI, DI")
	g.i("MOVQ CX, R8")
	g.i("TESTQ R8, R8")
	g.i("JZ sp_maxdone")
	g.label("sp_max")
	g.i("VMULPS (DI), %s, Z2", z(zScale))
	g.i("VMAXPS Z0, Z2, Z0") // sc > m → sc; NaN never wins
	g.i("VMULPS 64(DI), %s, Z3", z(zScale))
	g.i("VMAXPS Z1, Z3, Z1")
	g.i("ADDQ $128, DI")
	g.i("DECQ R8")
	g.i("JNZ sp_max")
	g.label("sp_maxdone")
	// m' and alpha.
	g.i("TESTQ BX, BX")
	g.i("JNZ sp_first")
	g.i("VMOVUPS (DX), Z2") // m (old)
	g.i("VMOVUPS 64(DX), Z3")
	g.i("VMAXPS Z2, Z0, Z0") // mx > m → mx, else m
	g.i("VMAXPS Z3, Z1, Z1")
	for h := 0; h < 2; h++ {
		// alpha = expDef(float64(m) − float64(m')) for lanes 16h … 16h+15.
		g.widen(2+h, 4, 11) // m
		g.widen(h, 12, 13)  // m' (the sum registers are free until phase 2)
		g.i("VSUBPD Z12, Z4, Z4")
		g.i("VSUBPD Z13, Z11, Z11")
		g.exp2(4, 11, scratch)
		g.i("VMOVUPS Z4, %d(DX)", 256+64*h)
	}
	g.i("JMP sp_m")
	g.label("sp_first")
	g.i("VPXORD Z4, Z4, Z4")
	g.i("VMOVUPS Z4, 256(DX)") // alpha = 0
	g.i("VMOVUPS Z4, 320(DX)")
	g.label("sp_m")
	g.i("VMOVUPS Z0, (DX)") // m = m'
	g.i("VMOVUPS Z1, 64(DX)")
	g.widen(0, zM64, zM64+1)
	g.widen(1, zM64+2, zM64+3)
	// Phase 2: p = expDef(float64(scale·p) − float64(m')), Σ p per lane.
	g.i("VPXORD %s, %s, %s", z(zSum), z(zSum), z(zSum))
	g.i("VPXORD %s, %s, %s", z(zSum+1), z(zSum+1), z(zSum+1))
	g.i("MOVQ CX, R8")
	g.i("TESTQ R8, R8")
	g.i("JZ sp_expdone")
	g.label("sp_exp")
	for h := 0; h < 2; h++ {
		g.i("VMULPS %d(SI), %s, Z2", 64*h, z(zScale)) // sc = scale·p
		g.widen(2, 3, 4)
		g.i("VSUBPD %s, Z3, Z3", z(zM64+2*h))
		g.i("VSUBPD %s, Z4, Z4", z(zM64+2*h+1))
		g.exp2(3, 4, scratch)
		g.i("VMOVUPS Z3, %d(SI)", 64*h)
		g.i("VADDPS Z3, %s, %s", z(zSum+h), z(zSum+h))
	}
	g.i("ADDQ $128, SI")
	g.i("DECQ R8")
	g.i("JNZ sp_exp")
	g.label("sp_expdone")
	// Phase 3: l = Σ (first) or float32(l·alpha) + Σ.
	g.i("TESTQ BX, BX")
	g.i("JNZ sp_lfirst")
	for h := 0; h < 2; h++ {
		g.i("VMOVUPS %d(DX), Z2", 128+64*h)
		g.i("VMULPS %d(DX), Z2, Z2", 256+64*h)
		g.i("VADDPS %s, Z2, Z2", z(zSum+h))
		g.i("VMOVUPS Z2, %d(DX)", 128+64*h)
	}
	g.i("VZEROUPPER")
	g.i("RET")
	g.label("sp_lfirst")
	g.i("VMOVUPS %s, 128(DX)", z(zSum))
	g.i("VMOVUPS %s, 192(DX)", z(zSum+1))
	g.i("VZEROUPPER")
	g.i("RET")
}

func (g *gen) scaleCols() {
	g.text(`
// func scaleColsAVX512(o *float32, rows, ld int, alpha *[32]float32)
//
// scaleColsGo on rows ≥ 0 rows of 32 values at o, stride ld values.
TEXT ·scaleColsAVX512(SB), NOSPLIT, $0-32
`)
	g.i("MOVQ o+0(FP), DI")
	g.i("MOVQ rows+8(FP), CX")
	g.i("MOVQ ld+16(FP), R8")
	g.i("SHLQ $2, R8")
	g.i("MOVQ alpha+24(FP), AX")
	g.i("VMOVUPS (AX), Z0")
	g.i("VMOVUPS 64(AX), Z1")
	g.i("TESTQ CX, CX")
	g.i("JZ sc_end")
	g.label("sc_loop")
	g.i("VMULPS (DI), Z0, Z2")
	g.i("VMULPS 64(DI), Z1, Z3")
	g.i("VMOVUPS Z2, (DI)")
	g.i("VMOVUPS Z3, 64(DI)")
	g.i("ADDQ R8, DI")
	g.i("DECQ CX")
	g.i("JNZ sc_loop")
	g.label("sc_end")
	g.i("VZEROUPPER")
	g.i("RET")
}

func (g *gen) addRows() {
	g.text(`
// func addRowsAVX512(p *float32, n int, acc *[32]float32)
//
// addRowsGo on the n ≥ 0 panel rows at p.
TEXT ·addRowsAVX512(SB), NOSPLIT, $0-24
`)
	g.i("MOVQ p+0(FP), SI")
	g.i("MOVQ n+8(FP), CX")
	g.i("MOVQ acc+16(FP), AX")
	g.i("VMOVUPS (AX), Z0")
	g.i("VMOVUPS 64(AX), Z1")
	g.i("TESTQ CX, CX")
	g.i("JZ ar_end")
	g.label("ar_loop")
	g.i("VADDPS (SI), Z0, Z0")
	g.i("VADDPS 64(SI), Z1, Z1")
	g.i("ADDQ $128, SI")
	g.i("DECQ CX")
	g.i("JNZ ar_loop")
	g.label("ar_end")
	g.i("VMOVUPS Z0, (AX)")
	g.i("VMOVUPS Z1, 64(AX)")
	g.i("VZEROUPPER")
	g.i("RET")
}

func main() {
	out := flag.String("o", "softmax_amd64.s", "output file")
	flag.Parse()
	var g gen
	g.text(`// Code generated by gen_softmax.go; DO NOT EDIT.

//go:build amd64 && !noasm

#include "textflag.h"

// The AVX-512 row kernels of package attn; each computes its pure-Go
// definition in softmax.go bit for bit (see gen_softmax.go).
`)
	g.softmaxPanel()
	g.scaleCols()
	g.addRows()
	if err := os.WriteFile(*out, []byte(g.b.String()), 0o644); err != nil {
		log.Fatal(err)
	}
}
