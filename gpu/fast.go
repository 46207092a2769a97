package gpu

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/device"
	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/vulkan"
)

// Fast mode (compute.Fast, --precision bf16-fast): the bfloat16 linears on
// tensor cores through VK_NV_cooperative_matrix. Not exact: see the
// package documentation's "Fast mode" and docs/gpu.md.
//
// The cooperative matrices of VK_NV_cooperative_matrix (the GLSL extension
// Debian bookworm's glslc knows) take float16, not bfloat16, operands. The
// bfloat16 operands are carried over exactly: each row (of the activations
// and of the weights) is scaled by a power of two 2^s that puts its
// largest finite value in [2^14, 2^15), so that every value within 2^-31
// of the row's largest becomes a float16 exactly (8 significant bits fit
// in float16's 11, and float16's exponents cover 2^-17 … 2^15 with 8 bits);
// smaller values round to float16's subnormals (an absolute error below
// 2^-39 of the row's largest). A product of two float16 values is exact
// in float32; the tensor cores accumulate in float32, and each result is
// scaled back by 2^-(sA+sB). So fast mode's products differ from the
// bfloat16 definition only in the accumulation's order and rounding.

// fastModules are the fast-mode modules (shaders/*_fast.comp), with what
// each is for. They are not exact (no float controls, contraction allowed,
// no check of their instructions), newKernel refuses them and only
// newFastKernel creates them; TestFastModules requires every *_fast module
// to be listed here.
var fastModules = map[string]string{
	"gemm_prep_fast":    "operands: float32 rows → bfloat16 operands → float16 scaled by a power of two per row (integer arithmetic)",
	"gemm_coopmat_fast": "the product on tensor cores (VK_NV_cooperative_matrix, 16×16×16 float16·float16+float32)",
	"gemm_emu_fast":     "test-only: the product's tile loop with the cooperative-matrix multiply emulated by float32 loops (runs on any device, lavapipe included)",
}

// newFastKernel is newKernel for a fast-mode module.
func newFastKernel(dev *vulkan.Device, name string, s vulkan.KernelSpec) (*vulkan.Kernel, error) {
	if _, ok := fastModules[name]; !ok {
		return nil, fmt.Errorf("gpu: %s is not a fast-mode module", name)
	}
	b, err := module(dev, name)
	if err != nil {
		return nil, err
	}
	s.SPIRV = b
	return dev.Kernel(s)
}

// FastShape is the cooperative-matrix shape of fast mode's kernel
// (shaders/gemm_fast.glsl).
var FastShape = vulkan.CoopMatrixShape{M: 16, N: 16, K: 16, A: "float16", B: "float16", C: "float32", Result: "float32", Scope: "subgroup"}

// fastShared is the shared memory of fast mode's product kernel, bytes:
// two 64×40 float16 tiles and the 64×68 float32 result.
const fastShared = 2*64*5*16 + 64*68*4

// ErrNoFastMode is wrapped by FastSupport's refusal of a device.
var ErrNoFastMode = errors.New("gpu: fast mode (bf16-fast: tensor cores, bfloat16 operands, float32 accumulation) needs VK_NV_cooperative_matrix with its " +
	"16x16x16 float16*float16+float32=float32 (subgroup) shape, shaderFloat16, the Vulkan memory model and 32-wide subgroups")

