package gemm

import (
	"fmt"
	"math"
)

// Operands in another form: packing from float32 panels (a product's
// output written straight into panel layout, as the tiled attention and
// the implicit-im2col convolutions do), reading a packed operand's values
// back, and re-packing a bfloat16 operand for the kernel selected now.

// PackPanelsAs packs op(B) (k×n) given as float32 panels — the layout of
// PackedB.Panels: element (q, j) at panels[(j/NR)*k*NR + q*NR + j%NR],
// with ⌈n/NR⌉ panels — into p at precision prec (BF16 rounds to nearest
// even), reusing p's storage, and returns p (allocated when nil). A
// caller that computes B panel by panel in float32 (e.g. attention
// probabilities) gets a bfloat16 operand in the selected kernel's layout
// without a row-major copy.
func PackPanelsAs(p *PackedB, prec Precision, n, k int, panels []float32) *PackedB {
	checkPrec("PackPanelsAs", prec)
	if n < 0 || k < 0 {
		panic(fmt.Sprintf("gemm.PackPanelsAs: negative size n=%d k=%d", n, k))
	}
	checkSize("PackPanelsAs", roundUp(n, NR), k)
	if need := roundUp(n, NR) * k; len(panels) < need {
		panic(fmt.Sprintf("gemm.PackPanelsAs: %d values for %d panels of %d×%d", len(panels), (n+NR-1)/NR, k, NR))
	}
	if p == nil {
		p = new(PackedB)
	}
	return p.packFrom(prec, n, k, source{f: panels, panels: true})
}

// bf16Bits is RoundBF16(v) as an operand reads it: a denormal result
// becomes a zero of its sign.
func bf16Bits(v float32) uint32 {
	b := math.Float32bits(v)
	if b&0x7fffffff > 0x7f800000 {
		return b>>16 | 0x40
	}
	r := (b + 0x7fff + (b >> 16 & 1)) >> 16
	if r&0x7f80 == 0 {
		r &= 0x8000
	}
	return r
}

// The rounding loops of bfloat16 packing. Each has one definition, the
// pure-Go function below (bf16Bits per element); on amd64 with AVX-512
// the default build replaces them at start-up by generated assembly
// (kernels_amd64.s: bf16PanelsQuad, bf16PanelsAMX, bf16PanelsQuadA,
// bf16KMajorQuadA, bf16Floats, bf16Row)
// that computes the same bits (TestRoundKernelsExact).
var (
	// panelsQuad packs groups groups of four rows of NR float32 (src
	// [4·groups][NR]) into quad-pair dwords (dst [2·groups][NR]).
	panelsQuad = panelsQuadGo
	// panelsAMX is panelsQuad for the AMX pair layout.
	panelsAMX = panelsAMXGo
	// floatsBF16 sets dst[i] to the bfloat16 operand value of src[i].
	floatsBF16 = floatsBF16Go
	// rowBF16 sets dst[i] to the bfloat16 operand bits of src[i].
	rowBF16 = rowBF16Go
	// panelsQuadA packs blocks×16 depths of an A panel (MR float32 rows
	// of src, lda apart) into quad-pair dwords (dst, 32 per block).
	panelsQuadA = panelsQuadAGo
	// kMajorQuadA packs quads×4 A panels (MR rows each, pstride dwords
	// apart) over groups×4 depths from a k-major float32 source (row r at
	// depth q: src[q·ld + r]) into quad-pair dwords.
	kMajorQuadA = kMajorQuadAGo
	// roundAsm reports whether the assembly versions are in use.
	roundAsm bool
)

func init() { roundInit() }

// forceRoundGo switches the rounding loops to pure Go and returns a
// function that restores the previous choice (tests).
func forceRoundGo() (restore func()) {
	q, a, f, r, qa, km, on := panelsQuad, panelsAMX, floatsBF16, rowBF16, panelsQuadA, kMajorQuadA, roundAsm
	panelsQuad, panelsAMX, floatsBF16, rowBF16, panelsQuadA, kMajorQuadA, roundAsm = panelsQuadGo, panelsAMXGo, floatsBF16Go, rowBF16Go, panelsQuadAGo, kMajorQuadAGo, false
	return func() {
		panelsQuad, panelsAMX, floatsBF16, rowBF16, panelsQuadA, kMajorQuadA, roundAsm = q, a, f, r, qa, km, on
	}
}

