package gemm

import "fmt"

// The packed, blocked driver (GotoBLAS style). B is packed whole into
// panels of NR columns; a block of up to TileM rows of A into panels of MR
// rows (or AMX rows). The kernels compute whole MR×NR micro-tiles (AMX:
// 32×32) over chunks of depth, starting from zero or continuing from C;
// partial micro-tiles at the edges run the same kernel on scratch, and a
// bfloat16 block that is cut short by a sub-range (ProductSub, MulPacked)
// runs on zero-padded copies, so every element of C sees exactly the
// arithmetic of the definition wherever it lies, and the result does not
// depend on the tiling of the work among goroutines.

// stripF32Func computes full micro-tiles on float32 panels: for each of na
// A panels p (MR rows; panel p starts at a[p*aStride]) against one B panel
// (NR columns, b), over depth kc:
//
//	C[p·MR + r][s] = product over the kc depths of A_p[·][r] and B[·][s],
//	                 continuing from C (acc) or from +0
//
// where C[i][s] is c[i*ldc+s] and the product is the kernel's definition
// (float32, or bfloat16 with kc a multiple of BF16Block).
type stripF32Func func(a []float32, aStride, na int, b []float32, kc int, c []float32, ldc int, acc bool)

// stripU32Func is stripF32Func on quad-pair panels; kq counts dwords (two
// depths each) and is a multiple of BF16Block/2.
type stripU32Func func(a []uint32, aStride, na int, b []uint32, kq int, c []float32, ldc int, acc bool)

// amxFunc computes full 32×32 tiles on AMX operands: for ng row groups g
// (rows 32g.. of a, lda dwords per row) and nb B panels j (b[j*bStride:],
// NR columns), over kb blocks of BF16Block depth:
//
//	C[32g + r][NR·j + s] = bfloat16 product, continuing from C (acc) or +0
type amxFunc func(a []uint32, lda, ng int, b []uint32, bStride, nb, kb int, c []float32, ldc int, acc bool)

// amxCheck panics unless an amxFunc call with these arguments stays inside
// its slices (the assembly kernels do not check).
func amxCheck(a []uint32, lda, ng int, b []uint32, bStride, nb, kb int, c []float32, ldc int) {
	const h = BF16Block / 2
	if ng < 1 || nb < 1 || kb < 1 || lda < kb*h || bStride < kb*h*NR || ldc < nb*NR {
		panic(fmt.Sprintf("gemm: AMX kernel call with %d groups, %d panels, %d blocks, lda %d, bStride %d, ldc %d", ng, nb, kb, lda, bStride, ldc))
	}
	_ = a[(ng*amxRows-1)*lda+kb*h-1]
	_ = b[(nb-1)*bStride+kb*h*NR-1]
	_ = c[(ng*amxRows-1)*ldc+nb*NR-1]
}

// span is a packed operand's part in one product: rows [r0, r0+rows) (A:
// multiple of MR; B: columns, multiple of NR) at depths [k0, k0+k).
type span struct {
	op         *packedOp
	r0, rows   int
	k0         int
	padded     bool // the depth range ends at the operand's end (zero padding follows)
	panelWidth int  // MR or NR
}

