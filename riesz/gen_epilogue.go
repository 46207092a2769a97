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

	"github.com/densitykv/densitykv/internal/asmtext"
)

type gen struct{ asmtext.Writer }

var z, y, x = asmtext.Z, asmtext.Y, asmtext.X

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
		g.I("VMOVUPS.Z %s, K1, %s", mem, z(reg))
	} else {
		g.I("VMOVUPS %s, %s", mem, z(reg))
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
		g.I("VADDPS %s, %s, %s", z(nb), z(zNa), z(w)) // c = na + nb
	} else {
		g.I("VADDPS %d(R12)(BX*4), %s, %s", off, z(zNa), z(w)) // c = na + nb
	}
	g.I("VFNMADD231PS %s, %s, %s", z(zTwo), z(dot), z(w)) // d2 = c − 2·dot, one rounding
	g.I("VMAXPS %s, %s, %s", z(w), z(zZero), z(w))        // d2 < 0 → 0; NaN, −0 kept
	g.I("VMULPS %s, %s, %s", z(zS), z(w), z(w))           // d2·s
	g.I("VADDPS %s, %s, %s", z(zEps), z(w), z(w))         // t = eps + d2·s
	switch pow {
	case 2:
		g.I("VMULPS %s, %s, %s", z(w), z(w), z(w)) // t·t
	case 4:
		g.I("VMULPS %s, %s, %s", z(w), z(w), z(w)) // t·t
		g.I("VMULPS %s, %s, %s", z(w), z(w), z(w)) // (t·t)²
	}
	g.I("VMINPS %s, %s, %s", z(w), z(zMax), z(w)) // x > Max → Max; NaN kept
	if masked {
		g.I("VDIVPS.Z %s, %s, K1, %s", z(w), z(zOne), z(w)) // w = 1/x, tail lanes 0
		g.I("VMOVUPS %s, K1, %d(DI)(BX*4)", z(w), off)
	} else {
		g.I("VDIVPS %s, %s, %s", z(w), z(zOne), z(w)) // w = 1/x
		g.I("VMOVUPS %s, %d(DI)(BX*4)", z(w), off)
	}
}

// sum2 adds the 16 float32 of register v, converted to float64, to the
// lane sums a0 (lanes 0..7) and a1 (8..15), using lo and hi as scratch.
func (g *gen) sum2(v, lo, hi, a0, a1 int) {
	g.I("VCVTPS2PD %s, %s", y(v), z(lo))
	g.I("VEXTRACTF64X4 $1, %s, %s", z(v), y(hi))
	g.I("VCVTPS2PD %s, %s", y(hi), z(hi))
	g.I("VADDPD %s, %s, %s", z(lo), z(a0), z(a0))
	g.I("VADDPD %s, %s, %s", z(hi), z(a1), z(a1))
}

// tree reduces the lane sums a0, a1 by lanes16's tree into X0 (clobbers
// Z0, Z1).
func (g *gen) tree(a0, a1 int) {
	g.I("VADDPD %s, %s, Z0", z(a1), z(a0)) // a[i] = l[i] + l[i+8]
	g.I("VEXTRACTF64X4 $1, Z0, Y1")
	g.I("VADDPD Y1, Y0, Y0") // b[i] = a[i] + a[i+4]
	g.I("VEXTRACTF128 $1, Y0, X1")
	g.I("VADDPD X1, X0, X0") // c[i] = b[i] + b[i+2]
	g.I("VPERMILPD $1, X0, X1")
	g.I("VADDSD X1, X0, X0") // c[0] + c[1]
}

// maxTree reduces the 16 float32 lanes of m to their maximum in X0
// (clobbers Z0, Z1). The lanes are ≥ +0 and not NaN, so the order of the
// comparisons does not matter.
func (g *gen) maxTree(m int) {
	g.I("VEXTRACTF64X4 $1, %s, Y1", z(m))
	g.I("VMAXPS Y1, %s, Y0", y(m))
	g.I("VEXTRACTF128 $1, Y0, X1")
	g.I("VMAXPS X1, X0, X0")
	g.I("VPERMILPS $0x4e, X0, X1")
	g.I("VMAXPS X1, X0, X0")
	g.I("VPERMILPS $0xb1, X0, X1")
	g.I("VMAXPS X1, X0, X0")
}

