package attn

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestAsmSelected requires the assembly row kernels wherever the build and
// the CPU support them, so that a broken selection cannot silently turn the
// cross-checks into comparisons of the pure-Go code with itself.
func TestAsmSelected(t *testing.T) {
	if SIMD() != asmCPU() {
		t.Fatalf("SIMD() = %v, but the build and CPU support the assembly: %v", SIMD(), asmCPU())
	}
	if !SIMD() {
		t.Log("no assembly row kernels in this build or on this CPU: the cross-checks compare the pure-Go code with itself")
	}
}

// same32 reports whether a and b have identical bits or are both NaN.
func same32(a, b float32) bool {
	return math.Float32bits(a) == math.Float32bits(b) || a != a && b != b
}

func diff32(a, b []float32) int {
	for i := range a {
		if !same32(a[i], b[i]) {
			return i
		}
	}
	return -1
}

var specials = []float32{
	0, float32(math.Copysign(0, -1)), 1, -1, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)),
	math.MaxFloat32, -math.MaxFloat32, 1e30, -1e30, 1e-40, -1e-40, math.SmallestNonzeroFloat32, 88, 89, -88, -104, -110, 700,
}

// panelInput fills a panel of cols rows (plus one guard row) by trial:
// 0 typical scores, 1 a NaN score and a lane of −Inf scores, 2 −Inf, huge
// and tiny scores, 3 all far below 0, 4 special values everywhere.
func panelInput(rng *rand.Rand, cols, trial int) []float32 {
	p := make([]float32, cols*lanes+lanes)
	for i := range p[:cols*lanes] {
		p[i] = float32(rng.NormFloat64() * 30)
	}
	for i := cols * lanes; i < len(p); i++ {
		p[i] = -12345 // guard row
	}
	if cols == 0 {
		return p
	}
	switch trial {
	case 1:
		p[rng.IntN(cols)*lanes+3] = float32(math.NaN())
		for s := 0; s < cols; s++ {
			p[s*lanes+5] = float32(math.Inf(-1)) // a lane with no finite score
		}
	case 2:
		p[rng.IntN(cols)*lanes+7] = float32(math.Inf(-1))
		p[rng.IntN(cols)*lanes+9] = 1e30
		p[rng.IntN(cols)*lanes+11] = 1e-40
	case 3:
		for i := range p[:cols*lanes] {
			p[i] = -200 + float32(rng.Float64()) // all far below 0
		}
	case 4:
		for i := range p[:cols*lanes] {
			p[i] = specials[rng.IntN(len(specials))]
		}
	}
	return p
}

// TestRowKernelsBitIdentical runs the start-up row kernels (the assembly on
// AVX-512) against the pure-Go definitions, bit for bit (NaN matches NaN),
// on panel lengths around the vector widths, special scores and states, and
// both steps (first and later), with a guard row that must survive.
func TestRowKernelsBitIdentical(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for _, cols := range []int{0, 1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 100, 512} {
		for trial := 0; trial < 5; trial++ {
			for _, first := range []bool{true, false} {
				name := fmt.Sprintf("cols=%d/trial=%d/first=%v", cols, trial, first)
				p := panelInput(rng, cols, trial)
				var st panelState
				for i := range st.m {
					st.m[i] = float32(rng.NormFloat64() * 10)
					st.l[i] = float32(rng.Float64() * 5)
					st.alpha[i] = -7
					if trial == 4 {
						st.m[i] = specials[rng.IntN(len(specials))]
						st.l[i] = specials[rng.IntN(len(specials))]
					}
				}
				sg, sf := st, st
				pg, pf := slices.Clone(p), slices.Clone(p)
				softmaxPanelGo(pg, cols, 0.125, &sg, first)
				softmaxPanel(pf, cols, 0.125, &sf, first)
				if i := diff32(pf, pg); i >= 0 {
					t.Fatalf("%s: p[%d] = %v, pure Go %v (score %v)", name, i, pf[i], pg[i], p[i])
				}
				for _, f := range []struct {
					what string
					a, b []float32
				}{{"m", sf.m[:], sg.m[:]}, {"l", sf.l[:], sg.l[:]}, {"alpha", sf.alpha[:], sg.alpha[:]}} {
					if i := diff32(f.a, f.b); i >= 0 {
						t.Fatalf("%s: %s[%d] = %v, pure Go %v", name, f.what, i, f.a[i], f.b[i])
					}
				}
			}
			// addRows and scaleCols, also on a sub-range and an offset column block.
			p := panelInput(rng, cols, trial)
			for _, r := range [][2]int{{0, cols}, {cols / 3, cols - cols/4}} {
				var ag, af [lanes]float32
				for i := range ag {
					ag[i] = float32(rng.NormFloat64())
				}
				af = ag
				addRowsGo(p, r[0], r[1], &ag)
				addRows(p, r[0], r[1], &af)
				if i := diff32(af[:], ag[:]); i >= 0 {
					t.Fatalf("cols=%d trial=%d: addRows lane %d: %v, pure Go %v", cols, trial, i, af[i], ag[i])
				}
			}
			var alpha [lanes]float32
			for i := range alpha {
				alpha[i] = float32(rng.Float64())
				if trial == 4 {
					alpha[i] = specials[rng.IntN(len(specials))]
				}
			}
			const ld, j0 = lanes + 24, 13
			o := make([]float32, cols*ld+ld)
			for i := range o {
				o[i] = float32(rng.NormFloat64())
				if trial == 4 {
					o[i] = specials[rng.IntN(len(specials))]
				}
			}
			og := slices.Clone(o)
			scaleCols(o, cols, ld, j0, &alpha)
			scaleColsGo(og, cols, ld, j0, &alpha)
			if i := diff32(o, og); i >= 0 {
				t.Fatalf("cols=%d trial=%d: scaleCols %d: %v, pure Go %v", cols, trial, i, o[i], og[i])
			}
		}
	}
}

