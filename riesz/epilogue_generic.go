package riesz

import "math"

// MaxDenominator caps t^p before the reciprocal so that interactions of
// astronomically distant points are ~1e−36 instead of 0·∞ = NaN in the
// reciprocal-and-Newton SIMD path; both paths apply it.
const MaxDenominator = 1e36

// fromDotsGeneric is the reference of epiFromDots:
//
//	d2 = max(0, na + nb[j] − 2·row[j]); t = eps + d2·s; row[j] = 1/min(t^pow, MaxDenominator)
func fromDotsGeneric(row []float32, na float32, nb []float32, eps, s float32, pow int) {
	nb = nb[:len(row)]
	for j, v := range row {
		d2 := na + nb[j] - 2*v
		if d2 < 0 {
			d2 = 0
		}
		t := eps + d2*s
		x := t
		switch pow {
		case 2:
			x = t * t
		case 4:
			x = t * t
			x *= x
		}
		row[j] = 1 / min(x, MaxDenominator)
	}
}

// rowStatsGeneric is the reference of epiRowStats.
func rowStatsGeneric(row, inv []float32) (s, sn float64, m float32) {
	inv = inv[:len(row)]
	for j, v := range row {
		s += float64(v)
		q := v * inv[j]
		sn += float64(q)
		if q > m {
			m = q
		}
	}
	return s, sn, m
}

// rowSumColsGeneric is the reference of epiRowSumCols.
func rowSumColsGeneric(row []float32, col []float64) float64 {
	var s float64
	if col == nil {
		for _, v := range row {
			s += float64(v)
		}
		return s
	}
	col = col[:len(row)]
	for j, v := range row {
		f := float64(v)
		s += f
		col[j] += f
	}
	return s
}

// scanRowGeneric is the reference of epiScanRow.
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

// fromDotsStatsGeneric is the reference of epiFromDotsStats.
func fromDotsStatsGeneric(row []float32, na float32, nb, inv []float32, eps, s float32, pow int) (sum, sn float64, m float32) {
	fromDotsGeneric(row, na, nb, eps, s, pow)
	if inv == nil {
		return rowSumColsGeneric(row, nil), 0, 0
	}
	return rowStatsGeneric(row, inv)
}

// statsSumGeneric is the reference of epiStatsSum (the row sum of
// fromDotsStatsGeneric with inv nil).
func statsSumGeneric(row []float32) float64 { return rowSumColsGeneric(row, nil) }

// compressGeneric is the reference of epiCompress.
func compressGeneric(row []float32, _ []uint16, cols []int32, dst []float32) {
	for k, c := range cols {
		dst[k] = row[c]
	}
}

// tileStatsGeneric is the reference of epiTileStats.
func tileStatsGeneric(t []float32, ldt, rows, cols int, na, nb, inv []float32, eps, s float32, pow int, os, osn []float64, om []float32) {
	for r := 0; r < rows; r++ {
		os[r], osn[r], om[r] = fromDotsStatsGeneric(t[r*ldt:r*ldt+cols], na[r], nb, inv, eps, s, pow)
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
