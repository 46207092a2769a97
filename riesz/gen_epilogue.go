//go:build ignore

// gen_epilogue writes epilogue_amd64.s, the AVX-512 epilogues of the
// interaction passes. Every function computes exactly the pure-Go
// definition in epilogue_generic.go (same operations, same rounding, same
// order of additions per float64 lane, same tree), so results are identical
// bit for bit; TestEpiloguesBitIdentical checks it and
// TestGeneratedAssemblyUpToDate keeps the .s file in sync with this program.
//
//	go run gen_epilogue.go [-o epilogue_amd64.s]
//
// Conventions of the generated code: rows are walked in 16-element chunks
// (one ZMM of float32): the sums in blocks of 64 elements (four chunks per
// loop iteration), then single chunks, then a masked tail (K1 holds the low
// n mod 16 bits); masked loads are zeroing and do not fault past the end,
// so no element outside a slice is read or written. A sum keeps its 16
// float32 partials of the current block in one ZMM and its 16 float64
// lanes in two (j mod 16 in 0..7 and 8..15); at the end of a block the
// partials are converted and added to the lanes. A zeroed tail lane adds
// +0, which changes neither a partial nor a lane (both start at +0 and so
// are never −0). Every function ends with VZEROUPPER: the Go code that
// follows is compiled to legacy SSE, which must not run with dirty upper
// halves.
// Operand order is Go's (sources first); for VMAXPS/VMINPS the first
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

// i emits one instruction.
func (g *gen) i(format string, args ...any) { fmt.Fprintf(&g.b, "\t"+format+"\n", args...) }

func (g *gen) label(l string) { fmt.Fprintf(&g.b, "%s:\n", l) }

func (g *gen) text(s string) { g.b.WriteString(s) }

func z(n int) string { return fmt.Sprintf("Z%d", n) }
func y(n int) string { return fmt.Sprintf("Y%d", n) }
func x(n int) string { return fmt.Sprintf("X%d", n) }

// maxDenominator is riesz.MaxDenominator (1e36) as float32 bits.
var maxDenominator = math.Float32bits(1e36)

// Registers shared by the interaction bodies.
const (
	zZero = 31 // +0
	zOne  = 30 // 1.0
	zMax  = 29 // MaxDenominator
	zEps  = 28 // eps
	zS    = 27 // s = 1/σ²
	zNa   = 26 // the row's squared norm
	zTwo  = 25 // 2.0
	zPs   = 16 // Σ w, float32 partials of the block
	zPq   = 17 // Σ q, float32 partials of the block
	zS0   = 20 // Σ w, lanes 0..7 (float64)
	zS1   = 21 // Σ w, lanes 8..15
	zQ0   = 22 // Σ q, lanes 0..7
	zQ1   = 23 // Σ q, lanes 8..15
	zMx   = 24 // max q (float32, 16 lanes)
)

// tmp returns temporary register k of chunk u (8 per chunk, two sets used
// alternately).
func tmp(u, k int) int { return 8*(u%2) + k }

// loadMasked loads 16 float32 at mem into reg (zeroing masked load when
// masked).
func (g *gen) load(mem string, reg int, masked bool) {
	if masked {
		g.i("VMOVUPS.Z %s, K1, %s", mem, z(reg))
	} else {
		g.i("VMOVUPS %s, %s", mem, z(reg))
	}
}

