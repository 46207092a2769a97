package gemm

import (
	"fmt"
	"math"
	"unsafe"
)

// The packing loops unroll the MR=4 rows of a panel by hand.
const _ = uint(MR-4) + uint(4-MR)

// layout is the memory layout of a packed operand. Float32 operands always
// use layoutF32; bfloat16 operands use the layout of the kernel selected
// for BF16 when they are packed (an operand packed for one layout cannot
// be multiplied by a kernel of another: re-pack after Force).
type layout uint8

const (
	// layoutF32: float32 panels. A: [⌈m/MR⌉][kp][MR], B: [⌈n/NR⌉][kp][NR],
	// padding rows and columns zero; kp = k for F32 operands and k rounded
	// up to a multiple of BF16Block (zero depth padding) for BF16 operands,
	// whose values are the bfloat16 operand values widened to float32.
	layoutF32 layout = iota
	// layoutQuad: bfloat16 quad pairs for VDPBF16PS. A: [⌈m/MR⌉][kp/2][MR],
	// B: [⌈n/NR⌉][kp/2][NR] uint32, kp = k rounded up to BF16Block. Within
	// each block of 32 depths, group g (depths 4g..4g+3) fills dword 2g with
	// depth 4g (high half) and 4g+2 (low half), the even chain's two steps,
	// and dword 2g+1 with 4g+1 (high) and 4g+3 (low), the odd chain's.
	layoutQuad
	// layoutAMX: bfloat16 pairs for TDPBF16PS. A: row-major [mp][kp/2]
	// uint32, rows padded to mp = ⌈m/32⌉·32; B: [⌈n/NR⌉][kp/2][NR] uint32
	// (the VNNI layout, two 16-column tiles side by side). A pair holds
	// depth 2t in its low half and 2t+1 in its high half.
	layoutAMX
)

func (l layout) String() string {
	return [...]string{"float32 panels", "bf16 quad pairs", "bf16 AMX tiles"}[l]
}

// amxRows is the row group of the AMX kernel: two 16-row tiles.
const amxRows = 32

// pairIndex returns, for depth q of a pair layout, the dword within a row
// (or panel row) and the shift of its half (16: high half, 0: low half).
func pairIndex(l layout, q int) (d int, shift uint) {
	if l == layoutQuad {
		i := q % BF16Block
		d = q/BF16Block*(BF16Block/2) + 2*(i/4) + i&1
		if i%4 < 2 {
			return d, 16
		}
		return d, 0
	}
	return q / 2, uint(q&1) * 16
}

func roundUp(x, m int) int { return (x + m - 1) / m * m }

// PackedA is a left-hand operand packed for the micro-kernels. Float32
// operands (PackA, PackAT, Resize) use float32 panels of MR rows: element
// (i, q) of the m×k matrix A lives at
//
//	Data()[(i/MR)*k*MR + q*MR + i%MR]
//
// and the padding rows (m ≤ i < ceil(m/MR)·MR) are zero. Callers that
// produce A themselves may write this layout directly (see Resize).
// BF16 operands (PackAAs, PackABF16) use the layout of the selected
// bfloat16 kernel, which is internal.
type PackedA struct{ o packedOp }

// M returns the number of rows of the packed operand.
func (p *PackedA) M() int { return p.o.rows }

// K returns the inner dimension of the packed operand.
func (p *PackedA) K() int { return p.o.k }

// Precision returns the operand's precision.
func (p *PackedA) Precision() Precision { return p.o.prec }

// Data returns the packed values of a float32 operand (layout in the
// type's comment); nil for a BF16 operand.
func (p *PackedA) Data() []float32 {
	if p.o.prec != F32 {
		return nil
	}
	return p.o.data
}

// Bytes returns the memory held by the packed operand.
func (p *PackedA) Bytes() int64 { return int64(cap(p.o.data)+cap(p.o.u32)) * 4 }

