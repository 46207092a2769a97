package attn

import (
	"math"

	"github.com/densitykv/densitykv/internal/vmath"
)

// The row kernels of the online softmax. Each has one numerical
// definition, written in pure Go below (always built, the oracle of the
// tests), and on amd64 an AVX-512 version in generated Go assembly
// (softmax_amd64.s, from gen_softmax.go; build tags amd64 && !noasm) that
// computes the same values bit for bit. The choice is made once at
// start-up by CPU features alone, so a plain go build gets the assembly and
// attention outputs are identical on every CPU and in every build.
//
// The definitions (per query lane i of a panel; every operation in float32,
// rounded to nearest even, no fused operations except inside expDef):
//
//	sc      = scale·p[s][i]
//	mx      = the largest sc over the panel's keys, starting from −MaxFloat32
//	          (sc replaces mx only when sc > mx: NaN scores never win)
//	m'      = mx when mx > m, else m (mx if first)
//	alpha   = 0 if first, else expDef(m − m')
//	p[s][i] = expDef(sc − m')
//	l       = Σ_s p[s][i] in float32, in order of s; then l = that sum if
//	          first, else float32(l·alpha) + that sum
//
// and expDef is the exponential defined below. scaleCols multiplies in
// float32; addRows adds in float32 in order of the rows.
var (
	// softmaxPanel runs one online-softmax step on a panel of scores
	// p[s*lanes+i] (key s < cols, query lane i), as defined above. A lane
	// whose scores are all −Inf gets probabilities 0; a NaN score makes
	// its probability and the lane's l NaN.
	softmaxPanel = softmaxPanelGo
	// scaleCols multiplies columns j0..j0+lanes of the rows×ld matrix o by
	// alpha (column j0+i by alpha[i]).
	scaleCols = scaleColsGo
	// addRows adds rows [from, to) of a panel into acc (lane by lane, in
	// order of the rows).
	addRows = addRowsGo

	asmKernels bool
)

//go:generate go run gen_softmax.go

func init() { archInit() }

// SIMD reports whether the assembly (AVX-512) row kernels are in use. They
// compute the same values as the pure-Go ones, bit for bit.
func SIMD() bool { return asmKernels }

// forceGeneric switches the row kernels to the pure-Go ones and returns a
// function that restores the previous choice (for tests).
func forceGeneric() (restore func()) {
	sp, sc, ar, on := softmaxPanel, scaleCols, addRows, asmKernels
	softmaxPanel, scaleCols, addRows, asmKernels = softmaxPanelGo, scaleColsGo, addRowsGo, false
	return func() { softmaxPanel, scaleCols, addRows, asmKernels = sp, sc, ar, on }
}

// minMax is the floor of the running maximum: keeps m finite when every
// score so far is −Inf, so that exp(−Inf − m) = 0 rather than NaN.
const minMax = -math.MaxFloat32

// expDef is the exponential of the softmax, vmath.Exp32Clamped: y clamped
// to [vmath.Exp32Lo, vmath.Exp32Hi] = [−104, 89] (NaN: the result is NaN),
// then vmath.Exp32 (a Cody–Waite reduction, a degree-7 Taylor polynomial by
// fused multiply-adds and a scaling by 2^n, every step an IEEE float32
// operation): the one exponential of every model. The result is within 0.9
// ulp of e^y (TestExpDef measures it; correctly rounded in about 95 % of
// cases), with gradual underflow to 0 below about −103.97 and +Inf above
// 88.72. expDef(0) = 1 exactly.
//
// Before 2026-11-25 the exponential was a float64 one (0.51 ulp, two
// conversions and twice the vector lanes per value; removed from
// internal/vmath since): about twice the softmax's time, for an accuracy
// float32 attention does not use (the scores and sums are float32;
// PyTorch's softmax uses a float32 expf).
func expDef(y float32) float32 { return vmath.Exp32Clamped(y) }

func softmaxPanelGo(p []float32, cols int, scale float32, st *panelState, first bool) {
	var mx [lanes]float32
	for i := range mx {
		mx[i] = minMax
	}
	for s := 0; s < cols; s++ {
		row := p[s*lanes : s*lanes+lanes]
		for i, v := range row {
			if sc := v * scale; sc > mx[i] {
				mx[i] = sc
			}
		}
	}
	for i := range mx {
		mn := mx[i]
		if first {
			st.alpha[i] = 0
		} else {
			if !(mn > st.m[i]) {
				mn = st.m[i]
			}
			st.alpha[i] = expDef(st.m[i] - mn)
		}
		st.m[i] = mn
	}
	var sum [lanes]float32
	for s := 0; s < cols; s++ {
		row := p[s*lanes : s*lanes+lanes]
		for i, v := range row {
			sc := float32(v * scale) // the conversion keeps the product from being fused
			e := expDef(sc - st.m[i])
			row[i] = e
			sum[i] += e
		}
	}
	for i := range sum {
		if first {
			st.l[i] = sum[i]
		} else {
			st.l[i] = float32(st.l[i]*st.alpha[i]) + sum[i]
		}
	}
}

func scaleColsGo(o []float32, rows, ld, j0 int, alpha *[lanes]float32) {
	for r := 0; r < rows; r++ {
		row := o[r*ld+j0 : r*ld+j0+lanes]
		for i := range row {
			row[i] *= alpha[i]
		}
	}
}

func addRowsGo(p []float32, from, to int, acc *[lanes]float32) {
	for s := from; s < to; s++ {
		row := p[s*lanes : s*lanes+lanes]
		for i, v := range row {
			acc[i] += v
		}
	}
}
