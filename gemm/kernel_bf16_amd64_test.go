//go:build goexperiment.simd && amd64

package gemm

import (
	"simd/archsimd"
	"testing"

	"golang.org/x/sys/cpu"
)

// TestBF16KernelInstalled fails when the CPU has AVX512_BF16 but the
// assembly kernel was not installed: the start-up self-test rejected it,
// which would otherwise only show as a slower bench.
func TestBF16KernelInstalled(t *testing.T) {
	has := archsimd.X86.AVX512() && cpu.X86.HasAVX512BF16
	t.Logf("AVX-512 with AVX512_BF16: %v", has)
	if has && bf16Kernel == nil {
		t.Fatal("the CPU has AVX512_BF16 but the bfloat16 kernel failed its start-up self-test")
	}
	if !has && bf16Kernel != nil {
		t.Fatal("the bfloat16 kernel is installed on a CPU without AVX512_BF16")
	}
	if BF16() != (bf16Kernel != nil) {
		t.Fatalf("BF16() = %v with the kernel installed = %v", BF16(), bf16Kernel != nil)
	}
}
