//go:build goexperiment.simd && amd64

package attn

import (
	"math"
	"simd/archsimd"
)

// archInit selects the AVX-512 row kernels when the CPU supports them.
func archInit() {
	if archsimd.X86.AVX512() {
		rowMax = rowMaxAVX512
		expRow = expRowAVX512
	}
}

func rowMaxAVX512(x []float32, scale float32) float32 {
	neg := float32(math.Inf(-1))
	acc := archsimd.BroadcastFloat32x16(neg)
	sv := archsimd.BroadcastFloat32x16(scale)
	j := 0
	for ; j+16 <= len(x); j += 16 {
		acc = acc.Max(archsimd.LoadFloat32x16((*[16]float32)(x[j : j+16])).Mul(sv))
	}
	var buf [16]float32
	acc.Store(&buf)
	archsimd.ClearAVXUpperBits() // scalar SSE code follows
	m := neg
	for _, v := range buf {
		m = max(m, v)
	}
	for _, v := range x[j:] {
		m = max(m, v*scale)
	}
	// Max on vectors drops NaN in one operand order; recheck so NaN
	// propagates like the scalar kernel.
	if m == m {
		for _, v := range x {
			if v != v {
				return v
			}
		}
	}
	return m
}

// exp16 returns exp(y) for y ≤ 0 (or small positive) to about 2 ulp:
// y = n·ln2 + u with |u| ≤ ln2/2 (Cody–Waite split of ln2), e^u by its
// Taylor polynomial of degree 7, then scaled by 2^n (VSCALEFPS). Inputs
// below −104 give 0; NaN gives NaN.
func exp16(y archsimd.Float32x16) archsimd.Float32x16 {
	const (
		log2e = 1.44269504088896341
		ln2hi = 0.693359375
		ln2lo = -2.12194440e-4
	)
	y = y.Max(archsimd.BroadcastFloat32x16(-104))
	n := y.Mul(archsimd.BroadcastFloat32x16(log2e)).RoundToEvenScaled(0)
	u := n.Mul(archsimd.BroadcastFloat32x16(-ln2hi)).Add(y)
	u = n.Mul(archsimd.BroadcastFloat32x16(-ln2lo)).Add(u)
	p := archsimd.BroadcastFloat32x16(1.0 / 5040)
	p = p.MulAdd(u, archsimd.BroadcastFloat32x16(1.0/720))
	p = p.MulAdd(u, archsimd.BroadcastFloat32x16(1.0/120))
	p = p.MulAdd(u, archsimd.BroadcastFloat32x16(1.0/24))
	p = p.MulAdd(u, archsimd.BroadcastFloat32x16(1.0/6))
	p = p.MulAdd(u, archsimd.BroadcastFloat32x16(0.5))
	p = p.MulAdd(u, archsimd.BroadcastFloat32x16(1))
	p = p.MulAdd(u, archsimd.BroadcastFloat32x16(1))
	return p.Scale(n)
}

func expRowAVX512(x []float32, scale, m float32) float32 {
	if m != m {
		return expRowGo(x, scale, m)
	}
	sv := archsimd.BroadcastFloat32x16(scale)
	mv := archsimd.BroadcastFloat32x16(-m)
	var s0, s1 archsimd.Float32x16
	j := 0
	for ; j+32 <= len(x); j += 32 {
		e0 := exp16(archsimd.LoadFloat32x16((*[16]float32)(x[j:j+16])).MulAdd(sv, mv))
		e1 := exp16(archsimd.LoadFloat32x16((*[16]float32)(x[j+16:j+32])).MulAdd(sv, mv))
		e0.Store((*[16]float32)(x[j : j+16]))
		e1.Store((*[16]float32)(x[j+16 : j+32]))
		s0 = s0.Add(e0)
		s1 = s1.Add(e1)
	}
	for ; j < len(x); j += 16 {
		part := x[j:min(j+16, len(x))]
		e := exp16(archsimd.LoadFloat32x16SlicePart(part).MulAdd(sv, mv))
		e.StoreSlicePart(part)
		if len(part) < 16 {
			// zero the lanes past the end before summing
			var buf [16]float32
			copy(buf[:], part)
			e = archsimd.LoadFloat32x16(&buf)
		}
		s0 = s0.Add(e)
	}
	var buf [16]float32
	s0.Add(s1).Store(&buf)
	archsimd.ClearAVXUpperBits() // scalar SSE code follows
	var sum float32
	for _, v := range buf {
		sum += v
	}
	return sum
}
