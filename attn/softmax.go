package attn

import "math"

// rowMax returns max_j scale·x[j] (−Inf for an empty row); it is chosen at
// start-up like expRow.
var rowMax = rowMaxGo

// expRow overwrites x[j] with exp(scale·x[j] − m) and returns Σ_j x[j] in
// float32. m ≥ max_j scale·x[j], so every value lies in [0, 1].
var expRow = expRowGo

func init() { archInit() }

func rowMaxGo(x []float32, scale float32) float32 {
	m := float32(math.Inf(-1))
	for _, v := range x {
		if s := v * scale; s > m || s != s {
			m = s
		}
	}
	return m
}

func expRowGo(x []float32, scale, m float32) float32 {
	var sum float32
	for j, v := range x {
		e := expf(v*scale - m)
		x[j] = e
		sum += e
	}
	return sum
}