// rowLoop emits the walk over one row of n elements: BX = 0, two chunks
// while BX < R14 (n rounded down to 32), one while BX < R10 (n rounded
// down to 16), then the masked tail when K1 ≠ 0. chunk(u, masked) emits
// the work for the chunk at BX+16u. The loop falls through to the end of
// the row.
func (g *gen) rowLoop(p string, chunk func(u int, masked bool)) {
	g.I("XORQ BX, BX")
	g.I("CMPQ BX, R14")
	g.I("JGE %s_one", p)
	g.Label(p + "_loop")
	chunk(0, false)
	chunk(1, false)
	g.I("ADDQ $32, BX")
	g.I("CMPQ BX, R14")
	g.I("JLT %s_loop", p)
	g.Label(p + "_one")
	g.I("CMPQ BX, R10")
	g.I("JGE %s_tail", p)
	chunk(0, false)
	g.I("ADDQ $16, BX")
	g.Label(p + "_tail")
	g.I("KORTESTW K1, K1")
	g.I("JZ %s_end", p)
	chunk(0, true)
	g.Label(p + "_end")
}

// blockLoop emits the walk over one row of n elements for the sums: BX =
// 0, blocks of four chunks while BX < R14 (n rounded down to 64), each
// followed by flush, then single chunks while BX < R10, the masked tail
// when K1 ≠ 0, and a last flush (which adds +0 partials when the row ends
// on a block boundary: no change). reset zeroes the partials; chunk(u,
// masked) emits the work for the chunk at BX+16u.
func (g *gen) blockLoop(p string, reset, flush func(), chunk func(u int, masked bool)) {
	g.I("XORQ BX, BX")
	reset()
	g.I("CMPQ BX, R14")
	g.I("JGE %s_rest", p)
	g.Label(p + "_block")
	for u := 0; u < 4; u++ {
		chunk(u, false)
	}
	flush()
	reset()
	g.I("ADDQ $64, BX")
	g.I("CMPQ BX, R14")
	g.I("JLT %s_block", p)
	g.Label(p + "_rest")
	g.I("CMPQ BX, R10")
	g.I("JGE %s_tail", p)
	g.Label(p + "_one")
	chunk(0, false)
	g.I("ADDQ $16, BX")
	g.I("CMPQ BX, R10")
	g.I("JLT %s_one", p)
	g.Label(p + "_tail")
	g.I("KORTESTW K1, K1")
	g.I("JZ %s_flush", p)
	chunk(0, true)
	g.Label(p + "_flush")
	flush()
}

// zero emits VPXORD of the registers.
func (g *gen) zero(regs ...int) {
	for _, r := range regs {
		g.I("VPXORD %s, %s, %s", z(r), z(r), z(r))
	}
}

// lengths sets K1 to the tail mask of n (clobbers CX, AX), R10 = n &^ 15
// and R14 = n rounded down to a multiple of blk (32 or 64).
func (g *gen) lengths(n string, blk int) {
	g.I("MOVQ %s, CX", n)
	g.I("ANDQ $15, CX")
	g.I("MOVL $1, AX")
	g.I("SHLL CX, AX")
	g.I("DECL AX")
	g.I("KMOVW AX, K1")
	g.I("MOVQ %s, R10", n)
	g.I("ANDQ $-16, R10")
	g.I("MOVQ %s, R14", n)
	g.I("ANDQ $%d, R14", -blk)
}

func (g *gen) interactionConsts(epsArg, sArg string) {
	g.I("VPXORD %s, %s, %s", z(zZero), z(zZero), z(zZero))
	g.Broadcast32(math.Float32bits(1), zOne)
	g.Broadcast32(maxDenominator, zMax)
	g.Broadcast32(math.Float32bits(2), zTwo)
	g.I("VBROADCASTSS %s, %s", epsArg, z(zEps))
	g.I("VBROADCASTSS %s, %s", sArg, z(zS))
}

