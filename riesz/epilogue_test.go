package riesz

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// epiLengths straddle the vector widths (8 float64 / 16 float32 lanes) and
// the two-chunk unrolling of the assembly.
var epiLengths = []int{0, 1, 2, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 47, 48, 49, 63, 64, 65, 127, 128, 129, 511, 512, 513}

// TestAsmSelected requires the assembly epilogues wherever the build and
// the CPU support them, so that a broken selection cannot silently turn the
// cross-checks below into comparisons of the pure-Go code with itself.
func TestAsmSelected(t *testing.T) {
	if SIMD() != asmCPU() {
		t.Fatalf("SIMD() = %v, but the build and CPU support the assembly: %v", SIMD(), asmCPU())
	}
	if !SIMD() {
		t.Log("no assembly epilogues in this build or on this CPU: the cross-checks compare the pure-Go code with itself")
	}
}

// same32 reports whether a and b have identical bits or are both NaN.
func same32(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b
}

func same64(a, b float64) bool {
	return math.Float64bits(a) == math.Float64bits(b) || a != a && b != b
}

func diff32(a, b []float32) int {
	for i := range a {
		if !same32(a[i], b[i]) {
			return i
		}
	}
	return -1
}

func diff64(a, b []float64) int {
	for i := range a {
		if !same64(a[i], b[i]) {
			return i
		}
	}
	return -1
}

// specials are the values mixed into the "special" input class.
var specials = []float32{
	0, float32(math.Copysign(0, -1)), 1, -1, 0.5, 2, 1e-3,
	float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)),
	math.MaxFloat32, -math.MaxFloat32, 1e38, -1e38, 1e30, -1e30, 1e19, 1e18,
	math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32, 1e-40, -1e-40, 1.17549435e-38,
	1e-20, 1e-30, 1e36, 1e37,
}

// inputClass fills v by class: 0 typical pass values, 1 a mix of typical
// and special values, 2 special values only, 3 huge and tiny magnitudes.
func fill(rng *rand.Rand, v []float32, class int, scale float64, positive bool) {
	for i := range v {
		var x float32
		switch class {
		case 0:
			x = float32(rng.NormFloat64() * scale)
		case 1:
			if rng.IntN(4) == 0 {
				x = specials[rng.IntN(len(specials))]
			} else {
				x = float32(rng.NormFloat64() * scale)
			}
		case 2:
			x = specials[rng.IntN(len(specials))]
		default:
			x = float32(math.Ldexp(rng.Float64()+0.5, rng.IntN(280)-150))
			if rng.IntN(2) == 0 {
				x = -x
			}
		}
		if positive && class == 0 {
			x = float32(math.Abs(float64(x)))
		}
		v[i] = x
	}
}

const guard = float32(-7.25e11)

// band is the width of the guard bands around float64 outputs, which hold
// negZero: adding +0 to one (a zeroed lane written past the end) gives +0.
const band = 16

var negZero = math.Copysign(0, -1)

// guarded returns a slice of n values with guard values on both sides
// (base[off-1] and base[off+n]), offset by off to vary the alignment.
func guarded(n, off int) (base, s []float32) {
	base = make([]float32, n+off+1+4)
	for i := range base {
		base[i] = guard
	}
	return base, base[off : off+n]
}

func checkGuards(t *testing.T, what string, base []float32, off, n int) {
	t.Helper()
	for i, v := range base {
		if (i < off || i >= off+n) && v != guard {
			t.Fatalf("%s: guard at %d overwritten with %v", what, i-off, v)
		}
	}
}

// TestEpiloguesBitIdentical cross-checks every selected epilogue with its
// pure-Go definition, bit for bit (NaN matches NaN), on lengths around the
// vector widths, typical and special inputs (NaN, ±Inf, ±0, huge,
// denormal), odd alignments and guard values that must survive.
func TestEpiloguesBitIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for _, n := range epiLengths {
		for class := 0; class < 4; class++ {
			off := 1 + (n+class)%5
			name := fmt.Sprintf("n%d/class%d", n, class)
			for _, pow := range []int{1, 2, 4, 3} {
				checkFromDots(t, rng, name+fmt.Sprintf("/p%d", pow), n, class, off, pow)
			}
			checkRowReductions(t, rng, name, n, class, off)
			checkScanEpi(t, rng, name, n, class, off)
			checkCompress(t, rng, name, n, class, off)
		}
	}
}