// FastSupport returns nil when fast mode's kernel runs on device d, else an
// error wrapping ErrNoFastMode that names the device and what it lacks.
// Devices that offer only VK_KHR_cooperative_matrix are refused too: the
// kernel is SPIR-V for the NV extension (Debian bookworm's glslc, which
// builds the modules, knows GL_NV_cooperative_matrix, not
// GL_KHR_cooperative_matrix).
func FastSupport(d vulkan.DeviceInfo) error {
	var lacks []string
	if !slices.Contains(d.CooperativeMatrixNV, FastShape) {
		switch {
		case len(d.CooperativeMatrixNV) > 0:
			lacks = append(lacks, fmt.Sprintf("the %v shape of VK_NV_cooperative_matrix (it offers %s)", FastShape, shapeList(d.CooperativeMatrixNV)))
		case len(d.CooperativeMatrix) > 0:
			lacks = append(lacks, fmt.Sprintf("VK_NV_cooperative_matrix (it offers VK_KHR_cooperative_matrix: %s, which fast mode's kernel does not use yet)", shapeList(d.CooperativeMatrix)))
		default:
			lacks = append(lacks, "VK_NV_cooperative_matrix (it offers no cooperative-matrix extension, KHR or NV)")
		}
	}
	if !d.Float16 {
		lacks = append(lacks, "shaderFloat16")
	}
	if !d.MemoryModel {
		lacks = append(lacks, "the Vulkan memory model (vulkanMemoryModel)")
	}
	if d.SubgroupSize != 32 {
		lacks = append(lacks, fmt.Sprintf("32-wide subgroups (its subgroups are %d wide)", d.SubgroupSize))
	}
	if d.MaxWorkgroupInvocations < 128 || d.MaxSharedMemory < fastShared {
		lacks = append(lacks, fmt.Sprintf("128 invocations and %d bytes of shared memory per workgroup (it has %d and %d)", fastShared, d.MaxWorkgroupInvocations, d.MaxSharedMemory))
	}
	if d.Unsupported != "" {
		lacks = append(lacks, "Vulkan support ("+d.Unsupported+")")
	}
	if len(lacks) == 0 {
		return nil
	}
	return fmt.Errorf("%w; %s %s (%s) lacks %s. Exact mode (bf16 or fp32) runs there", ErrNoFastMode,
		device.VulkanIndex(d.Index), d.Name, d.DriverName, strings.Join(lacks, "; "))
}

func shapeList(s []vulkan.CoopMatrixShape) string {
	var out []string
	for _, c := range s {
		out = append(out, c.String())
	}
	return strings.Join(out, "; ")
}

// FastOperand is a matrix prepared for fast mode's product, Rows×K: in
// its buffer, row r's float16 values (the bfloat16 operands scaled by 2^s
// of the row) at half index r·kp + q, kp = K rounded up to 8 (zeros
// beyond K), two to a 32-bit word, the lower half first; then one int32
// per row, its s. PrepFast writes one from float32 rows on the device,
// UploadFast from bfloat16 weights on the host (the same bits).
type FastOperand struct {
	Buf     *vulkan.Buffer
	Rows, K int
}

// kv is the depth in groups of 8 halves (one uvec4).
func (o FastOperand) kv() int { return (o.K + 7) / 8 }

// fastWords is the size of a Rows×K FastOperand in 32-bit words.
func fastWords(rows, k int) int64 { return int64(rows)*int64((k+7)/8)*4 + int64(rows) }

func (o FastOperand) check(what string) error {
	switch {
	case o.Buf == nil:
		return fmt.Errorf("%s: no buffer", what)
	case o.Rows <= 0 || o.K <= 0 || o.Rows > maxIndex/4 || o.K > maxIndex/4:
		return fmt.Errorf("%s is %d×%d", what, o.Rows, o.K)
	case 4*fastWords(o.Rows, o.K) > o.Buf.Size() || fastWords(o.Rows, o.K) > maxIndex:
		return fmt.Errorf("%s (%d×%d) needs %d bytes, its buffer has %d", what, o.Rows, o.K, 4*fastWords(o.Rows, o.K), o.Buf.Size())
	}
	return nil
}

// NewFastOperand allocates a rows×k FastOperand (its values undefined
// until PrepFast writes them).
func NewFastOperand(dev *vulkan.Device, rows, k int) (FastOperand, error) {
	if rows <= 0 || k <= 0 || rows > maxIndex/4 || k > maxIndex/4 || fastWords(rows, k) > maxIndex {
		return FastOperand{}, fmt.Errorf("gpu: NewFastOperand: %d×%d", rows, k)
	}
	buf, err := dev.Alloc(4 * fastWords(rows, k))
	if err != nil {
		return FastOperand{}, fmt.Errorf("gpu: NewFastOperand %d×%d: %w", rows, k, err)
	}
	return FastOperand{Buf: buf, Rows: rows, K: k}, nil
}

