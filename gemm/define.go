package gemm

import (
	"fmt"
	"math"

	"github.com/densitykv/densitykv/internal/vmath"
	"github.com/densitykv/densitykv/internal/vocab"
)

// This file is the definition of every product the package computes (see
// the package documentation): the scalar steps, the bfloat16 conversions
// and the naive reference loops. It is always built; every kernel is tested
// bit for bit against it.

// Precision is the precision of a packed operand, and so of a product: two
// F32 operands give the float32 product, two BF16 operands the bfloat16
// product (see the package documentation for both definitions). Operands
// of a product must have the same precision.
//
// It is also the precision mode of the models built on the engine (wan,
// vae, t5: their matrix and attention inputs at this precision), so it
// has one spelling everywhere — flags, YAML keys, logs: "fp32" and "bf16"
// (String, MarshalText, UnmarshalText; Names lists them).
type Precision uint8

const (
	// F32 ("fp32"): float32 values.
	F32 Precision = iota
	// BF16 ("bf16"): bfloat16 values (rounded from float32 to nearest
	// even, or read from bfloat16 storage); denormal bfloat16 values are
	// read as zero.
	BF16
)

var precisionNames = vocab.List{Pkg: "gemm", Kind: "precision", Names: []string{"fp32", "bf16"}}

// String returns "fp32" or "bf16".
func (p Precision) String() string { return precisionNames.String(uint8(p), "Precision") }

// MarshalText returns the precision's name, or an error for a value
// without one.
func (p Precision) MarshalText() ([]byte, error) { return precisionNames.Marshal(uint8(p)) }

// UnmarshalText sets p to the precision named b ("fp32" or "bf16",
// exactly); any other text is an error naming it and the names allowed,
// and leaves p unchanged.
func (p *Precision) UnmarshalText(b []byte) error {
	v, err := precisionNames.Parse(b)
	if err != nil {
		return err
	}
	*p = Precision(v)
	return nil
}

// Names lists the precisions' names in value order: fp32, bf16.
func (Precision) Names() []string { return precisionNames.All() }

// Depth of one block of the bfloat16 product: 16 pairs, the depth of one
// AMX TDPBF16PS instruction.
const BF16Block = 32

const (
	minNormal32 = 0x1p-126 // smallest normal float32
	signBit32   = 0x80000000
)

// RoundBF16 rounds a float32 to the nearest bfloat16 (ties to even) and
// returns its bits: NaN stays NaN (quiet), ±Inf and values beyond the
// largest bfloat16 become ±Inf. Denormal results are kept here; operands
// read them as zero.
func RoundBF16(v float32) uint16 {
	b := math.Float32bits(v)
	if b&0x7fffffff > 0x7f800000 { // NaN: keep the sign, force quiet
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b >> 16 & 1)) >> 16)
}

// BF16ToFloat32 returns the float32 value of bfloat16 bits (exact).
func BF16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// BF16OperandBits sets dst[i] to the bfloat16 bits that a bfloat16 product
// reads for src[i]: RoundBF16, with a denormal result flushed to the zero
// of its sign (as products read denormal operands). Storing these instead
// of RoundBF16's bits changes nothing a bfloat16 product computes from
// them. It runs generated AVX-512 code where the CPU has it (the same
// bits). dst must hold len(src) values.
func BF16OperandBits(dst []uint16, src []float32) {
	if len(dst) < len(src) {
		panic(fmt.Sprintf("gemm: BF16OperandBits: %d outputs for %d values", len(dst), len(src)))
	}
	rowBF16(dst[:len(src)], src)
}

// bf16Operand returns the value a bfloat16 operand contributes: h widened
// to float32, with a denormal read as zero of the same sign.
func bf16Operand(h uint16) float32 {
	if h&0x7f80 == 0 {
		h &= 0x8000
	}
	return math.Float32frombits(uint32(h) << 16)
}

// roundOperand is the value a float32 v contributes as an operand of
// precision p: v itself (F32), or bf16Operand(RoundBF16(v)).
func roundOperand(p Precision, v float32) float32 {
	if p == BF16 {
		return bf16Operand(RoundBF16(v))
	}
	return v
}

// dazC is the value an accumulated C contributes to a bfloat16 product:
// denormals read as zero of the same sign.
func dazC(c float32) float32 {
	if b := math.Float32bits(c); b&0x7f800000 == 0 {
		return math.Float32frombits(b & signBit32)
	}
	return c
}

