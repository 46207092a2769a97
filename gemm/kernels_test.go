package gemm

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// testKernels returns the kernels of precision p that this machine can
// run (assembly that passed selection's checks, the pure-Go kernel and the
// Go emulations of the others), by name.
func testKernels(t testing.TB, p Precision) []string {
	t.Helper()
	selectKernels()
	var names []string
	for _, k := range registry {
		if k.prec == p && k.unavailable == "" {
			names = append(names, k.name)
		}
	}
	return names
}

// withKernel runs f with products of precision p forced onto kernel name.
func withKernel(t testing.TB, p Precision, name string, f func()) {
	t.Helper()
	restore, err := Force(p.String() + ":" + name)
	if err != nil {
		t.Fatalf("Force(%v:%s): %v", p, name, err)
	}
	defer restore()
	f()
}

// mulCase is a MulPacked call: an m×n×k product of A[ai0:][ak0:] (A is
// am×ak) and op(B)[bk0:][bj0:] (op(B) is bk×bn).
type mulCase struct{ m, n, k, ai0, ak0, bj0, bk0, am, ak, bn, bk int }

func (c mulCase) String() string {
	return fmt.Sprintf("%dx%dx%d@A[%d:][%d:](%dx%d)·B[%d:][%d:](%dx%d)", c.m, c.n, c.k, c.ai0, c.ak0, c.am, c.ak, c.bk0, c.bj0, c.bk, c.bn)
}

// mulCases straddle the register block (MR, NR), AMX row groups (32), the
// 32-depth blocks, the depth chunks (KC, amxChunk), TileN, with offsets, depth ranges
// that stop inside a block or run to the operand's end (zero padding), and
// empty depth.
var mulCases = []mulCase{
	{4, 32, 32, 0, 0, 0, 0, 4, 32, 32, 32},
	{1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1},
	{5, 33, 33, 0, 0, 0, 0, 5, 33, 33, 33},
	{3, 31, 17, 4, 0, 32, 0, 9, 40, 70, 17},         // depth stops inside a block (A is deeper)
	{37, 70, 300, 4, 32, 32, 64, 41, 400, 102, 364}, // offsets, chunks, block cut short
	{64, 96, 256, 8, 128, 64, 128, 72, 384, 160, 384},
	{33, 545, 129, 32, 0, 0, 0, 65, 129, 545, 129}, // crosses TileN, partial AMX group, padded tail
	{32, 64, 95, 0, 0, 0, 0, 32, 95, 64, 95},       // whole AMX tiles, padded tail
	{8, 40, 0, 0, 0, 0, 0, 8, 10, 40, 10},          // k = 0
	{40, 64, 600, 0, 0, 0, 0, 40, 600, 64, 600},    // two AMX depth chunks and a part, partial group
}

// testValues fills n values: plain random ones, or the self-test's mix of
// extremes, denormals, zeros, ±Inf and NaN.
func testValues(rng *rand.Rand, n int, special bool) []float32 {
	if special {
		return specialValues(rng, n)
	}
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(rng.Float64()*2 - 1)
	}
	return s
}

const guard = float32(-7777.5)

// TestKernelsExact runs every kernel of each precision (assembly where the
// CPU has it, pure Go, Go emulations of the rest) through MulPacked on
// mulCases, with accumulation on and off, plain and special values, A
// packed directly and transposed, B packed NT and NN, and compares every
// element bit for bit with the definition (refProduct), NaN-aware, with
// guard values around C that must survive.
func TestKernelsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, prec := range []Precision{F32, BF16} {
		names := testKernels(t, prec)
		t.Logf("%v kernels: %v", prec, names)
		for ci, c := range mulCases {
			if prec == BF16 && (c.ak0%BF16Block != 0 || c.bk0%BF16Block != 0) {
				continue
			}
			for _, special := range []bool{false, true} {
				a := testValues(rng, c.am*c.ak, special)
				b := testValues(rng, c.bn*c.bk, special)
				at := transpose(a, c.am, c.ak) // A = atᵀ, at is ak×am
				bnn := transpose(b, c.bn, c.bk)
				ldc := c.n + 1 + ci%3
				c0 := testValues(rng, c.m*ldc+3, special)
				for i := 0; i < c.m; i++ {
					for j := c.n; j < ldc; j++ {
						c0[i*ldc+j] = guard
					}
				}
				for _, acc := range []bool{false, true} {
					want := slices.Clone(c0)
					refProduct(prec, c.m, c.n, c.k,
						func(i, q int) float32 { return roundOperand(prec, a[(c.ai0+i)*c.ak+c.ak0+q]) },
						func(q, j int) float32 { return roundOperand(prec, b[(c.bj0+j)*c.bk+c.bk0+q]) }, want, ldc, acc)
					for vi, name := range names {
						vi += ci
						withKernel(t, prec, name, func() {
							var pa *PackedA
							var pb *PackedB
							if (vi+int(b2i(special)))%2 == 0 {
								pa = PackAAs(nil, prec, c.am, c.ak, a, c.ak)
								pb = PackNTAs(nil, prec, c.bn, c.bk, b, c.bk)
							} else {
								pa = PackATAs(nil, prec, c.am, c.ak, at, c.am)
								pb = PackNNAs(nil, prec, c.bn, c.bk, bnn, c.bn)
							}
							got := slices.Clone(c0)
							MulPacked(c.m, c.n, c.k, pa, c.ai0, c.ak0, pb, c.bj0, c.bk0, got, ldc, acc)
							compareC(t, fmt.Sprintf("%v %s %v special=%v acc=%v", prec, name, c, special, acc), got, want)
						})
					}
				}
			}
		}
	}
}