// Resize makes p an m×k float32 operand, reusing its storage, and returns
// the packed values for the caller to fill completely (padding rows
// included).
func (p *PackedA) Resize(m, k int) []float32 {
	if m < 0 || k < 0 {
		panic(fmt.Sprintf("gemm.PackedA.Resize: negative size m=%d k=%d", m, k))
	}
	checkSize("PackedA.Resize", m, k)
	p.o = packedOp{rows: m, k: k, kp: k, prec: F32, lay: layoutF32, isA: true, data: grow(p.o.data, (m+MR-1)/MR*MR*k), u32: p.o.u32}
	return p.o.data
}

// PackedB is a right-hand operand packed once into micro-kernel panels and
// reused across products, e.g. a bank's keys used for several passes or a
// Linear layer's weights. The zero value is empty; Pack functions reuse its
// storage. A PackedB may be read by several goroutines at once but must not
// be re-packed while in use.
type PackedB struct{ o packedOp }

// N returns the number of columns of C (rows of Bᵀ) of the packed operand.
func (p *PackedB) N() int { return p.o.rows }

// K returns the inner dimension of the packed operand.
func (p *PackedB) K() int { return p.o.k }

// Precision returns the operand's precision.
func (p *PackedB) Precision() Precision { return p.o.prec }

// Bytes returns the memory held by the packed operand.
func (p *PackedB) Bytes() int64 { return int64(cap(p.o.data)+cap(p.o.u32)) * 4 }

// Panels returns the packed values of a float32 operand in the fast
// layout: element (q, j) of op(B) (K()×N()) lives at
//
//	Panels()[(j/NR)*K()*NR + q*NR + j%NR]
//
// with zero padding columns (N() ≤ j < ceil(N()/NR)·NR); nil for a BF16
// operand.
func (p *PackedB) Panels() []float32 {
	if p.o.prec != F32 {
		return nil
	}
	return p.o.data
}

// Resize makes p a float32 operand with op(B) of size k×n (N()=n, K()=k),
// reusing its storage, and returns the panels (layout as in Panels) for the
// caller to fill completely, padding included.
func (p *PackedB) Resize(n, k int) []float32 {
	if n < 0 || k < 0 {
		panic(fmt.Sprintf("gemm.PackedB.Resize: negative size n=%d k=%d", n, k))
	}
	checkSize("PackedB.Resize", n, k)
	p.o = packedOp{rows: n, k: k, kp: k, prec: F32, lay: layoutF32, data: grow(p.o.data, (n+NR-1)/NR*NR*k), u32: p.o.u32}
	return p.o.data
}

// source is a matrix to pack, read as R (rows × k): element (r, q) of R is
// f[r*ld+q] (or h[...] for bfloat16 storage), or f[q*ld+r] when kMajor.
// For A, R = A; for B, R = op(B)ᵀ (the n×k matrix whose rows are B's
// columns of C).
//
// With panels, f is instead in the float32 panel layout of PackedB.Panels
// for R's k columns: element (r, q) at f[(r/NR)*k*NR + q*NR + r%NR] (ld
// unused).
type source struct {
	f      []float32
	h      []uint16
	ld     int
	kMajor bool
	panels bool
}

// packedOp is the common part of PackedA and PackedB that packing fills.
type packedOp struct {
	rows, k int
	prec    Precision
	lay     layout
	isA     bool // the A side (panels of MR rows, or AMX rows)
	kp      int
	data    []float32
	u32     []uint32
	t       []uint16 // scratch row for packing
}

// packLayout returns the layout an operand of precision prec gets now.
func packLayout(prec Precision) layout {
	if prec == F32 {
		return layoutF32
	}
	return selectedKernel(BF16).lay
}