// macro computes C[0:rows][0:cols] (+)= A[ai0:][ak0:ak0+k] · op(B)[bk0:][bj0:]
// with kernel kern: A and B packed (same precision and layout as kern).
func macro(kern *kernel, pa *packedOp, ai0, ak0, rows int, pb *packedOp, bj0, bk0, cols, k int, c []float32, ldc int, acc bool, ws *workspace) {
	if k == 0 {
		if !acc {
			for r := 0; r < rows; r++ {
				clear(c[r*ldc : r*ldc+cols])
			}
		}
		return
	}
	padded := ak0+k == pa.k && bk0+k == pb.k
	switch pa.lay {
	case layoutF32:
		kc := KC
		if kern.prec == BF16 {
			kc = kern.kc
		}
		drivePanels(kern.f32, kern.prec, pa.lay, pa.data, pa.kp, ai0, ak0, rows, pb.data, pb.kp, bj0, bk0, cols, k, 1, kc, padded, c, ldc, acc, ws, &ws.tailF)
	case layoutQuad:
		drivePanels(kern.u32, kern.prec, pa.lay, pa.u32, pa.kp/2, ai0, ak0, rows, pb.u32, pb.kp/2, bj0, bk0, cols, k, 2, kern.kc, padded, c, ldc, acc, ws, &ws.tailU)
	case layoutAMX:
		driveAMX(kern.amx, pa, ai0, ak0, rows, pb, bj0, bk0, cols, k, padded, c, ldc, acc, ws)
	}
}

// tailScratch holds zero-padded copies of one bfloat16 block for a product
// whose depth range stops inside a block.
type tailScratch[E float32 | uint32] struct{ a, b []E }

// drivePanels runs a strip kernel over float32 or quad-pair panels. A's
// panels have depth aK units (per = depths per unit) and start at row ai0;
// B's have depth bK units and start at column bj0. kc is the depth chunk
// (a multiple of BF16Block for bfloat16).
func drivePanels[E float32 | uint32](strip func([]E, int, int, []E, int, []float32, int, bool), prec Precision, lay layout,
	ad []E, aK, ai0, ak0, rows int, bd []E, bK, bj0, bk0, cols, k, per, kc int, padded bool,
	c []float32, ldc int, acc bool, ws *workspace, tail *tailScratch[E]) {
	aStride, bStride := aK*MR, bK*NR
	ap := ad[(ai0/MR)*aStride:]
	bp := bd[(bj0/NR)*bStride:]
	kfull := k
	if prec == BF16 && !padded {
		kfull = k / BF16Block * BF16Block
	} else if prec == BF16 {
		kfull = roundUp(k, BF16Block)
	}
	for pc := 0; pc < kfull; pc += kc {
		n := min(kc, kfull-pc)
		panels(strip, ap, aStride, (ak0+pc)/per, bp, bStride, (bk0+pc)/per, n/per, rows, cols, c, ldc, acc || pc > 0, ws)
	}
	if kfull >= k {
		return
	}
	// The last block stops inside the operands: multiply zero-padded
	// copies of it.
	units := BF16Block / per
	npa, npb := (rows+MR-1)/MR, (cols+NR-1)/NR
	tail.a = growE(tail.a, npa*units*MR)
	tail.b = growE(tail.b, npb*units*NR)
	maskTail(lay, tail.a, ap, aStride, (ak0+kfull)/per, npa, MR, k-kfull)
	maskTail(lay, tail.b, bp, bStride, (bk0+kfull)/per, npb, NR, k-kfull)
	panels(strip, tail.a, units*MR, 0, tail.b, units*NR, 0, units, rows, cols, c, ldc, acc || kfull > 0, ws)
}

func growE[E float32 | uint32](s []E, n int) []E {
	if cap(s) < n {
		return make([]E, n)
	}
	return s[:n]
}

// maskTail copies one block (units depth units from unit u0) of np panels
// of width w from src (panel stride stride) into dst ([np][units][w]),
// keeping the block's first t depths and zeroing the rest.
func maskTail[E float32 | uint32](lay layout, dst, src []E, stride, u0, np, w, t int) {
	units := len(dst) / (np * w)
	var mask [BF16Block]uint32 // per unit, the halves to keep
	for q := 0; q < t; q++ {
		d, sh := pairIndex(lay, q)
		if lay == layoutF32 {
			d, sh = q, 0
		}
		mask[d] |= 0xffff << sh
	}
	for p := 0; p < np; p++ {
		s := src[p*stride+u0*w : p*stride+(u0+units)*w]
		d := dst[p*units*w : (p+1)*units*w]
		for u := 0; u < units; u++ {
			for j := 0; j < w; j++ {
				switch v := any(s[u*w+j]).(type) {
				case float32:
					if mask[u] == 0 {
						v = 0
					}
					d[u*w+j] = E(v)
				case uint32:
					d[u*w+j] = E(v & mask[u])
				}
			}
		}
	}
}