// interaction emits w = interaction(dot, na, nb, eps, s, pow) for the
// chunk at element offset BX+16u of the row at DI with norms at R12, into
// register tmp(u, 1), and stores it back into the row.
func (g *gen) interaction(u int, pow int, masked bool) {
	off := 64 * u
	dot, w, nb := tmp(u, 0), tmp(u, 1), tmp(u, 7)
	g.load(fmt.Sprintf("%d(DI)(BX*4)", off), dot, masked)
	if masked {
		g.load(fmt.Sprintf("%d(R12)(BX*4)", off), nb, true)
		g.i("VADDPS %s, %s, %s", z(nb), z(zNa), z(w)) // c = na + nb
	} else {
		g.i("VADDPS %d(R12)(BX*4), %s, %s", off, z(zNa), z(w)) // c = na + nb
	}
	g.i("VFNMADD231PS %s, %s, %s", z(zTwo), z(dot), z(w)) // d2 = c − 2·dot, one rounding
	g.i("VMAXPS %s, %s, %s", z(w), z(zZero), z(w))        // d2 < 0 → 0; NaN, −0 kept
	g.i("VMULPS %s, %s, %s", z(zS), z(w), z(w))           // d2·s
	g.i("VADDPS %s, %s, %s", z(zEps), z(w), z(w))         // t = eps + d2·s
	switch pow {
	case 2:
		g.i("VMULPS %s, %s, %s", z(w), z(w), z(w)) // t·t
	case 4:
		g.i("VMULPS %s, %s, %s", z(w), z(w), z(w)) // t·t
		g.i("VMULPS %s, %s, %s", z(w), z(w), z(w)) // (t·t)²
	}
	g.i("VMINPS %s, %s, %s", z(w), z(zMax), z(w)) // x > Max → Max; NaN kept
	if masked {
		g.i("VDIVPS.Z %s, %s, K1, %s", z(w), z(zOne), z(w)) // w = 1/x, tail lanes 0
		g.i("VMOVUPS %s, K1, %d(DI)(BX*4)", z(w), off)
	} else {
		g.i("VDIVPS %s, %s, %s", z(w), z(zOne), z(w)) // w = 1/x
		g.i("VMOVUPS %s, %d(DI)(BX*4)", z(w), off)
	}
}

// sum2 adds the 16 float32 of register v, converted to float64, to the
// lane sums a0 (lanes 0..7) and a1 (8..15), using lo and hi as scratch.
func (g *gen) sum2(v, lo, hi, a0, a1 int) {
	g.i("VCVTPS2PD %s, %s", y(v), z(lo))
	g.i("VEXTRACTF64X4 $1, %s, %s", z(v), y(hi))
	g.i("VCVTPS2PD %s, %s", y(hi), z(hi))
	g.i("VADDPD %s, %s, %s", z(lo), z(a0), z(a0))
	g.i("VADDPD %s, %s, %s", z(hi), z(a1), z(a1))
}

// tree reduces the lane sums a0, a1 by lanes16's tree into X0 (clobbers
// Z0, Z1).
func (g *gen) tree(a0, a1 int) {
	g.i("VADDPD %s, %s, Z0", z(a1), z(a0)) // a[i] = l[i] + l[i+8]
	g.i("VEXTRACTF64X4 $1, Z0, Y1")
	g.i("VADDPD Y1, Y0, Y0") // b[i] = a[i] + a[i+4]
	g.i("VEXTRACTF128 $1, Y0, X1")
	g.i("VADDPD X1, X0, X0") // c[i] = b[i] + b[i+2]
	g.i("VPERMILPD $1, X0, X1")
	g.i("VADDSD X1, X0, X0") // c[0] + c[1]
}

// maxTree reduces the 16 float32 lanes of m to their maximum in X0
// (clobbers Z0, Z1). The lanes are ≥ +0 and not NaN, so the order of the
// comparisons does not matter.
func (g *gen) maxTree(m int) {
	g.i("VEXTRACTF64X4 $1, %s, Y1", z(m))
	g.i("VMAXPS Y1, %s, Y0", y(m))
	g.i("VEXTRACTF128 $1, Y0, X1")
	g.i("VMAXPS X1, X0, X0")
	g.i("VPERMILPS $0x4e, X0, X1")
	g.i("VMAXPS X1, X0, X0")
	g.i("VPERMILPS $0xb1, X0, X1")
	g.i("VMAXPS X1, X0, X0")
}

