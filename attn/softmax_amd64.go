//go:build goexperiment.simd && amd64

package attn

import (
	"simd/archsimd"
	"unsafe"
)

// archInit selects the AVX-512 kernels when the CPU supports them.
func archInit() {
	if archsimd.X86.AVX512() {
		softmaxPanel = softmaxPanelAVX512
		scaleCols = scaleColsAVX512
		addRows = addRowsAVX512
	}
}

func load(p unsafe.Pointer) archsimd.Float32x16 {
	return archsimd.LoadFloat32x16((*[16]float32)(p))
}

func store(v archsimd.Float32x16, p unsafe.Pointer) { v.Store((*[16]float32)(p)) }

// exp16 returns exp(y) to about 2 ulp: y = n·ln2 + u with |u| ≤ ln2/2
// (Cody–Waite split of ln2), e^u by its Taylor polynomial of degree 7,
// scaled by 2^n (VSCALEFPS). Inputs below −104 give 0, NaN gives NaN
// (restored explicitly: the clamping max may drop it).
func exp16(y archsimd.Float32x16) archsimd.Float32x16 {
	const (
		log2e = 1.44269504088896341
		ln2hi = 0.693359375
		ln2lo = -2.12194440e-4
	)
	orig := y
	y = y.Max(archsimd.BroadcastFloat32x16(-104))
	n := y.Mul(archsimd.BroadcastFloat32x16(log2e)).RoundToEvenScaled(0)
	u := n.MulAdd(archsimd.BroadcastFloat32x16(-ln2hi), y)
	u = n.MulAdd(archsimd.BroadcastFloat32x16(-ln2lo), u)
	p := archsimd.BroadcastFloat32x16(1.0 / 5040)
	p = p.MulAdd(u, archsimd.BroadcastFloat32x16(1.0/720))
	p = p.MulAdd(u, archsimd.BroadcastFloat32x16(1.0/120))
	p = p.MulAdd(u, archsimd.BroadcastFloat32x16(1.0/24))
	p = p.MulAdd(u, archsimd.BroadcastFloat32x16(1.0/6))
	p = p.MulAdd(u, archsimd.BroadcastFloat32x16(0.5))
	p = p.MulAdd(u, archsimd.BroadcastFloat32x16(1))
	p = p.MulAdd(u, archsimd.BroadcastFloat32x16(1))
	return orig.Merge(p.Scale(n), orig.IsNaN())
}

func softmaxPanelAVX512(p []float32, cols int, scale float32, st *panelState, first bool) {
	if cols <= 0 {
		return
	}
	_ = p[cols*lanes-1]
	base := unsafe.Pointer(&p[0])
	sv := archsimd.BroadcastFloat32x16(scale)
	// The running maximum may drop NaN scores (vector max returns one
	// operand when the other is NaN); a NaN score still makes its
	// probability, hence l and the output, NaN in the exp pass below.
	floor := archsimd.BroadcastFloat32x16(minMax)
	m0, m1 := floor, floor
	for s := 0; s < cols; s++ {
		r := unsafe.Add(base, s*lanes*4)
		m0 = m0.Max(load(r).Mul(sv))
		m1 = m1.Max(load(unsafe.Add(r, 64)).Mul(sv))
	}
	var a0, a1 archsimd.Float32x16
	if !first {
		old0 := archsimd.LoadFloat32x16((*[16]float32)(st.m[0:16]))
		old1 := archsimd.LoadFloat32x16((*[16]float32)(st.m[16:32]))
		m0 = m0.Max(old0)
		m1 = m1.Max(old1)
		a0 = exp16(old0.Sub(m0))
		a1 = exp16(old1.Sub(m1))
	}
	a0.Store((*[16]float32)(st.alpha[0:16]))
	a1.Store((*[16]float32)(st.alpha[16:32]))
	m0.Store((*[16]float32)(st.m[0:16]))
	m1.Store((*[16]float32)(st.m[16:32]))
	nm0, nm1 := m0.Mul(archsimd.BroadcastFloat32x16(-1)), m1.Mul(archsimd.BroadcastFloat32x16(-1))
	var s0, s1 archsimd.Float32x16
	for s := 0; s < cols; s++ {
		r := unsafe.Add(base, s*lanes*4)
		e0 := exp16(load(r).MulAdd(sv, nm0))
		e1 := exp16(load(unsafe.Add(r, 64)).MulAdd(sv, nm1))
		store(e0, r)
		store(e1, unsafe.Add(r, 64))
		s0 = s0.Add(e0)
		s1 = s1.Add(e1)
	}
	if !first {
		l0 := archsimd.LoadFloat32x16((*[16]float32)(st.l[0:16]))
		l1 := archsimd.LoadFloat32x16((*[16]float32)(st.l[16:32]))
		s0 = l0.MulAdd(a0, s0)
		s1 = l1.MulAdd(a1, s1)
	}
	s0.Store((*[16]float32)(st.l[0:16]))
	s1.Store((*[16]float32)(st.l[16:32]))
	archsimd.ClearAVXUpperBits() // scalar SSE code follows
}

func scaleColsAVX512(o []float32, rows, ld, j0 int, alpha *[lanes]float32) {
	if rows <= 0 {
		return
	}
	_ = o[(rows-1)*ld+j0+lanes-1]
	a0 := archsimd.LoadFloat32x16((*[16]float32)(alpha[0:16]))
	a1 := archsimd.LoadFloat32x16((*[16]float32)(alpha[16:32]))
	for r := 0; r < rows; r++ {
		row := o[r*ld+j0 : r*ld+j0+lanes : r*ld+j0+lanes]
		p0, p1 := (*[16]float32)(row[0:16]), (*[16]float32)(row[16:32])
		archsimd.LoadFloat32x16(p0).Mul(a0).Store(p0)
		archsimd.LoadFloat32x16(p1).Mul(a1).Store(p1)
	}
	archsimd.ClearAVXUpperBits()
}

func addRowsAVX512(p []float32, from, to int, acc *[lanes]float32) {
	if to <= from {
		return
	}
	_ = p[to*lanes-1]
	s0 := archsimd.LoadFloat32x16((*[16]float32)(acc[0:16]))
	s1 := archsimd.LoadFloat32x16((*[16]float32)(acc[16:32]))
	for s := from; s < to; s++ {
		row := p[s*lanes : s*lanes+lanes : s*lanes+lanes]
		s0 = s0.Add(archsimd.LoadFloat32x16((*[16]float32)(row[0:16])))
		s1 = s1.Add(archsimd.LoadFloat32x16((*[16]float32)(row[16:32])))
	}
	s0.Store((*[16]float32)(acc[0:16]))
	s1.Store((*[16]float32)(acc[16:32]))
	archsimd.ClearAVXUpperBits()
}