func kernelArgs(rng *rand.Rand, class int) (na, eps, s float32) {
	na, eps, s = 20, 1, 1.0/64
	if class >= 1 && rng.IntN(3) == 0 {
		na = specials[rng.IntN(len(specials))]
	}
	if class >= 2 {
		eps = specials[rng.IntN(len(specials))]
		s = specials[rng.IntN(len(specials))]
	}
	return na, eps, s
}

func checkFromDots(t *testing.T, rng *rand.Rand, name string, n, class, off, pow int) {
	t.Helper()
	na, eps, s := kernelArgs(rng, class)
	base, dots := guarded(n, off)
	fill(rng, dots, class, 10, false)
	nb := make([]float32, n)
	fill(rng, nb, class, 30, true)
	inv := make([]float32, n)
	fill(rng, inv, class, 1, true)
	wantBase := slices.Clone(base)
	want := wantBase[off : off+n]
	fromDotsGeneric(want, na, nb, eps, s, pow)
	gotBase := slices.Clone(base)
	epiFromDots(gotBase[off:off+n], na, nb, eps, s, pow)
	if i := diff32(gotBase, wantBase); i >= 0 {
		t.Fatalf("%s: fromDots[%d] = %v, want %v (dot %v, nb %v, na %v, eps %v, s %v)", name, i-off, gotBase[i], wantBase[i], base[i], nb[i-off], na, eps, s)
	}
	checkGuards(t, name+" fromDots", gotBase, off, n)
	// Fused with the statistics, with and without inverse baselines.
	for _, iv := range [][]float32{nil, inv} {
		gotBase := slices.Clone(base)
		ws, wsn, wm := epiFromDotsStats(gotBase[off:off+n], na, nb, iv, eps, s, pow)
		var os, osn [1]float64
		var om [1]float32
		refBase := slices.Clone(base)
		tileStatsGeneric(refBase[off:off+n], n, 1, n, []float32{na}, nb, iv, eps, s, pow, os[:], osn[:], om[:])
		if i := diff32(gotBase, refBase); i >= 0 {
			t.Fatalf("%s inv=%v: fused interaction [%d] = %v, want %v", name, iv != nil, i-off, gotBase[i], refBase[i])
		}
		checkGuards(t, name+" fromDotsStats", gotBase, off, n)
		if !same64(ws, os[0]) || !same64(wsn, osn[0]) || !same32(wm, om[0]) {
			t.Fatalf("%s inv=%v: stats (%v, %v, %v), want (%v, %v, %v)", name, iv != nil, ws, wsn, wm, os[0], osn[0], om[0])
		}
	}
}

func checkRowReductions(t *testing.T, rng *rand.Rand, name string, n, class, off int) {
	t.Helper()
	base, row := guarded(n, off)
	fill(rng, row, class, 1, true)
	inv := make([]float32, n)
	fill(rng, inv, class, 1, true)
	orig := slices.Clone(base)
	s1, q1, m1 := rowStatsGeneric(row, inv)
	s2, q2, m2 := epiRowStats(row, inv)
	if !same64(s1, s2) || !same64(q1, q2) || !same32(m1, m2) {
		t.Fatalf("%s: rowStats (%v, %v, %v), want (%v, %v, %v)", name, s2, q2, m2, s1, q1, m1)
	}
	if i := diff32(base, orig); i >= 0 {
		t.Fatalf("%s: rowStats wrote its input at %d", name, i-off)
	}
	if r1, r2 := sumGeneric(row), epiRowSumCols(row, nil); !same64(r1, r2) {
		t.Fatalf("%s: row sum %v, want %v", name, r2, r1)
	}
	// Guard bands of −0 on both sides: adding a zeroed lane to one turns
	// it into +0, so a write past either end shows.
	cg := make([]float64, n+2*band)
	for i := range cg {
		cg[i] = negZero
	}
	for j := band; j < band+n; j++ {
		if rng.IntN(5) > 0 {
			cg[j] = rng.NormFloat64()
		}
	}
	ca := slices.Clone(cg)
	r1 := rowSumColsGeneric(row, cg[band:band+n])
	r2 := epiRowSumCols(row, ca[band:band+n])
	if !same64(r1, r2) {
		t.Fatalf("%s: rowSumCols %v, want %v", name, r2, r1)
	}
	if i := diff64(ca, cg); i >= 0 {
		t.Fatalf("%s: rowSumCols col[%d] = %v, want %v", name, i-band, ca[i], cg[i])
	}
}