// powDispatch jumps to p_1, p_2 or p_4 by the exponent in AX (1 for any
// value other than 2 and 4, as interaction does).
func (g *gen) powDispatch(p string) {
	g.I("CMPQ AX, $2")
	g.I("JEQ %s_2", p)
	g.I("CMPQ AX, $4")
	g.I("JEQ %s_4", p)
	g.I("JMP %s_1", p)
}

func (g *gen) fromDotsTile() {
	g.Text(`
// func fromDotsTileAVX512(t *float32, ldt, rows, cols int, na, nb *float32, eps, s float32, pow int)
//
// tileFromDotsGeneric: t[r*ldt+j] = interaction(t[r*ldt+j], na[r], nb[j], eps, s, pow)
// for r < rows, j < cols (rows ≥ 1).
TEXT ·fromDotsTileAVX512(SB), NOSPLIT, $0-64
`)
	g.I("MOVQ t+0(FP), DI")
	g.I("MOVQ ldt+8(FP), R8")
	g.I("SHLQ $2, R8")
	g.I("MOVQ rows+16(FP), R9")
	g.I("MOVQ na+32(FP), R11")
	g.I("MOVQ nb+40(FP), R12")
	g.lengths("cols+24(FP)", 32)
	g.interactionConsts("eps+48(FP)", "s+52(FP)")
	g.I("MOVQ pow+56(FP), AX")
	g.powDispatch("fd")
	for _, pow := range []int{1, 2, 4} {
		p := fmt.Sprintf("fd_%d", pow)
		g.Label(p)
		g.I("VBROADCASTSS (R11), %s", z(zNa))
		g.rowLoop(p, func(u int, masked bool) { g.interaction(u, pow, masked) })
		g.I("ADDQ R8, DI")
		g.I("ADDQ $4, R11")
		g.I("DECQ R9")
		g.I("JNZ %s", p)
		g.I("JMP fd_ret")
	}
	g.Label("fd_ret")
	g.I("VZEROUPPER")
	g.I("RET")
}

func (g *gen) tileStats() {
	g.Text(`
// func tileStatsAVX512(t *float32, ldt, rows, cols int, na, nb, inv *float32, eps, s float32, pow int, os, osn *float64, om *float32)
//
// tileStatsGeneric: for r < rows (≥ 1) the interactions of row r in place,
// os[r] = Σ w and, when inv is not nil, osn[r] = Σ w·inv and om[r] = max
// w·inv (both 0 when inv is nil). Lane sums: Z20, Z21 (w), Z22, Z23 (q);
// running maximum Z24.
TEXT ·tileStatsAVX512(SB), NOSPLIT, $0-96
`)
	g.I("MOVQ t+0(FP), DI")
	g.I("MOVQ ldt+8(FP), R8")
	g.I("SHLQ $2, R8")
	g.I("MOVQ rows+16(FP), R9")
	g.I("MOVQ na+32(FP), R11")
	g.I("MOVQ nb+40(FP), R12")
	g.I("MOVQ inv+48(FP), R13")
	g.lengths("cols+24(FP)", 64)
	g.interactionConsts("eps+56(FP)", "s+60(FP)")
	g.I("MOVQ os+72(FP), SI")
	g.I("MOVQ osn+80(FP), DX")
	g.I("MOVQ om+88(FP), CX")
	g.I("MOVQ pow+64(FP), AX")
	g.I("TESTQ R13, R13")
	g.I("JZ ts_sum")
	g.powDispatch("ts_inv")
	g.Label("ts_sum")
	g.powDispatch("ts_sum")
	for _, withInv := range []bool{true, false} {
		for _, pow := range []int{1, 2, 4} {
			p := fmt.Sprintf("ts_sum_%d", pow)
			if withInv {
				p = fmt.Sprintf("ts_inv_%d", pow)
			}
			g.Label(p)
			g.I("VBROADCASTSS (R11), %s", z(zNa))
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
				g.I("VADDPS %s, %s, %s", z(w), z(zPs), z(zPs))
				if !withInv {
					return
				}
				q := tmp(u, 4)
				if masked {
					g.load(fmt.Sprintf("%d(R13)(BX*4)", 64*u), tmp(u, 7), true)
					g.I("VMULPS %s, %s, %s", z(tmp(u, 7)), z(w), z(q)) // q = w·inv
				} else {
					g.I("VMULPS %d(R13)(BX*4), %s, %s", 64*u, z(w), z(q)) // q = w·inv
				}
				g.I("VMAXPS %s, %s, %s", z(zMx), z(q), z(zMx)) // q > m → q; NaN never wins
				g.I("VADDPS %s, %s, %s", z(q), z(zPq), z(zPq))
			})
			g.tree(zS0, zS1)
			g.I("VMOVSD X0, (SI)")
			if withInv {
				g.tree(zQ0, zQ1)
				g.I("VMOVSD X0, (DX)")
				g.maxTree(zMx)
				g.I("VMOVSS X0, (CX)")
			} else {
				g.I("MOVQ $0, (DX)")
				g.I("MOVL $0, (CX)")
			}
			g.I("ADDQ $8, SI")
			g.I("ADDQ $8, DX")
			g.I("ADDQ $4, CX")
			g.I("ADDQ R8, DI")
			g.I("ADDQ $4, R11")
			g.I("DECQ R9")
			g.I("JNZ %s", p)
			g.I("JMP ts_ret")
		}
	}
	g.Label("ts_ret")
	g.I("VZEROUPPER")
	g.I("RET")
}

