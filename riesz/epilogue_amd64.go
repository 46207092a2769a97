//go:build goexperiment.simd && amd64

package riesz

import (
	"math"
	"math/bits"
	"simd/archsimd"
	"sync"
	"unsafe"
)

// archInit selects the AVX-512 epilogues when the CPU supports them.
func archInit() {
	if archsimd.X86.AVX512() {
		epiFromDots = fromDotsAVX512
		epiRowStats = rowStatsAVX512
		epiRowSumCols = rowSumColsAVX512
		epiScanRow = scanRowAVX512
		epiFromDotsStats = fromDotsStatsAVX512
		epiStatsSum = statsSumAVX512
		epiCompress = compressAVX512
		epiTileStats = fromDotsStatsTileAVX512
		epiTileFromDots = fromDotsTileAVX512
		epiScanRows4 = scanRows4AVX512
		simdEpilogues = true
	}
}

// fromDotsAVX512 is fromDotsGeneric on 16 lanes (the distance uses a fused
// multiply-add: na + nb − 2·dot rounded once).
func fromDotsAVX512(row []float32, na float32, nb []float32, eps, s float32, pow int) {
	n := len(row) &^ 15
	nb = nb[:len(row)]
	vna := archsimd.BroadcastFloat32x16(na)
	m2 := archsimd.BroadcastFloat32x16(-2)
	ve := archsimd.BroadcastFloat32x16(eps)
	vs := archsimd.BroadcastFloat32x16(s)
	two := archsimd.BroadcastFloat32x16(2)
	mone := archsimd.BroadcastFloat32x16(-1)
	zero := archsimd.BroadcastFloat32x16(0)
	xmax := archsimd.BroadcastFloat32x16(MaxDenominator)
	for j := 0; j < n; j += 16 {
		p := (*[16]float32)(row[j : j+16])
		dot := archsimd.LoadFloat32x16(p)
		b := archsimd.LoadFloat32x16((*[16]float32)(nb[j : j+16]))
		d2 := dot.MulAdd(m2, vna.Add(b)).Max(zero)
		t := d2.MulAdd(vs, ve)
		var x archsimd.Float32x16
		switch pow {
		case 1:
			x = t
		case 2:
			x = t.Mul(t)
		default:
			t2 := t.Mul(t)
			x = t2.Mul(t2)
		}
		// 1/x: 14-bit reciprocal estimate and one Newton step (x ≥ eps > 0),
		// within a few float32 ulps of the division.
		x = x.Min(xmax)
		r := x.Reciprocal()
		r = r.Mul(x.Mul(r).MulAdd(mone, two))
		r.Store(p)
	}
	if n < len(row) {
		// The tail runs through the same vector arithmetic on a padded
		// copy, so an element's interaction does not depend on its column
		// position (cached and recomputed passes agree bit for bit).
		var t, tb [16]float32
		k := copy(t[:], row[n:])
		copy(tb[:], nb[n:])
		fromDotsAVX512(t[:], na, tb[:], eps, s, pow)
		copy(row[n:], t[:k])
	}
	archsimd.ClearAVXUpperBits() // scalar SSE code follows
}

func hsum(v archsimd.Float64x8) float64 {
	var a [8]float64
	v.Store(&a)
	return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))
}

func hmax(v archsimd.Float32x16) float32 {
	var a [16]float32
	v.Store(&a)
	m := a[0]
	for _, x := range a[1:] {
		if x > m {
			m = x
		}
	}
	return m
}

// hsum32 returns the float64 sum of the lanes of two float32 accumulators.
func hsum32(a, b archsimd.Float32x16) float64 {
	return hsum(a.GetLo().ConvertToFloat64().Add(a.GetHi().ConvertToFloat64()).
		Add(b.GetLo().ConvertToFloat64()).Add(b.GetHi().ConvertToFloat64()))
}