// fastScale is the scale exponent s of a row of bfloat16 operand bits:
// 141 − e for the largest biased exponent e of its finite nonzero values
// (the largest scaled value then lies in [2^14, 2^15)), at most 126 (a
// row whose largest value is below 2^-113); 0 for a row without one.
func fastScale(row []uint16) int {
	e := 0
	for _, h := range row {
		if x := int(h>>7) & 0xff; x != 0xff && x > e {
			e = x
		}
	}
	if e == 0 {
		return 0
	}
	return min(141-e, 126)
}

// fastHalf is the float16 bits of the bfloat16 operand h (a denormal h
// reads as the zero of its sign) times 2^s, s from fastScale: exact where
// the scaled value is at least 2^-17 in magnitude (every value within
// 2^-31 of the row's largest), else rounded to nearest even among
// float16's subnormals; ±Inf stays, NaN stays NaN (quiet).
func fastHalf(h uint16, s int) uint16 {
	sign := h & 0x8000
	e, m := int(h>>7)&0xff, h&0x7f
	switch {
	case e == 0xff && m != 0:
		return sign | 0x7e00
	case e == 0xff:
		return sign | 0x7c00
	case e == 0:
		return sign
	}
	x := e - 127 + s // at most 14
	if x >= -14 {
		return sign | uint16(x+15)<<10 | m<<3
	}
	sig := 0x80 | m
	sh := -(x + 17)
	switch {
	case sh <= 0:
		return sign | sig<<uint(-sh)
	case sh > 9:
		return sign
	}
	q, rem, half := sig>>uint(sh), sig&(1<<uint(sh)-1), uint16(1)<<uint(sh-1)
	if rem > half || rem == half && q&1 != 0 {
		q++
	}
	return sign | q
}

// fastWordsOf returns the FastOperand words of rows×k bfloat16 operand
// bits (row-major): what PrepFast writes for float32 rows whose
// gemm.BF16OperandBits are bits.
func fastWordsOf(rows, k int, bits []uint16) []uint32 {
	kv := (k + 7) / 8
	w := make([]uint32, fastWords(rows, k))
	for r := 0; r < rows; r++ {
		row := bits[r*k : (r+1)*k]
		s := fastScale(row)
		for q, h := range row {
			w[r*kv*4+q/2] |= uint32(fastHalf(h, s)) << (16 * (q % 2))
		}
		w[rows*kv*4+r] = uint32(int32(s))
	}
	return w
}

// UploadFast allocates the FastOperand of rows×k bfloat16 values (bits,
// row-major: the weights of a bf16 linear) and uploads it, converted on
// the host (fastHalf, fastScale).
func UploadFast(dev *vulkan.Device, rows, k int, bits []uint16) (FastOperand, error) {
	if len(bits) != rows*k {
		return FastOperand{}, fmt.Errorf("gpu: UploadFast: %d values for %d×%d", len(bits), rows, k)
	}
	op := make([]uint16, len(bits))
	for i, h := range bits {
		op[i] = h
		if h&0x7f80 == 0 {
			op[i] = h & 0x8000 // a denormal operand reads as zero
		}
	}
	o, err := NewFastOperand(dev, rows, k)
	if err != nil {
		return FastOperand{}, err
	}
	if err := dev.UploadUint32s(o.Buf, 0, fastWordsOf(rows, k, op)); err != nil {
		o.Buf.Free()
		return FastOperand{}, fmt.Errorf("gpu: UploadFast %d×%d: %w", rows, k, err)
	}
	return o, nil
}

