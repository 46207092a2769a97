package gemm

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// toPanels writes R (n×k row-major) in the float32 panel layout that
// PackPanelsAs reads, with NaN in the padding columns (which must be
// ignored).
func toPanels(r []float32, n, k int) []float32 {
	np := (n + NR - 1) / NR
	p := make([]float32, np*k*NR)
	for i := range p {
		p[i] = float32(math.NaN())
	}
	for j := 0; j < n; j++ {
		for q := 0; q < k; q++ {
			p[(j/NR)*k*NR+q*NR+j%NR] = r[j*k+q]
		}
	}
	return p
}

// TestPackPanelsAs: an operand packed from float32 panels equals the one
// packed from the row-major matrix, in its products (with depth ranges cut
// inside a block and running to the end) and in its values, at both
// precisions on every kernel, special values included.
func TestPackPanelsAs(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for _, prec := range []Precision{F32, BF16} {
		for _, s := range []struct{ m, n, k int }{{5, 33, 17}, {37, 64, 300}, {4, 32, 32}, {9, 70, 1}} {
			a := testValues(rng, s.m*s.k, true)
			r := testValues(rng, s.n*s.k, true)
			panels := toPanels(r, s.n, s.k)
			for _, name := range testKernels(t, prec) {
				withKernel(t, prec, name, func() {
					what := fmt.Sprintf("%v %s %v", prec, name, s)
					want, got := PackNTAs(nil, prec, s.n, s.k, r, s.k), PackPanelsAs(nil, prec, s.n, s.k, panels)
					compareC(t, what+" Unpack", got.Unpack(), want.Unpack())
					pa := PackAAs(nil, prec, s.m, s.k, a, s.k)
					cw, cg := make([]float32, s.m*s.n), make([]float32, s.m*s.n)
					MulPacked(s.m, s.n, s.k, pa, 0, 0, want, 0, 0, cw, s.n, false)
					MulPacked(s.m, s.n, s.k, pa, 0, 0, got, 0, 0, cg, s.n, false)
					compareC(t, what+" product", cg, cw)
					if k := s.k / BF16Block * BF16Block; k > 0 && k < s.k {
						MulPacked(s.m, s.n, k, pa, 0, 0, want, 0, 0, cw, s.n, false)
						MulPacked(s.m, s.n, k, pa, 0, 0, got, 0, 0, cg, s.n, false)
						compareC(t, what+" product cut at a block", cg, cw)
					}
				})
			}
		}
	}
}

// TestUnpack: Unpack returns the operand values: float32 as given, BF16
// rounded to nearest even with denormals read as zero; for A and B, NT and
// NN packing, on every kernel's layout.
func TestUnpack(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	// The second size is above the parallel packing threshold (1<<16
	// values): its row ranges are split between threads.
	for _, sz := range [][2]int{{37, 70}, {301, 259}} {
		m, k := sz[0], sz[1]
		x := testValues(rng, m*k, true)
		xt := transpose(x, m, k)
		for _, prec := range []Precision{F32, BF16} {
			want := make([]float32, len(x))
			for i, v := range x {
				want[i] = roundOperand(prec, v)
			}
			for _, name := range testKernels(t, prec) {
				withKernel(t, prec, name, func() {
					what := fmt.Sprintf("%v %s %dx%d", prec, name, m, k)
					compareC(t, what+" PackAAs", PackAAs(nil, prec, m, k, x, k).Unpack(), want)
					compareC(t, what+" PackATAs", PackATAs(nil, prec, m, k, xt, m).Unpack(), want)
					compareC(t, what+" PackNTAs", PackNTAs(nil, prec, m, k, x, k).Unpack(), want)
					compareC(t, what+" PackNNAs", PackNNAs(nil, prec, m, k, xt, m).Unpack(), want)
				})
			}
		}
	}
}

// TestRepack: a BF16 operand packed under one kernel and re-packed after
// Force switched to a kernel of another layout gives the products of one
// packed under the new kernel, bit for bit; float32 operands and operands
// already in the right layout are left alone.
func TestRepack(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 46))
	m, n, k := 37, 70, 100
	a, b := testValues(rng, m*k, true), testValues(rng, n*k, true)
	names := testKernels(t, BF16)
	for _, from := range names {
		for _, to := range names {
			var pa *PackedA
			var pb *PackedB
			var f32 *PackedB
			withKernel(t, BF16, from, func() {
				pa, pb = PackAAs(nil, BF16, m, k, a, k), PackNTAs(nil, BF16, n, k, b, k)
				f32 = PackNTAs(nil, F32, n, k, b, k)
			})
			withKernel(t, BF16, to, func() {
				same := packLayout(BF16) == pa.o.lay
				if ra, rb := pa.Repack(), pb.Repack(); ra == same || rb == same {
					t.Fatalf("%s → %s: Repack reports %v, %v (layouts equal: %v)", from, to, ra, rb, same)
				}
				if f32.Repack() || pa.Repack() || pb.Repack() {
					t.Fatalf("%s → %s: a second Repack (or a float32 one) did something", from, to)
				}
				want, got := make([]float32, m*n), make([]float32, m*n)
				MulPacked(m, n, k, PackAAs(nil, BF16, m, k, a, k), 0, 0, PackNTAs(nil, BF16, n, k, b, k), 0, 0, want, n, false)
				MulPacked(m, n, k, pa, 0, 0, pb, 0, 0, got, n, false)
				compareC(t, fmt.Sprintf("repacked %s → %s", from, to), got, want)
			})
		}
	}
}