func checkScanEpi(t *testing.T, rng *rand.Rand, name string, n, class, off int) {
	t.Helper()
	var rows [6][]float32
	for k := range rows {
		rows[k] = make([]float32, n)
		fill(rng, rows[k], class, 1, true)
	}
	acc := make([]float64, n+2*band)
	rem := make([]float64, n+2*band)
	cross := make([]int32, n+2*band)
	for j := range acc {
		acc[j], rem[j], cross[j] = negZero, negZero, -3
	}
	for j := band; j < band+n; j++ {
		acc[j] = rng.Float64()
		rem[j] = acc[j] + rng.Float64()*4
		cross[j] = Never
		switch rng.IntN(9) {
		case 0:
			rem[j] = math.Inf(1)
		case 1:
			rem[j] = math.NaN()
		case 2:
			acc[j] = math.Inf(1)
		}
	}
	a1, r1, c1 := slices.Clone(acc), slices.Clone(rem), slices.Clone(cross)
	a2, r2, c2 := slices.Clone(acc), slices.Clone(rem), slices.Clone(cross)
	a3, r3, c3 := slices.Clone(acc), slices.Clone(rem), slices.Clone(cross)
	in := func(s []float64) []float64 { return s[band : band+n] }
	ic := func(s []int32) []int32 { return s[band : band+n] }
	for k, w := range rows {
		scanRowGeneric(w, in(a1), in(r1), ic(c1), int32(10+k))
		epiScanRow(w, in(a2), in(r2), ic(c2), int32(10+k))
	}
	// Rows 0..3 by four, 4 and 5 singly: crossing points 10 … 15.
	epiScanRows4(rows[0], rows[1], rows[2], rows[3], in(a3), in(r3), ic(c3), 9)
	epiScanRow(rows[4], in(a3), in(r3), ic(c3), 14)
	epiScanRow(rows[5], in(a3), in(r3), ic(c3), 15)
	for _, got := range []struct {
		what string
		a, r []float64
		c    []int32
	}{{"scanRow", a2, r2, c2}, {"scanRows4", a3, r3, c3}} {
		if i := diff64(got.a, a1); i >= 0 {
			t.Fatalf("%s: %s acc[%d] = %v, want %v", name, got.what, i-band, got.a[i], a1[i])
		}
		if i := diff64(got.r, r1); i >= 0 {
			t.Fatalf("%s: %s rem[%d] = %v, want %v", name, got.what, i-band, got.r[i], r1[i])
		}
		if !slices.Equal(got.c, c1) {
			t.Fatalf("%s: %s crossings %v, want %v", name, got.what, got.c, c1)
		}
	}
}

func checkCompress(t *testing.T, rng *rand.Rand, name string, n, class, off int) {
	t.Helper()
	_, row := guarded(n, off)
	fill(rng, row, class, 1, false)
	density := rng.Float64()
	var cols []int32
	bits := make([]uint16, (n+15)/16)
	for j := 0; j < n; j++ {
		if rng.Float64() < density {
			cols = append(cols, int32(j))
			bits[j>>4] |= 1 << (j & 15)
		}
	}
	want := make([]float32, len(cols)+16)
	compressGeneric(row, bits, cols, want)
	base, got := guarded(len(cols)+16, off)
	epiCompress(row, bits, cols, got)
	if i := diff32(got[:len(cols)], want[:len(cols)]); i >= 0 {
		t.Fatalf("%s: compress[%d] = %v, want %v", name, i, got[i], want[i])
	}
	checkGuards(t, name+" compress", base, off, len(cols)+16)
}