// rowLoop emits the walk over one row of n elements: BX = 0, two chunks
// while BX < R14 (n rounded down to 32), one while BX < R10 (n rounded
// down to 16), then the masked tail when K1 ≠ 0. chunk(u, masked) emits
// the work for the chunk at BX+16u. The loop falls through to the end of
// the row.
func (g *gen) rowLoop(p string, chunk func(u int, masked bool)) {
	g.i("XORQ BX, BX")
	g.i("CMPQ BX, R14")
	g.i("JGE %s_one", p)
	g.label(p + "_loop")
	chunk(0, false)
	chunk(1, false)
	g.i("ADDQ $32, BX")
	g.i("CMPQ BX, R14")
	g.i("JLT %s_loop", p)
	g.label(p + "_one")
	g.i("CMPQ BX, R10")
	g.i("JGE %s_tail", p)
	chunk(0, false)
	g.i("ADDQ $16, BX")
	g.label(p + "_tail")
	g.i("KORTESTW K1, K1")
	g.i("JZ %s_end", p)
	chunk(0, true)
	g.label(p + "_end")
}

// blockLoop emits the walk over one row of n elements for the sums: BX =
// 0, blocks of four chunks while BX < R14 (n rounded down to 64), each
// followed by flush, then single chunks while BX < R10, the masked tail
// when K1 ≠ 0, and a last flush (which adds +0 partials when the row ends
// on a block boundary: no change). reset zeroes the partials; chunk(u,
// masked) emits the work for the chunk at BX+16u.
func (g *gen) blockLoop(p string, reset, flush func(), chunk func(u int, masked bool)) {
	g.i("XORQ BX, BX")
	reset()
	g.i("CMPQ BX, R14")
	g.i("JGE %s_rest", p)
	g.label(p + "_block")
	for u := 0; u < 4; u++ {
		chunk(u, false)
	}
	flush()
	reset()
	g.i("ADDQ $64, BX")
	g.i("CMPQ BX, R14")
	g.i("JLT %s_block", p)
	g.label(p + "_rest")
	g.i("CMPQ BX, R10")
	g.i("JGE %s_tail", p)
	g.label(p + "_one")
	chunk(0, false)
	g.i("ADDQ $16, BX")
	g.i("CMPQ BX, R10")
	g.i("JLT %s_one", p)
	g.label(p + "_tail")
	g.i("KORTESTW K1, K1")
	g.i("JZ %s_flush", p)
	chunk(0, true)
	g.label(p + "_flush")
	flush()
}

// zero emits VPXORD of the registers.
func (g *gen) zero(regs ...int) {
	for _, r := range regs {
		g.i("VPXORD %s, %s, %s", z(r), z(r), z(r))
	}
}

// lengths sets K1 to the tail mask of n (clobbers CX, AX), R10 = n &^ 15
// and R14 = n rounded down to a multiple of blk (32 or 64).
func (g *gen) lengths(n string, blk int) {
	g.i("MOVQ %s, CX", n)
	g.i("ANDQ $15, CX")
	g.i("MOVL $1, AX")
	g.i("SHLL CX, AX")
	g.i("DECL AX")
	g.i("KMOVW AX, K1")
	g.i("MOVQ %s, R10", n)
	g.i("ANDQ $-16, R10")
	g.i("MOVQ %s, R14", n)
	g.i("ANDQ $%d, R14", -blk)
}

func (g *gen) broadcast32(bits uint32, reg int) {
	g.i("MOVL $0x%08x, AX", bits)
	g.i("VPBROADCASTD AX, %s", z(reg))
}

func (g *gen) interactionConsts(epsArg, sArg string) {
	g.i("VPXORD %s, %s, %s", z(zZero), z(zZero), z(zZero))
	g.broadcast32(math.Float32bits(1), zOne)
	g.broadcast32(maxDenominator, zMax)
	g.broadcast32(math.Float32bits(2), zTwo)
	g.i("VBROADCASTSS %s, %s", epsArg, z(zEps))
	g.i("VBROADCASTSS %s, %s", sArg, z(zS))
}