func transpose(x []float32, rows, cols int) []float32 {
	t := make([]float32, len(x))
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			t[j*rows+i] = x[i*cols+j]
		}
	}
	return t
}

// compareC fails on the first element of got that differs from want
// (NaN-aware, guards included).
func compareC(t testing.TB, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if !sameBits(got[i], want[i]) {
			t.Fatalf("%s: element %d = %v (%#08x), want %v (%#08x)", what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// TestAPIPathsExact checks NT, NN, NTFunc, NTFuncParallel, PackedB.Product,
// TileFunc and ProductSub at both precisions on every kernel against the
// definition, on shapes crossing TileM and TileN.
func TestAPIPathsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	type shape struct{ m, n, k int }
	for _, prec := range []Precision{F32, BF16} {
		for _, s := range []shape{{130, 520, 70}, {5, 33, 160}, {129, 40, 33}} {
			a := testValues(rng, s.m*(s.k+1), false)
			b := testValues(rng, s.n*(s.k+2), false)
			bnn := testValues(rng, s.k*(s.n+3), false)
			want := make([]float32, s.m*s.n)
			refProduct(prec, s.m, s.n, s.k, func(i, q int) float32 { return roundOperand(prec, a[i*(s.k+1)+q]) },
				func(q, j int) float32 { return roundOperand(prec, b[j*(s.k+2)+q]) }, want, s.n, false)
			wantNN := make([]float32, s.m*s.n)
			refProduct(prec, s.m, s.n, s.k, func(i, q int) float32 { return roundOperand(prec, a[i*(s.k+1)+q]) },
				func(q, j int) float32 { return roundOperand(prec, bnn[q*(s.n+3)+j]) }, wantNN, s.n, false)
			// ProductSub: columns [32, n), depths [k0, k) continuing from C.
			k0 := min(BF16Block, s.k)
			wantSub := slices.Clone(want)
			refProduct(prec, s.m, s.n-32, s.k-k0, func(i, q int) float32 { return roundOperand(prec, a[i*(s.k+1)+k0+q]) },
				func(q, j int) float32 { return roundOperand(prec, b[(32+j)*(s.k+2)+k0+q]) }, wantSub[32:], s.n, true)
			for _, name := range testKernels(t, prec) {
				withKernel(t, prec, name, func() {
					what := fmt.Sprintf("%v %s %v", prec, name, s)
					c := make([]float32, s.m*s.n)
					NTAs(prec, s.m, s.n, s.k, a, s.k+1, b, s.k+2, c, s.n)
					compareC(t, what+" NT", c, want)
					NNAs(prec, s.m, s.n, s.k, a, s.k+1, bnn, s.n+3, c, s.n)
					compareC(t, what+" NN", c, wantNN)
					pb := PackNTAs(nil, prec, s.n, s.k, b, s.k+2)
					clear(c)
					pb.Product(s.m, a, s.k+1, c, s.n)
					compareC(t, what+" Product", c, want)
					tiles := func(i0, j0, rows, cols int, tile []float32, ldt int) {
						for r := 0; r < rows; r++ {
							copy(c[(i0+r)*s.n+j0:(i0+r)*s.n+j0+cols], tile[r*ldt:r*ldt+cols])
						}
					}
					clear(c)
					NTFuncAs(prec, s.m, s.n, s.k, a, s.k+1, b, s.k+2, tiles)
					compareC(t, what+" NTFunc", c, want)
					clear(c)
					pb.TileFunc(s.m, a, s.k+1, tiles)
					compareC(t, what+" TileFunc", c, want)
					clear(c)
					NTFuncParallelAs(prec, s.m, s.n, s.k, a, s.k+1, b, s.k+2, func(_, i0, j0, rows, cols int, tile []float32, ldt int) {
						tiles(i0, j0, rows, cols, tile, ldt)
					})
					compareC(t, what+" NTFuncParallel", c, want)
					copy(c, want)
					pb.ProductSub(s.m, a[k0:], s.k+1, 32, s.n, k0, s.k, c[32:], s.n, true)
					compareC(t, what+" ProductSub", c, wantSub)
				})
			}
		}
	}
}

// TestBF16Storage checks that packing bfloat16 storage gives the same
// products as packing the float32 values it holds: as BF16 operands, and
// widened to F32.
func TestBF16Storage(t *testing.T) {
	for _, k := range []int{100, 103, 5} {
		testBF16Storage(t, 37, 70, k)
	}
}

func testBF16Storage(t *testing.T, m, n, k int) {
	rng := rand.New(rand.NewPCG(25, uint64(26+k)))
	af, bf := testValues(rng, m*k, true), testValues(rng, n*k, true)
	ah, bh := make([]uint16, m*k), make([]uint16, n*k)
	for i, v := range af {
		ah[i] = RoundBF16(v)
		af[i] = BF16ToFloat32(ah[i])
	}
	for i, v := range bf {
		bh[i] = RoundBF16(v)
		bf[i] = BF16ToFloat32(bh[i])
	}
	for _, prec := range []Precision{F32, BF16} {
		for _, name := range testKernels(t, prec) {
			withKernel(t, prec, name, func() {
				want := make([]float32, m*n)
				MulPacked(m, n, k, PackAAs(nil, prec, m, k, af, k), 0, 0, PackNTAs(nil, prec, n, k, bf, k), 0, 0, want, n, false)
				for _, v := range []struct {
					name string
					pa   *PackedA
					pb   *PackedB
				}{
					{"A NT", PackABF16(nil, prec, m, k, ah, k), PackNTBF16(nil, prec, n, k, bh, k)},
					{"AT NN", PackATBF16(nil, prec, m, k, []uint16(transposeU16(ah, m, k)), m), PackNNBF16(nil, prec, n, k, transposeU16(bh, n, k), n)},
				} {
					got := make([]float32, m*n)
					MulPacked(m, n, k, v.pa, 0, 0, v.pb, 0, 0, got, n, false)
					compareC(t, fmt.Sprintf("%v %s %s from bfloat16 storage, k=%d", prec, name, v.name, k), got, want)
				}
			})
		}
	}
}

func transposeU16(x []uint16, rows, cols int) []uint16 {
	t := make([]uint16, len(x))
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			t[j*rows+i] = x[i*cols+j]
		}
	}
	return t
}