// rowStatsAVX512 is rowStatsGeneric with float32 lane accumulators (two per
// sum, so each lane adds at most len/32 terms: for the passes' 512-column
// segments 16 terms, a relative error of a few 1e-7), combined in float64.
func rowStatsAVX512(row, inv []float32) (s, sn float64, m float32) {
	n := len(row) &^ 31
	inv = inv[:len(row)]
	var s0, s1, q0, q1, mx archsimd.Float32x16
	for j := 0; j < n; j += 32 {
		w0 := archsimd.LoadFloat32x16((*[16]float32)(row[j : j+16]))
		w1 := archsimd.LoadFloat32x16((*[16]float32)(row[j+16 : j+32]))
		p0 := w0.Mul(archsimd.LoadFloat32x16((*[16]float32)(inv[j : j+16])))
		p1 := w1.Mul(archsimd.LoadFloat32x16((*[16]float32)(inv[j+16 : j+32])))
		s0 = s0.Add(w0)
		s1 = s1.Add(w1)
		q0 = q0.Add(p0)
		q1 = q1.Add(p1)
		mx = mx.Max(p0).Max(p1)
	}
	s = hsum32(s0, s1)
	sn = hsum32(q0, q1)
	m = hmax(mx)
	archsimd.ClearAVXUpperBits() // scalar SSE code follows
	if n < len(row) {
		ts, tsn, tm := rowStatsGeneric(row[n:], inv[n:])
		s += ts
		sn += tsn
		m = max(m, tm)
	}
	return s, sn, m
}

// rowSumColsAVX512 is rowSumColsGeneric with float32 lanes for the row sum
// alone (as rowStatsAVX512) and float64 lanes when columns are added.
func rowSumColsAVX512(row []float32, col []float64) float64 {
	if col == nil {
		n := len(row) &^ 31
		var a0, a1 archsimd.Float32x16
		for j := 0; j < n; j += 32 {
			a0 = a0.Add(archsimd.LoadFloat32x16((*[16]float32)(row[j : j+16])))
			a1 = a1.Add(archsimd.LoadFloat32x16((*[16]float32)(row[j+16 : j+32])))
		}
		s := hsum32(a0, a1)
		archsimd.ClearAVXUpperBits() // scalar SSE code follows
		if n < len(row) {
			s += rowSumColsGeneric(row[n:], nil)
		}
		return s
	}
	n := len(row) &^ 15
	var s0, s1 archsimd.Float64x8
	{
		col = col[:len(row)]
		for j := 0; j < n; j += 16 {
			w := archsimd.LoadFloat32x16((*[16]float32)(row[j : j+16]))
			lo := w.GetLo().ConvertToFloat64()
			hi := w.GetHi().ConvertToFloat64()
			s0 = s0.Add(lo)
			s1 = s1.Add(hi)
			c0 := (*[8]float64)(col[j : j+8])
			c1 := (*[8]float64)(col[j+8 : j+16])
			archsimd.LoadFloat64x8(c0).Add(lo).Store(c0)
			archsimd.LoadFloat64x8(c1).Add(hi).Store(c1)
		}
	}
	var l8 [8]float64
	s0.Add(s1).Store(&l8)
	archsimd.ClearAVXUpperBits() // scalar SSE code follows
	s := lanes8(&l8)
	if n < len(row) {
		var c []float64
		if col != nil {
			c = col[n:]
		}
		s += rowSumColsGeneric(row[n:], c)
	}
	return s
}

// scanRowAVX512 is scanRowGeneric on 8 float64 lanes; the rare crossings
// are recorded in scalar code.
func scanRowAVX512(row []float32, acc, rem []float64, cross []int32, r int32) {
	n := len(row) &^ 15
	acc = acc[:len(row)]
	rem = rem[:len(row)]
	cross = cross[:len(row)]
	inf := math.Inf(1)
	for j := 0; j < n; j += 16 {
		w := archsimd.LoadFloat32x16((*[16]float32)(row[j : j+16]))
		a0p := (*[8]float64)(acc[j : j+8])
		a1p := (*[8]float64)(acc[j+8 : j+16])
		a0 := archsimd.LoadFloat64x8(a0p).Add(w.GetLo().ConvertToFloat64())
		a1 := archsimd.LoadFloat64x8(a1p).Add(w.GetHi().ConvertToFloat64())
		a0.Store(a0p)
		a1.Store(a1p)
		m0 := a0.GreaterEqual(archsimd.LoadFloat64x8((*[8]float64)(rem[j : j+8]))).ToBits()
		m1 := a1.GreaterEqual(archsimd.LoadFloat64x8((*[8]float64)(rem[j+8 : j+16]))).ToBits()
		if m0|m1 != 0 {
			bits := uint16(m0) | uint16(m1)<<8
			for l := 0; l < 16; l++ {
				if bits&(1<<l) != 0 {
					cross[j+l] = r
					rem[j+l] = inf
				}
			}
		}
	}
	archsimd.ClearAVXUpperBits() // scalar SSE code follows
	if n < len(row) {
		scanRowGeneric(row[n:], acc[n:], rem[n:], cross[n:], r)
	}
}

