package riesz

import "math"

// The pure-Go epilogues: the definition of every epilogue (see
// epilogue.go), always built, and the oracle the assembly is tested against
// bit for bit. Products that feed an addition are converted explicitly
// (float32(x*y)) so that no compiler fuses them into a multiply-add: the
// definition's only fused operation is the distance's c − 2·dot.

// MaxDenominator caps t^p before the division, so that no interaction is
// below 1e−36 (see the package comment).
const MaxDenominator = 1e36

// interaction is the Soft-Riesz interaction of one dot product (p = pow for
// pow 2 and 4, p = 1 otherwise):
//
//	c  = na + nb                       (float32, rounded)
//	d2 = c − 2·dot                     (one rounding, as a fused multiply-add)
//	d2 = 0 if d2 < 0                   (NaN stays NaN, −0 stays −0)
//	t  = eps + d2·s                    (two roundings, no fused multiply-add)
//	x  = t, t·t or (t·t)·(t·t)         (each product rounded)
//	x  = MaxDenominator if x > MaxDenominator (NaN stays NaN)
//	w  = 1/x                           (IEEE division)
func interaction(dot, na, nb, eps, s float32, pow int) float32 {
	// c − 2·dot with one rounding (a fused multiply-add): both operands
	// are float32, so the float64 difference is exact or within 1/32 of a
	// float32 ulp of c or of 2·dot, and its rounding to float32 is the
	// fused result.
	d2 := float32(float64(na+nb) - 2*float64(dot))
	if d2 < 0 {
		d2 = 0
	}
	t := eps + float32(d2*s)
	x := t
	switch pow {
	case 2:
		x = float32(t * t)
	case 4:
		x = float32(t * t)
		x = float32(x * x)
	}
	if x > MaxDenominator {
		x = MaxDenominator
	}
	return 1 / x
}

// sumLanes is the row-sum definition of every epilogue. The row is cut
// into blocks of 64 elements from its start (the last may be shorter).
// Within a block, element j is added in float32 to partial j mod 16
// (partials start at +0, elements in order of j: each partial is the
// float32 sum of at most 4 elements). At the end of each block every
// partial, converted to float64, is added to lane j mod 16 of 16 float64
// lanes (starting at +0, blocks in order). The lanes are then combined by
// the fixed tree of lanes16, which is what a vector of 8 float64 lanes
// computes by halving (16 → 8 → 4 → 2 → 1), whatever the vector width
// used. The float32 partials keep the vector code cheap (one addition per
// 16 elements, one conversion per 64); their error, at most 3 float32
// roundings of 4 terms, does not grow with the length of the row.
type sumLanes [16]float64

// block is the number of elements of a block of sumLanes.
const block = 64

// addBlock adds the float32 partials of one block (at most 64 elements,
// the start of the block at a multiple of 64) to the lanes.
func (l *sumLanes) addBlock(b []float32) {
	var p [16]float32
	for j, v := range b {
		p[j&15] += v
	}
	for i, v := range p {
		l[i] += float64(v)
	}
}

// lanes16 combines the lanes: a[i] = l[i] + l[i+8] (i < 8), b[i] = a[i] +
// a[i+4] (i < 4), c[i] = b[i] + b[i+2] (i < 2), sum = c[0] + c[1].
func (l *sumLanes) lanes16() float64 {
	var a [8]float64
	for i := range a {
		a[i] = l[i] + l[i+8]
	}
	b0, b1, b2, b3 := a[0]+a[4], a[1]+a[5], a[2]+a[6], a[3]+a[7]
	return (b0 + b2) + (b1 + b3)
}

// sumGeneric is the row sum Σ row by the sumLanes definition.
func sumGeneric(row []float32) float64 {
	var l sumLanes
	for b := 0; b < len(row); b += block {
		l.addBlock(row[b:min(b+block, len(row))])
	}
	return l.lanes16()
}

// fromDotsGeneric is the reference of epiFromDots: row[j] =
// interaction(row[j], na, nb[j], eps, s, pow).
func fromDotsGeneric(row []float32, na float32, nb []float32, eps, s float32, pow int) {
	nb = nb[:len(row)]
	for j, v := range row {
		row[j] = interaction(v, na, nb[j], eps, s, pow)
	}
}

// rowStatsGeneric is the reference of epiRowStats: s = Σ row and sn = Σ q
// by the sumLanes definition, with q = row[j]·inv[j] rounded to float32,
// and m = the largest q, starting from +0 (m = q when q > m: NaN never
// wins).
func rowStatsGeneric(row, inv []float32) (s, sn float64, m float32) {
	inv = inv[:len(row)]
	var ls, lq sumLanes
	var q [block]float32
	for b := 0; b < len(row); b += block {
		e := min(b+block, len(row))
		for j, v := range row[b:e] {
			q[j] = v * inv[b+j]
			if q[j] > m {
				m = q[j]
			}
		}
		ls.addBlock(row[b:e])
		lq.addBlock(q[:e-b])
	}
	return ls.lanes16(), lq.lanes16(), m
}

// rowSumColsGeneric is the reference of epiRowSumCols: returns Σ row by the
// lane definition and adds float64(row[j]) to col[j] (col may be nil).
func rowSumColsGeneric(row []float32, col []float64) float64 {
	if col != nil {
		col = col[:len(row)]
		for j, v := range row {
			col[j] += float64(v)
		}
	}
	return sumGeneric(row)
}

// scanRowGeneric is the reference of epiScanRow: acc[j] += float64(row[j]);
// where then acc[j] ≥ rem[j] (an ordered comparison: false for NaN),
// cross[j] = r and rem[j] = +Inf.
func scanRowGeneric(row []float32, acc, rem []float64, cross []int32, r int32) {
	acc = acc[:len(row)]
	rem = rem[:len(row)]
	cross = cross[:len(row)]
	for j, v := range row {
		s := acc[j] + float64(v)
		acc[j] = s
		if s >= rem[j] {
			cross[j] = r
			rem[j] = math.Inf(1)
		}
	}
}

// compressGeneric is the reference of epiCompress.
func compressGeneric(row []float32, _ []uint16, cols []int32, dst []float32) {
	for k, c := range cols {
		dst[k] = row[c]
	}
}

// tileStatsGeneric is the reference of epiTileStats: for every row r,
// fromDotsGeneric, then (os[r], osn[r], om[r]) = rowStatsGeneric(row, inv),
// or (Σ row, 0, 0) when inv is nil.
func tileStatsGeneric(t []float32, ldt, rows, cols int, na, nb, inv []float32, eps, s float32, pow int, os, osn []float64, om []float32) {
	for r := 0; r < rows; r++ {
		row := t[r*ldt : r*ldt+cols]
		fromDotsGeneric(row, na[r], nb, eps, s, pow)
		if inv == nil {
			os[r], osn[r], om[r] = sumGeneric(row), 0, 0
		} else {
			os[r], osn[r], om[r] = rowStatsGeneric(row, inv)
		}
	}
}

// tileFromDotsGeneric is the reference of epiTileFromDots.
func tileFromDotsGeneric(t []float32, ldt, rows, cols int, na, nb []float32, eps, s float32, pow int) {
	for r := 0; r < rows; r++ {
		fromDotsGeneric(t[r*ldt:r*ldt+cols], na[r], nb, eps, s, pow)
	}
}

// scanRows4Generic is the reference of epiScanRows4.
func scanRows4Generic(w0, w1, w2, w3 []float32, acc, rem []float64, cross []int32, r int32) {
	for k, w := range [4][]float32{w0, w1, w2, w3} {
		scanRowGeneric(w, acc, rem, cross, r+int32(k)+1)
	}
}