func panelsQuadGo(dst []uint32, src []float32, groups int) {
	for g := 0; g < groups; g++ {
		// Dword row 2g holds depths 4g (high) and 4g+2 (low), dword row
		// 2g+1 depths 4g+1 and 4g+3 (see layoutQuad).
		x := src[4*g*NR : 4*(g+1)*NR : 4*(g+1)*NR]
		d0, d1 := (*[NR]uint32)(dst[2*g*NR:]), (*[NR]uint32)(dst[(2*g+1)*NR:])
		for i := range d0 {
			d0[i] = bf16Bits(x[i])<<16 | bf16Bits(x[2*NR+i])
			d1[i] = bf16Bits(x[NR+i])<<16 | bf16Bits(x[3*NR+i])
		}
	}
}

func panelsAMXGo(dst []uint32, src []float32, groups int) {
	for t := 0; t < 2*groups; t++ {
		// Dword row t: depth 2t in the low half, 2t+1 in the high half.
		x := src[2*t*NR : 2*(t+1)*NR : 2*(t+1)*NR]
		d := (*[NR]uint32)(dst[t*NR:])
		for i := range d {
			d[i] = bf16Bits(x[i]) | bf16Bits(x[NR+i])<<16
		}
	}
}

func panelsQuadAGo(dst []uint32, src []float32, lda, blocks int) {
	for g := 0; g < 4*blocks; g++ {
		for s := 0; s < MR; s++ {
			x := src[s*lda+4*g : s*lda+4*g+4 : s*lda+4*g+4]
			setQuad(dst, MR, g, s, [4]uint32{bf16Bits(x[0]), bf16Bits(x[1]), bf16Bits(x[2]), bf16Bits(x[3])})
		}
	}
}

func kMajorQuadAGo(dst []uint32, src []float32, ld, pstride, quads, groups int) {
	for p := 0; p < 4*quads; p++ {
		for g := 0; g < groups; g++ {
			for s := 0; s < MR; s++ {
				var x [4]uint32
				for i := range x {
					x[i] = bf16Bits(src[(4*g+i)*ld+p*MR+s])
				}
				setQuad(dst[p*pstride:], MR, g, s, x)
			}
		}
	}
}

func floatsBF16Go(dst, src []float32) {
	for i, v := range src {
		dst[i] = math.Float32frombits(bf16Bits(v) << 16)
	}
}

func rowBF16Go(dst []uint16, src []float32) {
	for i, v := range src {
		dst[i] = uint16(bf16Bits(v))
	}
}

// fillFromPanels packs B panels [lo, hi) of a bfloat16 operand from
// float32 panels f (source.panels): panel to panel, NR columns at a time,
// whole groups of four depths through the rounding loops and the rest
// (depths up to the padded kp, zero beyond k) here.
func (o *packedOp) fillFromPanels(lo, hi int, f []float32) {
	k, kp := o.k, o.kp
	full := k / 4 // groups of four depths inside k
	var tail [4 * NR]float32
	for jp := lo; jp < hi; jp++ {
		src := f[jp*k*NR : (jp+1)*k*NR]
		switch o.lay {
		case layoutF32:
			dst := o.data[jp*kp*NR : (jp+1)*kp*NR]
			floatsBF16(dst[:k*NR], src)
			clear(dst[k*NR:])
		case layoutQuad, layoutAMX:
			dst := o.u32[jp*kp/2*NR : (jp+1)*kp/2*NR]
			group := panelsQuad
			if o.lay == layoutAMX {
				group = panelsAMX
			}
			if full > 0 {
				group(dst, src, full)
			}
			// The groups from full on, zero-padded (Go: at most a
			// block's worth).
			for g := full; g < kp/4; g++ {
				clear(tail[:])
				if q := 4 * g; q < k {
					copy(tail[:], src[q*NR:])
				}
				if o.lay == layoutAMX {
					panelsAMXGo(dst[2*g*NR:], tail[:], 1)
				} else {
					panelsQuadGo(dst[2*g*NR:], tail[:], 1)
				}
			}
		}
	}
}

