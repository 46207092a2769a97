package vae

import (
	"math"
	"sync"

	"github.com/densitykv/densitykv/gemm"
)

// parallel runs f over [0, n) split into contiguous chunks of at least
// minChunk, one per worker (gemm.Threads() of them). Callers compute every
// element independently, so the split does not change the results.
func parallel(n, minChunk int, f func(lo, hi int)) {
	w := gemm.Threads()
	if c := (n + minChunk - 1) / max(minChunk, 1); c < w {
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

// normBlock is the number of pixels normalised together (their sums of
// squares stay in registers/L1 while the channels stream by).
const normBlock = 256

// rmsNorm writes RMS_norm (then SiLU when act) of src [ch][P] into dst
// (which may be src):
//
//	dst[c][p] = act(src[c][p] / max(‖src[:, p]‖₂, 1e-12) · √ch · gamma[c])
//
// The sum of squares of each pixel runs over the channels in order.
func rmsNorm(dst, src []float32, ch, P int, gamma []float32, act bool) {
	scale := float32(math.Sqrt(float64(ch)))
	parallel(P, 4*normBlock, func(lo, hi int) {
		var nrm [normBlock]float32
		for b := lo; b < hi; b += normBlock {
			n := min(normBlock, hi-b)
			s := nrm[:n]
			clear(s)
			for c := 0; c < ch; c++ {
				for j, v := range src[c*P+b : c*P+b+n] {
					s[j] += v * v
				}
			}
			for j, v := range s {
				s[j] = max(float32(math.Sqrt(float64(v))), 1e-12)
			}
			for c := 0; c < ch; c++ {
				g := gamma[c]
				d := dst[c*P+b : c*P+b+n]
				for j, v := range src[c*P+b : c*P+b+n] {
					y := v / s[j] * scale * g
					if act {
						y = silu(y)
					}
					d[j] = y
				}
			}
		}
	})
}

// silu returns v·sigmoid(v) = v / (1 + e^−v).
func silu(v float32) float32 {
	f := float64(v)
	return float32(f / (1 + expGo(-f)))
}

// expGo is math.Exp's portable algorithm (FreeBSD e_exp.c, as in Go's
// math.exp; the same as package wan's), used instead of math.Exp in hot
// loops: on amd64 math.Exp's assembly mixes VEX and legacy SSE
// instructions, which is very slow in GOEXPERIMENT=simd binaries whose
// AVX upper state is dirty. Results agree with math.Exp to within 1 ulp.
func expGo(x float64) float64 {
	const (
		ln2Hi     = 6.93147180369123816490e-01
		ln2Lo     = 1.90821492927058770002e-10
		log2e     = 1.44269504088896338700e+00
		overflow  = 7.09782712893383973096e+02
		underflow = -7.45133219101941108420e+02
		nearZero  = 1.0 / (1 << 28)
		p1        = 1.66666666666666657415e-01
		p2        = -2.77777777770155933842e-03
		p3        = 6.61375632143793436117e-05
		p4        = -1.65339022054652515390e-06
		p5        = 4.13813679705723846039e-08
	)
	switch {
	case x != x || x > overflow:
		if x != x {
			return x
		}
		return math.Inf(1)
	case x < underflow:
		return 0
	case -nearZero < x && x < nearZero:
		return 1 + x
	}
	var k int
	if x < 0 {
		k = int(log2e*x - 0.5)
	} else {
		k = int(log2e*x + 0.5)
	}
	hi := x - float64(k)*ln2Hi
	lo := float64(k) * ln2Lo
	r := hi - lo
	t := r * r
	c := r - t*(p1+t*(p2+t*(p3+t*(p4+t*p5))))
	y := 1 - ((lo - (r*c)/(2-c)) - hi)
	return math.Ldexp(y, k)
}

// transpose writes dst[c][r] = src[r][c] for src [rows][cols], in blocks.
func transpose(dst, src []float32, rows, cols int) {
	const b = 32
	parallel(rows, b*4, func(lo, hi int) {
		for r0 := lo; r0 < hi; r0 += b {
			r1 := min(r0+b, hi)
			for c0 := 0; c0 < cols; c0 += b {
				c1 := min(c0+b, cols)
				for r := r0; r < r1; r++ {
					row := src[r*cols : (r+1)*cols]
					for c := c0; c < c1; c++ {
						dst[c*rows+r] = row[c]
					}
				}
			}
		}
	})
}