// TestSoftmaxPanelSemantics pins the documented behaviour of a panel step:
// probabilities of a lane sum to l, the lane's maximum gets probability 1,
// −Inf scores get 0, a NaN score poisons its lane only.
func TestSoftmaxPanelSemantics(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	const cols = 40
	p := panelInput(rng, cols, 1)
	var st panelState
	softmaxPanel(p, cols, 0.25, &st, true)
	for i := 0; i < lanes; i++ {
		var sum float32
		ones := 0
		for s := 0; s < cols; s++ {
			v := p[s*lanes+i]
			sum += v
			if v == 1 {
				ones++
			}
		}
		switch i {
		case 3:
			if st.l[i] == st.l[i] {
				t.Fatalf("lane 3 has a NaN score but l = %v", st.l[i])
			}
		case 5:
			if st.l[i] != 0 || sum != 0 {
				t.Fatalf("lane 5 (all −Inf) has l = %v, Σ p = %v", st.l[i], sum)
			}
		default:
			if !same32(sum, st.l[i]) || ones == 0 || st.alpha[i] != 0 {
				t.Fatalf("lane %d: Σ p = %v, l = %v, %d probabilities of 1, alpha %v", i, sum, st.l[i], ones, st.alpha[i])
			}
		}
	}
}

// TestExpDef checks expDef against the exponential rounded to float32
// (math/big, exactly) on a dense sweep of the range and on special inputs:
// every result within 0.9 ulp, most correctly rounded; exact at 0;
// monotone; NaN, ±Inf and the under- and overflow ends as documented.
func TestExpDef(t *testing.T) {
	worst, wrong, n := 0.0, 0, 0
	prev := float32(0)
	for y := float32(-105); y <= 90; y += 0.000731 {
		got := expDef(y)
		want := math.Exp(float64(y)) // within 1 ulp of float64: the rounding to float32 below is exact except at ties
		if got < prev {
			t.Fatalf("expDef not monotone at %v: %v < %v", y, got, prev)
		}
		prev = got
		n++
		if float32(want) != got {
			wrong++
		}
		w32 := float32(want)
		if w32 == 0 || math.IsInf(float64(w32), 0) || w32 < 1.1754944e-38 {
			// Denormal, zero or overflow: one of e^y's two float32 neighbours.
			if math.Abs(float64(got)-want) >= math.SmallestNonzeroFloat32 && !(math.IsInf(float64(got), 1) && want > math.MaxFloat32) {
				t.Fatalf("expDef(%v) = %v, want %v (denormal or overflow range)", y, got, want)
			}
			continue
		}
		ulp := float64(math.Nextafter32(w32, float32(math.Inf(1))) - w32)
		if e := math.Abs(float64(got)-want) / ulp; e > worst {
			worst = e
		}
	}
	t.Logf("worst error %.3f ulp; %d of %d (%.2f %%) not correctly rounded", worst, wrong, n, 100*float64(wrong)/float64(n))
	if worst > 0.9 {
		t.Fatalf("worst error %.3f ulp > 0.9", worst)
	}
	if frac := float64(wrong) / float64(n); frac > 0.1 {
		t.Fatalf("%.1f %% not correctly rounded", 100*frac)
	}
	// Exactly rounded references for a few points with math/big.
	for _, y := range []float32{-1, 0.5, 1, 10, -50, 88.5} {
		got := expDef(y)
		if want := bigExp32(float64(y)); math.Abs(float64(got-want)) > float64(math.Nextafter32(want, 2*want)-want) {
			t.Fatalf("expDef(%v) = %v, math/big %v", y, got, want)
		}
	}
	inf := float32(math.Inf(1))
	for _, c := range []struct {
		y    float32
		want float32
	}{
		{0, 1}, {float32(math.Copysign(0, -1)), 1}, {-inf, 0}, {-104, 0}, {-200, 0}, {-math.MaxFloat32, 0},
		{inf, inf}, {88.73, inf}, {math.MaxFloat32, inf},
	} {
		if got := expDef(c.y); !same32(got, c.want) {
			t.Fatalf("expDef(%v) = %v, want %v", c.y, got, c.want)
		}
	}
	if got := expDef(float32(math.NaN())); got == got {
		t.Fatalf("expDef(NaN) = %v", got)
	}
	if got := expDef(-103); got == 0 || got > 1e-44 {
		t.Fatalf("expDef(−103) = %v, want a denormal", got)
	}
}