// pack packs R (rows × k from src) as an operand of precision prec in
// layout lay: the A side (panels of MR rows, or AMX rows) when isA, else
// the B side (panels of NR). It sizes the storage and fills everything, in
// parallel for large operands.
func (o *packedOp) pack(isA bool, prec Precision, lay layout, rows, k int, src source) {
	if prec == F32 && lay != layoutF32 {
		panic("gemm: float32 operand in a bfloat16 layout")
	}
	o.rows, o.k, o.prec, o.lay, o.isA = rows, k, prec, lay, isA
	o.kp = k
	if prec == BF16 {
		o.kp = roundUp(k, BF16Block)
	}
	w := NR
	if isA {
		w = MR
	}
	np := (rows + w - 1) / w
	switch {
	case o.lay == layoutF32:
		o.data = grow(o.data, np*o.kp*w)
	case o.lay == layoutAMX && isA:
		o.u32 = growU32(o.u32, roundUp(rows, amxRows)*o.kp/2)
		clear(o.u32[rows*o.kp/2:])
		np = rows
	default:
		o.u32 = growU32(o.u32, np*o.kp/2*w)
	}
	if rows*k < 1<<16 || Threads() == 1 {
		o.t = growU16(o.t, o.kp)
		o.fill(isA, w, 0, np, &src, o.t)
		return
	}
	s := src // escapes to the workers (only here)
	parallelFor(Threads(), np, func(_, lo, hi int) { o.fill(isA, w, lo, hi, &s, make([]uint16, o.kp)) })
}

// fill packs panels [lo, hi) of width w (AMX A: rows [lo, hi)).
func (o *packedOp) fill(isA bool, w, lo, hi int, src *source, t []uint16) {
	k, kp := o.k, o.kp
	if o.prec == F32 {
		for jp := lo; jp < hi; jp++ {
			dst := o.data[jp*kp*w : (jp+1)*kp*w]
			r0 := jp * w
			cols := min(w, o.rows-r0)
			if src.h == nil {
				packF32Panel(dst, w, cols, k, src, r0)
				continue
			}
			clear(dst)
			for s := 0; s < cols; s++ {
				src.rowBits(t, r0+s, k, false)
				for q, h := range t[:k] {
					dst[q*w+s] = math.Float32frombits(uint32(h) << 16)
				}
			}
		}
		return
	}
	t = t[:kp]
	if src.panels && !isA {
		o.fillFromPanels(lo, hi, src.f)
		return
	}
	if src.kMajor && src.h == nil {
		o.fillKMajor(isA, w, lo, hi, src)
		return
	}
	if o.lay == layoutQuad && !isA && src.h != nil && !src.kMajor {
		o.fillQuadBF16(lo, hi, src)
		return
	}
	if o.lay == layoutAMX && isA {
		h := kp / 2
		if littleEndian && src.h == nil && !src.kMajor && !src.panels {
			// A row of AMX pairs is the row of bfloat16 values in
			// order (little-endian dwords): round straight into it.
			for r := lo; r < hi; r++ {
				dst := u16s(o.u32[r*h : (r+1)*h])
				rowBF16(dst[:k], src.f[r*src.ld:r*src.ld+k])
				clear(dst[k:])
			}
			return
		}
		for r := lo; r < hi; r++ {
			src.rowBits(t, r, k, true)
			dst := o.u32[r*h : (r+1)*h]
			for i := range dst {
				dst[i] = uint32(t[2*i]) | uint32(t[2*i+1])<<16
			}
		}
		return
	}
	units := kp // depths per panel row of dst: float32 panels
	if o.lay != layoutF32 {
		units = kp / 2
	}
	for jp := lo; jp < hi; jp++ {
		r0 := jp * w
		cols := min(w, o.rows-r0)
		if o.lay == layoutF32 {
			dst := o.data[jp*units*w : (jp+1)*units*w]
			if cols < w {
				clear(dst)
			}
			for s := 0; s < cols; s++ {
				src.rowBits(t, r0+s, k, true)
				for q, h := range t {
					dst[q*w+s] = math.Float32frombits(uint32(h) << 16)
				}
			}
			continue
		}
		dst := o.u32[jp*units*w : (jp+1)*units*w]
		if o.lay == layoutQuad && isA && cols == MR && src.h == nil && !src.kMajor && !src.panels {
			quadAPanel(dst, src.f[r0*src.ld:], src.ld, k, kp)
			continue
		}
		if cols < w {
			clear(dst)
		}
		for s := 0; s < cols; s++ {
			src.rowBits(t, r0+s, k, true)
			if o.lay == layoutQuad {
				// Group g of depths 4g..4g+3: dword 2g = (4g, 4g+2), the
				// even chain's two steps; dword 2g+1 = (4g+1, 4g+3).
				for g := 0; g < kp/4; g++ {
					x := t[4*g : 4*g+4 : 4*g+4]
					setQuad(dst, w, g, s, [4]uint32{uint32(x[0]), uint32(x[1]), uint32(x[2]), uint32(x[3])})
				}
				continue
			}
			for i := 0; i < units; i++ { // AMX B: pairs (2i, 2i+1), low half first
				dst[i*w+s] = uint32(t[2*i]) | uint32(t[2*i+1])<<16
			}
		}
	}
}

