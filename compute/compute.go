package compute

import (
	"errors"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/nn"
	"github.com/densitykv/densitykv/rope"
)

// ErrNoKernel is wrapped by the error of an operation a backend does not
// compute (yet): "gpu: LayerNorm: not on this backend yet".
var ErrNoKernel = errors.New("not on this backend yet")

// Tensor is a backend's flat float32 tensor of Len values (activations,
// or parameters uploaded once by Param). Its values are reached only
// through the backend that made it (Download, or HostMemory on the CPU).
type Tensor interface {
	Len() int
}

// Linear is a backend's handle of an nn.Linear's weights and bias,
// uploaded once by Backend.LoadLinear at a precision: In inputs, Out
// outputs per row.
type Linear interface {
	In() int
	Out() int
}

// Vec is a [d] vector per group of rows (the DiT's per-frame modulation
// rows): group g's vector is elements Off + g·Stride … Off + g·Stride + d − 1
// of T (Stride 0: one vector for every group).
type Vec struct {
	T           Tensor
	Off, Stride int
}

// Backend computes the models' operations on its tensors. Operations
// record their first failure, skip everything after it, and the next
// Flush or Download returns it (see the package documentation); the
// shapes are checked against the tensors' lengths.
//
// A Backend is used by one goroutine at a time.
type Backend interface {
	// String names the backend and its device ("cpu", "vulkan:0 (…)").
	String() string

	// New returns a tensor of n zeros.
	New(n int) Tensor
	// View returns the n values of t from offset off, sharing t's storage.
	View(t Tensor, off, n int) Tensor
	// Param returns a read-only tensor of v's values, uploaded once (the
	// CPU backend uses v itself: v must not change while it is used).
	Param(v []float32) Tensor
	// Free releases a tensor made by New or Param (after the operations
	// recorded with it have run); nil is ignored.
	Free(t Tensor)
	// Upload writes src into dst (len(src) = dst.Len()), after the
	// operations recorded before it.
	Upload(dst Tensor, src []float32)
	// Download runs what is recorded and copies src into dst
	// (len(dst) = src.Len()); it returns the backend's first error.
	Download(dst []float32, src Tensor) error
	// Flush runs what is recorded and returns the backend's first error.
	Flush() error

	// LoadLinear uploads l's weights (packed: nn.Linear.Weight's values,
	// which are bfloat16 roundings at gemm.BF16) and bias once, for
	// products at precision prec, l's packed precision.
	LoadLinear(l *nn.Linear[float32], prec gemm.Precision) Linear
	// FreeLinear releases what LoadLinear uploaded; nil is ignored.
	FreeLinear(w Linear)

	// Linear sets y [rows][Out] = x [rows][In]·Wᵀ + b: nn.Linear.Apply
	// (gemm's product at the weights' precision, x rounded to bfloat16 at
	// gemm.BF16, then the bias added in float32).
	Linear(y Tensor, w Linear, x Tensor, rows int)
	// LayerNorm sets y [rows][d] to nn.LayerNorm of x (y may be x); w and
	// b are the affine [d] weights, or both nil.
	LayerNorm(y, x Tensor, rows, d int, eps float64, w, b Tensor)
	// RMSNorm sets y [rows][d] to nn.RMSNorm of x with weights w [d] (y
	// may be x).
	RMSNorm(y, x Tensor, rows, d int, eps float64, w Tensor)
	// GELUTanh applies nn.GELUTanh to x in place.
	GELUTanh(x Tensor)
	// SiLU sets y to nn.SiLU of x (y may be x; same length).
	SiLU(y, x Tensor)
	// Attention sets out [T][H][D] to nn.Attention(prec, out, q, k, v, T,
	// S, H, D, scale) of q [T][H][D] and k, v [S][H][D].
	Attention(prec gemm.Precision, out, q, k, v Tensor, T, S, H, D int, scale float32)
	// Modulate sets y [rows][d] = y·(1+scale) + shift in place (Modulate's
	// definition in cpu.go), the vectors those of the row's group of
	// groupRows rows.
	Modulate(y Tensor, rows, d, groupRows int, shift, scale Vec)
	// GatedAdd sets x [rows][d] += o·gate (GatedAdd in cpu.go), gate the
	// vector of the row's group of groupRows rows.
	GatedAdd(x, o Tensor, rows, d, groupRows int, gate Vec)
	// Add sets x += y (same length).
	Add(x, y Tensor)
	// AddBias sets x[r][j] += b[j] for x [rows][d], b [d].
	AddBias(x Tensor, rows, d int, b Tensor)
	// Copy copies n values of src from srcOff to dst at dstOff (not
	// overlapping).
	Copy(dst Tensor, dstOff int, src Tensor, srcOff, n int)
	// Rope rotates in place frames whole frames of x [token][heads][D]
	// (D = r.HeadDim()) from token tok0, a frame being height·width tokens
	// in grid order, frame f at temporal position t0+f: the bits of
	//
	//	r.NewRotator(height, width).Frame(x[(tok0+f·height·width)·heads·D:], heads, t0+f)
	//
	// (the memory policies' rotation of queries and keys).
	Rope(x Tensor, tok0, heads int, r *rope.Table, height, width, t0, frames int)

	// umT5's operations (package t5; their CPU definitions in cpu_t5.go).

	// LoadLinearBF16 uploads l's bfloat16 weights (not packed: l.W as it
	// is) and bias once, for products at prec; Linear then computes
	// l.Stream's bits (gemm.NTAs at prec of x and the weights as float32,
	// x rounded to bfloat16 at gemm.BF16, then the bias).
	LoadLinearBF16(l *nn.Linear[uint16], prec gemm.Precision) Linear
	// Mul sets x *= y element-wise (same length).
	Mul(x, y Tensor)
	// BiasedAttention sets out [n][H][D] to nn.BiasedAttention(prec, out,
	// q, k, v, n, H, D, bias, keep, probs) of q, k, v [n][H][D], the
	// relative-position bias [H][2n−1] and keep [n] (a key is kept where
	// its value is not 0); probs [H][n][n], when not nil, receives the
	// probabilities.
	BiasedAttention(prec gemm.Precision, out, q, k, v Tensor, n, H, D int, bias, keep, probs Tensor)

	// The VAE decoder's operations (package vae; vae.go, their CPU
	// definitions in cpu_vae.go).
	VAEOps
}

