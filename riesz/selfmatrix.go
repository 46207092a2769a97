package riesz

import (
	"fmt"

	"github.com/densitykv/densitykv/gemm"
)

// SelfSumsMatrix is SelfSums over a computed interaction matrix: w holds
// W[i][j] = w(a_i, a_j) for the n members of a set (row stride n, as
// RowStatsCached of the set against itself writes it; only the part above
// the diagonal is read), and out[i] receives Φ(i) = Σ_{j≠i} W[i][j] with
// SelfSums's additions in SelfSums's order (the same tiles and 512-column
// segments, each pair added to both members), so the results equal
// SelfSums bit for bit given equal interactions. It lets a device that
// computed the interactions reduce them as the CPU does.
func SelfSumsMatrix(w []float32, n int, out []float64) {
	if n < 0 || len(w) < n*n || len(out) < n {
		panic(fmt.Sprintf("riesz: SelfSumsMatrix: %d interactions and %d outputs for %d members", len(w), len(out), n))
	}
	if n < 2 {
		return
	}
	for i0 := 0; i0 < n; i0 += TileRows {
		rows := min(TileRows, n-i0)
		for j0 := (i0 / gemm.NR) * gemm.NR; j0 < n; j0 += TileCols {
			cols := min(TileCols, n-j0)
			if j0+cols <= i0+1 {
				continue
			}
			for r := 0; r < rows; r++ {
				i := i0 + r
				start := max(0, i+1-j0)
				if start >= cols {
					continue
				}
				out[i] += epiRowSumCols(w[i*n+j0+start:i*n+j0+cols], out[j0+start:j0+cols])
			}
		}
	}
}