// round32 returns p + c rounded once to float32 (vmath.Round32: p an
// exact product of two float32 values or a float32 value, c a float32
// value; with ftz, x86 flush-to-zero of tiny results).
func round32(p, c float64, ftz bool) float32 { return vmath.Round32(p, c, ftz) }

// fma32 returns a·b + c with one rounding (IEEE fusedMultiplyAdd in
// float32, round to nearest even, gradual underflow): one step of the
// float32 product.
func fma32(a, b, c float32) float32 {
	return round32(float64(a)*float64(b), float64(c), false)
}

// fmaBF16 returns ftz(a·b + c) with one rounding: one step of an even or
// odd chain of the bfloat16 product. a and b are bfloat16 operand values
// (so a·b is exact in float64) and c is not denormal.
func fmaBF16(a, b, c float32) float32 {
	return round32(float64(a)*float64(b), float64(c), true)
}

// addBF16 returns ftz(x + y), rounded once: the additions closing a block
// of the bfloat16 product.
func addBF16(x, y float32) float32 {
	return round32(float64(x), float64(y), true)
}

// dotF32 is the float32 product of one output element: starting from c,
// c = fma32(a(q), b(q), c) for q = 0, 1, …, k-1.
func dotF32(k int, a, b func(q int) float32, c float32) float32 {
	for q := 0; q < k; q++ {
		c = fma32(a(q), b(q), c)
	}
	return c
}

// dotBF16 is the bfloat16 product of one output element over depth k,
// continuing from c (already read through dazC, or +0): blocks of
// BF16Block depth from q = 0, the last one padded with zero operands; in
// each, an even chain over the block's elements 0, 2, …, 30 and an odd
// chain over 1, 3, …, 31, both from +0, then c = (c + (even + odd)). a and
// b return bfloat16 operand values.
func dotBF16(k int, a, b func(q int) float32, c float32) float32 {
	for q0 := 0; q0 < k; q0 += BF16Block {
		var ch [2]float32 // even, odd chains, from +0
		for i := 0; i < BF16Block; i++ {
			var x, y float32 // padding: +0 · +0
			if q := q0 + i; q < k {
				x, y = a(q), b(q)
			}
			ch[i&1] = fmaBF16(x, y, ch[i&1])
		}
		c = addBF16(c, addBF16(ch[0], ch[1]))
	}
	return c
}

// refProduct is the reference loop, the definition of every product:
//
//	for i < m, j < n: c[i*ldc+j] = dot(A[i][·], op(B)[·][j], acc ? c[i*ldc+j] : +0)
//
// with dot = dotF32 or dotBF16 for the precision, a(i, q) and b(q, j) the
// operands' values (already rounded to the precision). For BF16, C is read
// through dazC; k = 0 leaves C as it is (or +0).
func refProduct(prec Precision, m, n, k int, a func(i, q int) float32, b func(q, j int) float32, c []float32, ldc int, acc bool) {
	am, bm := make([]float32, m*k), make([]float32, n*k)
	for i := 0; i < m; i++ {
		for q := 0; q < k; q++ {
			am[i*k+q] = a(i, q)
		}
	}
	for j := 0; j < n; j++ {
		for q := 0; q < k; q++ {
			bm[j*k+q] = b(q, j)
		}
	}
	refMat(prec, m, n, k, am, bm, c, ldc, acc)
}

// refMat is refProduct on operand matrices: a is m×k and b is n×k (row j
// holds column j of op(B)), both row-major and dense.
func refMat(prec Precision, m, n, k int, a, b []float32, c []float32, ldc int, acc bool) {
	for i := 0; i < m; i++ {
		ai := a[i*k : i*k+k]
		for j := 0; j < n; j++ {
			bj := b[j*k : j*k+k]
			var x float32
			if acc {
				x = c[i*ldc+j]
			}
			at := func(q int) float32 { return ai[q] }
			bt := func(q int) float32 { return bj[q] }
			switch {
			case k == 0:
			case prec == BF16:
				x = dotBF16(k, at, bt, dazC(x))
			default:
				x = dotF32(k, at, bt, x)
			}
			c[i*ldc+j] = x
		}
	}
}