// fromDotsStatsAVX512 fuses fromDotsAVX512 and rowStatsAVX512 (or the row
// sum when inv is nil) in one sweep over the row; each float32 lane adds
// len/16 terms (32 for a 512-column segment) before the float64 combine.
// (Unrolling by two spills vector registers — the compiler allocates 15 —
// and is several times slower.)
func fromDotsStatsAVX512(row []float32, na float32, nb, inv []float32, eps, s float32, pow int) (sum, sn float64, m float32) {
	n := len(row) &^ 15
	nb = nb[:len(row)]
	if inv != nil {
		inv = inv[:len(row)]
	}
	vna := archsimd.BroadcastFloat32x16(na)
	m2 := archsimd.BroadcastFloat32x16(-2)
	ve := archsimd.BroadcastFloat32x16(eps)
	vs := archsimd.BroadcastFloat32x16(s)
	two := archsimd.BroadcastFloat32x16(2)
	zero := archsimd.BroadcastFloat32x16(0)
	xmax := archsimd.BroadcastFloat32x16(MaxDenominator)
	var as, aq, mx archsimd.Float32x16
	for j := 0; j < n; j += 16 {
		p := (*[16]float32)(row[j : j+16])
		b := archsimd.LoadFloat32x16((*[16]float32)(nb[j : j+16]))
		t := archsimd.LoadFloat32x16(p).MulAdd(m2, vna.Add(b)).Max(zero).MulAdd(vs, ve)
		x := t
		if pow >= 2 {
			x = t.Mul(t)
			if pow == 4 {
				x = x.Mul(x)
			}
		}
		// 1/x: 14-bit estimate and one Newton step, r·(2 − x·r).
		x = x.Min(xmax)
		r := x.Reciprocal()
		r = r.Mul(two.Sub(x.Mul(r)))
		r.Store(p)
		as = as.Add(r)
		if inv != nil {
			q := r.Mul(archsimd.LoadFloat32x16((*[16]float32)(inv[j : j+16])))
			aq = aq.Add(q)
			mx = mx.Max(q)
		}
	}
	sum = hsum32(as, zero)
	if inv != nil {
		sn = hsum32(aq, zero)
		m = hmax(mx)
	}
	if n < len(row) {
		// The tail's interactions come from the same vector arithmetic on
		// a padded copy (position-independent values, see fromDotsAVX512);
		// its reductions are scalar as in the reference.
		var t, tb [16]float32
		k := copy(t[:], row[n:])
		copy(tb[:], nb[n:])
		fromDotsStatsAVX512(t[:], na, tb[:], nil, eps, s, pow)
		copy(row[n:], t[:k])
		archsimd.ClearAVXUpperBits() // scalar SSE code follows
		var ts, tsn float64
		var tm float32
		if inv != nil {
			ts, tsn, tm = rowStatsGeneric(row[n:], inv[n:])
		} else {
			ts = rowSumColsGeneric(row[n:], nil)
		}
		sum += ts
		sn += tsn
		m = max(m, tm)
	}
	archsimd.ClearAVXUpperBits() // scalar SSE code follows
	return sum, sn, m
}

