package riesz

// Epilogues: the per-element work of the fused passes after the dot
// products (distance → interaction, row/column reductions, prefix scan).
// Each has a pure-Go reference (epilogue_generic.go, always built) and, with
// GOEXPERIMENT=simd on AVX-512, an archsimd version chosen once at start-up
// (epilogue_amd64.go). Reductions accumulate in float64 in both; the SIMD
// versions sum in 8 or 16 float64 lanes, so they agree with the reference to
// float64 rounding, not bit for bit. Within one process every pass uses the
// same epilogues, so cached and recomputed passes agree bit for bit; the
// SIMD interaction of an element does not depend on its column position
// (row tails run the vector arithmetic on a padded copy), so sums gathered
// from a cached matrix equal a recomputed pass over the gathered rows.
//
// Performance rule for the SIMD versions: no scalar float code (which the Go
// compiler emits as legacy SSE) may run while the vector registers' upper
// halves are dirty; on this Xeon that costs far more than a row's
// arithmetic. Broadcast operands are loaded from memory, reductions are
// stored and finished after archsimd.ClearAVXUpperBits, and the statistics
// and interaction epilogues work a whole tile per call (epiTileStats,
// epiTileFromDots).
var (
	// epiFromDots: row[j] = w(max(0, na + nb[j] − 2·row[j])) for pow 1, 2, 4.
	epiFromDots = fromDotsGeneric
	// epiRowStats: Σ row, Σ row·inv (float32 products), max row·inv.
	epiRowStats = rowStatsGeneric
	// epiRowSumCols: returns Σ row and adds row into col (col may be nil).
	epiRowSumCols = rowSumColsGeneric
	// epiScanRow: acc += row; first crossing of acc ≥ rem recorded as r and
	// rem set to +Inf (rem is the pass's private copy).
	epiScanRow = scanRowGeneric
	// epiFromDotsStats: epiFromDots then epiRowStats (inv nil: sum only),
	// fused in one sweep.
	epiFromDotsStats = fromDotsStatsGeneric
	// epiStatsSum: Σ row of an already computed row, bit for bit the sum
	// that epiFromDotsStats (inv nil) returns for the row it writes.
	epiStatsSum = statsSumGeneric
	// epiCompress: dst[k] = row[cols[k]] for the strictly increasing cols,
	// whose bits are also given per 16 columns (bits[c/16] bit c%16); dst
	// has 16 values of slack.
	epiCompress = compressGeneric
	// epiTileStats: epiFromDotsStats for every row of a tile (row r of
	// t[r*ldt:], norm na[r]); per-row results in s, sn, m.
	epiTileStats = tileStatsGeneric
	// epiTileFromDots: epiFromDots for every row of a tile.
	epiTileFromDots = tileFromDotsGeneric
	// epiScanRows4: epiScanRow on four rows in order (prefix lengths
	// r+1 … r+4), bit for bit.
	epiScanRows4  = scanRows4Generic
	simdEpilogues bool
)

func init() { archInit() }

// SIMD reports whether the AVX-512 epilogues are in use.
func SIMD() bool { return simdEpilogues }

// forceGeneric switches to the reference epilogues and returns a function
// that restores the previous choice (for tests).
func forceGeneric() (restore func()) {
	a, b, c, d, e, f, g, h, i, j, s := epiFromDots, epiRowStats, epiRowSumCols, epiScanRow, epiFromDotsStats, epiStatsSum, epiCompress, epiTileStats, epiTileFromDots, epiScanRows4, simdEpilogues
	epiFromDots, epiRowStats, epiRowSumCols, epiScanRow, epiFromDotsStats, epiStatsSum, epiCompress, epiTileStats, epiTileFromDots, epiScanRows4, simdEpilogues =
		fromDotsGeneric, rowStatsGeneric, rowSumColsGeneric, scanRowGeneric, fromDotsStatsGeneric, statsSumGeneric, compressGeneric, tileStatsGeneric, tileFromDotsGeneric, scanRows4Generic, false
	return func() {
		epiFromDots, epiRowStats, epiRowSumCols, epiScanRow, epiFromDotsStats, epiStatsSum, epiCompress, epiTileStats, epiTileFromDots, epiScanRows4, simdEpilogues = a, b, c, d, e, f, g, h, i, j, s
	}
}
