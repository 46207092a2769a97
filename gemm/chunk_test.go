package gemm

import (
	"strconv"
	"testing"
)

func itoa(i int) string { return strconv.Itoa(i) }

// TestAMXChunkResultsUnchanged: cutting the AMX kernel's depth into chunks
// (amxChunk), in either loop order (amxGroupOuter), gives the same bits as
// one pass, on the AMX layout (the hardware kernel where the CPU has it,
// else the Go emulation).
func TestAMXChunkResultsUnchanged(t *testing.T) {
	name := "emu-amx"
	for _, n := range testKernels(t, BF16) {
		if n == "amx" {
			name = n
		}
	}
	const m, n, k = 70, 96, 700
	rng := newRng(3)
	a, b := testValues(rng, m*k, false), testValues(rng, n*k, true)
	var want []float32
	for _, ch := range []int{1 << 20, 1, 3, 8, -1, -3} {
		withKernel(t, BF16, name, func() {
			defer func(old int, g bool) { amxChunk, amxGroupOuter = old, g }(amxChunk, amxGroupOuter)
			// A negative chunk runs the other loop order.
			amxChunk, amxGroupOuter = max(ch, -ch), ch < 0 != amxGroupOuter
			pa, pb := PackAAs(nil, BF16, m, k, a, k), PackNTAs(nil, BF16, n, k, b, k)
			c := make([]float32, m*n)
			MulPacked(m, n, k, pa, 0, 0, pb, 0, 0, c, n, false)
			if want == nil {
				want = c
				return
			}
			compareC(t, name+" in chunks of "+itoa(ch), c, want)
		})
	}
}
