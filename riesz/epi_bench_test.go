package riesz

import "testing"

// BenchmarkEpilogue times the per-tile epilogue of the scoring pass
// (distance → interaction, row statistics) on one 128×512 tile.
func BenchmarkEpilogue(b *testing.B) {
	k := MustNew(8, 2, 1)
	tile := make([]float32, TileRows*TileCols)
	nb := make([]float32, TileCols)
	inv := make([]float32, TileCols)
	for i := range nb {
		nb[i] = 100
		inv[i] = 1
	}
	var acc float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for r := 0; r < TileRows; r++ {
			row := tile[r*TileCols : (r+1)*TileCols]
			s, sn, _ := epiFromDotsStats(row, 100, nb, inv, k.eps32, k.invS2, k.pow)
			acc += s + sn
		}
	}
	_ = acc
	b.ReportMetric(float64(TileRows*TileCols*b.N)/b.Elapsed().Seconds()/1e9, "Gelem/s")
}

func BenchmarkEpiFromDots(b *testing.B) {
	row := make([]float32, TileCols)
	nb := make([]float32, TileCols)
	for i := 0; i < b.N; i++ {
		for r := 0; r < TileRows; r++ {
			epiFromDots(row, 100, nb, 1, 1.0/64, 2)
		}
	}
	b.ReportMetric(float64(TileRows*TileCols*b.N)/b.Elapsed().Seconds()/1e9, "Gelem/s")
}

func BenchmarkEpiRowStats(b *testing.B) {
	row := make([]float32, TileCols)
	inv := make([]float32, TileCols)
	var s float64
	for i := 0; i < b.N; i++ {
		for r := 0; r < TileRows; r++ {
			a, c, _ := epiRowStats(row, inv)
			s += a + c
		}
	}
	_ = s
	b.ReportMetric(float64(TileRows*TileCols*b.N)/b.Elapsed().Seconds()/1e9, "Gelem/s")
}
