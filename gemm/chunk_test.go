package gemm

import (
	"strconv"
	"strings"
	"testing"
)

func itoa(i int) string { return strconv.Itoa(i) }

// TestAMXChunkResultsUnchanged: cutting the AMX kernel's depth into chunks
// (amxChunk), in either loop order (amxGroupOuter), gives the same bits as
// one pass, on the AMX layout: the Go emulation, the generated AMX kernels
// in the interpreter (sim-amx, sim-amx-i) and on the hardware (amx, amx-i)
// where the CPU has it, all equal.
func TestAMXChunkResultsUnchanged(t *testing.T) {
	var names []string
	for _, n := range testKernels(t, BF16) {
		if strings.Contains(n, "amx") {
			names = append(names, n)
		}
	}
	if len(names) < 3 {
		t.Fatalf("AMX-layout kernels %v: want emu-amx and the interpreted ones at least", names)
	}
	const m, n, k = 70, 96, 700
	rng := newRng(3)
	a, b := testValues(rng, m*k, false), testValues(rng, n*k, true)
	var want []float32
	for _, name := range names {
		for _, ch := range []int{1 << 20, 1, 3, 8, -1, -3} {
			chunkRun(t, name, ch, m, n, k, a, b, &want)
		}
	}
}

// chunkRun computes the product on kernel name in depth chunks of ch
// blocks (negative: in the other loop order) and compares it with *want,
// or sets *want on the first call.
func chunkRun(t *testing.T, name string, ch, m, n, k int, a, b []float32, want *[]float32) {
	withKernel(t, BF16, name, func() {
		defer func(old int, g bool) { amxChunk, amxGroupOuter = old, g }(amxChunk, amxGroupOuter)
		// A negative chunk runs the other loop order.
		amxChunk, amxGroupOuter = max(ch, -ch), ch < 0 != amxGroupOuter
		pa, pb := PackAAs(nil, BF16, m, k, a, k), PackNTAs(nil, BF16, n, k, b, k)
		c := make([]float32, m*n)
		MulPacked(m, n, k, pa, 0, 0, pb, 0, 0, c, n, false)
		if *want == nil {
			*want = c
			return
		}
		compareC(t, name+" in chunks of "+itoa(ch), c, *want)
	})
}
