package gpu

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/internal/vmath"
	"github.com/densitykv/densitykv/vulkan"
	"github.com/densitykv/densitykv/vulkan/vulkantest"
)

// The operations of shaders/exactops.comp (its push constant op).
const (
	opExp32 = iota
	opExpDef
	opDiv
	opSqrt
	opRoundBF16
	opBF16ToF32
	opBF16Operand // gemm_exact.glsl's gemm_bf16_operand
	opDaz         // gemm_daz
	opFMABF16     // gemm_fma_bf16
	opAddBF16     // gemm_add_bf16
	opFMA32
)

// exSameBits compares float32 bits, any NaN equal to any NaN (payloads are
// not part of the definitions).
func exSameBits(x, y uint32) bool {
	return x == y || (x&0x7fffffff > 0x7f800000 && y&0x7fffffff > 0x7f800000)
}

// exUpload allocates a buffer holding v (at least one word).
func exUpload(t testing.TB, dev *vulkan.Device, v []uint32) *vulkan.Buffer {
	t.Helper()
	b, err := dev.Alloc(int64(4 * max(len(v), 1)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Free)
	if err := dev.UploadUint32s(b, 0, v); err != nil {
		t.Fatal(err)
	}
	return b
}

// exRun runs exactops' op over (a[i], b[i], c[i]) and returns the results.
func exRun(t *testing.T, dev *vulkan.Device, op int, a, b, c []uint32) []uint32 {
	t.Helper()
	n := len(a)
	k, err := newKernel(dev, "exactops", vulkan.KernelSpec{Name: "exactops", Bindings: 4, PushSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	out := exUpload(t, dev, make([]uint32, n))
	push := make([]byte, 8)
	binary.LittleEndian.PutUint32(push, uint32(op))
	binary.LittleEndian.PutUint32(push[4:], uint32(n))
	batch := dev.NewBatch()
	groups := uint32((n + 63) / 64)
	batch.Dispatch(k, [3]uint32{min(groups, 1024), (groups + 1023) / 1024, 1}, push, out, exUpload(t, dev, a), exUpload(t, dev, b), exUpload(t, dev, c))
	if err := batch.Run(); err != nil {
		t.Fatal(err)
	}
	got := make([]uint32, n)
	if err := dev.DownloadUint32s(out, 0, got); err != nil {
		t.Fatal(err)
	}
	return got
}

// exSpecials are float32 bit patterns every operation is tried on, each
// against each: zeros, the smallest and largest denormals and normals,
// ±Inf, NaNs, 1 and its neighbours, powers of two.
var exSpecials = []uint32{
	0, 0x80000000, 1, 0x80000001, 3, 0x7fffff, 0x807fffff, 0x400000, 0x800000, 0x800001,
	0x7f7fffff, 0xff7fffff, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00001, 0x7f800001,
	0x3f800000, 0xbf800000, 0x3f800001, 0x3f7fffff, 0x3fffffff, 0x40000000, 0x34000000,
	0x4b000000, 0x5f800000, 0x1f800000, 0x0c800000, 0x33800000, 0x3fb504f3,
}

// exCase is one operation's inputs.
type exCase struct{ a, b, c []uint32 }

// exInputs returns n random bit patterns per operand, after every pair of
// specials (a against b, c random), with the hard cases of division in
// half of the rest: quotients within an ulp of a float32 (a = b·q rounded:
// the last bits decide), quotients exactly halfway between two denormals
// (a = M·2^e with M odd, b = 2^(e+150): the tie goes to even), denormal
// quotients, huge and tiny ratios.
func exInputs(r *rand.Rand, n int) exCase {
	var x exCase
	for _, a := range exSpecials {
		for _, b := range exSpecials {
			x.a, x.b, x.c = append(x.a, a), append(x.b, b), append(x.c, r.Uint32())
		}
	}
	for len(x.a) < n {
		a, b := r.Uint32(), r.Uint32()
		switch r.IntN(8) {
		case 0: // a = b·q rounded: a/b within an ulp of q
			b = b&0x807fffff | uint32(r.IntN(60)+100)<<23
			q := r.Uint32()&0x807fffff | uint32(r.IntN(200)+20)<<23
			a = math.Float32bits(float32(float64(math.Float32frombits(b)) * float64(math.Float32frombits(q))))
		case 3: // a/b = M·2^−150, M odd: halfway between two denormals
			e := r.IntN(21) - 20 // a's exponent, so that b = 2^(e+127) is normal
			a = a&0x807fffff | 1 | uint32(e+127)<<23
			b = uint32(e+254) << 23
		case 1: // denormal results
			a = r.Uint32() & 0x81ffffff
			b = b&0x807fffff | uint32(r.IntN(40)+120)<<23
		case 2: // overflow and underflow
			a = a&0x807fffff | uint32(r.IntN(30)+225)<<23
			b = b & 0x80ffffff
		}
		x.a, x.b, x.c = append(x.a, a), append(x.b, b), append(x.c, r.Uint32())
	}
	return x
}

// exCheck compares got with want(i) and reports the first differences.
func exCheck(t *testing.T, name string, x exCase, got []uint32, want func(i int) uint32) {
	t.Helper()
	bad := 0
	for i, g := range got {
		if w := want(i); !exSameBits(g, w) {
			if bad < 5 {
				t.Errorf("%s(%#08x, %#08x, %#08x) = %#08x, want %#08x", name, x.a[i], x.b[i], x.c[i], g, w)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d results differ", name, bad, len(got))
	}
}

func exF32(b uint32) float32  { return math.Float32frombits(b) }
func exBits(f float32) uint32 { return math.Float32bits(f) }

// TestExactDivSqrt: div32 and sqrt32 against Go's float32 division and
// math.Sqrt on a million inputs (random bit patterns and the hard cases).
func TestExactDivSqrt(t *testing.T) {
	dev := vulkantest.Open(t)
	x := exInputs(rand.New(rand.NewPCG(1, 2)), 1<<20)
	exCheck(t, "div32", x, exRun(t, dev, opDiv, x.a, x.b, x.c), func(i int) uint32 {
		return exBits(exF32(x.a[i]) / exF32(x.b[i]))
	})
	exCheck(t, "sqrt32", x, exRun(t, dev, opSqrt, x.a, x.b, x.c), func(i int) uint32 {
		return exBits(float32(math.Sqrt(float64(exF32(x.a[i])))))
	})
	// Every perfect square of a 12-bit integer and its neighbours.
	var sq exCase
	for m := uint32(1); m < 1<<12; m++ {
		v := exBits(float32(m * m))
		sq.a = append(sq.a, v-1, v, v+1)
	}
	sq.b, sq.c = sq.a, sq.a
	exCheck(t, "sqrt32", sq, exRun(t, dev, opSqrt, sq.a, sq.b, sq.c), func(i int) uint32 {
		return exBits(float32(math.Sqrt(float64(exF32(sq.a[i])))))
	})
}

// expDefRef is attn's expDef (softmax.go): NaN kept, clamped to [−104, 89].
func expDefRef(y float32) float32 {
	if y != y {
		return y
	}
	return vmath.Exp32(min(max(y, -104), 89))
}

// TestExactExp: exp32 on its domain [−104, 89] and exp_def everywhere.
func TestExactExp(t *testing.T) {
	dev := vulkantest.Open(t)
	r := rand.New(rand.NewPCG(3, 4))
	var x exCase
	for _, v := range []float32{-104, 89, 0, -103.97, 88.72, -87.3, 0.5, -0.5} {
		x.a = append(x.a, exBits(v), exBits(v)+1, exBits(v)-1)
	}
	for len(x.a) < 1<<19 {
		x.a = append(x.a, exBits(float32(r.Float64()*193-104)))
	}
	x.b, x.c = x.a, x.a
	exCheck(t, "exp32", x, exRun(t, dev, opExp32, x.a, x.b, x.c), func(i int) uint32 { return exBits(vmath.Exp32(exF32(x.a[i]))) })
	y := exInputs(r, 1<<18)
	exCheck(t, "exp_def", y, exRun(t, dev, opExpDef, y.a, y.b, y.c), func(i int) uint32 { return exBits(expDefRef(exF32(y.a[i]))) })
}

// TestExactFMA: fma32 (vmath.FMA32) on random bit patterns, on products
// and addends that cancel, and near the denormal range.
func TestExactFMA(t *testing.T) {
	dev := vulkantest.Open(t)
	r := rand.New(rand.NewPCG(5, 6))
	x := exInputs(r, 1<<19)
	for i := range x.a {
		switch i % 3 {
		case 1: // cancellation: c ≈ −a·b
			p := float32(float64(exF32(x.a[i])) * float64(exF32(x.b[i])))
			x.c[i] = exBits(-p) + uint32(r.IntN(5)) - 2
		case 2: // tiny results
			x.a[i] = x.a[i]&0x807fffff | uint32(r.IntN(60)+34)<<23
			x.b[i] = x.b[i]&0x807fffff | uint32(r.IntN(60)+34)<<23
			x.c[i] &= 0x80ffffff
		}
	}
	exCheck(t, "fma32", x, exRun(t, dev, opFMA32, x.a, x.b, x.c), func(i int) uint32 {
		return exBits(vmath.FMA32(exF32(x.a[i]), exF32(x.b[i]), exF32(x.c[i])))
	})
}

// bf16OperandRef is what a bfloat16 product reads for bits h.
func bf16OperandRef(h uint16) float32 {
	var d [1]uint16
	gemm.BF16OperandBits(d[:], []float32{gemm.BF16ToFloat32(h)})
	return gemm.BF16ToFloat32(d[0])
}

// dazRef is gemm's dazC.
func dazRef(c float32) float32 {
	if b := exBits(c); b&0x7f800000 == 0 {
		return exF32(b & 0x80000000)
	}
	return c
}

// TestExactBF16: round_bf16, bf16_to_f32 and the bfloat16 product's steps
// of gemm_exact.glsl: gemm_bf16_operand, gemm_daz, gemm_fma_bf16 and
// gemm_add_bf16 (vmath.Round32 with ftz), with results around 2^−126
// where flushing decides.
func TestExactBF16(t *testing.T) {
	dev := vulkantest.Open(t)
	r := rand.New(rand.NewPCG(7, 8))
	x := exInputs(r, 1<<18)
	exCheck(t, "round_bf16", x, exRun(t, dev, opRoundBF16, x.a, x.b, x.c), func(i int) uint32 { return uint32(gemm.RoundBF16(exF32(x.a[i]))) })
	exCheck(t, "bf16_to_f32", x, exRun(t, dev, opBF16ToF32, x.a, x.b, x.c), func(i int) uint32 { return exBits(gemm.BF16ToFloat32(uint16(x.a[i]))) })
	exCheck(t, "gemm_bf16_operand", x, exRun(t, dev, opBF16Operand, x.a, x.b, x.c), func(i int) uint32 { return exBits(bf16OperandRef(uint16(x.a[i]))) })
	exCheck(t, "gemm_daz", x, exRun(t, dev, opDaz, x.a, x.b, x.c), func(i int) uint32 { return exBits(dazRef(exF32(x.a[i]))) })

	// Chain steps: a, b bfloat16 operands, c not denormal; half of them in
	// the range where a·b + c is near 2^−126, and the band [2^−126 − 2^−150,
	// 2^−126 − 2^−151) that rounds to 2^−126 gradually but is tiny unbounded.
	var s exCase
	for i := 0; i < 1<<18; i++ {
		a, b := bf16OperandRef(uint16(r.Uint32())), bf16OperandRef(uint16(r.Uint32()))
		c := dazRef(exF32(r.Uint32()))
		if i%2 == 0 {
			a = bf16OperandRef(uint16(r.Uint32()&0x80ff | uint32(r.IntN(40)+40)<<7))
			b = bf16OperandRef(uint16(r.Uint32()&0x80ff | uint32(r.IntN(40)+40)<<7))
			c = dazRef(exF32(r.Uint32()&0x80ffffff | uint32(r.IntN(6))<<23))
		}
		if i%16 == 1 && i/16 < 127 { // a·b = −(2k+1)·2^−150, c = 2^−126 + k·2^−149
			k := uint32(i/16) + 1
			a, b, c = -float32(2*k+1)*0x1p-75, 0x1p-75, exF32(0x800000+k)
		}
		s.a, s.b, s.c = append(s.a, exBits(a)), append(s.b, exBits(b)), append(s.c, exBits(c))
	}
	exCheck(t, "gemm_fma_bf16", s, exRun(t, dev, opFMABF16, s.a, s.b, s.c), func(i int) uint32 {
		return exBits(vmath.Round32(float64(exF32(s.a[i]))*float64(exF32(s.b[i])), float64(exF32(s.c[i])), true))
	})
	exCheck(t, "gemm_add_bf16", s, exRun(t, dev, opAddBF16, s.c, s.a, s.b), func(i int) uint32 {
		return exBits(vmath.Round32(float64(exF32(s.c[i])), float64(exF32(s.a[i])), true))
	})
}
