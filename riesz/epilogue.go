package riesz

// Epilogues: the per-element work of the fused passes after the dot
// products (distance → interaction, row/column reductions, prefix scan,
// compress). Each has one numerical definition, written in pure Go in
// epilogue_generic.go (always built, the oracle of the tests), and on amd64
// an AVX-512 version in generated Go assembly (epilogue_amd64.s, from
// gen_epilogue.go; build tags amd64 && !noasm) that computes the same
// values bit for bit. The choice is made once at start-up, by CPU features
// alone (AVX-512 Foundation); a plain go build gets the assembly, and,
// given the same dot products from package gemm, results are identical on
// every CPU, in every build and for every thread count.
//
// The definitions:
//
//   - Interaction (interaction in epilogue_generic.go): d2 = (na + nb) −
//     2·dot (one rounding) clamped at 0, t = eps + d2·s (two roundings),
//     x = t, t·t or (t·t)², capped at MaxDenominator, w = 1/x by IEEE
//     division. Every operation is a float32 operation rounded to nearest
//     even; no approximate reciprocals (whose bits differ between CPU
//     vendors). NaN propagates; −0 is kept.
//   - Row sums (Σ w, Σ w·inv; sumLanes): the row is cut into blocks of
//     64 elements; within a block, element j is added in float32 to
//     partial j mod 16 (each partial sums at most 4 elements, in order);
//     at the end of a block each partial, converted to float64, is added
//     to lane j mod 16 of 16 float64 lanes; the lanes are combined by a
//     fixed tree (l[i]+l[i+8], then +4, +2, +1). The error is at most 3
//     float32 roundings of the absolute sum, whatever the row length. The
//     blocks and lanes are numbered from the start of the row segment
//     passed to the epilogue: the passes reduce 512-column segments of
//     each row and add the segments' sums in order in float64, so sums
//     never depend on the thread count or on the kernel.
//   - Row maximum of w·inv: the float32 product rounded, the largest
//     value starting from +0; NaN never wins.
//   - Column sums and the prefix scan: one float64 addition per element,
//     in row order.
//
// Performance rule for the assembly: no scalar float code (which the Go
// compiler emits as legacy SSE) may run while the vector registers' upper
// halves are dirty, so every function ends with VZEROUPPER, reductions are
// finished in vector registers, and the interaction epilogues work a whole
// tile per call (epiTileStats, epiTileFromDots).
var (
	// epiTileFromDots: row r of t (t[r*ldt:], cols values) becomes
	// interaction(row[j], na[r], nb[j], eps, s, pow).
	epiTileFromDots = tileFromDotsGeneric
	// epiTileStats: epiTileFromDots, and per row os[r] = Σ w, osn[r] = Σ
	// w·inv, om[r] = max w·inv (inv nil: os only, osn = om = 0).
	epiTileStats = tileStatsGeneric
	// epiRowStats: Σ row, Σ row·inv (float32 products), max row·inv.
	epiRowStats = rowStatsGeneric
	// epiRowSumCols: returns Σ row and adds row into col (col may be nil).
	epiRowSumCols = rowSumColsGeneric
	// epiScanRow: acc += row; first crossing of acc ≥ rem recorded as r and
	// rem set to +Inf (rem is the pass's private copy; only an infinite
	// acc, impossible for finite interactions, would cross again).
	epiScanRow = scanRowGeneric
	// epiScanRows4: epiScanRow on four rows in order (crossing points
	// r+1 … r+4), bit for bit.
	epiScanRows4 = scanRows4Generic
	// epiCompress: dst[k] = row[cols[k]] for the strictly increasing cols,
	// whose bits are also given per 16 columns (bits[c/16] bit c%16); dst
	// has 16 values of slack, whose contents are unspecified afterwards.
	epiCompress = compressGeneric

	asmEpilogues bool
)

//go:generate go run gen_epilogue.go

func init() { archInit() }

// SIMD reports whether the assembly (AVX-512) epilogues are in use. They
// compute the same values as the pure-Go ones, bit for bit.
func SIMD() bool { return asmEpilogues }

// epiFromDots is epiTileFromDots on one row.
func epiFromDots(row []float32, na float32, nb []float32, eps, s float32, pow int) {
	epiTileFromDots(row, len(row), 1, len(row), []float32{na}, nb, eps, s, pow)
}

// epiFromDotsStats is epiTileStats on one row.
func epiFromDotsStats(row []float32, na float32, nb, inv []float32, eps, s float32, pow int) (sum, sn float64, m float32) {
	var os, osn [1]float64
	var om [1]float32
	epiTileStats(row, len(row), 1, len(row), []float32{na}, nb, inv, eps, s, pow, os[:], osn[:], om[:])
	return os[0], osn[0], om[0]
}

// forceGeneric switches to the pure-Go epilogues and returns a function
// that restores the previous choice (for tests).
func forceGeneric() (restore func()) {
	a, b, c, d, e, f, g, on := epiTileFromDots, epiTileStats, epiRowStats, epiRowSumCols, epiScanRow, epiScanRows4, epiCompress, asmEpilogues
	epiTileFromDots, epiTileStats, epiRowStats, epiRowSumCols, epiScanRow, epiScanRows4, epiCompress, asmEpilogues =
		tileFromDotsGeneric, tileStatsGeneric, rowStatsGeneric, rowSumColsGeneric, scanRowGeneric, scanRows4Generic, compressGeneric, false
	return func() {
		epiTileFromDots, epiTileStats, epiRowStats, epiRowSumCols, epiScanRow, epiScanRows4, epiCompress, asmEpilogues = a, b, c, d, e, f, g, on
	}
}