// TestTileEpiloguesBitIdentical checks the tile epilogues on tiles with a
// row stride larger than the row (guard values in the gaps must survive)
// and several rows, against the pure-Go definition.
func TestTileEpiloguesBitIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, cols := range []int{1, 5, 16, 17, 37, 64, 511, 512} {
		for _, rows := range []int{1, 3, 130} {
			for class := 0; class < 4; class++ {
				for _, pow := range []int{1, 2, 4} {
					ldt := cols + 1 + rows%7
					tile := make([]float32, rows*ldt)
					for i := range tile {
						tile[i] = guard
					}
					for r := 0; r < rows; r++ {
						fill(rng, tile[r*ldt:r*ldt+cols], class, 4, false)
					}
					na := make([]float32, rows)
					fill(rng, na, class, 20, true)
					nb := make([]float32, cols)
					fill(rng, nb, class, 20, true)
					inv := make([]float32, cols)
					fill(rng, inv, class, 1, true)
					_, eps, s := kernelArgs(rng, class)
					name := fmt.Sprintf("%dx%d/class%d/p%d", rows, cols, class, pow)
					for _, iv := range [][]float32{nil, inv} {
						want, got := slices.Clone(tile), slices.Clone(tile)
						ws, wsn, wm := make([]float64, rows+1), make([]float64, rows+1), make([]float32, rows+1)
						gs, gsn, gm := make([]float64, rows+1), make([]float64, rows+1), make([]float32, rows+1)
						for _, o := range [][]float64{ws, wsn, gs, gsn} {
							o[rows] = -1
						}
						wm[rows], gm[rows] = -1, -1
						tileStatsGeneric(want, ldt, rows, cols, na, nb, iv, eps, s, pow, ws, wsn, wm)
						epiTileStats(got, ldt, rows, cols, na, nb, iv, eps, s, pow, gs, gsn, gm)
						if i := diff32(got, want); i >= 0 {
							t.Fatalf("%s inv=%v: tile value (%d, %d) = %v, want %v", name, iv != nil, i/ldt, i%ldt, got[i], want[i])
						}
						if i := diff64(gs, ws); i >= 0 {
							t.Fatalf("%s inv=%v: row %d sum %v, want %v", name, iv != nil, i, gs[i], ws[i])
						}
						if i := diff64(gsn, wsn); i >= 0 {
							t.Fatalf("%s inv=%v: row %d normalised sum %v, want %v", name, iv != nil, i, gsn[i], wsn[i])
						}
						if i := diff32(gm, wm); i >= 0 {
							t.Fatalf("%s inv=%v: row %d max %v, want %v", name, iv != nil, i, gm[i], wm[i])
						}
					}
					want, got := slices.Clone(tile), slices.Clone(tile)
					tileFromDotsGeneric(want, ldt, rows, cols, na, nb, eps, s, pow)
					epiTileFromDots(got, ldt, rows, cols, na, nb, eps, s, pow)
					if i := diff32(got, want); i >= 0 {
						t.Fatalf("%s: tileFromDots value (%d, %d) = %v, want %v", name, i/ldt, i%ldt, got[i], want[i])
					}
				}
			}
		}
	}
}

// TestInteractionDefinition pins the definition on hand-computed cases.
func TestInteractionDefinition(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	maxDen := float32(MaxDenominator)
	capW := 1 / maxDen // the smallest interaction
	for _, c := range []struct {
		dot, na, nb, eps, s float32
		pow                 int
		want                float32
	}{
		{0, 1, 1, 1, 0.5, 2, 1.0 / 4}, // d2 = 2, t = 2
		{1, 1, 1, 1, 0.5, 2, 1},       // d2 = 0
		{3, 1, 1, 1, 0.5, 4, 1},       // d2 < 0 clamps
		{0, 3, 0, 1, 1, 1, 0.25},      // pow 1
		{0, 3, 0, 1, 1, 4, 1.0 / 256}, // pow 4
		{0, 1e30, 0, 1, 1, 2, capW},   // capped at MaxDenominator
		{nan, 1, 1, 1, 1, 2, nan},     // NaN propagates
		{-inf, 1, 1, 1, 1, 2, capW},   // d2 = +Inf → capped
		{inf, 1, 1, 1, 1, 2, 1},       // d2 = −Inf → 0
		{-1.8e38, -3e38, 0, 1, 1e-37, 2, wantFD(-1.8e38, -3e38, 0, 1, 1e-37)}, // 2·dot overflows float32, the fused d2 does not (≈ 1/49)
		{0.1, 0.3, 0.2, 1, 1.0 / 3, 2, wantFD(0.1, 0.3, 0.2, 1, 1.0/3)},
	} {
		got := interaction(c.dot, c.na, c.nb, c.eps, c.s, c.pow)
		if !same32(got, c.want) {
			t.Errorf("interaction(%v, %v, %v, %v, %v, %d) = %v, want %v", c.dot, c.na, c.nb, c.eps, c.s, c.pow, got, c.want)
		}
	}
}