// powDispatch jumps to p_1, p_2 or p_4 by the exponent in AX (1 for any
// value other than 2 and 4, as interaction does).
func (g *gen) powDispatch(p string) {
	g.i("CMPQ AX, $2")
	g.i("JEQ %s_2", p)
	g.i("CMPQ AX, $4")
	g.i("JEQ %s_4", p)
	g.i("JMP %s_1", p)
}

func (g *gen) fromDotsTile() {
	g.text(`
// func fromDotsTileAVX512(t *float32, ldt, rows, cols int, na, nb *float32, eps, s float32, pow int)
//
// tileFromDotsGeneric: t[r*ldt+j] = interaction(t[r*ldt+j], na[r], nb[j], eps, s, pow)
// for r < rows, j < cols (rows ≥ 1).
TEXT ·fromDotsTileAVX512(SB), NOSPLIT, $0-64
`)
	g.i("MOVQ t+0(FP), DI")
	g.i("MOVQ ldt+8(FP), R8")
	g.i("SHLQ $2, R8")
	g.i("MOVQ rows+16(FP), R9")
	g.i("MOVQ na+32(FP), R11")
	g.i("MOVQ nb+40(FP), R12")
	g.lengths("cols+24(FP)", 32)
	g.interactionConsts("eps+48(FP)", "s+52(FP)")
	g.i("MOVQ pow+56(FP), AX")
	g.powDispatch("fd")
	for _, pow := range []int{1, 2, 4} {
		p := fmt.Sprintf("fd_%d", pow)
		g.label(p)
		g.i("VBROADCASTSS (R11), %s", z(zNa))
		g.rowLoop(p, func(u int, masked bool) { g.interaction(u, pow, masked) })
		g.i("ADDQ R8, DI")
		g.i("ADDQ $4, R11")
		g.i("DECQ R9")
		g.i("JNZ %s", p)
		g.i("JMP fd_ret")
	}
	g.label("fd_ret")
	g.i("VZEROUPPER")
	g.i("RET")
}

