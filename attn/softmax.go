package attn

import "math"

// The row kernels are chosen once at start-up: AVX-512 versions in the
// GOEXPERIMENT=simd build on a capable CPU, else the portable ones below.
var (
	// softmaxPanel runs one online-softmax step on a panel of scores
	// p[s*lanes+i] (key s < cols, query lane i): with m' = max(m,
	// max_s scale·p[s][i]) it sets alpha = exp(m − m') (0 when first),
	// p[s][i] = exp(scale·p[s][i] − m'), l = l·alpha + Σ_s p[s][i] (l = Σ
	// when first) and m = m'. A lane whose scores are all −Inf keeps
	// probabilities 0; a NaN score makes its probability and the lane's l
	// NaN (the lane's m is then unspecified).
	softmaxPanel = softmaxPanelGo
	// scaleCols multiplies columns j0..j0+lanes of the rows×ld matrix o by
	// alpha (column j0+i by alpha[i]).
	scaleCols = scaleColsGo
	// addRows adds rows [from, to) of a panel into acc (lane by lane, in
	// order of the rows).
	addRows = addRowsGo
)

func init() { archInit() }

// minMax is the floor of the running maximum: keeps m finite when every
// score so far is −Inf, so that exp(−Inf − m) = 0 rather than NaN.
const minMax = -math.MaxFloat32

func softmaxPanelGo(p []float32, cols int, scale float32, st *panelState, first bool) {
	var mx [lanes]float32
	for i := range mx {
		mx[i] = minMax
	}
	for s := 0; s < cols; s++ {
		row := p[s*lanes : s*lanes+lanes]
		for i, v := range row {
			mx[i] = max(mx[i], v*scale)
		}
	}
	for i := range mx {
		mn := mx[i]
		if !first {
			mn = max(st.m[i], mn)
		}
		if first {
			st.alpha[i] = 0
		} else {
			st.alpha[i] = expf(st.m[i] - mn)
		}
		st.m[i] = mn
	}
	var sum [lanes]float32
	for s := 0; s < cols; s++ {
		row := p[s*lanes : s*lanes+lanes]
		for i, v := range row {
			e := expf(v*scale - st.m[i])
			row[i] = e
			sum[i] += e
		}
	}
	for i := range sum {
		if first {
			st.l[i] = sum[i]
		} else {
			st.l[i] = st.l[i]*st.alpha[i] + sum[i]
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
