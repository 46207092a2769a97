package riesz

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestTileStatsMatchesRows checks that the tile-batched epilogue of the
// fused passes equals the per-row epilogue bit for bit (interactions written
// and every statistic), on tiles with and without a column tail, with and
// without inverse baselines, for every special-cased exponent, and more
// rows than one tile.
func TestTileStatsMatchesRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, pow := range []int{1, 2, 4} {
		for _, cols := range []int{5, 16, 37, 512} {
			for _, withInv := range []bool{false, true} {
				t.Run(fmt.Sprintf("p%d/c%d/inv%v", pow, cols, withInv), func(t *testing.T) {
					rows, ldt := 2*TileRows+3, cols+7
					tile := make([]float32, rows*ldt)
					for i := range tile {
						tile[i] = float32(rng.NormFloat64() * 4)
					}
					na := make([]float32, rows)
					for i := range na {
						na[i] = float32(10 + rng.Float64()*10)
					}
					nb := make([]float32, cols)
					var inv []float32
					if withInv {
						inv = make([]float32, cols)
					}
					for j := range nb {
						nb[j] = float32(10 + rng.Float64()*10)
						if inv != nil {
							inv[j] = float32(rng.Float64())
						}
					}
					ref := append([]float32(nil), tile...)
					orig := append([]float32(nil), tile...)
					s, sn, m := make([]float64, rows), make([]float64, rows), make([]float32, rows)
					epiTileStats(tile, ldt, rows, cols, na, nb, inv, 1, 1.0/64, pow, s, sn, m)
					for r := 0; r < rows; r++ {
						ws, wsn, wm := epiFromDotsStats(ref[r*ldt:r*ldt+cols], na[r], nb, inv, 1, 1.0/64, pow)
						if s[r] != ws || sn[r] != wsn || m[r] != wm {
							t.Fatalf("row %d: tile (%v, %v, %v), row (%v, %v, %v)", r, s[r], sn[r], m[r], ws, wsn, wm)
						}
					}
					for i := range tile {
						if tile[i] != ref[i] {
							t.Fatalf("value %d: tile %v, row %v", i, tile[i], ref[i])
						}
					}
					// The interaction-only tile epilogue writes the same values.
					for i := range tile {
						tile[i] = orig[i]
						ref[i] = orig[i]
					}
					epiTileFromDots(tile, ldt, rows, cols, na, nb, 1, 1.0/64, pow)
					for r := 0; r < rows; r++ {
						epiFromDots(ref[r*ldt:r*ldt+cols], na[r], nb, 1, 1.0/64, pow)
					}
					for i := range tile {
						if tile[i] != ref[i] {
							t.Fatalf("fromDots value %d: tile %v, row %v", i, tile[i], ref[i])
						}
					}
				})
			}
		}
	}
}

// TestWorkspaceRepacksRows checks that a workspace reused for a second pass
// over the same (mutated in place) left-hand rows does not reuse the row
// block packed by the first pass.
func TestWorkspaceRepacksRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	k := MustNew(4, 2, 1)
	a := randSet(rng, 70, 16, 1)
	b := randSet(rng, 600, 16, 1)
	var ws Workspace
	first := make([]float64, a.N)
	k.Sums(a, b, first, nil, &ws)
	for i := range a.X {
		a.X[i] *= 0.5
	}
	Norms(a.Norms, a.X, a.N, a.D)
	got := make([]float64, a.N)
	k.Sums(a, b, got, nil, &ws)
	want := make([]float64, a.N)
	k.Sums(a, b, want, nil, new(Workspace))
	for i := range want {
		if got[i] != want[i] || got[i] == first[i] {
			t.Fatalf("row %d: reused workspace %v, fresh %v, before the change %v", i, got[i], want[i], first[i])
		}
	}
}

// TestScanRows4MatchesRows checks the four-row prefix-scan epilogue against
// four single-row calls: accumulators, crossing points (including several
// crossings inside one group and already-crossed lanes) and headrooms.
func TestScanRows4MatchesRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 11))
	for _, n := range []int{5, 16, 40, 512} {
		var w [4][]float32
		for k := range w {
			w[k] = make([]float32, n)
			for j := range w[k] {
				w[k][j] = float32(rng.Float64())
			}
		}
		acc := make([]float64, n)
		rem := make([]float64, n)
		cross := make([]int32, n)
		for j := range rem {
			acc[j] = rng.Float64()
			rem[j] = acc[j] + rng.Float64()*2.5 // crosses after 0–5 rows
			cross[j] = Never
			if j%7 == 0 {
				rem[j] = math.Inf(1) // already crossed
			}
		}
		acc2, rem2, cross2 := slices.Clone(acc), slices.Clone(rem), slices.Clone(cross)
		epiScanRows4(w[0], w[1], w[2], w[3], acc, rem, cross, 8)
		for k := range w {
			epiScanRow(w[k], acc2, rem2, cross2, int32(8+k+1))
		}
		got := 0
		for j := range acc {
			if acc[j] != acc2[j] || rem[j] != rem2[j] || cross[j] != cross2[j] {
				t.Fatalf("n=%d column %d: (%v, %v, %d), want (%v, %v, %d)", n, j, acc[j], rem[j], cross[j], acc2[j], rem2[j], cross2[j])
			}
			if cross[j] != Never {
				got++
			}
		}
		if got == 0 {
			t.Fatalf("n=%d: no crossings exercised", n)
		}
	}
}
