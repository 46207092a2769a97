package wan

import (
	"math"
	"runtime"
	"sync"

	"github.com/densitykv/densitykv/gemm"
)

// parallel runs f over [0, n) split into contiguous chunks, one per worker.
func parallel(n, minChunk int, f func(lo, hi int)) {
	w := runtime.GOMAXPROCS(0)
	if minChunk < 1 {
		minChunk = 1
	}
	if c := (n + minChunk - 1) / minChunk; c < w {
		w = c
	}
	if w <= 1 {
		if n > 0 {
			f(0, n)
		}
		return
	}
	var wg sync.WaitGroup
	for i := 0; i < w; i++ {
		lo, hi := i*n/w, (i+1)*n/w
		if lo == hi {
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); f(lo, hi) }()
	}
	wg.Wait()
}

// apply computes y[rows][Out] = x[rows][In]·Wᵀ + b.
func (l *Linear) apply(y, x []float32, rows int) {
	in, out := l.In, l.Out
	y = y[:rows*out]
	if rows >= 2*runtime.GOMAXPROCS(0) {
		parallel(rows, 4, func(lo, hi int) {
			gemm.NT(hi-lo, out, in, x[lo*in:], in, l.W, in, y[lo*out:], out)
		})
	} else {
		parallel(out, 64, func(lo, hi int) {
			gemm.NT(rows, hi-lo, in, x, in, l.W[lo*in:], in, y[lo:], out)
		})
	}
	if l.B != nil {
		for r := 0; r < rows; r++ {
			yr := y[r*out : (r+1)*out]
			for j, b := range l.B {
				yr[j] += b
			}
		}
	}
}

// layerNorm writes (x − mean)/√(var + eps) of each row of x [rows][d] into y,
// then, when w != nil, y·w + b.
func layerNorm(y, x []float32, rows, d int, eps float64, w, b []float32) {
	parallel(rows, 16, func(lo, hi int) {
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
				q += t * t
			}
			inv := 1 / math.Sqrt(q/float64(d)+eps)
			for j, v := range xr {
				yr[j] = float32((float64(v) - mean) * inv)
			}
			if w != nil {
				for j := range yr {
					yr[j] = yr[j]*w[j] + b[j]
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
			yr[j] = yr[j]*(1+sc[j]) + sh[j]
		}
	}
}

// rmsNorm normalises each row of x [rows][d] in place: x·w/√(mean(x²)+eps).
func rmsNorm(x []float32, rows, d int, eps float64, w []float32) {
	parallel(rows, 16, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			xr := x[r*d : (r+1)*d]
			var q float64
			for _, v := range xr {
				q += float64(v) * float64(v)
			}
			inv := 1 / math.Sqrt(q/float64(d)+eps)
			for j, v := range xr {
				xr[j] = float32(float64(v)*inv) * w[j]
			}
		}
	})
}

// geluTanh applies GELU with the tanh approximation in place.
func geluTanh(x []float32) {
	const c = 0.7978845608028654 // √(2/π)
	parallel(len(x), 4096, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			v := float64(x[i])
			x[i] = float32(0.5 * v * (1 + math.Tanh(c*(v+0.044715*v*v*v))))
		}
	})
}

// silu returns x·sigmoid(x) into y.
func silu(y, x []float32) {
	for i, v := range x {
		f := float64(v)
		y[i] = float32(f / (1 + math.Exp(-f)))
	}
}

// Attention tiles.
const (
	attnQTile = 64
	attnKTile = 256
)

// attention computes out[T][H][D] = softmax(q·kᵀ·scale)·v per head, where q
// is [T][H][D] and k, v are [S][H][D]. It tiles queries and keys and keeps
// an online softmax, so the full T×S score matrix is never materialised.
// kt and vt are scratch of len ≥ S·H·D (head-major copies).
func attention(out, q, k, v []float32, T, S, H, D int, scale float32, kt, vt []float32) {
	// Head-major copies of k and v: [H][S][D].
	for s := 0; s < S; s++ {
		for h := 0; h < H; h++ {
			copy(kt[(h*S+s)*D:(h*S+s+1)*D], k[(s*H+h)*D:(s*H+h+1)*D])
			copy(vt[(h*S+s)*D:(h*S+s+1)*D], v[(s*H+h)*D:(s*H+h+1)*D])
		}
	}
	nq := (T + attnQTile - 1) / attnQTile
	parallel(H*nq, 1, func(lo, hi int) {
		qb := make([]float32, attnQTile*D)
		acc := make([]float32, attnQTile*D)
		sc := make([]float32, attnQTile*attnKTile)
		pv := make([]float32, attnQTile*D)
		m := make([]float32, attnQTile)
		l := make([]float32, attnQTile)
		for job := lo; job < hi; job++ {
			h, qi := job/nq, job%nq
			t0 := qi * attnQTile
			tn := min(attnQTile, T-t0)
			for i := 0; i < tn; i++ {
				src := q[((t0+i)*H+h)*D : ((t0+i)*H+h+1)*D]
				dst := qb[i*D : (i+1)*D]
				for j, x := range src {
					dst[j] = x * scale
				}
				m[i] = float32(math.Inf(-1))
				l[i] = 0
			}
			clear(acc[:tn*D])
			kh, vh := kt[h*S*D:(h+1)*S*D], vt[h*S*D:(h+1)*S*D]
			for s0 := 0; s0 < S; s0 += attnKTile {
				sn := min(attnKTile, S-s0)
				gemm.NT(tn, sn, D, qb, D, kh[s0*D:], D, sc, sn)
				for i := 0; i < tn; i++ {
					row := sc[i*sn : (i+1)*sn]
					mx := m[i]
					for _, x := range row {
						if x > mx {
							mx = x
						}
					}
					corr := float32(math.Exp(float64(m[i] - mx)))
					var sum float32
					for j, x := range row {
						e := float32(math.Exp(float64(x - mx)))
						row[j] = e
						sum += e
					}
					l[i] = l[i]*corr + sum
					m[i] = mx
					if corr != 1 {
						a := acc[i*D : (i+1)*D]
						for j := range a {
							a[j] *= corr
						}
					}
				}
				gemm.NN(tn, D, sn, sc, sn, vh[s0*D:], D, pv, D)
				for i := range pv[:tn*D] {
					acc[i] += pv[i]
				}
			}
			for i := 0; i < tn; i++ {
				inv := 1 / l[i]
				dst := out[((t0+i)*H+h)*D : ((t0+i)*H+h+1)*D]
				for j, a := range acc[i*D : (i+1)*D] {
					dst[j] = a * inv
				}
			}
		}
	})
}
