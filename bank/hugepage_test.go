package bank

import (
	"runtime"
	"testing"
)

// TestAdviseHuge checks that the advice covers only whole pages inside the
// slice, whatever its length and alignment, and never fails on small ones.
func TestAdviseHuge(t *testing.T) {
	big := make([]float32, 3<<20)
	for _, c := range []struct {
		x      []float32
		maxLen int
	}{
		{nil, 0},
		{big[:1], 0},
		{big[1:1024], 0}, // under a page once aligned
		{big, len(big) * 4},
		{big[3 : len(big)-5], len(big)*4 - 32},
	} {
		n := adviseHuge(c.x)
		if n < 0 || n > c.maxLen || n%4096 != 0 {
			t.Errorf("len %d: advised %d bytes, want a multiple of 4096 within %d", len(c.x), n, c.maxLen)
		}
		if runtime.GOOS == "linux" && c.maxLen >= 2*4096 && n == 0 {
			t.Errorf("len %d: nothing advised", len(c.x))
		}
	}
}