func (g *gen) tileStats() {
	g.text(`
// func tileStatsAVX512(t *float32, ldt, rows, cols int, na, nb, inv *float32, eps, s float32, pow int, os, osn *float64, om *float32)
//
// tileStatsGeneric: for r < rows (≥ 1) the interactions of row r in place,
// os[r] = Σ w and, when inv is not nil, osn[r] = Σ w·inv and om[r] = max
// w·inv (both 0 when inv is nil). Lane sums: Z20, Z21 (w), Z22, Z23 (q);
// running maximum Z24.
TEXT ·tileStatsAVX512(SB), NOSPLIT, $0-96
`)
	g.i("MOVQ t+0(FP), DI")
	g.i("MOVQ ldt+8(FP), R8")
	g.i("SHLQ $2, R8")
	g.i("MOVQ rows+16(FP), R9")
	g.i("MOVQ na+32(FP), R11")
	g.i("MOVQ nb+40(FP), R12")
	g.i("MOVQ inv+48(FP), R13")
	g.lengths("cols+24(FP)", 64)
	g.interactionConsts("eps+56(FP)", "s+60(FP)")
	g.i("MOVQ os+72(FP), SI")
	g.i("MOVQ osn+80(FP), DX")
	g.i("MOVQ om+88(FP), CX")
	g.i("MOVQ pow+64(FP), AX")
	g.i("TESTQ R13, R13")
	g.i("JZ ts_sum")
	g.powDispatch("ts_inv")
	g.label("ts_sum")
	g.powDispatch("ts_sum")
	for _, withInv := range []bool{true, false} {
		for _, pow := range []int{1, 2, 4} {
			p := fmt.Sprintf("ts_sum_%d", pow)
			if withInv {
				p = fmt.Sprintf("ts_inv_%d", pow)
			}
			g.label(p)
			g.i("VBROADCASTSS (R11), %s", z(zNa))
			if withInv {
				g.zero(zS0, zS1, zQ0, zQ1, zMx)
			} else {
				g.zero(zS0, zS1)
			}
			reset := func() {
				g.zero(zPs)
				if withInv {
					g.zero(zPq)
				}
			}
			flush := func() {
				g.sum2(zPs, 2, 3, zS0, zS1)
				if withInv {
					g.sum2(zPq, 5, 6, zQ0, zQ1)
				}
			}
			g.blockLoop(p, reset, flush, func(u int, masked bool) {
				g.interaction(u, pow, masked)
				w := tmp(u, 1)
				g.i("VADDPS %s, %s, %s", z(w), z(zPs), z(zPs))
				if !withInv {
					return
				}
				q := tmp(u, 4)
				if masked {
					g.load(fmt.Sprintf("%d(R13)(BX*4)", 64*u), tmp(u, 7), true)
					g.i("VMULPS %s, %s, %s", z(tmp(u, 7)), z(w), z(q)) // q = w·inv
				} else {
					g.i("VMULPS %d(R13)(BX*4), %s, %s", 64*u, z(w), z(q)) // q = w·inv
				}
				g.i("VMAXPS %s, %s, %s", z(zMx), z(q), z(zMx)) // q > m → q; NaN never wins
				g.i("VADDPS %s, %s, %s", z(q), z(zPq), z(zPq))
			})
			g.tree(zS0, zS1)
			g.i("VMOVSD X0, (SI)")
			if withInv {
				g.tree(zQ0, zQ1)
				g.i("VMOVSD X0, (DX)")
				g.maxTree(zMx)
				g.i("VMOVSS X0, (CX)")
			} else {
				g.i("MOVQ $0, (DX)")
				g.i("MOVL $0, (CX)")
			}
			g.i("ADDQ $8, SI")
			g.i("ADDQ $8, DX")
			g.i("ADDQ $4, CX")
			g.i("ADDQ R8, DI")
			g.i("ADDQ $4, R11")
			g.i("DECQ R9")
			g.i("JNZ %s", p)
			g.i("JMP ts_ret")
		}
	}
	g.label("ts_ret")
	g.i("VZEROUPPER")
	g.i("RET")
}

func (g *gen) rowStats() {
	g.text(`
// func rowStatsAVX512(row, inv *float32, n int) (s, sn float64, m float32)
//
// rowStatsGeneric over n ≥ 0 elements.
TEXT ·rowStatsAVX512(SB), NOSPLIT, $0-44
`)
	g.i("MOVQ row+0(FP), DI")
	g.i("MOVQ inv+8(FP), R13")
	g.lengths("n+16(FP)", 64)
	g.zero(zS0, zS1, zQ0, zQ1, zMx)
	reset := func() { g.zero(zPs, zPq) }
	flush := func() {
		g.sum2(zPs, 2, 3, zS0, zS1)
		g.sum2(zPq, 5, 6, zQ0, zQ1)
	}
	g.blockLoop("rs", reset, flush, func(u int, masked bool) {
		w, q := tmp(u, 1), tmp(u, 4)
		g.load(fmt.Sprintf("%d(DI)(BX*4)", 64*u), w, masked)
		g.i("VADDPS %s, %s, %s", z(w), z(zPs), z(zPs))
		if masked {
			g.load(fmt.Sprintf("%d(R13)(BX*4)", 64*u), tmp(u, 7), true)
			g.i("VMULPS %s, %s, %s", z(tmp(u, 7)), z(w), z(q))
		} else {
			g.i("VMULPS %d(R13)(BX*4), %s, %s", 64*u, z(w), z(q))
		}
		g.i("VMAXPS %s, %s, %s", z(zMx), z(q), z(zMx))
		g.i("VADDPS %s, %s, %s", z(q), z(zPq), z(zPq))
	})
	g.tree(zS0, zS1)
	g.i("VMOVSD X0, s+24(FP)")
	g.tree(zQ0, zQ1)
	g.i("VMOVSD X0, sn+32(FP)")
	g.maxTree(zMx)
	g.i("VMOVSS X0, m+40(FP)")
	g.i("VZEROUPPER")
	g.i("RET")
}