// setQuad stores depths 4g … 4g+3 (bfloat16 bits x) of row s of a
// quad-pair panel of width w: dword row 2g holds x[0] (high half) and
// x[2], dword row 2g+1 holds x[1] and x[3] (layoutQuad).
func setQuad(dst []uint32, w, g, s int, x [4]uint32) {
	dst[(2*g)*w+s] = x[0]<<16 | x[2]
	dst[(2*g+1)*w+s] = x[1]<<16 | x[3]
}

// quadAPanel packs one whole A panel (MR = 4 float32 rows of f, ld apart,
// k depths) into quad-pair dwords (dst: kp/2·MR of them), as fill's
// general loop does: the blocks of 16 depths through panelsQuadA (the
// generated AVX-512 loop where the CPU has it), the rest here.
func quadAPanel(dst []uint32, f []float32, ld, k, kp int) {
	blocks := k / 16
	if blocks > 0 {
		panelsQuadA(dst, f, ld, blocks)
	}
	for g := 4 * blocks; g < kp/4; g++ {
		for s := 0; s < MR; s++ {
			var x [4]uint32
			for i := range x {
				if q := 4*g + i; q < k {
					x[i] = bf16Bits(f[s*ld+q])
				}
			}
			setQuad(dst, MR, g, s, x)
		}
	}
}

// kMajorBlock is the depth block of fillKMajor: 32 depths, one BF16Block
// (so it divides kp), 64 bytes of an AMX A row.
const kMajorBlock = BF16Block