// panels computes one depth chunk (kc units from unit aOff of A and bOff
// of B) for all micro-tiles of the rows×cols block: full tiles straight
// into C, partial ones through scratch.
func panels[E float32 | uint32](strip func([]E, int, int, []E, int, []float32, int, bool),
	ap []E, aStride, aOff int, bp []E, bStride, bOff, kc, rows, cols int, c []float32, ldc int, acc bool, ws *workspace) {
	full := rows / MR
	tmp := ws.strip[:]
	for jj := 0; jj < cols; jj += NR {
		nc := min(NR, cols-jj)
		b := bp[(jj/NR)*bStride+bOff*NR:]
		if nc == NR && full > 0 {
			strip(ap[aOff*MR:], aStride, full, b, kc, c[jj:], ldc, acc)
		}
		r0 := full * MR
		if nc < NR {
			r0 = 0
		}
		// The rest goes through tmp, TileM rows at a time.
		for i0 := r0; i0 < rows; i0 += TileM {
			nr := min(TileM, rows-i0)
			np := (nr + MR - 1) / MR
			if acc {
				for r := 0; r < nr; r++ {
					copy(tmp[r*NR:r*NR+nc], c[(i0+r)*ldc+jj:(i0+r)*ldc+jj+nc])
				}
			}
			strip(ap[(i0/MR)*aStride+aOff*MR:], aStride, np, b, kc, tmp, NR, acc)
			for r := 0; r < nr; r++ {
				copy(c[(i0+r)*ldc+jj:(i0+r)*ldc+jj+nc], tmp[r*NR:r*NR+nc])
			}
		}
	}
}

// driveAMX runs the AMX kernel (or its emulation) over AMX operands: full
// 32×32 tiles straight into C, edges through scratch, and a block cut
// short by the depth range on zero-padded copies.
func driveAMX(f amxFunc, pa *packedOp, ai0, ak0, rows int, pb *packedOp, bj0, bk0, cols, k int, padded bool, c []float32, ldc int, acc bool, ws *workspace) {
	lda := pa.kp / 2
	bStride := pb.kp / 2 * NR
	kb := k / BF16Block
	if padded {
		kb = (k + BF16Block - 1) / BF16Block
	}
	a := pa.u32[ai0*lda+ak0/2:]
	b := pb.u32[(bj0/NR)*bStride+bk0/2*NR:]
	// Depth chunks of amxChunk blocks: C is stored and reloaded between
	// chunks, which leaves every result unchanged (the blocks are added to
	// C in the same order).
	groupOuter := amxGroupOuter && kb > amxChunk
	for c0 := 0; c0 < kb; c0 += amxChunk {
		n := min(amxChunk, kb-c0)
		amxBlock(f, a[c0*BF16Block/2:], lda, b[c0*BF16Block/2*NR:], bStride, n, rows, cols, c, ldc, acc || c0 > 0, groupOuter, ws)
	}
	if t := k - kb*BF16Block; t > 0 {
		// Zero-padded copies of the last block: A rows [mp][16], B panels.
		const h = BF16Block / 2
		npb := (cols + NR - 1) / NR
		ta := growE(ws.tailU.a, roundUp(rows, amxRows)*h)
		tb := growE(ws.tailU.b, npb*h*NR)
		clear(ta)
		ws.tailU.a, ws.tailU.b = ta, tb
		var mask [h]uint32
		for q := 0; q < t; q++ {
			mask[q/2] |= 0xffff << (uint(q&1) * 16)
		}
		for r := 0; r < rows; r++ {
			src := a[r*lda+kb*h : r*lda+kb*h+h]
			for d := range mask {
				ta[r*h+d] = src[d] & mask[d]
			}
		}
		for p := 0; p < npb; p++ {
			src := b[p*bStride+kb*h*NR:]
			for d := range mask {
				for j := 0; j < NR; j++ {
					tb[(p*h+d)*NR+j] = src[d*NR+j] & mask[d]
				}
			}
		}
		amxBlock(f, ta, h, tb, h*NR, 1, rows, cols, c, ldc, acc || kb > 0, false, ws)
	}
}