func (g *gen) rowStats() {
	g.Text(`
// func rowStatsAVX512(row, inv *float32, n int) (s, sn float64, m float32)
//
// rowStatsGeneric over n ≥ 0 elements.
TEXT ·rowStatsAVX512(SB), NOSPLIT, $0-44
`)
	g.I("MOVQ row+0(FP), DI")
	g.I("MOVQ inv+8(FP), R13")
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
		g.I("VADDPS %s, %s, %s", z(w), z(zPs), z(zPs))
		if masked {
			g.load(fmt.Sprintf("%d(R13)(BX*4)", 64*u), tmp(u, 7), true)
			g.I("VMULPS %s, %s, %s", z(tmp(u, 7)), z(w), z(q))
		} else {
			g.I("VMULPS %d(R13)(BX*4), %s, %s", 64*u, z(w), z(q))
		}
		g.I("VMAXPS %s, %s, %s", z(zMx), z(q), z(zMx))
		g.I("VADDPS %s, %s, %s", z(q), z(zPq), z(zPq))
	})
	g.tree(zS0, zS1)
	g.I("VMOVSD X0, s+24(FP)")
	g.tree(zQ0, zQ1)
	g.I("VMOVSD X0, sn+32(FP)")
	g.maxTree(zMx)
	g.I("VMOVSS X0, m+40(FP)")
	g.I("VZEROUPPER")
	g.I("RET")
}