// statsSumAVX512 is the row sum of fromDotsStatsAVX512 (inv nil) over an
// already computed row: one float32 accumulator over 16-lane steps, the same
// horizontal reduction and the same scalar tail, so the two agree bit for
// bit.
func statsSumAVX512(row []float32) float64 {
	n := len(row) &^ 15
	var zero, as archsimd.Float32x16
	for j := 0; j < n; j += 16 {
		as = as.Add(archsimd.LoadFloat32x16((*[16]float32)(row[j : j+16])))
	}
	// hsum32(as, zero), finished after VZEROUPPER.
	var l8 [8]float64
	as.GetLo().ConvertToFloat64().Add(as.GetHi().ConvertToFloat64()).
		Add(zero.GetLo().ConvertToFloat64()).Add(zero.GetHi().ConvertToFloat64()).Store(&l8)
	archsimd.ClearAVXUpperBits() // scalar SSE code follows
	sum := lanes8(&l8)
	if n < len(row) {
		sum += rowSumColsGeneric(row[n:], nil)
	}
	return sum
}

// compressAVX512 is compressGeneric with VCOMPRESSPS: each 16-column chunk
// with selected columns is loaded once and its selected lanes are packed to
// the front and stored at the next output position.
func compressAVX512(row []float32, bm []uint16, cols []int32, dst []float32) {
	n := len(row) &^ 15
	pos := 0
	for c := 0; c < n>>4; c++ {
		m := bm[c]
		if m == 0 {
			continue
		}
		v := archsimd.LoadFloat32x16((*[16]float32)(row[c*16 : c*16+16]))
		v.Compress(archsimd.Mask32x16FromBits(m)).Store((*[16]float32)(dst[pos : pos+16]))
		pos += bits.OnesCount16(m)
	}
	archsimd.ClearAVXUpperBits() // scalar SSE code follows
	for j := n; j < len(row); j++ {
		if bm[j>>4]>>(j&15)&1 != 0 {
			dst[pos] = row[j]
			pos++
		}
	}
	_ = cols
}

// tileScratch holds the broadcast operands and the per-row partial
// reductions of fromDotsStatsTileAVX512, so that no scalar (legacy SSE)
// instruction runs while the vector registers' upper halves are dirty:
// mixing the two costs hundreds of cycles per row on this CPU, more than
// the row's arithmetic.
type tileScratch struct {
	na     [TileRows][16]float32
	c      [5][16]float32
	hs, hq [TileRows][8]float64
	mx     [TileRows][16]float32
}