// TestEval32MatchesEpilogue checks that the scalar Eval32 computes what the
// epilogues compute for the same squared distance.
func TestEval32MatchesEpilogue(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 13))
	for _, p := range []float64{1, 2, 4} {
		k := MustNew(5, p, 0.5)
		for i := 0; i < 2000; i++ {
			d2 := float32(math.Ldexp(rng.Float64(), rng.IntN(80)-40))
			if i == 0 {
				d2 = 0
			}
			if got, want := k.Eval32(d2), interaction(0, d2, 0, k.eps32, k.invS2, k.pow); !same32(got, want) {
				t.Fatalf("p=%v: Eval32(%v) = %v, epilogue %v", p, d2, got, want)
			}
		}
	}
}

// wantFD spells out the p = 2 definition with explicit roundings (d2 is
// c − 2·dot rounded once, which the exact float64 difference gives here).
func wantFD(dot, na, nb, eps, s float32) float32 {
	c := float32(na + nb)
	d2 := float32(float64(c) - 2*float64(dot))
	if d2 < 0 {
		d2 = 0
	}
	tt := float32(eps + float32(d2*s))
	return float32(1 / float32(tt*tt))
}

// TestSumDefinition checks the row-sum definition against its spelled-out
// form (float32 partials j mod 16 per block of 64, float64 lanes, the
// halving tree) and its accuracy: each partial sums at most 4 terms, so the
// error is at most 3 float32 roundings of the absolute sum, whatever the
// length.
func TestSumDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 7))
	for _, n := range append(epiLengths, 4096, 100000) {
		row := make([]float32, n)
		fill(rng, row, 0, 1, false)
		var l [16]float64
		for b := 0; b < n; b += 64 {
			var p [16]float32
			for j := b; j < min(b+64, n); j++ {
				p[j%16] = p[j%16] + row[j]
			}
			for i := range l {
				l[i] += float64(p[i])
			}
		}
		for w := 8; w >= 1; w /= 2 {
			for i := 0; i < w; i++ {
				l[i] += l[i+w]
			}
		}
		got := sumGeneric(row)
		if !same64(got, l[0]) {
			t.Fatalf("n=%d: sum %v, spelled-out definition %v", n, got, l[0])
		}
		exact, abs := 0.0, 0.0
		comp := 0.0
		for _, v := range row { // Neumaier: exact enough for the bound
			x := float64(v)
			abs += math.Abs(x)
			s := exact + x
			if math.Abs(exact) >= math.Abs(x) {
				comp += (exact - s) + x
			} else {
				comp += (x - s) + exact
			}
			exact = s
		}
		exact += comp
		if bound := 3*0x1p-24*abs + 1e-12*abs; math.Abs(got-exact) > bound {
			t.Fatalf("n=%d: sum %v, exact %v (bound %v)", n, got, exact, bound)
		}
		if s, _, _ := rowStatsGeneric(row, row); !same64(s, got) {
			t.Fatalf("n=%d: rowStats sum differs from the row sum", n)
		}
		if s := rowSumColsGeneric(row, make([]float64, n)); !same64(s, got) {
			t.Fatalf("n=%d: rowSumCols sum differs from the row sum", n)
		}
	}
}