// rowSum emits rowSumAVX512 (col == false) or rowSumColsAVX512.
func (g *gen) rowSum(col bool) {
	if col {
		g.Text(`
// func rowSumColsAVX512(row *float32, n int, col *float64) float64
//
// rowSumColsGeneric over n ≥ 0 elements with col not nil: col[j] += row[j]
// (float64) and the lane sum of row.
TEXT ·rowSumColsAVX512(SB), NOSPLIT, $0-32
`)
	} else {
		g.Text(`
// func rowSumAVX512(row *float32, n int) float64
//
// sumGeneric over n ≥ 0 elements.
TEXT ·rowSumAVX512(SB), NOSPLIT, $0-24
`)
	}
	g.I("MOVQ row+0(FP), DI")
	g.lengths("n+8(FP)", 64)
	if col {
		g.I("MOVQ col+16(FP), SI")
		g.I("KSHIFTRW $8, K1, K2") // tail mask of lanes 8..15
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
		g.I("VADDPS %s, %s, %s", z(w), z(zPs), z(zPs))
		if !col {
			return
		}
		g.I("VCVTPS2PD %s, %s", y(w), z(lo))
		g.I("VEXTRACTF64X4 $1, %s, %s", z(w), y(hi))
		g.I("VCVTPS2PD %s, %s", y(hi), z(hi))
		for h, v := range []int{lo, hi} {
			mem := fmt.Sprintf("%d(SI)(BX*8)", 128*u+64*h)
			c := tmp(u, 5+h)
			if masked {
				k := []string{"K1", "K2"}[h]
				g.I("VMOVUPD.Z %s, %s, %s", mem, k, z(c))
				g.I("VADDPD %s, %s, %s", z(v), z(c), z(c))
				g.I("VMOVUPD %s, %s, %s", z(c), k, mem)
			} else {
				g.I("VADDPD %s, %s, %s", mem, z(v), z(c)) // col + row (commutative)
				g.I("VMOVUPD %s, %s", z(c), mem)
			}
		}
	})
	g.tree(zS0, zS1)
	if col {
		g.I("VMOVSD X0, ret+24(FP)")
	} else {
		g.I("VMOVSD X0, ret+16(FP)")
	}
	g.I("VZEROUPPER")
	g.I("RET")
}

// scan emits scanRowAVX512 (k = 1) or scanRows4AVX512 (k = 4).
func (g *gen) scan(k int) {
	var args []string
	rowReg := []string{"SI", "R11", "R12", "R13"}
	p := "scan1"
	if k == 1 {
		g.Text(`
// func scanRowAVX512(w *float32, n int, acc, rem *float64, cross *int32, r int32)
//
// scanRowGeneric over n ≥ 0 elements.
TEXT ·scanRowAVX512(SB), NOSPLIT, $0-44
`)
		g.I("MOVQ w+0(FP), SI")
		args = []string{"n+8(FP)", "acc+16(FP)", "rem+24(FP)", "cross+32(FP)", "r+40(FP)"}
	} else {
		p = "scan4"
		g.Text(`
// func scanRows4AVX512(w0, w1, w2, w3 *float32, n int, acc, rem *float64, cross *int32, r int32)
//
// scanRows4Generic over n ≥ 0 elements: scanRowGeneric on w0..w3 in order
// with crossing points r+1 … r+4; the accumulators stay in registers
// across the four rows (the same additions in the same order).
TEXT ·scanRows4AVX512(SB), NOSPLIT, $0-68
`)
		for i := 0; i < 4; i++ {
			g.I("MOVQ w%d+%d(FP), %s", i, 8*i, rowReg[i])
		}
		args = []string{"n+32(FP)", "acc+40(FP)", "rem+48(FP)", "cross+56(FP)", "r+64(FP)"}
	}
	g.I("MOVQ %s, DI", args[1])
	g.I("MOVQ %s, R8", args[2])
	g.I("MOVQ %s, R9", args[3])
	g.lengths(args[0], 32)
	g.I("KSHIFTRW $8, K1, K2")
	g.I("MOVQ $0x7ff0000000000000, AX")
	g.I("VPBROADCASTQ AX, Z31") // +Inf
	// Crossing points: Z16+i holds r (k = 1) or r+i+1.
	for i := 0; i < k; i++ {
		g.I("MOVL %s, AX", args[4])
		if k > 1 {
			g.I("ADDL $%d, AX", i+1)
		}
		g.I("VPBROADCASTD AX, %s", z(16+i))
	}
	// Registers of the chunk: acc Z0, Z1; rem Z2, Z3; row Z4, lo Z5, hi Z6.
	g.I("XORQ BX, BX")
	chunk := func(masked bool, next string) {
		ld := func(mem string, reg int, km string) {
			if masked {
				g.I("VMOVUPD.Z %s, %s, %s", mem, km, z(reg))
			} else {
				g.I("VMOVUPD %s, %s", mem, z(reg))
			}
		}
		st := func(reg int, mem string, km string) {
			if masked {
				g.I("VMOVUPD %s, %s, %s", z(reg), km, mem)
			} else {
				g.I("VMOVUPD %s, %s", z(reg), mem)
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
				g.I("VCMPPD $0x1d, Z2, Z0, K1, K4") // acc ≥ rem (ordered), tail lanes only
				g.I("VCMPPD $0x1d, Z3, Z1, K2, K5")
			} else {
				g.I("VCMPPD $0x1d, Z2, Z0, K4") // acc ≥ rem (ordered)
				g.I("VCMPPD $0x1d, Z3, Z1, K5")
			}
			g.I("KUNPCKBW K4, K5, K6") // K6 = K5<<8 | K4
			g.I("KORTESTW K6, K6")
			skip := fmt.Sprintf("%s_%s_%d", p, next, i)
			g.I("JZ %s", skip)
			g.I("VMOVDQU32 %s, K6, (R9)(BX*4)", z(16+i)) // cross = r
			g.I("VMOVAPD Z31, K4, Z2")                   // rem = +Inf
			g.I("VMOVAPD Z31, K5, Z3")
			g.Label(skip)
		}
		st(0, "(DI)(BX*8)", "K1")
		st(1, "64(DI)(BX*8)", "K2")
		st(2, "(R8)(BX*8)", "K1")
		st(3, "64(R8)(BX*8)", "K2")
	}
	g.I("CMPQ BX, R10")
	g.I("JGE %s_tail", p)
	g.Label(p + "_loop")
	chunk(false, "x")
	g.I("ADDQ $16, BX")
	g.I("CMPQ BX, R10")
	g.I("JLT %s_loop", p)
	g.Label(p + "_tail")
	g.I("KORTESTW K1, K1")
	g.I("JZ %s_end", p)
	chunk(true, "t")
	g.Label(p + "_end")
	g.I("VZEROUPPER")
	g.I("RET")
}