// fillQuadBF16 packs B panels [lo, hi) in the quad-pair layout from
// row-major bfloat16 storage (a Linear's weights kept in bfloat16): depth
// group by depth group, each row's four depths read as one 64-bit word,
// the panel's dwords written in order. Denormals are flushed as rowBits
// does (the rare word holding one takes the element-wise path).
func (o *packedOp) fillQuadBF16(lo, hi int, src *source) {
	k, kp := o.k, o.kp
	full := k / 4
	for jp := lo; jp < hi; jp++ {
		r0 := jp * NR
		cols := min(NR, o.rows-r0)
		dst := o.u32[jp*kp/2*NR : (jp+1)*kp/2*NR]
		if cols < NR {
			clear(dst)
		}
		for s := 0; s < cols; s++ {
			row := src.h[(r0+s)*src.ld : (r0+s)*src.ld+k]
			for g := 0; g < full; g++ {
				x := row[4*g : 4*g+4 : 4*g+4]
				v := uint64(x[0]) | uint64(x[1])<<16 | uint64(x[2])<<32 | uint64(x[3])<<48
				const exp, one = 0x7f807f807f807f80, 0x8000800080008000
				if (v&exp+exp)&one != one { // a zero exponent: flush that lane's mantissa
					for i := range 4 {
						if lane := v >> (16 * i) & 0xffff; lane&0x7f80 == 0 {
							v &^= 0x7fff << (16 * i)
						}
					}
				}
				dst[2*g*NR+s] = uint32(v)<<16 | uint32(v>>32)&0xffff
				dst[(2*g+1)*NR+s] = uint32(v)&0xffff0000 | uint32(v>>48)
			}
			if full*4 < kp {
				// The last groups: zero-padded depths.
				var t [BF16Block]uint16
				n := copy(t[:], row[4*full:])
				for q := range n {
					if t[q]&0x7f80 == 0 {
						t[q] &= 0x8000
					}
				}
				for g := full; g < kp/4; g++ {
					x := t[4*(g-full) : 4*(g-full)+4]
					dst[2*g*NR+s] = uint32(x[0])<<16 | uint32(x[2])
					dst[(2*g+1)*NR+s] = uint32(x[1])<<16 | uint32(x[3])
				}
			}
		}
	}
}

// at returns the bits of element (r, q) of R (rows × k) held by the packed
// operand: the float32 value for an F32 operand, the bfloat16 bits
// (widened to float32 bits) for a BF16 one.
func (o *packedOp) at(r, q int) uint32 {
	w := NR
	if o.isA {
		w = MR
	}
	switch {
	case o.lay == layoutF32:
		return math.Float32bits(o.data[(r/w)*o.kp*w+q*w+r%w])
	case o.lay == layoutAMX && o.isA:
		return o.u32[r*(o.kp/2)+q/2] >> (uint(q&1) * 16) & 0xffff << 16
	default:
		d, sh := pairIndex(o.lay, q)
		return o.u32[(r/w)*(o.kp/2)*w+d*w+r%w] >> sh & 0xffff << 16
	}
}

// unpack returns R (rows × k, row-major) as float32 values.
func (o *packedOp) unpack() []float32 {
	out := make([]float32, o.rows*o.k)
	for r := 0; r < o.rows; r++ {
		for q := 0; q < o.k; q++ {
			out[r*o.k+q] = math.Float32frombits(o.at(r, q))
		}
	}
	return out
}

// Unpack returns the operand's values as an M()×K() row-major matrix: A
// itself (a BF16 operand's bfloat16 values widened to float32, denormals
// read as zero).
func (p *PackedA) Unpack() []float32 { return p.o.unpack() }

// Unpack returns the operand's values as an N()×K() row-major matrix whose
// row j is column j of op(B) (B itself after PackNT, Bᵀ after PackNN); a
// BF16 operand's bfloat16 values widened to float32, denormals read as
// zero.
func (p *PackedB) Unpack() []float32 { return p.o.unpack() }

// repack re-packs a bfloat16 operand into the layout of the bfloat16
// kernel selected now, from its own values, and reports whether it had to.
func (o *packedOp) repack() bool {
	if o.prec != BF16 || o.rows == 0 {
		return false
	}
	lay := packLayout(BF16)
	if o.lay == lay {
		return false
	}
	h := make([]uint16, o.rows*o.k)
	for r := 0; r < o.rows; r++ {
		for q := 0; q < o.k; q++ {
			h[r*o.k+q] = uint16(o.at(r, q) >> 16)
		}
	}
	old := o.lay
	o.pack(o.isA, BF16, lay, o.rows, o.k, source{h: h, ld: o.k})
	// Drop the storage of the old layout.
	if old == layoutF32 {
		o.data = nil
	} else if lay == layoutF32 {
		o.u32 = nil
	}
	return true
}

// Repack re-packs a bfloat16 operand for the bfloat16 kernel selected now
// (after Force changed it to one with another layout) from its own values,
// and reports whether it had to; float32 operands never need it. The
// values are unchanged. It must not run while the operand is in use.
func (p *PackedA) Repack() bool { return p.o.repack() }

// Repack is PackedA.Repack for a right-hand operand.
func (p *PackedB) Repack() bool { return p.o.repack() }