// PrepFast records dst = the FastOperand of the float32 matrix src (its
// values rounded by gemm.BF16OperandBits first) into batch: the same bits
// as UploadFast of those bfloat16 values.
func PrepFast(dev *vulkan.Device, batch *vulkan.Batch, dst FastOperand, src Matrix) error {
	if err := src.check("source", int(gemm.F32)); err != nil {
		return fmt.Errorf("gpu: PrepFast: %w", err)
	}
	if err := dst.check("destination"); err != nil {
		return fmt.Errorf("gpu: PrepFast: %w", err)
	}
	if dst.Rows != src.Rows || dst.K != src.Cols {
		return fmt.Errorf("gpu: PrepFast: destination %d×%d for a source %d×%d", dst.Rows, dst.K, src.Rows, src.Cols)
	}
	if dst.Buf == src.Buf {
		return fmt.Errorf("gpu: PrepFast: destination and source share a buffer")
	}
	groups, err := grid(dev, int64(dst.Rows), 1)
	if err != nil {
		return fmt.Errorf("gpu: PrepFast: %w", err)
	}
	k, err := newFastKernel(dev, "gemm_prep_fast", vulkan.KernelSpec{Name: "gemm_prep_fast", Bindings: 2, PushSize: 20})
	if err != nil {
		return fmt.Errorf("gpu: PrepFast: %w", err)
	}
	batch.Dispatch(k, groups, le32(uint32(dst.Rows), uint32(dst.K), uint32(dst.kv()), uint32(src.Off), uint32(src.Ld)), src.Buf, dst.Buf)
	return nil
}

// FastProduct is fast mode's product C = A·Bᵀ (C M×N float32, A M×K and
// B N×K FastOperands): the bfloat16 values' products accumulated in
// float32 on tensor cores, not gemm's bits. Emulate runs the test-only
// module instead (the same tile loop, the multiply in float32 loops), on
// any device.
type FastProduct struct {
	C       Matrix
	A, B    FastOperand
	Emulate bool
}

// Record checks the product and records it into batch; without Emulate it
// refuses a device that FastSupport refuses.
func (p FastProduct) Record(dev *vulkan.Device, batch *vulkan.Batch) error {
	if err := p.C.check("C", int(gemm.F32)); err != nil {
		return fmt.Errorf("gpu: FastProduct: %w", err)
	}
	if err := p.A.check("A"); err != nil {
		return fmt.Errorf("gpu: FastProduct: %w", err)
	}
	if err := p.B.check("B"); err != nil {
		return fmt.Errorf("gpu: FastProduct: %w", err)
	}
	if p.A.Rows != p.C.Rows || p.B.Rows != p.C.Cols || p.A.K != p.B.K {
		return fmt.Errorf("gpu: FastProduct: C %d×%d = A %d×%d · (B %d×%d)ᵀ: shapes do not match", p.C.Rows, p.C.Cols, p.A.Rows, p.A.K, p.B.Rows, p.B.K)
	}
	if p.C.Buf == p.A.Buf || p.C.Buf == p.B.Buf {
		return fmt.Errorf("gpu: FastProduct: C shares a buffer with an operand")
	}
	module := "gemm_coopmat_fast"
	if p.Emulate {
		module = "gemm_emu_fast"
	} else if err := FastSupport(dev.Info()); err != nil {
		return err
	}
	i := dev.Info()
	if i.MaxWorkgroupInvocations < 128 || i.MaxSharedMemory < fastShared {
		return fmt.Errorf("gpu: FastProduct: the kernel needs 128 invocations and %d bytes of shared memory per workgroup, %v has %d and %d", fastShared, dev, i.MaxWorkgroupInvocations, i.MaxSharedMemory)
	}
	groups := [3]uint32{uint32(ceilDiv(p.C.Cols, 64)), uint32(ceilDiv(p.C.Rows, 64)), 1}
	for d, g := range groups[:2] {
		if lim := i.MaxWorkgroupCount[d]; lim > 0 && g > lim {
			return fmt.Errorf("gpu: FastProduct: C %d×%d needs %d workgroups in dimension %d, beyond the device's %d", p.C.Rows, p.C.Cols, g, d, lim)
		}
	}
	k, err := newFastKernel(dev, module, vulkan.KernelSpec{Name: module, Bindings: 3, PushSize: 20})
	if err != nil {
		return fmt.Errorf("gpu: FastProduct: %w", err)
	}
	push := le32(uint32(p.C.Rows), uint32(p.C.Cols), uint32(p.A.kv()), uint32(p.C.Ld), uint32(p.C.Off))
	batch.Dispatch(k, groups, push, p.A.Buf, p.B.Buf, p.C.Buf)
	return nil
}