// rowSum emits rowSumAVX512 (col == false) or rowSumColsAVX512.
func (g *gen) rowSum(col bool) {
	if col {
		g.text(`
// func rowSumColsAVX512(row *float32, n int, col *float64) float64
//
// rowSumColsGeneric over n ≥ 0 elements with col not nil: col[j] += row[j]
// (float64) and the lane sum of row.
TEXT ·rowSumColsAVX512(SB), NOSPLIT, $0-32
`)
	} else {
		g.text(`
// func rowSumAVX512(row *float32, n int) float64
//
// sumGeneric over n ≥ 0 elements.
TEXT ·rowSumAVX512(SB), NOSPLIT, $0-24
`)
	}
	g.i("MOVQ row+0(FP), DI")
	g.lengths("n+8(FP)", 64)
	if col {
		g.i("MOVQ col+16(FP), SI")
		g.i("KSHIFTRW $8, K1, K2") // tail mask of lanes 8..15
	}
	g.zero(zS0, zS1)
	p := "sum"
	if col {
		p = "sumc"
	}
	reset := func() { g.zero(zPs) }
	flush := func() { g.sum2(zPs, 2, 3, zS0, zS1) }
	g.blockLoop(p, reset, flush, func(u int, masked bool) {
		w, lo, hi := tmp(u, 1), tmp(u, 2), tmp(u, 3)
		g.load(fmt.Sprintf("%d(DI)(BX*4)", 64*u), w, masked)
		g.i("VADDPS %s, %s, %s", z(w), z(zPs), z(zPs))
		if !col {
			return
		}
		g.i("VCVTPS2PD %s, %s", y(w), z(lo))
		g.i("VEXTRACTF64X4 $1, %s, %s", z(w), y(hi))
		g.i("VCVTPS2PD %s, %s", y(hi), z(hi))
		for h, v := range []int{lo, hi} {
			mem := fmt.Sprintf("%d(SI)(BX*8)", 128*u+64*h)
			c := tmp(u, 5+h)
			if masked {
				k := []string{"K1", "K2"}[h]
				g.i("VMOVUPD.Z %s, %s, %s", mem, k, z(c))
				g.i("VADDPD %s, %s, %s", z(v), z(c), z(c))
				g.i("VMOVUPD %s, %s, %s", z(c), k, mem)
			} else {
				g.i("VADDPD %s, %s, %s", mem, z(v), z(c)) // col + row (commutative)
				g.i("VMOVUPD %s, %s", z(c), mem)
			}
		}
	})
	g.tree(zS0, zS1)
	if col {
		g.i("VMOVSD X0, ret+24(FP)")
	} else {
		g.i("VMOVSD X0, ret+16(FP)")
	}
	g.i("VZEROUPPER")
	g.i("RET")
}

