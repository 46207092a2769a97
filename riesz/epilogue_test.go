package riesz

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestEpiloguesAgainstGeneric cross-checks the selected epilogues (SIMD in
// a GOEXPERIMENT=simd build on AVX-512) with the pure-Go references on
// lengths around the vector width, with guard values that must survive.
func TestEpiloguesAgainstGeneric(t *testing.T) {
	if !SIMD() {
		t.Log("SIMD epilogues not in use; checking the generic path against itself")
	}
	rng := rand.New(rand.NewPCG(9, 9))
	const guard = 7.5
	for _, n := range []int{0, 1, 7, 15, 16, 17, 31, 32, 33, 128, 511, 512, 513} {
		for _, pow := range []int{1, 2, 4} {
			dots := make([]float32, n+2)
			nb := make([]float32, n)
			for j := 0; j < n; j++ {
				nb[j] = float32(rng.Float64() * 50)
				dots[j+1] = float32(rng.NormFloat64() * 10)
			}
			dots[0], dots[n+1] = guard, guard
			want := slices.Clone(dots)
			fromDotsGeneric(want[1:n+1], 20, nb, 1, 1.0/64, pow)
			got := slices.Clone(dots)
			epiFromDots(got[1:n+1], 20, nb, 1, 1.0/64, pow)
			if got[0] != guard || got[n+1] != guard {
				t.Fatalf("n=%d: guard overwritten", n)
			}
			for j := range got {
				if math.Abs(float64(got[j]-want[j])) > 1e-6*math.Abs(float64(want[j])) {
					t.Fatalf("n=%d pow=%d fromDots[%d] = %v, want %v", n, pow, j, got[j], want[j])
				}
			}
		}
		row := make([]float32, n)
		inv := make([]float32, n)
		for j := range row {
			row[j] = float32(rng.Float64())
			inv[j] = float32(0.5 + rng.Float64())
		}
		s1, q1, m1 := rowStatsGeneric(row, inv)
		s2, q2, m2 := epiRowStats(row, inv)
		if math.Abs(s1-s2) > 2e-6*s1 || math.Abs(q1-q2) > 2e-6*q1 || m1 != m2 {
			t.Fatalf("n=%d rowStats (%v %v %v) vs (%v %v %v)", n, s2, q2, m2, s1, q1, m1)
		}
		// Fused distance → interaction → statistics.
		for _, withInv := range []bool{false, true} {
			var iv []float32
			if withInv {
				iv = inv
			}
			dots := make([]float32, n)
			nb := make([]float32, n)
			for j := range dots {
				dots[j] = float32(rng.NormFloat64() * 10)
				nb[j] = float32(rng.Float64() * 50)
			}
			d1, d2 := slices.Clone(dots), slices.Clone(dots)
			a1, b1, x1 := fromDotsStatsGeneric(d1, 20, nb, iv, 1, 1.0/64, 2)
			a2, b2, x2 := epiFromDotsStats(d2, 20, nb, iv, 1, 1.0/64, 2)
			if math.Abs(a1-a2) > 4e-6*a1 || math.Abs(b1-b2) > 4e-6*b1 || math.Abs(float64(x1-x2)) > 1e-6*float64(x1) {
				t.Fatalf("n=%d fused stats (%v %v %v) vs (%v %v %v)", n, a2, b2, x2, a1, b1, x1)
			}
			for j := range d1 {
				if math.Abs(float64(d1[j]-d2[j])) > 1e-6*float64(d1[j]) {
					t.Fatalf("n=%d fused interactions differ at %d", n, j)
				}
			}
		}
		c1 := make([]float64, n+1)
		c2 := make([]float64, n+1)
		c1[n], c2[n] = guard, guard
		r1 := rowSumColsGeneric(row, c1[:n])
		r2 := epiRowSumCols(row, c2[:n])
		if math.Abs(r1-r2) > 1e-12*(1+r1) || !slices.Equal(c1, c2) {
			t.Fatalf("n=%d rowSumCols differs", n)
		}
		if r3 := epiRowSumCols(row, nil); math.Abs(r3-r1) > 2e-6*r1 {
			t.Fatalf("n=%d rowSum without cols differs", n)
		}
		// Scan: exact agreement (per-column float64 additions).
		acc1 := make([]float64, n)
		acc2 := make([]float64, n)
		rem1 := make([]float64, n)
		for j := range rem1 {
			rem1[j] = rng.Float64() * 3
		}
		rem2 := slices.Clone(rem1)
		cr1 := make([]int32, n)
		cr2 := make([]int32, n)
		for j := range cr1 {
			cr1[j], cr2[j] = Never, Never
		}
		for r := int32(1); r <= 6; r++ {
			scanRowGeneric(row, acc1, rem1, cr1, r)
			epiScanRow(row, acc2, rem2, cr2, r)
		}
		if !slices.Equal(acc1, acc2) || !slices.Equal(cr1, cr2) || !slices.Equal(rem1, rem2) {
			t.Fatalf("n=%d scanRow differs", n)
		}
	}
}

// TestPassesGeneric reruns the pass tests on the reference epilogues.
func TestPassesGeneric(t *testing.T) {
	defer forceGeneric()()
	TestPassesAgainstNaive(t)
	TestPrefixScan(t)
}