// fastState is a fast-mode Backend's (NewFastBackend): the activations'
// FastOperand scratch, grown as needed, and the products recorded.
type fastState struct {
	emulate  bool
	scratch  *vulkan.Buffer
	products int
}

// NewFastBackend returns a Backend of dev in fast mode: its bfloat16
// linears (LoadLinear and LoadLinearBF16 at gemm.BF16) run on tensor cores
// (FastProduct), every other operation stays exact. It refuses a device
// FastSupport refuses, and one that fails the exactness probe (the rest
// of the model runs the exact kernels).
func NewFastBackend(dev *vulkan.Device) (*Backend, error) {
	if err := FastSupport(dev.Info()); err != nil {
		return nil, err
	}
	return newFast(dev, false)
}

// NewEmulatedFastBackend is NewFastBackend with the product's multiply
// emulated (FastProduct.Emulate), on any device: for tests of fast mode's
// tile loop and tolerance where no device offers a cooperative matrix
// (lavapipe). It is slow and proves nothing about tensor cores.
func NewEmulatedFastBackend(dev *vulkan.Device) (*Backend, error) { return newFast(dev, true) }

func newFast(dev *vulkan.Device, emulate bool) (*Backend, error) {
	b, err := NewBackend(dev)
	if err != nil {
		return nil, err
	}
	b.fast = &fastState{emulate: emulate}
	return b, nil
}

// Mode is compute.Fast for a Backend made by NewFastBackend (or
// NewEmulatedFastBackend), else compute.Exact.
func (b *Backend) Mode() compute.Mode {
	if b.fast != nil {
		return compute.Fast
	}
	return compute.Exact
}

// FastProducts is the number of fast-mode products recorded so far (0 in
// exact mode): a test's evidence that fast mode ran.
func (b *Backend) FastProducts() int {
	if b.fast == nil {
		return 0
	}
	return b.fast.products
}

// fastWeights uploads bfloat16 weights [out][in] as a FastOperand, kept in
// a devLinear's Matrix: Buf the operand's buffer, Rows×Cols out×in.
func (b *Backend) fastWeights(out, in int, bits []uint16) (Matrix, error) {
	o, err := UploadFast(b.dev, out, in, bits)
	if err != nil {
		return Matrix{}, err
	}
	return Matrix{Buf: o.Buf, Prec: gemm.BF16, Rows: out, Cols: in, Ld: in}, nil
}

// fastLinear records y = x·Wᵀ (+ bias) in fast mode: x prepared into the
// scratch FastOperand, then the product.
func (b *Backend) fastLinear(y, x *devTensor, l *devLinear, rows int) {
	in, out := l.In(), l.Out()
	f := b.fast
	if need := 4 * fastWords(rows, in); f.scratch == nil || f.scratch.Size() < need {
		if f.scratch != nil {
			b.release(f.scratch)
			f.scratch = nil
		}
		buf, err := b.dev.Alloc(need)
		if err != nil {
			b.fail("Linear", err)
			return
		}
		f.scratch = buf
	}
	a := FastOperand{Buf: f.scratch, Rows: rows, K: in}
	if err := PrepFast(b.dev, b.batch, a, x.matrix(rows, in)); err != nil {
		b.fail("Linear", err)
		return
	}
	w := FastOperand{Buf: l.w.Buf, Rows: out, K: in}
	if err := (FastProduct{C: y.matrix(rows, out), A: a, B: w, Emulate: f.emulate}).Record(b.dev, b.batch); err != nil {
		b.fail("Linear", err)
		return
	}
	f.products++
	if l.bias != nil {
		b.AddBias(y, rows, out, l.bias)
	}
}