// bigExp32 returns e^y rounded to float32 via a 200-bit series.
func bigExp32(y float64) float32 {
	const prec = 200
	x := new(big.Float).SetPrec(prec).SetFloat64(y)
	sum := new(big.Float).SetPrec(prec).SetInt64(1)
	term := new(big.Float).SetPrec(prec).SetInt64(1)
	for k := 1; k < 400; k++ {
		term.Mul(term, x)
		term.Quo(term, new(big.Float).SetPrec(prec).SetInt64(int64(k)))
		sum.Add(sum, term)
	}
	f, _ := sum.Float32()
	return f
}

// TestExpAccuracy checks the probabilities of a one-lane-per-score panel
// (the selected kernel) against math.Exp over the whole range the softmax
// uses.
func TestExpAccuracy(t *testing.T) {
	const cols = 4096
	p := make([]float32, cols*lanes)
	// Row 0 is all zeros, so every lane's maximum is 0 and p becomes
	// exp(x) for x in (−104, 0].
	for i := lanes; i < len(p); i++ {
		p[i] = -104 * float32(i) / float32(len(p))
	}
	p[lanes+1] = float32(math.NaN())
	p[lanes+2] = float32(math.Inf(-1))
	var st panelState
	softmaxPanel(p, cols, 1, &st, true)
	worst := 0.0
	for i, v := range p {
		x := float64(-104 * float32(i) / float32(len(p)))
		if i < lanes {
			x = 0
		}
		want := math.Exp(x)
		switch i - lanes {
		case 1:
			want = math.NaN()
		case 2:
			want = 0
		}
		if math.IsNaN(want) {
			if v == v {
				t.Fatalf("exp(NaN) = %v", v)
			}
			continue
		}
		if want < 0x1p-126 { // float32 denormal range: one of the two neighbours
			if math.Abs(float64(v)-want) >= 0x1p-149 {
				t.Fatalf("exp(%v) = %v, want %v", x, v, want)
			}
			continue
		}
		e := math.Abs(float64(v)-want) / want
		worst = max(worst, e)
		if e > 0.9*0x1p-23 { // 0.9 ulp (expDef's bound) of the largest ulp relative to the value
			t.Fatalf("exp(%v) = %v, want %v (rel %.3g)", x, v, want, e)
		}
	}
	t.Logf("worst relative error %.3g", worst)
}

// FuzzSoftmaxPanel cross-checks the selected row kernels with the pure-Go
// definitions on arbitrary float32 bit patterns: the input supplies the
// scale, the state (m, l) and the scores of a panel.
func FuzzSoftmaxPanel(f *testing.F) {
	rng := rand.New(rand.NewPCG(6, 6))
	for _, cols := range []int{1, 3, 17} {
		for trial := 0; trial < 5; trial++ {
			p := panelInput(rng, cols, trial)
			b := make([]byte, 4*(1+2*lanes+cols*lanes))
			binary.LittleEndian.PutUint32(b, math.Float32bits(0.125))
			for i, v := range p[:cols*lanes] {
				binary.LittleEndian.PutUint32(b[4*(1+2*lanes+i):], math.Float32bits(v))
			}
			f.Add(b, trial%2 == 0)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte, first bool) {
		v := make([]float32, len(b)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		if len(v) < 1+2*lanes {
			return
		}
		scale := v[0]
		var st panelState
		copy(st.m[:], v[1:1+lanes])
		copy(st.l[:], v[1+lanes:1+2*lanes])
		v = v[1+2*lanes:]
		cols := len(v) / lanes
		p := v[:cols*lanes]
		sg, sf := st, st
		pg, pf := slices.Clone(p), slices.Clone(p)
		softmaxPanelGo(pg, cols, scale, &sg, first)
		softmaxPanel(pf, cols, scale, &sf, first)
		if i := diff32(pf, pg); i >= 0 {
			t.Fatalf("p[%d] = %v, pure Go %v", i, pf[i], pg[i])
		}
		if diff32(sf.m[:], sg.m[:]) >= 0 || diff32(sf.l[:], sg.l[:]) >= 0 || diff32(sf.alpha[:], sg.alpha[:]) >= 0 {
			t.Fatalf("state %v, pure Go %v", sf, sg)
		}
		var ag, af [lanes]float32
		copy(ag[:], st.l[:])
		af = ag
		addRowsGo(p, 0, cols, &ag)
		addRows(p, 0, cols, &af)
		if diff32(af[:], ag[:]) >= 0 {
			t.Fatal("addRows differs")
		}
		og := slices.Clone(p)
		scaleCols(p, cols, lanes, 0, &st.m)
		scaleColsGo(og, cols, lanes, 0, &st.m)
		if i := diff32(p, og); i >= 0 {
			t.Fatalf("scaleCols %d: %v, pure Go %v", i, p[i], og[i])
		}
	})
}