// amxChunk is the depth chunk of the AMX kernel in blocks of BF16Block:
// C is stored and reloaded between chunks. A product deeper than one chunk
// (the DiT's linears, depth 1,536 and 8,960) visits C, with amxGroupOuter,
// group by group (32 rows), each against every B panel, so that a row
// group's chunk of A (32 rows × 512 depths, 32 KiB) is reused from L1
// across the panels; a shallower one (the bank's passes and attention's
// Sᵀ, depth 128; its Oᵀ, depth 512) panel by panel against every group,
// whose A block then fits in L1 whole. The per-element arithmetic is the
// same in every configuration (each tile sees its blocks in depth order).
// Variables so that BenchmarkAMXLoops can sweep them. On the Intel Xeon
// with AMX measured (README), one-core sweeps of the deep linears favoured
// chunks of 8–16 blocks, the bank ran faster panel by panel, and the 1.3B
// layer call showed no difference beyond that host's noise.
var (
	amxChunk      = 16
	amxGroupOuter = true
)

// amxBlock computes C[0:rows][0:cols] over kb blocks from A rows a (lda
// dwords per row, at least roundUp(rows, 32) rows readable or padded by
// the caller's layout) and B panels b.
func amxBlock(f amxFunc, a []uint32, lda int, b []uint32, bStride, kb, rows, cols int, c []float32, ldc int, acc, groupOuter bool, ws *workspace) {
	ng, nb := rows/amxRows, cols/NR
	if ng > 0 && nb > 0 {
		if groupOuter && nb > 1 {
			for g := 0; g < ng; g++ {
				f(a[g*amxRows*lda:], lda, 1, b, bStride, nb, kb, c[g*amxRows*ldc:], ldc, acc)
			}
		} else {
			f(a, lda, ng, b, bStride, nb, kb, c, ldc, acc)
		}
	}
	tmp := ws.strip[:amxRows*NR]
	edge := func(ga []uint32, r0, nr, j int) {
		nc := min(NR, cols-j*NR)
		if acc {
			for r := 0; r < nr; r++ {
				copy(tmp[r*NR:r*NR+nc], c[(r0+r)*ldc+j*NR:(r0+r)*ldc+j*NR+nc])
			}
		}
		f(ga, lda, 1, b[j*bStride:], bStride, 1, kb, tmp, NR, acc)
		for r := 0; r < nr; r++ {
			copy(c[(r0+r)*ldc+j*NR:(r0+r)*ldc+j*NR+nc], tmp[r*NR:r*NR+nc])
		}
	}
	if nb*NR < cols { // the partial panel, full row groups
		for g := 0; g < ng; g++ {
			edge(a[g*amxRows*lda:], g*amxRows, amxRows, nb)
		}
	}
	if rem := rows - ng*amxRows; rem > 0 {
		// The partial row group: a zero-padded copy of its rows.
		ga := growU32(ws.edgeA, amxRows*lda)
		ws.edgeA = ga
		clear(ga)
		for r := 0; r < rem; r++ {
			src := a[(ng*amxRows+r)*lda:]
			copy(ga[r*lda:r*lda+kb*BF16Block/2], src[:kb*BF16Block/2])
		}
		for j := 0; j < (cols+NR-1)/NR; j++ {
			edge(ga, ng*amxRows, rem, j)
		}
	}
}