// TestThreadCountIndependence: NT and NN give the same bits for every
// thread count, on every kernel and precision.
func TestThreadCountIndependence(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	m, n, k := 300, 700, 200
	if testing.Short() {
		m, n, k = 150, 600, 140
	}
	a, b, bnn := testValues(rng, m*k, false), testValues(rng, n*k, false), testValues(rng, k*n, false)
	defer SetThreads(SetThreads(1))
	for _, prec := range []Precision{F32, BF16} {
		for _, name := range testKernels(t, prec) {
			m, n, k := m, n, k
			if strings.HasPrefix(name, "emu-") || name == "go" {
				m, n, k = 130, 520, 70 // slow kernels: still several tiles and chunks
			}
			withKernel(t, prec, name, func() {
				var ref, refNN []float32
				for _, th := range []int{1, 2, 3, 7} {
					SetThreads(th)
					c, cnn := make([]float32, m*n), make([]float32, m*n)
					NTAs(prec, m, n, k, a, k, b, k, c, n)
					NNAs(prec, m, n, k, a, k, bnn, n, cnn, n)
					if ref == nil {
						ref, refNN = c, cnn
						continue
					}
					compareC(t, fmt.Sprintf("%v %s NT threads=%d", prec, name, th), c, ref)
					compareC(t, fmt.Sprintf("%v %s NN threads=%d", prec, name, th), cnn, refNN)
				}
			})
		}
	}
}