// fromDotsStatsTileAVX512 is fromDotsStatsAVX512 for every row of a tile
// (rows×cols at stride ldt, row r against norm na[r]), with the per-row
// results in os, osn, om. The arithmetic and the order of every reduction
// are those of fromDotsStatsAVX512, so results agree bit for bit; only the
// scalar work is batched after the vector work.
func fromDotsStatsTileAVX512(t []float32, ldt, rows, cols int, na, nb, inv []float32, eps, s float32, pow int, os, osn []float64, om []float32) {
	for rows > TileRows {
		fromDotsStatsTileAVX512(t, ldt, TileRows, cols, na, nb, inv, eps, s, pow, os, osn, om)
		t, na, os, osn, om = t[TileRows*ldt:], na[TileRows:], os[TileRows:], osn[TileRows:], om[TileRows:]
		rows -= TileRows
	}
	sc := tileScratchPool.get()
	defer tileScratchPool.put(sc)
	n := cols &^ 15
	nb = nb[:cols]
	if inv != nil {
		inv = inv[:cols]
	}
	na = na[:rows]
	os, osn, om = os[:rows], osn[:rows], om[:rows]
	for r, v := range na {
		for l := range sc.na[r] {
			sc.na[r][l] = v
		}
	}
	for l := 0; l < 16; l++ {
		sc.c[0][l], sc.c[1][l], sc.c[2][l], sc.c[3][l], sc.c[4][l] = -2, eps, s, 2, MaxDenominator
	}
	if n > 0 {
		m2 := archsimd.LoadFloat32x16(&sc.c[0])
		ve := archsimd.LoadFloat32x16(&sc.c[1])
		vs := archsimd.LoadFloat32x16(&sc.c[2])
		two := archsimd.LoadFloat32x16(&sc.c[3])
		xmax := archsimd.LoadFloat32x16(&sc.c[4])
		var zero archsimd.Float32x16
		for r := 0; r < rows; r++ {
			row := t[r*ldt : r*ldt+n]
			vna := archsimd.LoadFloat32x16(&sc.na[r])
			var as, aq, mx archsimd.Float32x16
			for j := 0; j < n; j += 16 {
				p := (*[16]float32)(row[j : j+16])
				b := archsimd.LoadFloat32x16((*[16]float32)(nb[j : j+16]))
				tt := archsimd.LoadFloat32x16(p).MulAdd(m2, vna.Add(b)).Max(zero).MulAdd(vs, ve)
				x := tt
				if pow >= 2 {
					x = tt.Mul(tt)
					if pow == 4 {
						x = x.Mul(x)
					}
				}
				x = x.Min(xmax)
				rc := x.Reciprocal()
				rc = rc.Mul(two.Sub(x.Mul(rc)))
				rc.Store(p)
				as = as.Add(rc)
				if inv != nil {
					q := rc.Mul(archsimd.LoadFloat32x16((*[16]float32)(inv[j : j+16])))
					aq = aq.Add(q)
					mx = mx.Max(q)
				}
			}
			as.GetLo().ConvertToFloat64().Add(as.GetHi().ConvertToFloat64()).
				Add(zero.GetLo().ConvertToFloat64()).Add(zero.GetHi().ConvertToFloat64()).Store(&sc.hs[r])
			if inv != nil {
				aq.GetLo().ConvertToFloat64().Add(aq.GetHi().ConvertToFloat64()).
					Add(zero.GetLo().ConvertToFloat64()).Add(zero.GetHi().ConvertToFloat64()).Store(&sc.hq[r])
				mx.Store(&sc.mx[r])
			}
		}
		archsimd.ClearAVXUpperBits() // scalar SSE code follows
	}
	for r := 0; r < rows; r++ {
		os[r], osn[r], om[r] = 0, 0, 0
		if n == 0 {
			continue
		}
		os[r] = lanes8(&sc.hs[r])
		if inv != nil {
			osn[r] = lanes8(&sc.hq[r])
			m := sc.mx[r][0]
			for _, x := range sc.mx[r][1:] {
				if x > m {
					m = x
				}
			}
			om[r] = m
		}
	}
	if n < cols {
		for r := 0; r < rows; r++ {
			var iv []float32
			if inv != nil {
				iv = inv[n:]
			}
			// The same padded-tail arithmetic as fromDotsStatsAVX512.
			ts, tsn, tm := fromDotsStatsAVX512(t[r*ldt+n:r*ldt+cols], na[r], nb[n:], iv, eps, s, pow)
			os[r] += ts
			osn[r] += tsn
			om[r] = max(om[r], tm)
		}
	}
}

// lanes8 is hsum's reduction of eight stored float64 lanes.
func lanes8(a *[8]float64) float64 {
	return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))
}

type scratchPool struct{ p sync.Pool }

var tileScratchPool scratchPool

func (sp *scratchPool) get() *tileScratch {
	if v, ok := sp.p.Get().(*tileScratch); ok {
		return v
	}
	return new(tileScratch)
}

func (sp *scratchPool) put(v *tileScratch) { sp.p.Put(v) }

