package parallel

import (
	"sync/atomic"
	"testing"
)

// TestFor: every index is visited exactly once, in min(threads,
// ⌈n/minChunk⌉) chunks of equal size (±1), for every thread setting, and
// n = 0 calls nothing.
func TestFor(t *testing.T) {
	for _, threads := range []int{1, 2, 3, 8} {
		prev := SetThreads(threads)
		for _, n := range []int{0, 1, 7, 100, 1001} {
			for _, minChunk := range []int{0, 1, 16, 5000} {
				seen := make([]atomic.Int32, max(n, 1))
				var calls atomic.Int32
				For(n, minChunk, func(lo, hi int) {
					calls.Add(1)
					if w := min(threads, (n+max(minChunk, 1)-1)/max(minChunk, 1)); hi-lo < n/w || hi-lo > n/w+1 {
						t.Errorf("n %d min %d: chunk [%d, %d) of %d workers", n, minChunk, lo, hi, w)
					}
					for i := lo; i < hi; i++ {
						seen[i].Add(1)
					}
				})
				for i := 0; i < n; i++ {
					if seen[i].Load() != 1 {
						t.Fatalf("threads %d n %d min %d: index %d visited %d times", threads, n, minChunk, i, seen[i].Load())
					}
				}
				if want := min(threads, (n+max(minChunk, 1)-1)/max(minChunk, 1)); int(calls.Load()) != want {
					t.Fatalf("threads %d n %d: %d calls", threads, n, calls.Load())
				}
			}
		}
		SetThreads(prev)
	}
}