func (g *gen) compress() {
	g.Text(`
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
	g.I("MOVQ row+0(FP), DI")
	g.I("MOVQ n+8(FP), CX")
	// R10: the bits of the last chunk that lie within n.
	g.I("ANDQ $15, CX")
	g.I("MOVL $1, R10")
	g.I("SHLL CX, R10")
	g.I("DECL R10")
	g.I("JNZ cp_mask")
	g.I("MOVL $0xffff, R10")
	g.Label("cp_mask")
	g.I("MOVQ n+8(FP), CX")
	g.I("MOVQ bm+16(FP), SI")
	g.I("MOVQ dst+24(FP), R9")
	g.I("MOVQ lim+32(FP), R8")
	g.I("ADDQ $15, CX")
	g.I("SHRQ $4, CX") // chunks
	g.I("XORQ BX, BX") // output position
	g.I("TESTQ CX, CX")
	g.I("JZ cp_end")
	g.Label("cp_loop")
	g.I("MOVWLZX (SI), AX")
	g.I("CMPQ CX, $1")
	g.I("JNE cp_full")
	g.I("ANDL R10, AX")
	g.Label("cp_full")
	g.I("TESTL AX, AX")
	g.I("JZ cp_next")
	g.I("CMPQ BX, R8")
	g.I("JGT cp_end")
	g.I("KMOVW AX, K1")
	g.I("VMOVUPS.Z (DI), K1, Z0")
	g.I("VCOMPRESSPS Z0, K1, Z1")
	g.I("VMOVUPS Z1, (R9)(BX*4)")
	g.I("POPCNTL AX, AX")
	g.I("ADDQ AX, BX")
	g.Label("cp_next")
	g.I("ADDQ $64, DI")
	g.I("ADDQ $2, SI")
	g.I("DECQ CX")
	g.I("JNZ cp_loop")
	g.Label("cp_end")
	g.I("VZEROUPPER")
	g.I("RET")
}

func main() {
	out := flag.String("o", "epilogue_amd64.s", "output file")
	flag.Parse()
	var g gen
	g.Text(`// Code generated by gen_epilogue.go; DO NOT EDIT.

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
	if err := os.WriteFile(*out, []byte(g.String()), 0o644); err != nil {
		log.Fatal(err)
	}
}
