package gemm

import "sync"

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

// workspace is the per-goroutine scratch of the fast path, pooled so that
// steady-state calls do not allocate it.
type workspace struct {
	pa    PackedA   // a packed block of A rows
	pb    PackedB   // B of NT, NN and NTFunc
	tile  []float32 // TileM×TileN tile for the fused API
	strip [TileM * NR]float32
	tailF tailScratch[float32]
	tailU tailScratch[uint32]
	edgeA []uint32
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