// fillKMajor packs panels [lo, hi) of width w (AMX A: rows [lo, hi)) of a
// bfloat16 operand from a k-major float32 source (element (r, q) of R at
// f[q·ld + r]: PackAT, PackNN), the same bits as rowBits and the layout
// loops of fill give. It walks the depths in blocks of kMajorBlock outside
// the rows, so that each source line is read from cache once per block
// instead of once per row: reading column by column (rowBits) touches one
// line per element, and for attention's Vᵀ (depth = 18,720 keys) the lines
// are evicted before the next row of the panel needs them.
func (o *packedOp) fillKMajor(isA bool, w, lo, hi int, src *source) {
	k, kp, f, ld := o.k, o.kp, src.f, src.ld
	at := func(q, r int) uint32 { // depth padding reads as +0
		if q >= k {
			return 0
		}
		return bf16Bits(f[q*ld+r])
	}
	if o.lay == layoutAMX && isA {
		h := kp / 2
		for q0 := 0; q0 < kp; q0 += kMajorBlock {
			for r := lo; r < hi; r++ {
				dst := o.u32[r*h+q0/2 : r*h+(q0+kMajorBlock)/2]
				for i := range dst {
					dst[i] = at(q0+2*i, r) | at(q0+2*i+1, r)<<16
				}
			}
		}
		return
	}
	units := kp / 2 // dwords per panel row
	if o.lay == layoutF32 {
		units = kp
	}
	if o.lay == layoutQuad && isA {
		// Whole panels four at a time: the full groups of four real
		// depths through kMajorQuadA (generated AVX-512 code where the CPU
		// has it), the last partial group and the padding here; the other
		// panels below.
		quads, groups := (min(hi, o.rows/MR)-lo)/4, k/4
		if quads > 0 && groups > 0 {
			kMajorQuadA(o.u32[lo*units*w:], f[lo*w:], ld, units*w, quads, groups)
			for jp := lo; jp < lo+4*quads; jp++ {
				dst := o.u32[jp*units*w : (jp+1)*units*w]
				for g := groups; g < kp/4; g++ {
					for s := 0; s < MR; s++ {
						r := jp*MR + s
						setQuad(dst, MR, g, s, [4]uint32{at(4*g, r), at(4*g+1, r), at(4*g+2, r), at(4*g+3, r)})
					}
				}
			}
			lo += 4 * quads
		}
	}
	for q0 := 0; q0 < kp; q0 += kMajorBlock {
		for jp := lo; jp < hi; jp++ {
			r0 := jp * w
			cols := min(w, o.rows-r0)
			if o.lay == layoutF32 {
				dst := o.data[jp*units*w : (jp+1)*units*w]
				for q := q0; q < q0+kMajorBlock; q++ {
					d := dst[q*w : q*w+w]
					for s := range cols {
						d[s] = math.Float32frombits(at(q, r0+s) << 16)
					}
					clear(d[cols:])
				}
				continue
			}
			dst := o.u32[jp*units*w : (jp+1)*units*w]
			clear(dst[q0/2*w : (q0+kMajorBlock)/2*w])
			for q := q0; q < min(q0+kMajorBlock, k); q++ {
				d, shift := pairIndex(o.lay, q)
				row := f[q*ld+r0 : q*ld+r0+cols]
				drow := dst[d*w : d*w+cols]
				for s, v := range row {
					drow[s] |= bf16Bits(v) << shift
				}
			}
		}
	}
}

// rowBits fills t[0:k] with row r of the source as bfloat16 bits (rounded
// to nearest even from float32; with bf16, denormals flushed to signed zero
// as operands read them) and zeros the rest of t.
func (s *source) rowBits(t []uint16, r, k int, bf16 bool) {
	switch {
	case s.panels:
		p := s.f[(r/NR)*k*NR+r%NR:]
		for q := range k {
			t[q] = RoundBF16(p[q*NR])
		}
	case s.h != nil && !s.kMajor:
		copy(t, s.h[r*s.ld:r*s.ld+k])
	case s.h != nil:
		for q := range k {
			t[q] = s.h[q*s.ld+r]
		}
	case !s.kMajor && bf16:
		rowBF16(t[:k], s.f[r*s.ld:r*s.ld+k])
		clear(t[k:])
		return
	case !s.kMajor:
		for q, v := range s.f[r*s.ld : r*s.ld+k] {
			t[q] = RoundBF16(v)
		}
	default:
		for q := range k {
			t[q] = RoundBF16(s.f[q*s.ld+r])
		}
	}
	if bf16 {
		for q, h := range t[:k] {
			if h&0x7f80 == 0 {
				t[q] = h & 0x8000
			}
		}
	}
	clear(t[k:])
}

