package gemm

import "sync"

// This file holds the reference loops (always built): they define the
// results and are the oracle for the packed fast path.

func ntGeneric(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	for i := 0; i < m; i++ {
		ar := a[i*lda : i*lda+k]
		cr := c[i*ldc : i*ldc+n]
		for j := range cr {
			br := b[j*ldb : j*ldb+k]
			var s float32
			for p, v := range ar {
				s += v * br[p]
			}
			cr[j] = s
		}
	}
}

func nnGeneric(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	for i := 0; i < m; i++ {
		cr := c[i*ldc : i*ldc+n]
		clear(cr)
		for p := 0; p < k; p++ {
			av := a[i*lda+p]
			br := b[p*ldb : p*ldb+n]
			for j, v := range br {
				cr[j] += av * v
			}
		}
	}
}

// parallelFor splits [0, count) into at most workers contiguous ranges and
// runs fn(w, lo, hi) for each, range 0 on the calling goroutine. The split
// depends only on count and workers.
func parallelFor(workers, count int, fn func(w, lo, hi int)) {
	if workers > count {
		workers = count
	}
	if workers <= 1 {
		if count > 0 {
			fn(0, 0, count)
		}
		return
	}
	var wg sync.WaitGroup
	wg.Add(workers - 1)
	for w := 1; w < workers; w++ {
		lo, hi := w*count/workers, (w+1)*count/workers
		go func() {
			defer wg.Done()
			fn(w, lo, hi)
		}()
	}
	fn(0, 0, count/workers)
	wg.Wait()
}

// parallelRows runs fn over contiguous row ranges of [0, m) on up to
// Threads() goroutines, at least 16 rows each.
func parallelRows(m int, fn func(i0, i1 int)) {
	workers := min(Threads(), (m+15)/16)
	parallelFor(workers, m, func(_, lo, hi int) { fn(lo, hi) })
}

// workspace is the per-goroutine scratch of the fast path, pooled so that
// steady-state calls do not allocate it.
type workspace struct {
	pb   PackedB
	ap   []float32 // packed A block: [TileM/MR][k][MR]
	tile []float32 // TileM×TileN tile for the fused API
	tmp  [MR * NR]float32
}

var pool = sync.Pool{New: func() any { return new(workspace) }}

func getWorkspace() *workspace  { return pool.Get().(*workspace) }
func putWorkspace(w *workspace) { pool.Put(w) }

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}
