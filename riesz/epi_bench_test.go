package riesz

import (
	"math/rand/v2"
	"testing"

	"github.com/densitykv/densitykv/internal/cputime"
)

// benchTile is one 128×512 tile of dot products of unit-scale vectors of
// dimension 128 (squared norms ≈ 128), as the scoring pass sees them.
func benchTile() (t, na, nb, inv []float32) {
	rng := rand.New(rand.NewPCG(1, 1))
	t = make([]float32, TileRows*TileCols)
	for i := range t {
		t[i] = float32(rng.NormFloat64() * 11)
	}
	na = make([]float32, TileRows)
	for i := range na {
		na[i] = float32(128 + rng.NormFloat64()*10)
	}
	nb = make([]float32, TileCols)
	inv = make([]float32, TileCols)
	for i := range nb {
		nb[i] = float32(128 + rng.NormFloat64()*10)
		inv[i] = float32(0.5 + rng.Float64())
	}
	return t, na, nb, inv
}

// benchLoop runs body once per iteration and reports elements per second
// of wall-clock and of process CPU time (perOp elements per iteration).
func benchLoop(b *testing.B, perOp int, body func()) {
	start := cputime.Process()
	for b.Loop() {
		body()
	}
	n := float64(perOp) * float64(b.N)
	b.ReportMetric(n/b.Elapsed().Seconds()/1e9, "Gelem/s")
	if cpu := cputime.Process() - start; cpu > 0 {
		b.ReportMetric(n/cpu.Seconds()/1e9, "cpuGelem/s")
	}
}

// BenchmarkEpilogue times the scoring pass's tile epilogue (distance →
// interaction, Σ w, Σ w·inv, max w·inv) on one 128×512 tile; the dot
// products are restored before each call (a copy, included in the time).
func BenchmarkEpilogue(b *testing.B) {
	k := MustNew(8, 2, 1)
	src, na, nb, inv := benchTile()
	t := make([]float32, len(src))
	s, sn := make([]float64, TileRows), make([]float64, TileRows)
	m := make([]float32, TileRows)
	benchLoop(b, TileRows*TileCols, func() {
		copy(t, src)
		epiTileStats(t, TileCols, TileRows, TileCols, na, nb, inv, k.eps32, k.invS2, k.pow, s, sn, m)
	})
}

// BenchmarkEpilogueSums is BenchmarkEpilogue without inverse baselines
// (the row-sum passes).
func BenchmarkEpilogueSums(b *testing.B) {
	k := MustNew(8, 2, 1)
	src, na, nb, _ := benchTile()
	t := make([]float32, len(src))
	s, sn := make([]float64, TileRows), make([]float64, TileRows)
	m := make([]float32, TileRows)
	benchLoop(b, TileRows*TileCols, func() {
		copy(t, src)
		epiTileStats(t, TileCols, TileRows, TileCols, na, nb, nil, k.eps32, k.invS2, k.pow, s, sn, m)
	})
}

// BenchmarkEpiFromDots times the interaction-only tile epilogue.
func BenchmarkEpiFromDots(b *testing.B) {
	k := MustNew(8, 2, 1)
	src, na, nb, _ := benchTile()
	t := make([]float32, len(src))
	benchLoop(b, TileRows*TileCols, func() {
		copy(t, src)
		epiTileFromDots(t, TileCols, TileRows, TileCols, na, nb, k.eps32, k.invS2, k.pow)
	})
}

// BenchmarkEpiRowSumCols times row and column sums of a 128×512 tile of
// interactions (the Sums pass with column sums).
func BenchmarkEpiRowSumCols(b *testing.B) {
	t, _, _, _ := benchTile()
	col := make([]float64, TileCols)
	var s float64
	benchLoop(b, TileRows*TileCols, func() {
		for r := 0; r < TileRows; r++ {
			s += epiRowSumCols(t[r*TileCols:(r+1)*TileCols], col)
		}
	})
	_ = s
}

// BenchmarkEpiScanRows4 times the cached prefix scan over 128 rows of 512
// interactions, four rows per call.
func BenchmarkEpiScanRows4(b *testing.B) {
	t, _, _, _ := benchTile()
	for i := range t {
		t[i] = 1e-3 * (1 + t[i]*t[i])
	}
	acc := make([]float64, TileCols)
	rem := make([]float64, TileCols)
	cross := make([]int32, TileCols)
	benchLoop(b, TileRows*TileCols, func() {
		for j := range acc {
			acc[j], rem[j], cross[j] = 0, 1+float64(j%7), Never
		}
		for r := 0; r < TileRows; r += 4 {
			w := func(k int) []float32 { return t[(r+k)*TileCols : (r+k+1)*TileCols] }
			epiScanRows4(w(0), w(1), w(2), w(3), acc, rem, cross, int32(r))
		}
	})
}
