package gpu

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/densitykv/densitykv/attn"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/vulkan"
)

// AttnMaxD is the largest head dimension of Attention.
const AttnMaxD = 256

// testRows, when positive, is the rows per workgroup of the attention and
// Soft-Riesz kernels (tests: the results do not depend on it).
var testRows int

// attnRows returns the query rows per workgroup of the attention kernel
// for head dimension d: the most (16, 8, …, 1) whose shared memory (the
// rows' queries, a key tile of scores, three values per row) the device
// has.
func attnRows(dev *vulkan.Device, d int) int {
	if testRows > 0 {
		return testRows
	}
	rows := 16
	for rows > 1 && int64(rows)*int64(d+attn.BlockS+3)*4 > int64(dev.Info().MaxSharedMemory) {
		rows /= 2
	}
	return rows
}

// Attention records into batch the exact-mode equivalent of
//
//	attn.AttentionAs(prec, out, q, k, v, T, S, H, D, scale)
//
// on device buffers of float32 values: q and out [T][H][D], k and v
// [S][H][D], row-major. out gets the CPU's bits (NaN payloads aside): per
// output row the same key tiles (attn.BlockS), online softmax (running
// maximum, rescaling, row sums in key order, vmath.Exp32 with attn's
// clamps), products by gemm's float32 or bfloat16 definition (with
// gemm.BF16: q, k, v and the probabilities rounded to bfloat16 operands)
// and the final division, correctly rounded. out must not share a buffer
// with q, k or v. Sizes are checked (S ≥ 1 when T, H ≥ 1; D ≤ AttnMaxD;
// buffers large enough); T = 0, H = 0 or D = 0 records nothing.
//
// It runs the exactness probe first (CheckExact, once per device) and
// returns its error on a device unfit for exact mode. The float32 fused
// multiply-add is the device's fma() where the probe found it one rounding,
// exact.glsl's integer fma32 elsewhere (the same bits, slower).
func Attention(dev *vulkan.Device, batch *vulkan.Batch, prec gemm.Precision, out, q, k, v *vulkan.Buffer, T, S, H, D int, scale float32) error {
	module, err := exactModule(dev, "attn_exact")
	if err != nil {
		return err
	}
	return attention(dev, batch, module, prec, out, q, k, v, T, S, H, D, scale)
}

// attention is Attention with the module chosen (attn_exact or
// attn_exact_softfma).
func attention(dev *vulkan.Device, batch *vulkan.Batch, module string, prec gemm.Precision, out, q, k, v *vulkan.Buffer, T, S, H, D int, scale float32) error {
	if err := checkAttention(dev, prec, out, q, k, v, T, S, H, D); err != nil {
		return fmt.Errorf("gpu: Attention: %w", err)
	}
	if T == 0 || H == 0 || D == 0 {
		return nil
	}
	rows := attnRows(dev, D)
	kern, err := newKernel(dev, module, vulkan.KernelSpec{Name: module, Bindings: 4, PushSize: 20, Spec: []uint32{uint32(rows), uint32(D)}})
	if err != nil {
		return fmt.Errorf("gpu: Attention: %w", err)
	}
	bf16 := uint32(0)
	if prec == gemm.BF16 {
		bf16 = 1
	}
	push := words(uint32(T), uint32(S), uint32(H), math.Float32bits(scale), bf16)
	batch.Dispatch(kern, [3]uint32{uint32((T + rows - 1) / rows), uint32(H), 1}, push, out, q, k, v)
	return nil
}

func checkAttention(dev *vulkan.Device, prec gemm.Precision, out, q, k, v *vulkan.Buffer, T, S, H, D int) error {
	switch {
	case prec != gemm.F32 && prec != gemm.BF16:
		return fmt.Errorf("unknown precision %v", prec)
	case T < 0 || S < 0 || H < 0 || D < 0:
		return fmt.Errorf("negative size T=%d S=%d H=%d D=%d", T, S, H, D)
	case T > 0 && H > 0 && S == 0:
		return fmt.Errorf("%d queries but no keys", T)
	case D > AttnMaxD:
		return fmt.Errorf("head dimension D=%d beyond %d", D, AttnMaxD)
	case T == 0 || H == 0 || D == 0:
		return nil
	}
	if out == q || out == k || out == v {
		return fmt.Errorf("out shares a buffer with an input")
	}
	for _, b := range []struct {
		name string
		buf  *vulkan.Buffer
		n    int64
	}{{"out", out, int64(T) * int64(H) * int64(D)}, {"q", q, int64(T) * int64(H) * int64(D)},
		{"k", k, int64(S) * int64(H) * int64(D)}, {"v", v, int64(S) * int64(H) * int64(D)}} {
		if err := checkElems(b.name, b.buf, b.n, 4, "float32"); err != nil {
			return fmt.Errorf("%w (T=%d S=%d H=%d D=%d)", err, T, S, H, D)
		}
	}
	rows := attnRows(dev, D)
	groups := [2]int{(T + rows - 1) / rows, H}
	for i, g := range groups {
		if m := dev.Info().MaxWorkgroupCount[i]; m > 0 && uint64(g) > uint64(m) {
			return fmt.Errorf("%d workgroups in dimension %d (T=%d, H=%d), beyond the device's %d", g, i, T, H, m)
		}
	}
	return nil
}

// maxElems bounds the elements a kernel indexes: its indices are 32-bit.
const maxElems = math.MaxUint32

// checkElems checks that buf holds n elements of size bytes (kind names
// them) and that they can be indexed in 32 bits.
func checkElems(name string, buf *vulkan.Buffer, n, size int64, kind string) error {
	switch {
	case buf == nil:
		return fmt.Errorf("%s is nil", name)
	case n > maxElems:
		return fmt.Errorf("%s: %d elements, beyond a kernel's 32-bit indices", name, n)
	case buf.Size() < size*n:
		return fmt.Errorf("%s holds %d bytes, need %d (%d %s)", name, buf.Size(), size*n, n, kind)
	}
	return nil
}

// words returns 32-bit values as little-endian push-constant bytes.
func words(v ...uint32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], x)
	}
	return b
}

// exactModule returns the module of the exact kernel name for dev: name
// itself (the float32 fused multiply-add as fma()) where the exactness
// probe found fma() one rounding, else name_softfma (exact.glsl's integer
// fma32, exact everywhere). It returns the probe's error on a device unfit
// for exact mode.
func exactModule(dev *vulkan.Device, name string) (string, error) {
	props, err := CheckExact(dev)
	if err != nil {
		return "", err
	}
	if props.FMA {
		return name, nil
	}
	return name + "_softfma", nil
}