// TestPrecisionNames: one spelling per precision, and errors that name
// the text and the names allowed.
func TestPrecisionNames(t *testing.T) {
	for _, p := range []Precision{F32, BF16} {
		b, err := p.MarshalText()
		if err != nil || string(b) != p.String() {
			t.Fatalf("%v: MarshalText %q, %v", p, b, err)
		}
		var q Precision = 7
		if err := q.UnmarshalText(b); err != nil || q != p {
			t.Fatalf("%q: UnmarshalText %v, %v", b, q, err)
		}
	}
	if F32.String() != "fp32" || BF16.String() != "bf16" {
		t.Fatalf("names %s, %s", F32, BF16)
	}
	p := BF16
	for _, bad := range []string{"f32", "FP32", "float32", "", "bf16 "} {
		err := p.UnmarshalText([]byte(bad))
		if err == nil || p != BF16 {
			t.Fatalf("%q: accepted (%v)", bad, p)
		}
		if msg := err.Error(); !strings.Contains(msg, fmt.Sprintf("%q", bad)) || !strings.Contains(msg, "fp32 or bf16") {
			t.Fatalf("%q: error %q", bad, msg)
		}
	}
	if _, err := Precision(9).MarshalText(); err == nil {
		t.Fatal("Precision(9) marshalled")
	}
	if _, err := Force("f32:go"); !errors.Is(err, ErrKernel) || !strings.Contains(err.Error(), "fp32 or bf16") {
		t.Fatalf("Force(f32:go): %v", err)
	}
}

// roundInputs returns n float32 values for the rounding loops: the
// self-test's mix, ties and near-ties at bit 16, the largest values that
// round to +Inf, values that round up to the smallest normal bfloat16 and
// just below it, float32 denormals, ±0, ±Inf and NaNs with payloads in
// either half.
func roundInputs(rng *rand.Rand, n int) []float32 {
	x := specialValues(rng, n)
	bits := []uint32{0x3f808000, 0x3f818000, 0x3f807fff, 0x3f808001, 0x7f7fffff, 0x7f7f8000, 0x7f7f7fff,
		0x007fffff, 0x007f8000, 0x007f7fff, 0x00800000, 0x00000001, 0x80000001, 0x807fffff, 0x00008000,
		0x7f800000, 0xff800000, 0x7f800001, 0xffc00000, 0x7fa00000, 0x7f800100, 0x7fffffff, 0x80000000, 0}
	for i := range x {
		switch rng.IntN(4) {
		case 0:
			x[i] = math.Float32frombits(bits[rng.IntN(len(bits))])
		case 1:
			x[i] = math.Float32frombits(rng.Uint32())
		}
	}
	return x
}

