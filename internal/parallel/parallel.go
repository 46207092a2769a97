// Package parallel splits element-wise work of the models (wan, vae, t5)
// over goroutines.
package parallel

import (
	"sync"

	"github.com/densitykv/densitykv/gemm"
)

// For runs f over [0, n) split into w contiguous chunks of equal size (±1),
// one per worker: w = min(gemm.Threads(), ⌈n/minChunk⌉) (minChunk < 1
// counts as 1), so no more workers than chunks of minChunk; with w = 1 the
// calling goroutine runs f(0, n) itself.
// Callers use it only for work whose results do not depend on the split.
func For(n, minChunk int, f func(lo, hi int)) {
	w := min(gemm.Threads(), (n+max(minChunk, 1)-1)/max(minChunk, 1))
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
