package nn

import (
	"math"

	"github.com/densitykv/densitykv/internal/parallel"
)

// RMSNorm writes x / √(mean(x²) + eps) · w of each row of x [rows][d]
// into y (which may be x): no centring, no bias, the statistic in float64
// (each square rounded before the sum), then
//
//	y[j] = float32(float64(x[j])·inv) · w[j]
//
// The DiT's q/k norms (package wan) and umT5's norms (package t5).
func RMSNorm(y, x []float32, rows, d int, eps float64, w []float32) {
	parallel.For(rows, 8, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xr, yr := x[r*d:(r+1)*d], y[r*d:(r+1)*d]
			var q float64
			for _, v := range xr {
				q += float64(float64(v) * float64(v)) // rounded before the sum: no fused multiply-add
			}
			inv := 1 / math.Sqrt(q/float64(d)+eps)
			for j, v := range xr {
				yr[j] = float32(float64(v)*inv) * w[j]
			}
		}
	})
}

// LayerNorm writes (x − mean)/√(var + eps) of each row of x [rows][d] into
// y (which may be x), mean and biased variance in float64, then, when w !=
// nil, y·w + b (float32, the product rounded before the sum). The DiT's
// norms (package wan: norm1, norm2 and the head without affine weights,
// norm3 with them).
func LayerNorm(y, x []float32, rows, d int, eps float64, w, b []float32) {
	parallel.For(rows, 16, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xr, yr := x[r*d:(r+1)*d], y[r*d:(r+1)*d]
			var s float64
			for _, v := range xr {
				s += float64(v)
			}
			mean := s / float64(d)
			var q float64
			for _, v := range xr {
				t := float64(v) - mean
				q += float64(t * t)
			}
			inv := 1 / math.Sqrt(q/float64(d)+eps)
			for j, v := range xr {
				yr[j] = float32((float64(v) - mean) * inv)
			}
			if w != nil {
				for j := range yr {
					yr[j] = float32(yr[j]*w[j]) + b[j]
				}
			}
		}
	})
}

// GroupNorm normalises x [channels][P] in place by groups of
// channels/groups channels (nn.GroupNorm: mean and biased variance over
// the group's channels and positions, in float64), applies the affine
// weights w and b [channels] in float64, rounds once to float32, then
// applies SiLU32 when silu is set. LongLive-RAG's autoencoder (package
// ragae).
func GroupNorm(x []float32, channels, P, groups int, w, b []float32, eps float64, silu bool) {
	cpg := channels / groups
	n := float64(cpg * P)
	for gi := 0; gi < groups; gi++ {
		part := x[gi*cpg*P : (gi+1)*cpg*P]
		var s float64
		for _, v := range part {
			s += float64(v)
		}
		mean := s / n
		var ss float64
		for _, v := range part {
			dv := float64(v) - mean
			ss += float64(dv * dv)
		}
		inv := 1 / math.Sqrt(ss/n+eps)
		for k := 0; k < cpg; k++ {
			c := gi*cpg + k
			a, bc := inv*float64(w[c]), float64(b[c])
			for p, v := range part[k*P : (k+1)*P] {
				y := float32(float64((float64(v)-mean)*a) + bc) // rounded product: no fused multiply-add
				if silu {
					y = SiLU32(y)
				}
				part[k*P+p] = y
			}
		}
	}
}