// packF32Panel packs rows [r0, r0+cols) of a float32 source into one
// float32 panel dst ([k][w]), zero padding columns cols..w-1.
func packF32Panel(dst []float32, w, cols, k int, src *source, r0 int) {
	b, ldb := src.f, src.ld
	if src.panels {
		if cols < w {
			clear(dst)
		}
		for s := 0; s < cols; s++ {
			p := b[((r0+s)/NR)*k*NR+(r0+s)%NR:]
			for q := range k {
				dst[q*w+s] = p[q*NR]
			}
		}
		return
	}
	if src.kMajor {
		for q := 0; q < k; q++ {
			d := dst[q*w : q*w+w]
			copy(d, b[q*ldb+r0:q*ldb+r0+cols])
			clear(d[cols:])
		}
		return
	}
	if cols < w {
		clear(dst)
	}
	// Four rows at a time: contiguous reads, four writes per step.
	s := 0
	for ; s+4 <= cols; s += 4 {
		x0 := b[(r0+s)*ldb : (r0+s)*ldb+k]
		x1 := b[(r0+s+1)*ldb : (r0+s+1)*ldb+k]
		x2 := b[(r0+s+2)*ldb : (r0+s+2)*ldb+k]
		x3 := b[(r0+s+3)*ldb : (r0+s+3)*ldb+k]
		for q := range x0 {
			d := dst[q*w+s : q*w+s+4 : q*w+s+4]
			d[0], d[1], d[2], d[3] = x0[q], x1[q], x2[q], x3[q]
		}
	}
	for ; s < cols; s++ {
		row := b[(r0+s)*ldb : (r0+s)*ldb+k]
		for q, v := range row {
			dst[q*w+s] = v
		}
	}
}

func growU32(s []uint32, n int) []uint32 {
	if cap(s) < n {
		return make([]uint32, n)
	}
	return s[:n]
}

// packA packs A (m×k) from src into p at precision prec.
func (p *PackedA) packFrom(prec Precision, m, k int, src source) *PackedA {
	p.o.pack(true, prec, packLayout(prec), m, k, src)
	return p
}

// packFrom packs R = op(B)ᵀ (n×k) from src into p at precision prec.
func (p *PackedB) packFrom(prec Precision, n, k int, src source) *PackedB {
	p.o.pack(false, prec, packLayout(prec), n, k, src)
	return p
}

func checkPrec(op string, prec Precision) {
	if prec != F32 && prec != BF16 {
		panic(fmt.Sprintf("gemm.%s: unknown precision %v", op, prec))
	}
}

// PackA packs A (m×k, row-major, leading dimension lda) into p as a float32
// operand, reusing its storage, and returns p (allocated when nil).
func PackA(p *PackedA, m, k int, a []float32, lda int) *PackedA {
	return PackAAs(p, F32, m, k, a, lda)
}

// PackAAs packs A (m×k float32, leading dimension lda) as an operand of
// precision prec: BF16 rounds every value to the nearest bfloat16 (ties
// to even).
func PackAAs(p *PackedA, prec Precision, m, k int, a []float32, lda int) *PackedA {
	checkPrec("PackAAs", prec)
	checkMat("PackA", "A", m, k, len(a), lda)
	if p == nil {
		p = new(PackedA)
	}
	return p.packFrom(prec, m, k, source{f: a, ld: lda})
}

// PackABF16 packs A (m×k bfloat16 bits, leading dimension lda) as an
// operand of precision prec: BF16 takes the values as they are, F32
// widens them to float32 (exactly).
func PackABF16(p *PackedA, prec Precision, m, k int, a []uint16, lda int) *PackedA {
	checkPrec("PackABF16", prec)
	checkMat("PackABF16", "A", m, k, len(a), lda)
	if p == nil {
		p = new(PackedA)
	}
	return p.packFrom(prec, m, k, source{h: a, ld: lda})
}

// PackAT packs A = Xᵀ into p as a float32 operand, where X is k×m
// (row-major, leading dimension ldx), e.g. the values of one attention head
// so that A = Vᵀ. It reuses p's storage and returns p (allocated when nil).
func PackAT(p *PackedA, m, k int, x []float32, ldx int) *PackedA {
	return PackATAs(p, F32, m, k, x, ldx)
}

