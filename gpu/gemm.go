package gpu

import (
	"fmt"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/vulkan"
)

// Tile is the blocking of the product kernel: workgroups of WX×WY
// invocations, each computing TM×TN elements of C (a workgroup a
// (WY·TM)×(WX·TN) tile), depth staged 32 at a time. It changes no bit of
// the result, only the speed.
type Tile struct{ WX, WY, TM, TN int }

// DefaultTile is the product's tile when a Product has none: 16×16
// invocations of 4×4 elements (64×64 tiles of C, 16.25 KiB of shared memory).
var DefaultTile = Tile{WX: 16, WY: 16, TM: 4, TN: 4}

// Product is one matrix product recorded into a batch:
//
//	C = A·Bᵀ (NT: A M×K, B N×K) or C = A·B (NN: B K×N), C M×N float32;
//	with Acc, C += … (continuing C's chain, gemm's accumulation).
//
// A and B have the same precision, which selects gemm's definition
// (gemm/doc.go): float32, per element c = fma(a[q], b[q], c) in depth
// order; bfloat16, blocks of 32 depths with even and odd chains. Every
// bit equals gemm.NTAs/NNAs (or MulPacked with acc) on the same values.
// K is A's columns, at least 1 (a Matrix is never empty). C may not share
// a buffer with A or B. For gemm.NTAs(gemm.BF16, …) on float32 activations,
// round them first (RoundBF16 into a bfloat16 Matrix, in the same batch).
// A float32 A may take a bfloat16 B: its values widened exactly to
// float32 as they are read, the float32 definition (nn.Linear.Stream's
// fp32 product of bfloat16 weights, which stay 2 bytes a weight).
type Product struct {
	C, A, B Matrix
	NN      bool // B is K×N; otherwise N×K
	Acc     bool
	Tile    Tile // zero: DefaultTile
}

// NT records C = A·Bᵀ (+C with acc) into batch; see Product.
func NT(dev *vulkan.Device, batch *vulkan.Batch, c, a, b Matrix, acc bool) error {
	return Product{C: c, A: a, B: b, Acc: acc}.Record(dev, batch)
}

// NN records C = A·B (+C with acc) into batch; see Product.
func NN(dev *vulkan.Device, batch *vulkan.Batch, c, a, b Matrix, acc bool) error {
	return Product{C: c, A: a, B: b, NN: true, Acc: acc}.Record(dev, batch)
}

// check validates the product's shapes and tile.
func (p Product) check() error {
	if err := p.C.check("C", int(gemm.F32)); err != nil {
		return err
	}
	if err := p.A.check("A", -1); err != nil {
		return err
	}
	if err := p.B.check("B", int(p.A.Prec)); err != nil && !p.widenB() {
		return err
	}
	m, n, k := p.C.Rows, p.C.Cols, p.A.Cols
	bn, bk, layout := p.B.Rows, p.B.Cols, "N×K"
	if p.NN {
		bn, bk, layout = p.B.Cols, p.B.Rows, "K×N"
	}
	if p.A.Rows != m || bn != n || bk != k {
		return fmt.Errorf("C %d×%d = A %d×%d · B %d×%d (%s): shapes do not match", m, n, p.A.Rows, p.A.Cols, p.B.Rows, p.B.Cols, layout)
	}
	if p.C.Buf == p.A.Buf || p.C.Buf == p.B.Buf {
		return fmt.Errorf("C shares a buffer with an operand")
	}
	t := p.tile()
	if t.WX <= 0 || t.WY <= 0 || t.TM <= 0 || t.TN <= 0 || t.WX*t.WY > 1024 || t.TM*t.TN > 64 {
		return fmt.Errorf("tile %+v: want positive sizes, at most 1024 invocations and 64 elements each", t)
	}
	return nil
}

// widenB reports a float32 product of a bfloat16 B (widened as read).
func (p Product) widenB() bool { return p.A.Prec == gemm.F32 && p.B.Prec == gemm.BF16 }

func (p Product) tile() Tile {
	if p.Tile == (Tile{}) {
		return DefaultTile
	}
	return p.Tile
}