// TestRoundKernelsExact: the assembly rounding loops (where this CPU and
// build have them) equal their pure-Go definitions bit for bit, for
// lengths around the vector width.
func TestRoundKernelsExact(t *testing.T) {
	if !roundAsm {
		t.Log("no assembly rounding loops in this build or on this CPU: the pure-Go ones are the only ones")
	}
	rng := rand.New(rand.NewPCG(47, 48))
	for _, groups := range []int{1, 2, 7, 64} {
		src := roundInputs(rng, 4*groups*NR)
		for _, f := range []struct {
			name    string
			asm, gf func([]uint32, []float32, int)
		}{{"quad", panelsQuad, panelsQuadGo}, {"amx", panelsAMX, panelsAMXGo}} {
			got, want := make([]uint32, 2*groups*NR+1), make([]uint32, 2*groups*NR+1)
			got[len(got)-1], want[len(want)-1] = 0xdead, 0xdead
			f.asm(got, src, groups)
			f.gf(want, src, groups)
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%s, %d groups: dword %d = %#08x, want %#08x", f.name, groups, i, got[i], want[i])
				}
			}
		}
	}
	for _, sh := range []struct{ ld, pstride, quads, groups int }{{16, 16, 1, 2}, {70, 40, 2, 5}, {1536, 520, 8, 64}} {
		src := roundInputs(rng, (4*sh.groups-1)*sh.ld+16*sh.quads)
		n := (4*sh.quads-1)*sh.pstride + 8*sh.groups
		got, want := make([]uint32, n+1), make([]uint32, n+1)
		for i := range got {
			got[i], want[i] = 0xdead, 0xdead
		}
		kMajorQuadA(got, src, sh.ld, sh.pstride, sh.quads, sh.groups)
		kMajorQuadAGo(want, src, sh.ld, sh.pstride, sh.quads, sh.groups)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("k-major quad A panels %+v: dword %d = %#08x, want %#08x", sh, i, got[i], want[i])
			}
		}
	}
	for _, sh := range []struct{ lda, blocks int }{{16, 1}, {37, 2}, {1536, 96}} {
		src := roundInputs(rng, (MR-1)*sh.lda+16*sh.blocks)
		got, want := make([]uint32, 32*sh.blocks+1), make([]uint32, 32*sh.blocks+1)
		got[len(got)-1], want[len(want)-1] = 0xdead, 0xdead
		panelsQuadA(got, src, sh.lda, sh.blocks)
		panelsQuadAGo(want, src, sh.lda, sh.blocks)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("quad A panel, lda %d, %d blocks: dword %d = %#08x, want %#08x", sh.lda, sh.blocks, i, got[i], want[i])
			}
		}
	}
	for _, n := range []int{0, 1, 15, 16, 17, 33, 100, 1000} {
		src := roundInputs(rng, n)
		gf, wf := make([]float32, n), make([]float32, n)
		floatsBF16(gf, src)
		floatsBF16Go(wf, src)
		compareC(t, fmt.Sprintf("floats n=%d", n), gf, wf)
		in := append([]float32(nil), src...)
		floatsBF16(in, in) // in place
		compareC(t, fmt.Sprintf("floats in place n=%d", n), in, wf)
		gr, wr := make([]uint16, n), make([]uint16, n)
		rowBF16(gr, src)
		rowBF16Go(wr, src)
		for i := range wr {
			if gr[i] != wr[i] || uint32(wr[i]) != bf16Bits(src[i]) {
				t.Fatalf("row n=%d: element %d (%#08x) = %#04x, want %#04x", n, i, math.Float32bits(src[i]), gr[i], wr[i])
			}
		}
	}
	// The definition itself: RoundBF16 with denormal results flushed.
	for _, v := range roundInputs(rng, 5000) {
		want := uint32(RoundBF16(v))
		if want&0x7f80 == 0 {
			want &= 0x8000
		}
		if got := bf16Bits(v); got != want {
			t.Fatalf("bf16Bits(%#08x) = %#04x, want %#04x", math.Float32bits(v), got, want)
		}
	}
}

// TestPackPanelsAsGo repeats TestPackPanelsAs with the pure-Go rounding
// loops, and checks that both give the same packed operands.
func TestPackPanelsAsGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(49, 50))
	n, k := 70, 203
	panels := toPanels(roundInputs(rng, n*k), n, k)
	for _, name := range testKernels(t, BF16) {
		withKernel(t, BF16, name, func() {
			want := PackPanelsAs(nil, BF16, n, k, panels).Unpack()
			restore := forceRoundGo()
			got := PackPanelsAs(nil, BF16, n, k, panels).Unpack()
			restore()
			compareC(t, "PackPanelsAs asm vs Go "+name, got, want)
		})
	}
	restore := forceRoundGo()
	defer restore()
	TestPackPanelsAs(t)
	TestUnpack(t)
}

// TestPackPanelsAllocs: re-packing probabilities into an operand of the
// same size does not allocate (the attention does it per key tile).
func TestPackPanelsAllocs(t *testing.T) {
	n, k := 128, 301
	panels := toPanels(testValues(rand.New(rand.NewPCG(51, 52)), n*k, false), n, k)
	defer SetThreads(SetThreads(1))
	for _, prec := range []Precision{F32, BF16} {
		var p PackedB
		PackPanelsAs(&p, prec, n, k, panels)
		if a := testing.AllocsPerRun(10, func() { PackPanelsAs(&p, prec, n, k, panels) }); a != 0 {
			t.Errorf("%v: %v allocations per PackPanelsAs", prec, a)
		}
	}
}

// TestBF16OperandBits: the exported rounding gives RoundBF16's bits, with
// denormal results flushed to the zero of their sign, for every length
// (the assembly's tails included), and a too-short dst panics.
func TestBF16OperandBits(t *testing.T) {
	rng := newRng(41)
	src := testValues(rng, 1000, true)
	src = append(src, 0x1p-130, -0x1p-127, 0x1p-126, 0x1.ffp-127)
	for _, n := range []int{0, 1, 15, 16, 17, 100, len(src)} {
		dst := make([]uint16, n)
		BF16OperandBits(dst, src[:n])
		for i, v := range src[:n] {
			want := RoundBF16(v)
			if want&0x7f80 == 0 {
				want &= 0x8000
			}
			if dst[i] != want {
				t.Fatalf("n %d: BF16OperandBits(%v [%#08x]) = %#04x, want %#04x", n, v, math.Float32bits(v), dst[i], want)
			}
		}
	}
	defer func() {
		if recover() == nil {
			t.Fatal("BF16OperandBits with a short dst did not panic")
		}
	}()
	BF16OperandBits(make([]uint16, 3), src[:4])
}