// scan emits scanRowAVX512 (k = 1) or scanRows4AVX512 (k = 4).
func (g *gen) scan(k int) {
	var args []string
	rowReg := []string{"SI", "R11", "R12", "R13"}
	p := "scan1"
	if k == 1 {
		g.text(`
// func scanRowAVX512(w *float32, n int, acc, rem *float64, cross *int32, r int32)
//
// scanRowGeneric over n ≥ 0 elements.
TEXT ·scanRowAVX512(SB), NOSPLIT, $0-44
`)
		g.i("MOVQ w+0(FP), SI")
		args = []string{"n+8(FP)", "acc+16(FP)", "rem+24(FP)", "cross+32(FP)", "r+40(FP)"}
	} else {
		p = "scan4"
		g.text(`
// func scanRows4AVX512(w0, w1, w2, w3 *float32, n int, acc, rem *float64, cross *int32, r int32)
//
// scanRows4Generic over n ≥ 0 elements: scanRowGeneric on w0..w3 in order
// with crossing points r+1 … r+4; the accumulators stay in registers
// across the four rows (the same additions in the same order).
TEXT ·scanRows4AVX512(SB), NOSPLIT, $0-68
`)
		for i := 0; i < 4; i++ {
			g.i("MOVQ w%d+%d(FP), %s", i, 8*i, rowReg[i])
		}
		args = []string{"n+32(FP)", "acc+40(FP)", "rem+48(FP)", "cross+56(FP)", "r+64(FP)"}
	}
	g.i("MOVQ %s, DI", args[1])
	g.i("MOVQ %s, R8", args[2])
	g.i("MOVQ %s, R9", args[3])
	g.lengths(args[0], 32)
	g.i("KSHIFTRW $8, K1, K2")
	g.i("MOVQ $0x7ff0000000000000, AX")
	g.i("VPBROADCASTQ AX, Z31") // +Inf
	// Crossing points: Z16+i holds r (k = 1) or r+i+1.
	for i := 0; i < k; i++ {
		g.i("MOVL %s, AX", args[4])
		if k > 1 {
			g.i("ADDL $%d, AX", i+1)
		}
		g.i("VPBROADCASTD AX, %s", z(16+i))
	}
	// Registers of the chunk: acc Z0, Z1; rem Z2, Z3; row Z4, lo Z5, hi Z6.
	g.i("XORQ BX, BX")
	chunk := func(masked bool, next string) {
		ld := func(mem string, reg int, km string) {
			if masked {
				g.i("VMOVUPD.Z %s, %s, %s", mem, km, z(reg))
			} else {
				g.i("VMOVUPD %s, %s", mem, z(reg))
			}
		}
		st := func(reg int, mem string, km string) {
			if masked {
				g.i("VMOVUPD %s, %s, %s", z(reg), km, mem)
			} else {
				g.i("VMOVUPD %s, %s", z(reg), mem)
			}
		}
		ld("(DI)(BX*8)", 0, "K1")
		ld("64(DI)(BX*8)", 1, "K2")
		ld("(R8)(BX*8)", 2, "K1")
		ld("64(R8)(BX*8)", 3, "K2")
		for i := 0; i < k; i++ {
			g.load(fmt.Sprintf("(%s)(BX*4)", rowReg[i]), 4, masked)
			g.sum2(4, 5, 6, 0, 1)
			if masked {
				g.i("VCMPPD $0x1d, Z2, Z0, K1, K4") // acc ≥ rem (ordered), tail lanes only
				g.i("VCMPPD $0x1d, Z3, Z1, K2, K5")
			} else {
				g.i("VCMPPD $0x1d, Z2, Z0, K4") // acc ≥ rem (ordered)
				g.i("VCMPPD $0x1d, Z3, Z1, K5")
			}
			g.i("KUNPCKBW K4, K5, K6") // K6 = K5<<8 | K4
			g.i("KORTESTW K6, K6")
			skip := fmt.Sprintf("%s_%s_%d", p, next, i)
			g.i("JZ %s", skip)
			g.i("VMOVDQU32 %s, K6, (R9)(BX*4)", z(16+i)) // cross = r
			g.i("VMOVAPD Z31, K4, Z2")                   // rem = +Inf
			g.i("VMOVAPD Z31, K5, Z3")
			g.label(skip)
		}
		st(0, "(DI)(BX*8)", "K1")
		st(1, "64(DI)(BX*8)", "K2")
		st(2, "(R8)(BX*8)", "K1")
		st(3, "64(R8)(BX*8)", "K2")
	}
	g.i("CMPQ BX, R10")
	g.i("JGE %s_tail", p)
	g.label(p + "_loop")
	chunk(false, "x")
	g.i("ADDQ $16, BX")
	g.i("CMPQ BX, R10")
	g.i("JLT %s_loop", p)
	g.label(p + "_tail")
	g.i("KORTESTW K1, K1")
	g.i("JZ %s_end", p)
	chunk(true, "t")
	g.label(p + "_end")
	g.i("VZEROUPPER")
	g.i("RET")
}

