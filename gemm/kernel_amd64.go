//go:build goexperiment.simd && amd64

package gemm

import (
	"simd/archsimd"
	"unsafe"
)

// archInit selects the AVX-512 micro-kernel when the CPU supports it.
func archInit() {
	if archsimd.X86.AVX512() {
		kernel = kernelAVX512
		simdKernel = true
	}
}

// kernelAVX512 is kernel (see kernel.go) with eight Float32x16 accumulators:
// MR=4 rows × NR=32 columns (two vectors per row), one fused multiply-add
// per accumulator and depth step. The slices are bounds-checked once up
// front; the loop walks them with unsafe pointers (a counted loop without
// per-step slice arithmetic runs about twice as fast as re-slicing).
func kernelAVX512(kc int, a, b []float32, c []float32, ldc int, acc bool) {
	if kc <= 0 {
		if !acc {
			for r := 0; r < MR; r++ {
				clear(c[r*ldc : r*ldc+NR])
			}
		}
		return
	}
	_ = a[kc*MR-1]
	_ = b[kc*NR-1]
	c0 := c[0*ldc : 0*ldc+NR : 0*ldc+NR]
	c1 := c[1*ldc : 1*ldc+NR : 1*ldc+NR]
	c2 := c[2*ldc : 2*ldc+NR : 2*ldc+NR]
	c3 := c[3*ldc : 3*ldc+NR : 3*ldc+NR]
	var x00, x01, x10, x11, x20, x21, x30, x31 archsimd.Float32x16
	if acc {
		x00 = archsimd.LoadFloat32x16((*[16]float32)(c0[0:16]))
		x01 = archsimd.LoadFloat32x16((*[16]float32)(c0[16:32]))
		x10 = archsimd.LoadFloat32x16((*[16]float32)(c1[0:16]))
		x11 = archsimd.LoadFloat32x16((*[16]float32)(c1[16:32]))
		x20 = archsimd.LoadFloat32x16((*[16]float32)(c2[0:16]))
		x21 = archsimd.LoadFloat32x16((*[16]float32)(c2[16:32]))
		x30 = archsimd.LoadFloat32x16((*[16]float32)(c3[0:16]))
		x31 = archsimd.LoadFloat32x16((*[16]float32)(c3[16:32]))
	}
	// The last depth step is peeled off so that pa and pb are never
	// advanced past the end of a and b (an out-of-bounds pointer is invalid
	// Go and checkptr rejects it under -race). Indexing by a byte offset
	// instead measured ~15% slower.
	pa := unsafe.Pointer(&a[0])
	pb := unsafe.Pointer(&b[0])
	for q := 1; q < kc; q++ {
		b0 := archsimd.LoadFloat32x16((*[16]float32)(pb))
		b1 := archsimd.LoadFloat32x16((*[16]float32)(unsafe.Add(pb, 64)))
		a0 := archsimd.BroadcastFloat32x16(*(*float32)(pa))
		x00 = a0.MulAdd(b0, x00)
		x01 = a0.MulAdd(b1, x01)
		a1 := archsimd.BroadcastFloat32x16(*(*float32)(unsafe.Add(pa, 4)))
		x10 = a1.MulAdd(b0, x10)
		x11 = a1.MulAdd(b1, x11)
		a2 := archsimd.BroadcastFloat32x16(*(*float32)(unsafe.Add(pa, 8)))
		x20 = a2.MulAdd(b0, x20)
		x21 = a2.MulAdd(b1, x21)
		a3 := archsimd.BroadcastFloat32x16(*(*float32)(unsafe.Add(pa, 12)))
		x30 = a3.MulAdd(b0, x30)
		x31 = a3.MulAdd(b1, x31)
		pa = unsafe.Add(pa, 4*MR)
		pb = unsafe.Add(pb, 4*NR)
	}
	{
		b0 := archsimd.LoadFloat32x16((*[16]float32)(pb))
		b1 := archsimd.LoadFloat32x16((*[16]float32)(unsafe.Add(pb, 64)))
		a0 := archsimd.BroadcastFloat32x16(*(*float32)(pa))
		x00 = a0.MulAdd(b0, x00)
		x01 = a0.MulAdd(b1, x01)
		a1 := archsimd.BroadcastFloat32x16(*(*float32)(unsafe.Add(pa, 4)))
		x10 = a1.MulAdd(b0, x10)
		x11 = a1.MulAdd(b1, x11)
		a2 := archsimd.BroadcastFloat32x16(*(*float32)(unsafe.Add(pa, 8)))
		x20 = a2.MulAdd(b0, x20)
		x21 = a2.MulAdd(b1, x21)
		a3 := archsimd.BroadcastFloat32x16(*(*float32)(unsafe.Add(pa, 12)))
		x30 = a3.MulAdd(b0, x30)
		x31 = a3.MulAdd(b1, x31)
	}
	x00.Store((*[16]float32)(c0[0:16]))
	x01.Store((*[16]float32)(c0[16:32]))
	x10.Store((*[16]float32)(c1[0:16]))
	x11.Store((*[16]float32)(c1[16:32]))
	x20.Store((*[16]float32)(c2[0:16]))
	x21.Store((*[16]float32)(c2[16:32]))
	x30.Store((*[16]float32)(c3[0:16]))
	x31.Store((*[16]float32)(c3[16:32]))
	// Leave no dirty upper halves behind: the scalar SSE code that follows
	// (packing, epilogues, math.Exp) would otherwise pay transition
	// penalties on Intel cores.
	archsimd.ClearAVXUpperBits()
}
