package kerneltest

import (
	"math"
	"slices"
	"testing"

	"github.com/densitykv/densitykv/gemm"
)

func TestHashAndFirstDiff(t *testing.T) {
	nan := float32(math.NaN())
	a, b := []float32{1, 2, nan}, []float32{1, 2, float32(math.Float32frombits(0x7fc00001))}
	if i := FirstDiff(a, b); i != -1 {
		t.Fatalf("NaNs differ at %d", i)
	}
	if i := FirstDiff([]float32{0}, []float32{float32(math.Copysign(0, -1))}); i != 0 {
		t.Fatalf("+0 and -0: %d", i)
	}
	if i := FirstDiff(a, a[:2]); i != 0 {
		t.Fatalf("lengths: %d", i)
	}
	// The hash covers the split into slices and every bit.
	h := Hash([]float32{1, 2}, []float32{3})
	for _, other := range [][][]float32{{{1}, {2, 3}}, {{1, 2, 3}}, {{1, 2}, {math.Nextafter32(3, 4)}}} {
		if Hash(other...) == h {
			t.Fatalf("%v hashes like [[1 2] [3]]", other)
		}
	}
	if Hash([]float32{1, 2}, []float32{3}) != h || len(h) != 64 || HashBytes([]byte("x")) == HashBytes([]byte("y")) {
		t.Fatal("hashes not stable or not SHA-256 hex")
	}
}

func TestEachRunsEveryKernelAndRestores(t *testing.T) {
	for _, p := range []gemm.Precision{gemm.F32, gemm.BF16} {
		before := gemm.KernelName(p)
		var seen []string
		Each(t, p, func(k string) {
			if gemm.KernelName(p) != k {
				t.Fatalf("running %s, gemm runs %s", k, gemm.KernelName(p))
			}
			seen = append(seen, k)
		})
		if !slices.Contains(seen, "go") || !slices.Equal(seen, Names(p)) {
			t.Fatalf("%v: ran %v, Names %v", p, seen, Names(p))
		}
		if p == gemm.BF16 && (!slices.Contains(seen, "emu-amx") || !slices.Contains(seen, "emu-avx512bf16")) {
			t.Fatalf("bf16 kernels %v lack the emulations", seen)
		}
		if gemm.KernelName(p) != before {
			t.Fatalf("%v: %s after Each, was %s", p, gemm.KernelName(p), before)
		}
	}
}
