package memory

import (
	"math"

	"github.com/densitykv/densitykv/bank"
)

// tensor is one layer's keys or values of one frame, [TokensPerFrame][H][D],
// held as float32 (f32) or as bfloat16 bits (b16): exactly one is set.
// A frame's K/V are held as bfloat16 only where that loses nothing the
// policy needs: values that are all bfloat16 already (a recorded bf16
// stream: lossless), or, for a DensityKV bank with a bfloat16 payload and
// the post-RoPE-key descriptor, frames that have left the local window and
// wait to be offered, which the bank reads only rounded (see readyFrame).
type tensor struct {
	f32 []float32
	b16 []uint16
}

func f32Tensor(x []float32) tensor { return tensor{f32: x} }

// len returns the number of values.
func (t tensor) len() int {
	if t.b16 != nil {
		return len(t.b16)
	}
	return len(t.f32)
}

// into writes the values to dst (len(dst) ≥ t.len()) as float32 and returns
// dst[:t.len()].
func (t tensor) into(dst []float32) []float32 {
	if t.b16 == nil {
		return dst[:copy(dst, t.f32)]
	}
	dst = dst[:len(t.b16)]
	for i, h := range t.b16 {
		dst[i] = math.Float32frombits(uint32(h) << 16)
	}
	return dst
}

// rows returns the values of rows [i, j) (row = n values).
func (t tensor) rows(i, j, n int) tensor {
	if t.b16 != nil {
		return tensor{b16: t.b16[i*n : j*n]}
	}
	return tensor{f32: t.f32[i*n : j*n]}
}

// float32s returns the values as float32: the slice itself when held so,
// else a decoded copy.
func (t tensor) float32s() []float32 {
	if t.b16 == nil {
		return t.f32
	}
	return t.into(make([]float32, len(t.b16)))
}

// bytes returns the memory the tensor holds.
func (t tensor) bytes() int64 { return int64(len(t.f32))*4 + int64(len(t.b16))*2 }

// compact returns x as a bfloat16 tensor when every value of x is a
// bfloat16 (its low 16 bits are zero), else as x itself.
func compact(x []float32) tensor {
	for _, v := range x {
		if math.Float32bits(v)&0xffff != 0 {
			return tensor{f32: x}
		}
	}
	h := make([]uint16, len(x))
	for i, v := range x {
		h[i] = uint16(math.Float32bits(v) >> 16)
	}
	return tensor{b16: h}
}

// rounded returns x rounded to bfloat16 (bank.RoundBF16, as the bank rounds
// its payload).
func rounded(x []float32) tensor {
	h := make([]uint16, len(x))
	for i, v := range x {
		h[i] = uint16(math.Float32bits(bank.RoundBF16(v)) >> 16)
	}
	return tensor{b16: h}
}

// frame is one latent frame's clean K/V in every layer: K[l] and V[l] are
// [TokensPerFrame][Heads][HeadDim]. Whether K is RoPE-rotated depends on
// the policy that owns it; Ready frames hold the DensityKV bank's
// candidates (see readyFrame).
type frame struct {
	ID    int
	K, V  []tensor
	Ready bool
}

// newFrame returns frame id with L empty layers.
func newFrame(id, L int) *frame {
	return &frame{ID: id, K: make([]tensor, L), V: make([]tensor, L)}
}

// keys returns layer l's keys as float32 (the frame's own slice when held
// so: callers that change it own the frame).
func (f *frame) keys(l int) []float32 { return f.K[l].float32s() }

// values returns layer l's values as float32 (like keys).
func (f *frame) values(l int) []float32 { return f.V[l].float32s() }

// bytes returns the memory the frame's K/V hold.
func (f *frame) bytes() int64 {
	var n int64
	for l := range f.K {
		n += f.K[l].bytes() + f.V[l].bytes()
	}
	return n
}
