// Package parallel holds the process's thread setting (Threads, which
// gemm.SetThreads sets) and splits element-wise work of the models (wan,
// vae, t5) over goroutines.
package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
)

var threads atomic.Int64

func init() { threads.Store(int64(runtime.GOMAXPROCS(0))) }

// SetThreads sets the number of goroutines the matrix products and For
// may use and returns the previous setting; n < 1 means
// runtime.GOMAXPROCS(0). The default is GOMAXPROCS at start-up. (The
// public spelling is gemm.SetThreads.)
func SetThreads(n int) (prev int) {
	if n < 1 {
		n = runtime.GOMAXPROCS(0)
	}
	return int(threads.Swap(int64(n)))
}

// Threads returns the current thread setting.
func Threads() int { return int(threads.Load()) }

// For runs f over [0, n) split into w contiguous chunks of equal size (±1),
// one per worker: w = min(Threads(), ⌈n/minChunk⌉) (minChunk < 1
// counts as 1), so no more workers than chunks of minChunk; with w = 1 the
// calling goroutine runs f(0, n) itself.
// Callers use it only for work whose results do not depend on the split.
func For(n, minChunk int, f func(lo, hi int)) {
	w := min(Threads(), (n+max(minChunk, 1)-1)/max(minChunk, 1))
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
