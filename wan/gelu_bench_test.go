package wan

import (
	"testing"

	"github.com/densitykv/densitykv/gemm"
)

func BenchmarkGeluAlone(b *testing.B) {
	x := make([]float32, 1<<20)
	for i := range x {
		x[i] = float32(i%200-100) * 0.03
	}
	for b.Loop() {
		geluTanh(x)
	}
}

func BenchmarkGeluAfterGemm(b *testing.B) {
	x := make([]float32, 1<<20)
	a := make([]float32, 256*256)
	c := make([]float32, 256*256)
	for i := range x {
		x[i] = float32(i%200-100) * 0.03
	}
	for b.Loop() {
		gemm.NT(256, 256, 256, a, 256, a, 256, c, 256)
		geluTanh(x)
	}
}