// Record checks the product and records its dispatch into batch. It runs
// the exactness probe first (once per device) and returns its error on a
// device that fails it.
func (p Product) Record(dev *vulkan.Device, batch *vulkan.Batch) error {
	name := "NT"
	if p.NN {
		name = "NN"
	}
	if err := p.check(); err != nil {
		return fmt.Errorf("gpu: %s: %w", name, err)
	}
	props, err := CheckExact(dev)
	if err != nil {
		return err
	}
	t := p.tile()
	if t.WX*t.WY > int(dev.Info().MaxWorkgroupInvocations) {
		return fmt.Errorf("gpu: %s: tile %+v: %d invocations, beyond the device's %d", name, t, t.WX*t.WY, dev.Info().MaxWorkgroupInvocations)
	}
	if shared := 4 * 32 * (t.WY*t.TM + t.WX*t.TN + 2); shared > int(dev.Info().MaxSharedMemory) {
		return fmt.Errorf("gpu: %s: tile %+v: %d bytes of shared memory, beyond the device's %d", name, t, shared, dev.Info().MaxSharedMemory)
	}
	module, bf16, nn := "gemm", uint32(0), uint32(0)
	if p.A.Prec == gemm.BF16 {
		bf16 = 1
	} else if fmaPath == "soft" || (!props.FMA && fmaPath != "hardware") {
		module = "gemm_softfma"
	}
	if p.NN {
		nn = 1
	}
	widen := uint32(0)
	if p.widenB() {
		widen = 1
	}
	k, err := newKernel(dev, module, vulkan.KernelSpec{
		Name: module + " " + name, Bindings: 3, PushSize: 40,
		Spec: []uint32{uint32(t.WX), uint32(t.WY), uint32(t.TM), uint32(t.TN), bf16, nn, widen},
	})
	if err != nil {
		return fmt.Errorf("gpu: %s: %w", name, err)
	}
	acc := uint32(0)
	if p.Acc {
		acc = 1
	}
	m, n := p.C.Rows, p.C.Cols
	push := le32(uint32(m), uint32(n), uint32(p.A.Cols), uint32(p.A.Ld), uint32(p.B.Ld), uint32(p.C.Ld),
		uint32(p.A.Off), uint32(p.B.Off), uint32(p.C.Off), acc)
	groups := [3]uint32{uint32(ceilDiv(n, t.WX*t.TN)), uint32(ceilDiv(m, t.WY*t.TM)), 1}
	for i, g := range groups[:2] {
		if lim := dev.Info().MaxWorkgroupCount[i]; lim > 0 && g > lim {
			return fmt.Errorf("gpu: %s: C %d×%d needs %d workgroups in dimension %d with tile %+v, beyond the device's %d: use a larger tile or split C", name, m, n, g, i, t, lim)
		}
	}
	batch.Dispatch(k, groups, push, p.A.Buf, p.B.Buf, p.C.Buf)
	return nil
}

// fmaPath overrides the float32 product's choice of fused multiply-add
// for tests: "soft" (exact.glsl's fma32) or "hardware" (fma(), even where
// the probe found it unfused); "" chooses by the probe.
var fmaPath string

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// RoundBF16 records dst = src rounded to bfloat16 into batch: each element
// gemm.RoundBF16 (nearest even, NaN kept quiet, denormal results kept), or
// with operand, gemm.BF16OperandBits (denormal results flushed to the
// zero of their sign, as products read them). src is float32, dst
// bfloat16, of the same shape; bits of dst's buffer outside dst stay.
func RoundBF16(dev *vulkan.Device, batch *vulkan.Batch, dst, src Matrix, operand bool) error {
	if err := src.check("source", int(gemm.F32)); err != nil {
		return fmt.Errorf("gpu: RoundBF16: %w", err)
	}
	if err := dst.check("destination", int(gemm.BF16)); err != nil {
		return fmt.Errorf("gpu: RoundBF16: %w", err)
	}
	if dst.Rows != src.Rows || dst.Cols != src.Cols {
		return fmt.Errorf("gpu: RoundBF16: destination %d×%d for a source %d×%d", dst.Rows, dst.Cols, src.Rows, src.Cols)
	}
	if dst.Buf == src.Buf {
		return fmt.Errorf("gpu: RoundBF16: destination and source share a buffer")
	}
	if _, err := CheckExact(dev); err != nil {
		return err
	}
	const local = 256
	k, err := newKernel(dev, "round_bf16", vulkan.KernelSpec{Name: "round_bf16", Bindings: 2, PushSize: 28, Spec: []uint32{local}})
	if err != nil {
		return fmt.Errorf("gpu: RoundBF16: %w", err)
	}
	first, end := dst.span()
	words := (end+1)/2 - first/2
	groups := ceilDiv(int(words), local)
	gx := min(groups, 65535)
	op := uint32(0)
	if operand {
		op = 1
	}
	push := le32(uint32(src.Rows), uint32(src.Cols), uint32(src.Off), uint32(src.Ld), uint32(dst.Off), uint32(dst.Ld), op)
	batch.Dispatch(k, [3]uint32{uint32(gx), uint32(ceilDiv(groups, gx)), 1}, push, src.Buf, dst.Buf)
	return nil
}