// HostMemory is implemented by a backend whose tensors are host memory
// (the CPU backend): host code (a memory policy, a trace) reads and
// hands in values without a copy.
type HostMemory interface {
	// Host returns t's values themselves.
	Host(t Tensor) []float32
	// Wrap returns a tensor whose values are v itself.
	Wrap(v []float32) Tensor
}

// LayerNormModulater is a fused kernel of the DiT's normalisation and
// modulation, the same bits as
//
//	b.LayerNorm(y, x, rows, d, eps, nil, nil)
//	b.Modulate(y, rows, d, groupRows, shift, scale)
type LayerNormModulater interface {
	LayerNormModulate(y, x Tensor, rows, d int, eps float64, groupRows int, shift, scale Vec)
}

// LayerNormModulate sets y [rows][d] = LN(x)·(1+scale) + shift (no affine
// LayerNorm): b's fused kernel when it has one (LayerNormModulater), else
// the two operations.
func LayerNormModulate(b Backend, y, x Tensor, rows, d int, eps float64, groupRows int, shift, scale Vec) {
	if f, ok := b.(LayerNormModulater); ok {
		f.LayerNormModulate(y, x, rows, d, eps, groupRows, shift, scale)
		return
	}
	b.LayerNorm(y, x, rows, d, eps, nil, nil)
	b.Modulate(y, rows, d, groupRows, shift, scale)
}