// FuzzKernels compares every kernel of both precisions with the
// definition on random shapes, offsets and values.
func FuzzKernels(f *testing.F) {
	f.Add(uint8(5), uint8(33), uint8(17), uint8(0), uint64(1), true)
	f.Add(uint8(1), uint8(1), uint8(0), uint8(1), uint64(2), false)
	f.Add(uint8(40), uint8(70), uint8(200), uint8(3), uint64(3), true)
	f.Fuzz(func(t *testing.T, m8, n8, k8, off uint8, seed uint64, special bool) {
		m, n, k := 1+int(m8%70), 1+int(n8), int(k8)
		ai0, bj0 := int(off%3)*MR, int(off/3%2)*NR
		rng := rand.New(rand.NewPCG(seed, 1))
		for _, prec := range []Precision{F32, BF16} {
			ak0 := int(off/6%3) * BF16Block
			if prec == F32 {
				ak0 += int(off / 18 % 5)
			}
			c := mulCase{m, n, k, ai0, ak0, bj0, ak0, ai0 + m, ak0 + k + int(seed%40), bj0 + n, ak0 + k}
			a := testValues(rng, c.am*c.ak, special)
			b := testValues(rng, c.bn*c.bk, special)
			c0 := testValues(rng, m*n, special)
			acc := seed%2 == 0
			want := slices.Clone(c0)
			refProduct(prec, m, n, k, func(i, q int) float32 { return roundOperand(prec, a[(c.ai0+i)*c.ak+c.ak0+q]) },
				func(q, j int) float32 { return roundOperand(prec, b[(c.bj0+j)*c.bk+c.bk0+q]) }, want, n, acc)
			for _, name := range testKernels(t, prec) {
				withKernel(t, prec, name, func() {
					got := slices.Clone(c0)
					MulPacked(m, n, k, PackAAs(nil, prec, c.am, c.ak, a, c.ak), c.ai0, c.ak0, PackNTAs(nil, prec, c.bn, c.bk, b, c.bk), c.bj0, c.bk0, got, n, acc)
					compareC(t, fmt.Sprintf("%v %s %v acc=%v", prec, name, c, acc), got, want)
				})
			}
		}
	})
}

// TestSelfTestRejects checks that the start-up self-test rejects kernels
// whose arithmetic differs from the definition in the ways real hardware
// or a wrong kernel could: a float32 kernel without fused multiply-adds;
// bfloat16 kernels that chain sequentially (VDPBF16PS with plain pairs),
// add the chains to C one at a time, do not flush tiny results, flush
// before rounding, or do not read denormal C as zero.
func TestSelfTestRejects(t *testing.T) {
	// The problem must exercise finite arithmetic, not only NaN and Inf.
	for _, prec := range []Precision{F32, BF16} {
		finite, all := 0, 0
		for _, w := range stWant[prec]() {
			for _, v := range w {
				all++
				if !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0) {
					finite++
				}
			}
		}
		if finite < all/3 {
			t.Errorf("%v: only %d of %d self-test results are finite", prec, finite, all)
		}
	}
	unfused := func(a []float32, aStride, na int, b []float32, kc int, c []float32, ldc int, acc bool) {
		for p := 0; p < na; p++ {
			for r := 0; r < MR; r++ {
				for s := 0; s < NR; s++ {
					var x float32
					if acc {
						x = c[(p*MR+r)*ldc+s]
					}
					for q := 0; q < kc; q++ {
						x += float32(a[p*aStride+q*MR+r] * b[q*NR+s])
					}
					c[(p*MR+r)*ldc+s] = x
				}
			}
		}
	}
	bf16Variant := func(step func(a, b, c float32) float32, close func(c, e, o float32) float32, sequential, daz bool) stripF32Func {
		return func(a []float32, aStride, na int, b []float32, kc int, c []float32, ldc int, acc bool) {
			for p := 0; p < na; p++ {
				for r := 0; r < MR; r++ {
					for s := 0; s < NR; s++ {
						var x float32
						if acc {
							x = c[(p*MR+r)*ldc+s]
							if daz {
								x = dazC(x)
							}
						}
						for q0 := 0; q0 < kc; q0 += BF16Block {
							var e, o float32
							for q := q0; q < q0+BF16Block; q++ {
								av, bv := a[p*aStride+q*MR+r], b[q*NR+s]
								if sequential || q%2 == 0 {
									e = step(av, bv, e)
								} else {
									o = step(av, bv, o)
								}
							}
							x = close(x, e, o)
						}
						c[(p*MR+r)*ldc+s] = x
					}
				}
			}
		}
	}
	def := func(c, e, o float32) float32 { return addBF16(c, addBF16(e, o)) }
	noFTZ := func(a, b, c float32) float32 { return round32(float64(a)*float64(b), float64(c), false) }
	ftzBefore := func(a, b, c float32) float32 {
		s := float64(a)*float64(b) + float64(c) // exact here
		if s != 0 && math.Abs(s) < minNormal32 {
			return float32(math.Copysign(0, s))
		}
		return fmaBF16(a, b, c)
	}
	for _, c := range []struct {
		name string
		k    *kernel
	}{
		{"f32 unfused", &kernel{name: "x", prec: F32, lay: layoutF32, f32: unfused}},
		{"bf16 sequential", &kernel{name: "x", prec: BF16, lay: layoutF32, kc: 128, f32: bf16Variant(fmaBF16, func(c, e, o float32) float32 { return addBF16(c, e) }, true, true)}},
		{"bf16 (C+e)+o", &kernel{name: "x", prec: BF16, lay: layoutF32, kc: 128, f32: bf16Variant(fmaBF16, func(c, e, o float32) float32 { return addBF16(addBF16(c, e), o) }, false, true)}},
		{"bf16 no ftz", &kernel{name: "x", prec: BF16, lay: layoutF32, kc: 128, f32: bf16Variant(noFTZ, def, false, true)}},
		{"bf16 ftz before rounding", &kernel{name: "x", prec: BF16, lay: layoutF32, kc: 128, f32: bf16Variant(ftzBefore, def, false, true)}},
		{"bf16 denormal C kept", &kernel{name: "x", prec: BF16, lay: layoutF32, kc: 128, f32: bf16Variant(fmaBF16, def, false, false)}},
		{"bf16 definition", &kernel{name: "x", prec: BF16, lay: layoutF32, kc: 128, f32: bf16Variant(fmaBF16, def, false, true)}},
	} {
		msg := selfTest(c.k)
		if (msg == "") != (c.name == "bf16 definition") {
			t.Errorf("%s: self-test says %q", c.name, msg)
		}
	}
}