// TestPassesBitIdentical runs every pass with the selected epilogues and
// with the pure-Go ones and requires identical bits: results do not depend
// on the kernel.
func TestPassesBitIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, sz := range [][3]int{{1, 1, 1}, {7, 33, 5}, {TileRows + 3, TileCols + 17, 16}, {300, 700, 64}} {
		n, m, d := sz[0], sz[1], sz[2]
		for _, p := range []float64{1, 2, 4, 1.5} {
			k := MustNew(3, p, 1)
			a := randSet(rng, n, d, 0.7)
			b := randSet(rng, m, d, 0.7)
			inv := make([]float32, m)
			for i := range inv {
				inv[i] = float32(0.5 + rng.Float64())
			}
			run := func() (out [][]float64, cache []float32, cross []int32) {
				var ws Workspace
				sum, mean, mx := make([]float64, n), make([]float64, n), make([]float64, n)
				cache = make([]float32, n*m)
				k.RowStatsCached(a, b, inv, sum, mean, mx, cache, &ws)
				rows, cols := make([]float64, n), make([]float64, m)
				k.Sums(a, b, rows, cols, &ws)
				rows2 := make([]float64, n)
				k.Sums(a, b, rows2, nil, &ws)
				self := make([]float64, n)
				k.SelfSums(a, self, &ws)
				rem := make([]float64, m)
				for j := range rem {
					rem[j] = float64(j%13) * 0.02 * float64(n)
				}
				cross = make([]int32, 2*m)
				ck := make([]float64, (n/TileRows+1)*m)
				k.PrefixScan(a, b, rem, cross[:m], TileRows, ck, &ws)
				order := make([]int32, n)
				for i := range order {
					order[i] = int32(n - 1 - i)
				}
				ck2 := make([]float64, (n/TileRows+1)*m)
				ScanRows(cache, m, order, rem, cross[m:], TileRows, ck2, &ws)
				sel := []int32{0}
				for j := 3; j < m; j += 3 {
					sel = append(sel, int32(j))
				}
				g := make([]float64, n)
				k.GatherRowSums(cache, m, order, sel, g, make([]float32, len(sel)+16))
				return [][]float64{sum, mean, mx, rows, cols, rows2, self, ck, ck2, g}, cache, cross
			}
			o1, c1, x1 := run()
			restore := forceGeneric()
			o2, c2, x2 := run()
			restore()
			for i := range o1 {
				if j := diff64(o1[i], o2[i]); j >= 0 {
					t.Fatalf("%v p=%v: output %d differs at %d: %v, pure Go %v", sz, p, i, j, o1[i][j], o2[i][j])
				}
			}
			if i := diff32(c1, c2); i >= 0 {
				t.Fatalf("%v p=%v: interaction %d: %v, pure Go %v", sz, p, i, c1[i], c2[i])
			}
			if !slices.Equal(x1, x2) {
				t.Fatalf("%v p=%v: crossing points differ", sz, p)
			}
		}
	}
}

// TestPassesGeneric reruns the pass tests on the pure-Go epilogues.
func TestPassesGeneric(t *testing.T) {
	defer forceGeneric()()
	TestPassesAgainstNaive(t)
	TestPrefixScan(t)
}

