package wan

import (
	"math"

	"github.com/densitykv/densitykv/internal/parallel"
	"github.com/densitykv/densitykv/internal/vmath"
)

// The element-wise steps below write every product that meets an addition
// through an explicit float32 (or float64) conversion, which Go's
// specification forbids fusing into a multiply-add: the results are the
// same bits whatever GOAMD64 level the binary is built for.

// apply computes y[rows][Out] = x[rows][In]·Wᵀ + b: the product at the
// packed weights' precision (x rounded to bfloat16 in a bf16 model), the
// bias added in float32.
func (l *Linear) apply(y, x []float32, rows int) {
	in, out := l.In, l.Out
	y = y[:rows*out]
	l.w.Product(rows, x[:rows*in], in, y, out) // threaded by gemm
	if l.B != nil {
		parallel.For(rows, 64, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				yr := y[r*out : (r+1)*out]
				for j, b := range l.B {
					yr[j] += b
				}
			}
		})
	}
}

// layerNorm writes (x − mean)/√(var + eps) of each row of x [rows][d] into y,
// then, when w != nil, y·w + b.
func layerNorm(y, x []float32, rows, d int, eps float64, w, b []float32) {
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

// modulate sets y = y·(1+scale) + shift in place for each row; scale and
// shift are [d] vectors per row group (rows/groups rows each).
func modulate(y []float32, rows, d, rowsPerFrame int, shift, scale func(f int) []float32) {
	for r := 0; r < rows; r++ {
		f := r / rowsPerFrame
		sh, sc := shift(f), scale(f)
		yr := y[r*d : (r+1)*d]
		for j := range yr {
			yr[j] = float32(yr[j]*(1+sc[j])) + sh[j]
		}
	}
}

// gatedAdd sets x += o·g row by row, g = gate(frame of the row) [d].
func gatedAdd(x, o []float32, rows, d, rowsPerFrame int, gate func(f int) []float32) {
	for r := 0; r < rows; r++ {
		g := gate(r / rowsPerFrame)
		xr, or := x[r*d:(r+1)*d], o[r*d:(r+1)*d]
		for j := range xr {
			xr[j] += float32(or[j] * g[j])
		}
	}
}

// addInto sets x += y.
func addInto(x, y []float32) {
	for i, v := range y[:len(x)] {
		x[i] += v
	}
}

// rmsNorm normalises each row of x [rows][d] in place: x·w/√(mean(x²)+eps).
func rmsNorm(x []float32, rows, d int, eps float64, w []float32) {
	parallel.For(rows, 16, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xr := x[r*d : (r+1)*d]
			var q float64
			for _, v := range xr {
				q += float64(float64(v) * float64(v))
			}
			inv := 1 / math.Sqrt(q/float64(d)+eps)
			for j, v := range xr {
				xr[j] = float32(float64(v)*inv) * w[j]
			}
		}
	})
}

// silu returns x·sigmoid(x) into y.
func silu(y, x []float32) {
	for i, v := range x {
		f := float64(v)
		y[i] = float32(f / (1 + vmath.ExpFdlibm(-f)))
	}
}