func TestForce(t *testing.T) {
	if _, err := Force("no-such-kernel"); !errors.Is(err, ErrKernel) {
		t.Fatalf("Force(no-such-kernel) = %v, want ErrKernel", err)
	}
	if _, err := Force("xx:go"); !errors.Is(err, ErrKernel) {
		t.Fatalf("Force(xx:go) = %v, want ErrKernel", err)
	}
	f32, bf := KernelName(F32), KernelName(BF16)
	restore, err := Force("go")
	if err != nil {
		t.Fatal(err)
	}
	if KernelName(F32) != "go" || KernelName(BF16) != "go" {
		t.Fatalf("after Force(go): %s, %s", KernelName(F32), KernelName(BF16))
	}
	restore()
	if KernelName(F32) != f32 || KernelName(BF16) != bf {
		t.Fatalf("restore: %s, %s, want %s, %s", KernelName(F32), KernelName(BF16), f32, bf)
	}
	// A BF16 operand packed for another layout is refused, not misread:
	// pack under an emulation whose layout differs from the selected
	// kernel's (the AMX layout, or on an AMX machine the VDPBF16PS one).
	other := "emu-amx"
	if selectedKernel(BF16).lay == layoutAMX {
		other = "emu-avx512bf16"
	}
	restore, err = Force("bf16:" + other)
	if err != nil {
		t.Fatal(err)
	}
	pa := PackAAs(nil, BF16, 4, 32, make([]float32, 128), 32)
	pb := PackNTAs(nil, BF16, 32, 32, make([]float32, 1024), 32)
	restore()
	if selectedKernel(BF16).lay == pb.o.lay {
		t.Fatalf("%s and the selected %s share a layout: the test needs another", other, KernelName(BF16))
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "re-pack") {
			t.Fatalf("MulPacked on operands of another layout: panic %v", r)
		}
	}()
	MulPacked(4, 32, 32, pa, 0, 0, pb, 0, 0, make([]float32, 128), 32, false)
}

func TestKernelInfo(t *testing.T) {
	ks, why := KernelInfo()
	for _, p := range []Precision{F32, BF16} {
		n := 0
		for _, k := range ks {
			if k.Precision == p && k.Selected {
				n++
				if k.SelfTest != "passed" {
					t.Errorf("%v: selected kernel %s: self-test %q", p, k.Name, k.SelfTest)
				}
			}
		}
		if n != 1 || why[p] == "" {
			t.Errorf("%v: %d selected kernels, reason %q", p, n, why[p])
		}
	}
	for _, k := range ks {
		if k.Available == "" && k.SelfTest != "passed" {
			t.Errorf("%v %s: available but self-test %q", k.Precision, k.Name, k.SelfTest)
		}
	}
	t.Log("\n" + KernelSummary())
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func newRng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed+1)) }