// PackATAs is PackAT at precision prec (BF16 rounds to nearest even).
func PackATAs(p *PackedA, prec Precision, m, k int, x []float32, ldx int) *PackedA {
	checkPrec("PackATAs", prec)
	checkMat("PackAT", "X", k, m, len(x), ldx)
	if p == nil {
		p = new(PackedA)
	}
	return p.packFrom(prec, m, k, source{f: x, ld: ldx, kMajor: true})
}

// PackATBF16 is PackAT from bfloat16 storage at precision prec.
func PackATBF16(p *PackedA, prec Precision, m, k int, x []uint16, ldx int) *PackedA {
	checkPrec("PackATBF16", prec)
	checkMat("PackATBF16", "X", k, m, len(x), ldx)
	if p == nil {
		p = new(PackedA)
	}
	return p.packFrom(prec, m, k, source{h: x, ld: ldx, kMajor: true})
}

// PackNT packs B (n×k, row-major, leading dimension ldb) as a float32
// operand for products C = A·Bᵀ, reusing p's storage, and returns p. A nil
// p allocates one.
func PackNT(p *PackedB, n, k int, b []float32, ldb int) *PackedB {
	return PackNTAs(p, F32, n, k, b, ldb)
}

// PackNTAs is PackNT at precision prec (BF16 rounds to nearest even).
func PackNTAs(p *PackedB, prec Precision, n, k int, b []float32, ldb int) *PackedB {
	checkPrec("PackNTAs", prec)
	checkMat("PackNT", "B", n, k, len(b), ldb)
	if p == nil {
		p = new(PackedB)
	}
	return p.packFrom(prec, n, k, source{f: b, ld: ldb})
}

// PackNTBF16 packs B (n×k bfloat16 bits, e.g. a Linear layer's weights kept
// in bfloat16) for C = A·Bᵀ at precision prec: BF16 as they are, F32
// widened.
func PackNTBF16(p *PackedB, prec Precision, n, k int, b []uint16, ldb int) *PackedB {
	checkPrec("PackNTBF16", prec)
	checkMat("PackNTBF16", "B", n, k, len(b), ldb)
	if p == nil {
		p = new(PackedB)
	}
	return p.packFrom(prec, n, k, source{h: b, ld: ldb})
}

// PackNN packs B (k×n, row-major, leading dimension ldb) as a float32
// operand for products C = A·B, reusing p's storage, and returns p. A nil p
// allocates one.
func PackNN(p *PackedB, n, k int, b []float32, ldb int) *PackedB {
	return PackNNAs(p, F32, n, k, b, ldb)
}

// PackNNAs is PackNN at precision prec (BF16 rounds to nearest even).
func PackNNAs(p *PackedB, prec Precision, n, k int, b []float32, ldb int) *PackedB {
	checkPrec("PackNNAs", prec)
	checkMat("PackNN", "B", k, n, len(b), ldb)
	if p == nil {
		p = new(PackedB)
	}
	return p.packFrom(prec, n, k, source{f: b, ld: ldb, kMajor: true})
}

// PackNNBF16 is PackNN from bfloat16 storage at precision prec.
func PackNNBF16(p *PackedB, prec Precision, n, k int, b []uint16, ldb int) *PackedB {
	checkPrec("PackNNBF16", prec)
	checkMat("PackNNBF16", "B", k, n, len(b), ldb)
	if p == nil {
		p = new(PackedB)
	}
	return p.packFrom(prec, n, k, source{h: b, ld: ldb, kMajor: true})
}

func growU16(s []uint16, n int) []uint16 {
	if cap(s) < n {
		return make([]uint16, n)
	}
	return s[:n]
}

// littleEndian reports whether a dword's low half comes first in memory,
// so that a row of AMX pairs can be written as a row of bfloat16 values.
var littleEndian = func() bool {
	x := uint32(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// u16s views a dword slice as its bfloat16 halves, in memory order.
func u16s(s []uint32) []uint16 {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&s[0])), 2*len(s))
}