// floats decodes little-endian float32 values from b.
func floats(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

func fuzzSeeds(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, n := range []int{1, 17, 40, 100} {
		for class := 0; class < 4; class++ {
			v := make([]float32, n)
			fill(rng, v, class, 10, false)
			b := make([]byte, 4*n)
			for i, x := range v {
				binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
			}
			f.Add(b, uint8(n%7))
		}
	}
}

// FuzzTileStats cross-checks the interaction and statistics epilogues on
// arbitrary float32 bit patterns: the input is split into dot products,
// norms and inverse baselines, the selector byte picks the exponent, the
// number of rows and whether baselines are given.
func FuzzTileStats(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte, sel uint8) {
		v := floats(b)
		if len(v) < 4 {
			return
		}
		eps, s := v[0], v[1]
		v = v[2:]
		pow := []int{1, 2, 4, 3}[sel&3]
		rows := 1 + int(sel>>2)%3
		cols := len(v) / (rows + 2)
		if cols == 0 {
			return
		}
		tile := v[:rows*cols]
		nb := v[rows*cols : rows*cols+cols]
		inv := v[rows*cols+cols : rows*cols+2*cols]
		na := make([]float32, rows)
		for r := range na {
			na[r] = nb[(r*7)%cols]
		}
		if sel&0x80 != 0 {
			inv = nil
		}
		want, got := slices.Clone(tile), slices.Clone(tile)
		ws, wsn, wm := make([]float64, rows), make([]float64, rows), make([]float32, rows)
		gs, gsn, gm := make([]float64, rows), make([]float64, rows), make([]float32, rows)
		tileStatsGeneric(want, cols, rows, cols, na, nb, inv, eps, s, pow, ws, wsn, wm)
		epiTileStats(got, cols, rows, cols, na, nb, inv, eps, s, pow, gs, gsn, gm)
		if i := diff32(got, want); i >= 0 {
			t.Fatalf("interaction %d = %v, want %v", i, got[i], want[i])
		}
		if diff64(gs, ws) >= 0 || diff64(gsn, wsn) >= 0 || diff32(gm, wm) >= 0 {
			t.Fatalf("stats (%v, %v, %v), want (%v, %v, %v)", gs, gsn, gm, ws, wsn, wm)
		}
		want2, got2 := slices.Clone(tile), slices.Clone(tile)
		tileFromDotsGeneric(want2, cols, rows, cols, na, nb, eps, s, pow)
		epiTileFromDots(got2, cols, rows, cols, na, nb, eps, s, pow)
		if i := diff32(got2, want2); i >= 0 {
			t.Fatalf("tileFromDots %d = %v, want %v", i, got2[i], want2[i])
		}
	})
}

// FuzzReductions cross-checks the row reductions, the scan and compress on
// arbitrary float32 bit patterns.
func FuzzReductions(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte, sel uint8) {
		v := floats(b)
		n := len(v) / 2
		row, inv := v[:n], v[n:2*n]
		s1, q1, m1 := rowStatsGeneric(row, inv)
		s2, q2, m2 := epiRowStats(row, inv)
		if !same64(s1, s2) || !same64(q1, q2) || !same32(m1, m2) {
			t.Fatalf("rowStats (%v, %v, %v), want (%v, %v, %v)", s2, q2, m2, s1, q1, m1)
		}
		c1 := make([]float64, n)
		for j := range c1 {
			c1[j] = float64(inv[j])
		}
		c2 := slices.Clone(c1)
		if r1, r2 := rowSumColsGeneric(row, c1), epiRowSumCols(row, c2); !same64(r1, r2) || diff64(c1, c2) >= 0 {
			t.Fatalf("rowSumCols %v, want %v", r2, r1)
		}
		acc1 := make([]float64, n)
		rem1 := make([]float64, n)
		cr1 := make([]int32, n)
		for j := range rem1 {
			rem1[j] = float64(inv[j])
		}
		acc2, rem2, cr2 := slices.Clone(acc1), slices.Clone(rem1), slices.Clone(cr1)
		for r := int32(1); r <= 4; r++ {
			scanRowGeneric(row, acc1, rem1, cr1, r)
		}
		epiScanRows4(row, row, row, row, acc2, rem2, cr2, 0)
		if diff64(acc1, acc2) >= 0 || diff64(rem1, rem2) >= 0 || !slices.Equal(cr1, cr2) {
			t.Fatal("scan differs")
		}
		var cols []int32
		bits := make([]uint16, (n+15)/16)
		for j := 0; j < n; j++ {
			if (j*int(sel+1))%3 != 0 {
				cols = append(cols, int32(j))
				bits[j>>4] |= 1 << (j & 15)
			}
		}
		d1, d2 := make([]float32, len(cols)+16), make([]float32, len(cols)+16)
		compressGeneric(row, bits, cols, d1)
		epiCompress(row, bits, cols, d2)
		if i := diff32(d1[:len(cols)], d2[:len(cols)]); i >= 0 {
			t.Fatalf("compress %d: %v, want %v", i, d2[i], d1[i])
		}
	})
}
