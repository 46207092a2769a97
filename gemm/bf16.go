package gemm

import (
	"math"
	"sync/atomic"
	"unsafe"
)

//go:generate go run gen_bf16.go

// The bfloat16 fast path. When both packed operands of MulPacked hold only
// values that are exact bfloat16 numbers in a safe exponent range (see
// bf16Exact), their products are exact in float32, and a sum of such
// products accumulated one rounding at a time is the same whether the
// micro-kernel issues one float32 fused multiply-add per depth step or one
// VDPBF16PS per depth pair: that instruction adds the product of the pair's
// high halves, rounds, then adds the product of the low halves and rounds,
// with denormals flushed (which the exponent range rules out). Packing depth
// 2i into the high half and 2i+1 into the low half therefore keeps the
// documented summation order (sequential in q), and the bfloat16 kernel
// gives the float32 results bit for bit at twice the multiply-adds per
// instruction. The bank's keys are bfloat16 by default, so every Riesz pass
// over them takes this path on CPUs with AVX512_BF16.
//
// The pairs are derived from the float32 panels while packing; an operand
// with any value outside the exact range simply has no pairs, and products
// with it use the float32 kernel.

// bf16Kernel computes one MR×NR block over kp ≥ 1 depth pairs:
//
//	for r < MR, s < NR: c[r*ldc+s] = (acc ? c[r*ldc+s] : 0) + Σ_{q<2kp} A[r][q]·B[q][s]
//
// with a = [kp][MR] and b = [kp][NR] pairs (depth 2i high, 2i+1 low) and
// the sum in order of q. It is nil when the build or the CPU has no
// bfloat16 kernel.
var bf16Kernel func(kp int, a, b *uint32, c *float32, ldc int, acc bool)

// useBF16 selects the bfloat16 kernel for MulPacked when both operands
// have pairs. It is set at start-up (after a self-test) and by SetBF16.
var useBF16 atomic.Bool

// bf16Calls counts the MulPacked calls served by the bfloat16 kernel.
var bf16Calls atomic.Int64

// BF16Calls returns the number of MulPacked calls served by the bfloat16
// kernel since the program started, so tests and benchmarks can tell
// which kernel ran.
func BF16Calls() int64 { return bf16Calls.Load() }

// BF16 reports whether MulPacked uses the AVX512_BF16 kernel for operands
// that are exact bfloat16 values (see SetBF16).
func BF16() bool { return useBF16.Load() && useFast && bf16Kernel != nil }

// SetBF16 enables or disables the bfloat16 kernel (where the build and the
// CPU have one) and returns the previous setting. Results are identical
// either way; only the speed of products of bfloat16-exact operands
// changes. It must not be called while products are running.
func SetBF16(on bool) (prev bool) {
	prev = BF16()
	useBF16.Store(on && bf16Kernel != nil)
	return prev
}

// The exponent range of bf16Exact: nonzero values have magnitudes in
// [2^bf16MinExp, 2^(bf16MaxExp+1)). Products then lie in [2^-96, 2^102),
// are exact in float32 (8-bit significands), and every nonzero partial sum
// is a multiple of 2^-110, so no value, product or sum is ever denormal
// (the instruction flushes those) and sums of fewer than 2^24 products
// cannot overflow.
// Operands of depth bf16MaxDepth or more get no pairs.
const (
	bf16MinExp   = -48
	bf16MaxExp   = 50
	bf16MaxDepth = 1 << 24
)

// bf16Exact reports whether v is zero or an exact bfloat16 value (low 16
// bits zero) of magnitude in [2^bf16MinExp, 2^(bf16MaxExp+1)).
func bf16Exact(v float32) bool {
	b := math.Float32bits(v)
	if b&0x7fffffff == 0 {
		return true
	}
	e := int(b>>23&0xff) - 127
	return b&0xffff == 0 && e >= bf16MinExp && e <= bf16MaxExp
}

// pairPanels derives the bfloat16 pair panels dst ([np][k/2][w] uint32)
// from float32 panels src ([np][k][w]) for panels [lo, hi), with depth 2i
// in the high half and 2i+1 in the low half. It stops and returns false at
// the first value that is not bf16Exact. k must be even.
func pairPanels(dst []uint32, src []float32, k, w, lo, hi int) bool {
	for p := lo; p < hi; p++ {
		s := src[p*k*w : (p+1)*k*w]
		d := dst[p*k/2*w : (p+1)*k/2*w]
		for i := 0; i < k/2; i++ {
			even := s[2*i*w : 2*i*w+w : 2*i*w+w]
			odd := s[(2*i+1)*w : (2*i+1)*w+w : (2*i+1)*w+w]
			out := d[i*w : i*w+w : i*w+w]
			for j := range out {
				x, y := even[j], odd[j]
				if !bf16Exact(x) || !bf16Exact(y) {
					return false
				}
				out[j] = math.Float32bits(x)&0xffff0000 | math.Float32bits(y)>>16
			}
		}
	}
	return true
}

func growU32(s []uint32, n int) []uint32 {
	if cap(s) < n {
		return make([]uint32, n)
	}
	return s[:n]
}

