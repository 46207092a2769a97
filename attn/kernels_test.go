package attn

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestRowKernelsCrossCheck runs the start-up row kernels (AVX-512 in the
// SIMD build) against the portable ones on random panels with special
// values, for every panel length around the vector width.
func TestRowKernelsCrossCheck(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	for _, cols := range []int{1, 2, 15, 16, 17, 31, 32, 33, 100} {
		for trial := 0; trial < 4; trial++ {
			p := make([]float32, cols*lanes+lanes) // one guard row
			for i := range p {
				p[i] = float32(rng.NormFloat64() * 30)
			}
			for i := cols * lanes; i < len(p); i++ {
				p[i] = -12345
			}
			switch trial {
			case 1:
				p[rng.IntN(cols)*lanes+3] = nan
				for s := 0; s < cols; s++ {
					p[s*lanes+5] = -inf // a lane with no finite score
				}
			case 2:
				p[rng.IntN(cols)*lanes+7] = -inf
				p[rng.IntN(cols)*lanes+9] = 1e30 // overflows scale·x? no: finite, dominates
			case 3:
				for i := range p[:cols*lanes] {
					p[i] = -200 + float32(rng.Float64()) // all far below 0
				}
			}
			for _, first := range []bool{true, false} {
				var sg, sf panelState
				for i := range sg.m {
					sg.m[i] = float32(rng.NormFloat64() * 10)
					sg.l[i] = float32(rng.Float64() * 5)
				}
				sf = sg
				pg := append([]float32(nil), p...)
				pf := append([]float32(nil), p...)
				softmaxPanelGo(pg, cols, 0.125, &sg, first)
				softmaxPanel(pf, cols, 0.125, &sf, first)
				for i := range pg {
					if lane := i % lanes; i < cols*lanes && sg.l[lane] != sg.l[lane] {
						// NaN lane: only the NaN score's probability is pinned.
						if p[i] != p[i] && pf[i] == pf[i] {
							t.Fatalf("cols=%d trial=%d: NaN score gave probability %v", cols, trial, pf[i])
						}
						continue
					}
					if !close32(pf[i], pg[i], 4e-7) {
						t.Fatalf("cols=%d trial=%d first=%v: p[%d] = %v, portable %v", cols, trial, first, i, pf[i], pg[i])
					}
				}
				for i := 0; i < lanes; i++ {
					if sg.l[i] != sg.l[i] {
						// A NaN score poisons the lane; its m is unspecified.
						if sf.l[i] == sf.l[i] {
							t.Fatalf("cols=%d trial=%d lane %d: l = %v, want NaN", cols, trial, i, sf.l[i])
						}
						continue
					}
					if !close32(sf.m[i], sg.m[i], 0) || !close32(sf.alpha[i], sg.alpha[i], 4e-7) || !close32(sf.l[i], sg.l[i], 2e-6) {
						t.Fatalf("cols=%d trial=%d first=%v lane %d: m/alpha/l = %v/%v/%v, portable %v/%v/%v",
							cols, trial, first, i, sf.m[i], sf.alpha[i], sf.l[i], sg.m[i], sg.alpha[i], sg.l[i])
					}
				}
			}
			// addRows and scaleCols
			var ag, af [lanes]float32
			addRowsGo(p, 0, cols, &ag)
			addRows(p, 0, cols, &af)
			for i := range ag {
				if !close32(af[i], ag[i], 1e-6) {
					t.Fatalf("addRows lane %d: %v, portable %v", i, af[i], ag[i])
				}
			}
			o := append([]float32(nil), p...)
			og := append([]float32(nil), p...)
			var alpha [lanes]float32
			for i := range alpha {
				alpha[i] = float32(rng.Float64())
			}
			scaleCols(o, cols, lanes, 0, &alpha)
			scaleColsGo(og, cols, lanes, 0, &alpha)
			for i := range o {
				if !close32(o[i], og[i], 0) {
					t.Fatalf("scaleCols %d: %v, portable %v", i, o[i], og[i])
				}
			}
		}
	}
}

// close32 compares with relative tolerance; NaNs equal NaNs, infinities
// must match exactly.
func close32(a, b float32, rel float64) bool {
	if a != a || b != b {
		return a != a && b != b
	}
	if math.IsInf(float64(a), 0) || math.IsInf(float64(b), 0) {
		return a == b
	}
	return math.Abs(float64(a)-float64(b)) <= rel*math.Max(math.Abs(float64(b)), 1e-30)+1e-38
}

// TestExpAccuracy checks the probabilities of a one-lane-per-score panel
// against math.Exp over the whole range the softmax uses.
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
		x := -104 * float64(i) / float64(len(p))
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
		if want < 1e-37 { // float32 denormal range: absolute check
			if math.Abs(float64(v)-want) > 1e-44 {
				t.Fatalf("exp(%v) = %v, want %v", x, v, want)
			}
			continue
		}
		e := math.Abs(float64(v)-want) / want
		worst = max(worst, e)
		if e > 3e-7 {
			t.Fatalf("exp(%v) = %v, want %v (rel %.3g)", x, v, want, e)
		}
	}
	t.Logf("worst relative error %.3g", worst)
}
