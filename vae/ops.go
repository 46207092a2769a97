package vae

import "github.com/densitykv/densitykv/internal/parallel"

// transpose writes dst[c][r] = src[r][c] for src [rows][cols], in blocks.
func transpose(dst, src []float32, rows, cols int) {
	const b = 32
	parallel.For(rows, b*4, func(lo, hi int) {
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