// packPairsB derives p's pair panels when the bfloat16 kernel is on and
// every value qualifies; otherwise p has none.
func (p *PackedB) packPairsB() {
	p.pairs = false
	if !BF16() || p.k%2 != 0 || p.k == 0 || p.k >= bf16MaxDepth || p.n == 0 {
		return
	}
	np := (p.n + NR - 1) / NR
	p.bf = growU32(p.bf, np*p.k/2*NR)
	if p.n*p.k < 1<<16 || Threads() == 1 {
		p.pairs = pairPanels(p.bf, p.data, p.k, NR, 0, np)
		return
	}
	var bad atomic.Bool
	parallelFor(Threads(), np, func(_, lo, hi int) {
		if !bad.Load() && !pairPanels(p.bf, p.data, p.k, NR, lo, hi) {
			bad.Store(true)
		}
	})
	p.pairs = !bad.Load()
}

// packPairsA derives p's pair panels like packPairsB.
func (p *PackedA) packPairsA() {
	p.pairs = false
	if !BF16() || p.k%2 != 0 || p.k == 0 || p.k >= bf16MaxDepth || p.m == 0 {
		return
	}
	np := (p.m + MR - 1) / MR
	p.bf = growU32(p.bf, np*p.k/2*MR)
	p.pairs = pairPanels(p.bf, p.data, p.k, MR, 0, np)
}

// macroBF16 is macro (blocked.go) on pair panels: ap holds A's panels of
// aKp pairs (pairs [aK0p, aK0p+k1p-k0p) are used) and the product runs over
// B's pairs [k0p, k1p). The result equals macro's bit for bit.
func (p *PackedB) macroBF16(ap []uint32, aKp, aK0p, rows, j0, cols, k0p, k1p int, c []float32, ldc int, acc bool, tmp *[MR * NR]float32) {
	macroPanels(p.bf, p.k/2, ap, aKp, aK0p, rows, j0, cols, k0p, k1p, KC/2, c, ldc, acc, tmp, pairKernel)
}

// pairKernel calls bf16Kernel on one MR×NR block after checking the
// slices' extents (the assembly cannot).
func pairKernel(kp int, a, b []uint32, c []float32, ldc int, acc bool) {
	_ = a[kp*MR-1]
	_ = b[kp*NR-1]
	_ = c[(MR-1)*ldc+NR-1]
	bf16Kernel(kp, &a[0], &b[0], &c[0], ldc, acc)
}

// bf16SelfTest runs bf16Kernel on a fixed problem whose sums depend on the
// order and the rounding of every step (bfloat16 values with exponents in
// [-8, 8]) and reports whether it matches the sequential float32 sums bit
// for bit, from zero and continuing from C. A CPU whose VDPBF16PS rounded
// the pair once, or added the low product first, fails it, and the
// float32 kernel stays in use.
func bf16SelfTest() bool {
	const k = 64
	var a [k * MR]float32 // [q][MR], as packed
	var b [k * NR]float32 // [q][NR]
	var ap [k / 2 * MR]uint32
	var bp [k / 2 * NR]uint32
	x := uint32(0x9e3779b9)
	next := func() float32 {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		e := int(x>>8%17) - 8
		m := float32(128+x>>16%128) / 128
		if x&1 != 0 {
			m = -m
		}
		return float32(math.Ldexp(float64(m), e))
	}
	for i := range a {
		a[i] = next()
	}
	for i := range b {
		b[i] = next()
	}
	if !pairPanels(ap[:], a[:], k, MR, 0, 1) || !pairPanels(bp[:], b[:], k, NR, 0, 1) {
		return false
	}
	var c, want [MR * NR]float32
	for pass := 0; pass < 2; pass++ {
		for r := 0; r < MR; r++ {
			for s := 0; s < NR; s++ {
				acc := want[r*NR+s]
				if pass == 0 {
					acc = 0
				}
				for q := 0; q < k; q++ {
					acc += a[q*MR+r] * b[q*NR+s] // the product is exact
				}
				want[r*NR+s] = acc
			}
		}
		bf16Kernel(k/2, &ap[0], &bp[0], &c[0], NR, pass > 0)
		if c != want {
			return false
		}
	}
	return true
}

// kernelBF16Go is bf16Kernel in Go: VDPBF16PS's documented arithmetic
// (per pair: add the high halves' product, round, add the low halves'
// product, round) for operands in bf16Exact's range, where no denormal
// arises. The tests check the assembly kernel against it and both against
// the float32 kernels; it also lets builds without the assembly test the
// pair packing and macroBF16.
var kernelBF16Go = pairKernelGo(func(x float32, pa, pb uint32) float32 {
	x += math.Float32frombits(pa&0xffff0000) * math.Float32frombits(pb&0xffff0000)
	return x + math.Float32frombits(pa<<16)*math.Float32frombits(pb<<16)
})

// pairKernelGo returns a bf16Kernel in Go whose per-pair arithmetic is
// step (accumulator, A pair, B pair → accumulator).
func pairKernelGo(step func(x float32, pa, pb uint32) float32) func(kp int, a, b *uint32, c *float32, ldc int, acc bool) {
	return func(kp int, a, b *uint32, c *float32, ldc int, acc bool) {
		as := unsafe.Slice(a, kp*MR)
		bs := unsafe.Slice(b, kp*NR)
		cs := unsafe.Slice(c, (MR-1)*ldc+NR)
		for r := 0; r < MR; r++ {
			for s := 0; s < NR; s++ {
				var x float32
				if acc {
					x = cs[r*ldc+s]
				}
				for i := 0; i < kp; i++ {
					x = step(x, as[i*MR+r], bs[i*NR+s])
				}
				cs[r*ldc+s] = x
			}
		}
	}
}