// fromDotsTileAVX512 is fromDotsAVX512 for every row of a tile (rows×cols
// at stride ldt, row r against norm na[r]), with the broadcast operands
// loaded from memory so that no legacy-SSE instruction runs while the
// upper halves are dirty; bit-identical to the per-row function.
func fromDotsTileAVX512(t []float32, ldt, rows, cols int, na, nb []float32, eps, s float32, pow int) {
	for rows > TileRows {
		fromDotsTileAVX512(t, ldt, TileRows, cols, na, nb, eps, s, pow)
		t, na = t[TileRows*ldt:], na[TileRows:]
		rows -= TileRows
	}
	sc := tileScratchPool.get()
	defer tileScratchPool.put(sc)
	n := cols &^ 15
	nb = nb[:cols]
	na = na[:rows]
	for r, v := range na {
		for l := range sc.na[r] {
			sc.na[r][l] = v
		}
	}
	for l := 0; l < 16; l++ {
		sc.c[0][l], sc.c[1][l], sc.c[2][l], sc.c[3][l], sc.c[4][l] = -2, eps, s, 2, MaxDenominator
	}
	if n > 0 {
		m2 := archsimd.LoadFloat32x16(&sc.c[0])
		ve := archsimd.LoadFloat32x16(&sc.c[1])
		vs := archsimd.LoadFloat32x16(&sc.c[2])
		two := archsimd.LoadFloat32x16(&sc.c[3])
		xmax := archsimd.LoadFloat32x16(&sc.c[4])
		var zero archsimd.Float32x16
		for r := 0; r < rows; r++ {
			row := t[r*ldt : r*ldt+n]
			vna := archsimd.LoadFloat32x16(&sc.na[r])
			for j := 0; j < n; j += 16 {
				p := (*[16]float32)(row[j : j+16])
				dot := archsimd.LoadFloat32x16(p)
				b := archsimd.LoadFloat32x16((*[16]float32)(nb[j : j+16]))
				d2 := dot.MulAdd(m2, vna.Add(b)).Max(zero)
				tt := d2.MulAdd(vs, ve)
				var x archsimd.Float32x16
				switch pow {
				case 1:
					x = tt
				case 2:
					x = tt.Mul(tt)
				default:
					t2 := tt.Mul(tt)
					x = t2.Mul(t2)
				}
				x = x.Min(xmax)
				rc := x.Reciprocal()
				// r·(2 − x·r), as fromDotsAVX512's r·((x·r)·(−1) + 2).
				rc = rc.Mul(two.Sub(x.Mul(rc)))
				rc.Store(p)
			}
		}
		archsimd.ClearAVXUpperBits() // scalar SSE code follows
	}
	if n < cols {
		for r := 0; r < rows; r++ {
			fromDotsAVX512(t[r*ldt+n:r*ldt+cols], na[r], nb[n:], eps, s, pow)
		}
	}
}

// scanRows4AVX512 is scanRowAVX512 applied to the rows w0..w3 in order
// (prefix lengths r+1 … r+4): the float64 accumulators stay in registers
// across the four rows, so each lane adds the same values in the same order
// and records the same crossing point as four separate calls.
func scanRows4AVX512(w0, w1, w2, w3 []float32, acc, rem []float64, cross []int32, r int32) {
	n := len(w0) &^ 15
	acc = acc[:len(w0)]
	rem = rem[:len(w0)]
	cross = cross[:len(w0)]
	w1, w2, w3 = w1[:len(w0)], w2[:len(w0)], w3[:len(w0)]
	ws := [4][]float32{w0, w1, w2, w3}
	for j := 0; j < n; j += 16 {
		a0p := (*[8]float64)(acc[j : j+8])
		a1p := (*[8]float64)(acc[j+8 : j+16])
		r0p := (*[8]float64)(rem[j : j+8])
		r1p := (*[8]float64)(rem[j+8 : j+16])
		a0 := archsimd.LoadFloat64x8(a0p)
		a1 := archsimd.LoadFloat64x8(a1p)
		rm0 := archsimd.LoadFloat64x8(r0p)
		rm1 := archsimd.LoadFloat64x8(r1p)
		for k := 0; k < 4; k++ {
			w := archsimd.LoadFloat32x16((*[16]float32)(ws[k][j : j+16]))
			a0 = a0.Add(w.GetLo().ConvertToFloat64())
			a1 = a1.Add(w.GetHi().ConvertToFloat64())
			m0 := a0.GreaterEqual(rm0).ToBits()
			m1 := a1.GreaterEqual(rm1).ToBits()
			if m0|m1 != 0 {
				// Rare (each state crosses once): record the crossings and
				// set the crossed lanes' headroom to +Inf in memory, then
				// reload it. Integer code only until the vector work ends.
				bits := uint16(m0) | uint16(m1)<<8
				for l := 0; l < 16; l++ {
					if bits&(1<<l) != 0 {
						cross[j+l] = r + int32(k) + 1
						*(*uint64)(unsafe.Pointer(&rem[j+l])) = 0x7ff0000000000000 // +Inf
					}
				}
				rm0 = archsimd.LoadFloat64x8(r0p)
				rm1 = archsimd.LoadFloat64x8(r1p)
			}
		}
		a0.Store(a0p)
		a1.Store(a1p)
	}
	archsimd.ClearAVXUpperBits() // scalar SSE code follows
	for k, w := range ws {
		if n < len(w) {
			scanRowGeneric(w[n:], acc[n:], rem[n:], cross[n:], r+int32(k)+1)
		}
	}
}