func (g *gen) compress() {
	g.text(`
// func compressAVX512(row *float32, n int, bm *uint16, dst *float32, lim int)
//
// compressGeneric with the columns given as bits: for each 16-column chunk
// c with bm[c] ≠ 0, the selected values of row (masked load, so nothing
// past n is read when the bits are within n) are packed to the front of a
// register and stored, all 16 lanes, at the next output position (dst has
// 16 values of slack). It stops before a store at a position beyond lim
// (len(dst) − 16), so inconsistent bits cannot write past dst.
TEXT ·compressAVX512(SB), NOSPLIT, $0-40
`)
	g.i("MOVQ row+0(FP), DI")
	g.i("MOVQ n+8(FP), CX")
	// R10: the bits of the last chunk that lie within n.
	g.i("ANDQ $15, CX")
	g.i("MOVL $1, R10")
	g.i("SHLL CX, R10")
	g.i("DECL R10")
	g.i("JNZ cp_mask")
	g.i("MOVL $0xffff, R10")
	g.label("cp_mask")
	g.i("MOVQ n+8(FP), CX")
	g.i("MOVQ bm+16(FP), SI")
	g.i("MOVQ dst+24(FP), R9")
	g.i("MOVQ lim+32(FP), R8")
	g.i("ADDQ $15, CX")
	g.i("SHRQ $4, CX") // chunks
	g.i("XORQ BX, BX") // output position
	g.i("TESTQ CX, CX")
	g.i("JZ cp_end")
	g.label("cp_loop")
	g.i("MOVWLZX (SI), AX")
	g.i("CMPQ CX, $1")
	g.i("JNE cp_full")
	g.i("ANDL R10, AX")
	g.label("cp_full")
	g.i("TESTL AX, AX")
	g.i("JZ cp_next")
	g.i("CMPQ BX, R8")
	g.i("JGT cp_end")
	g.i("KMOVW AX, K1")
	g.i("VMOVUPS.Z (DI), K1, Z0")
	g.i("VCOMPRESSPS Z0, K1, Z1")
	g.i("VMOVUPS Z1, (R9)(BX*4)")
	g.i("POPCNTL AX, AX")
	g.i("ADDQ AX, BX")
	g.label("cp_next")
	g.i("ADDQ $64, DI")
	g.i("ADDQ $2, SI")
	g.i("DECQ CX")
	g.i("JNZ cp_loop")
	g.label("cp_end")
	g.i("VZEROUPPER")
	g.i("RET")
}

func main() {
	out := flag.String("o", "epilogue_amd64.s", "output file")
	flag.Parse()
	var g gen
	g.text(`// Code generated by gen_epilogue.go; DO NOT EDIT.

//go:build amd64 && !noasm

#include "textflag.h"

// The AVX-512 epilogues of package riesz; each computes its pure-Go
// definition in epilogue_generic.go bit for bit (see gen_epilogue.go for
// the conventions).
`)
	g.fromDotsTile()
	g.tileStats()
	g.rowStats()
	g.rowSum(false)
	g.rowSum(true)
	g.scan(1)
	g.scan(4)
	g.compress()
	if err := os.WriteFile(*out, []byte(g.b.String()), 0o644); err != nil {
		log.Fatal(err)
	}
}
