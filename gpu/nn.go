package gpu

import (
	"fmt"
	"math"

	"github.com/densitykv/densitykv/vulkan"
)

// The non-product steps of a DiT block (issue #25): nn's norms and
// activations, wan's element-wise steps and nn.Linear's bias, each on
// device buffers of float32 values with the CPU's bits. Shaders:
// nn_norm.comp, nn_elementwise.comp, nn_act.glsl, nn_rope.comp (rope.go).

// LayerNorm records into batch the exact-mode equivalent of
//
//	nn.LayerNorm(y, x, rows, d, eps, w, b)
//
// on x and y [rows][d] (y may be x): per row the mean and biased variance
// in float64, summed in the row's order by one invocation,
// 1/√(var + eps) in float64 (exact64.glsl's correctly rounded division
// and square root), float32((x − mean)·inv), and with affine weights
// (w and b [d], both or neither) float32(y·w) + b. The device needs
// shaderFloat64 and shaderInt64 and must pass the exactness probe.
func LayerNorm(dev *vulkan.Device, batch *vulkan.Batch, y, x *vulkan.Buffer, rows, d int, eps float64, w, b *vulkan.Buffer) error {
	mode := uint32(0)
	if w != nil || b != nil {
		mode = 1
	}
	if err := norm(dev, batch, mode, y, x, rows, d, eps, w, b); err != nil {
		return fmt.Errorf("gpu: LayerNorm: %w", err)
	}
	return nil
}

// RMSNorm records into batch the exact-mode equivalent of
//
//	nn.RMSNorm(y, x, rows, d, eps, w)
//
// on x and y [rows][d] (y may be x), w [d]: per row q = Σ x² in float64
// (each square rounded before the sum, in the row's order), inv =
// 1/√(q/d + eps), y = float32(x·inv)·w. Device as LayerNorm's.
func RMSNorm(dev *vulkan.Device, batch *vulkan.Batch, y, x *vulkan.Buffer, rows, d int, eps float64, w *vulkan.Buffer) error {
	if w == nil {
		return fmt.Errorf("gpu: RMSNorm: w is nil")
	}
	if err := norm(dev, batch, 2, y, x, rows, d, eps, w, w); err != nil {
		return fmt.Errorf("gpu: RMSNorm: %w", err)
	}
	return nil
}

// norm checks and records nn_norm in mode (0 LayerNorm, 1 with affine
// weights, 2 RMSNorm).
func norm(dev *vulkan.Device, batch *vulkan.Batch, mode uint32, y, x *vulkan.Buffer, rows, d int, eps float64, w, b *vulkan.Buffer) error {
	if rows < 0 || d < 0 {
		return fmt.Errorf("rows %d and d %d must not be negative", rows, d)
	}
	n := int64(rows) * int64(d)
	if err := checkElems("x", x, n, 4, "float32"); err != nil {
		return err
	}
	if err := checkElems("y", y, n, 4, "float32"); err != nil {
		return err
	}
	if mode != 0 {
		if w == nil || b == nil {
			return fmt.Errorf("affine weights w and b: both or neither (w nil: %v, b nil: %v)", w == nil, b == nil)
		}
		if err := checkElems("w", w, int64(d), 4, "float32"); err != nil {
			return err
		}
		if err := checkElems("b", b, int64(d), 4, "float32"); err != nil {
			return err
		}
		if y == w || y == b {
			return fmt.Errorf("y shares a buffer with the weights")
		}
	} else {
		w, b = x, x // unused bindings
	}
	if err := needFloat64(dev); err != nil {
		return err
	}
	if _, err := CheckExact(dev); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	groups, err := grid(dev, int64(rows), 1)
	if err != nil {
		return err
	}
	k, err := newKernel(dev, "nn_norm", vulkan.KernelSpec{Name: "nn_norm", Bindings: 4, PushSize: 24})
	if err != nil {
		return err
	}
	push := words(uint32(rows), uint32(d), mode, 0, uint32(math.Float64bits(eps)), uint32(math.Float64bits(eps)>>32))
	batch.Dispatch(k, groups, push, y, x, w, b)
	return nil
}

// needFloat64 refuses a device without the float64 arithmetic and the
// 64-bit integers exact64.glsl needs.
func needFloat64(dev *vulkan.Device) error {
	if !dev.Info().Float64 || !dev.Info().Int64 {
		return fmt.Errorf("device %v lacks shaderFloat64 or shaderInt64 (float64 %v, int64 %v): the CPU's statistics are float64", dev, dev.Info().Float64, dev.Info().Int64)
	}
	return nil
}

// grid returns the workgroups of a dispatch over n items, per items per
// workgroup: as many as fit in dimension x, the rest in rows of y (the
// shaders index gl_WorkGroupID.x + gl_WorkGroupID.y·gl_NumWorkGroups.x).
func grid(dev *vulkan.Device, n, per int64) ([3]uint32, error) {
	g := (n + per - 1) / per
	maxX := int64(dev.Info().MaxWorkgroupCount[0])
	maxY := int64(dev.Info().MaxWorkgroupCount[1])
	if maxX <= 0 {
		maxX = 65535
	}
	if maxY <= 0 {
		maxY = 65535
	}
	x := min(g, maxX)
	y := (g + x - 1) / x
	if y > maxY || x*y*per > math.MaxUint32 {
		return [3]uint32{}, fmt.Errorf("%d items need %d workgroups, beyond the device's %d×%d", n, g, maxX, maxY)
	}
	return [3]uint32{uint32(x), uint32(y), 1}, nil
}

// FrameVectors names one float32 vector per frame in a device buffer:
// frame f's at element Off + f·Stride (the row i of wan's per-frame
// modulation mods [F][6][d] is {mods, i·d, 6·d}).
type FrameVectors struct {
	Buf         *vulkan.Buffer
	Off, Stride int
}

// check validates v for frames frames of d values.
func (v FrameVectors) check(name string, frames, d int) error {
	if v.Off < 0 || v.Stride < 0 {
		return fmt.Errorf("%s: offset %d and stride %d must not be negative", name, v.Off, v.Stride)
	}
	if frames == 0 || d == 0 {
		return nil
	}
	return checkElems(name, v.Buf, int64(v.Off)+int64(frames-1)*int64(v.Stride)+int64(d), 4, "float32")
}

// The ops of nn_elementwise.comp.
const (
	ewAdd = iota
	ewAddRow
	ewModulate
	ewGatedAdd
)

// Add records x += y on n float32 values (wan's addInto): x + y rounded
// once per element.
func Add(dev *vulkan.Device, batch *vulkan.Batch, x, y *vulkan.Buffer, n int) error {
	if n < 0 {
		return fmt.Errorf("gpu: Add: n %d is negative", n)
	}
	if err := elementwise(dev, batch, ewAdd, n, 1, 1, x, x, y, y, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("gpu: Add: %w", err)
	}
	return nil
}

// AddBias records dst[r][j] = y[r][j] + b[j] for rows rows of d values (dst
// may be y): nn.Linear's bias (addBias, dst = y), and wan's per-frame
// modulation mods[f] = modulation + e0[f] (dst = mods, y = e0, b =
// modulation, rows = F, d = 6·dim). b must not be dst.
func AddBias(dev *vulkan.Device, batch *vulkan.Batch, dst, y, b *vulkan.Buffer, rows, d int) error {
	if err := addBias(dev, batch, dst, y, b, rows, d); err != nil {
		return fmt.Errorf("gpu: AddBias: %w", err)
	}
	return nil
}

func addBias(dev *vulkan.Device, batch *vulkan.Batch, dst, y, b *vulkan.Buffer, rows, d int) error {
	if rows < 0 || d < 0 {
		return fmt.Errorf("rows %d and d %d must not be negative", rows, d)
	}
	if err := checkElems("b", b, int64(d), 4, "float32"); err != nil && rows > 0 {
		return err
	}
	if dst == b {
		return fmt.Errorf("dst is the bias buffer")
	}
	return elementwise(dev, batch, ewAddRow, rows*d, max(d, 1), 1, dst, y, b, b, 0, 0, 0, 0)
}

// Modulate records, for each row r of y [rows][d] in frame f =
// r/rowsPerFrame, y = float32(y·(1 + scale_f)) + shift_f (wan's modulate):
// 1 + scale rounded, the product rounded, then the sum. y must not be the
// shift's or the scale's buffer.
func Modulate(dev *vulkan.Device, batch *vulkan.Batch, y *vulkan.Buffer, rows, d, rowsPerFrame int, shift, scale FrameVectors) error {
	if err := modulate(dev, batch, y, rows, d, rowsPerFrame, shift, scale); err != nil {
		return fmt.Errorf("gpu: Modulate: %w", err)
	}
	return nil
}

func modulate(dev *vulkan.Device, batch *vulkan.Batch, y *vulkan.Buffer, rows, d, rpf int, shift, scale FrameVectors) error {
	frames, err := frameCount(rows, d, rpf)
	if err != nil {
		return err
	}
	if err := shift.check("shift", frames, d); err != nil {
		return err
	}
	if err := scale.check("scale", frames, d); err != nil {
		return err
	}
	if rows > 0 && d > 0 && (y == shift.Buf || y == scale.Buf) {
		return fmt.Errorf("y shares a buffer with shift or scale")
	}
	return elementwise(dev, batch, ewModulate, rows*d, d, rpf, y, y, shift.Buf, scale.Buf, shift.Off, shift.Stride, scale.Off, scale.Stride)
}

// GatedAdd records, for each row r of x and o [rows][d] in frame f =
// r/rowsPerFrame, x += float32(o·gate_f) (wan's gatedAdd). x must not be
// the gate's buffer.
func GatedAdd(dev *vulkan.Device, batch *vulkan.Batch, x, o *vulkan.Buffer, rows, d, rowsPerFrame int, gate FrameVectors) error {
	if err := gatedAdd(dev, batch, x, o, rows, d, rowsPerFrame, gate); err != nil {
		return fmt.Errorf("gpu: GatedAdd: %w", err)
	}
	return nil
}

func gatedAdd(dev *vulkan.Device, batch *vulkan.Batch, x, o *vulkan.Buffer, rows, d, rpf int, gate FrameVectors) error {
	frames, err := frameCount(rows, d, rpf)
	if err != nil {
		return err
	}
	if err := gate.check("gate", frames, d); err != nil {
		return err
	}
	if rows > 0 && d > 0 && x == gate.Buf {
		return fmt.Errorf("x shares a buffer with the gate")
	}
	return elementwise(dev, batch, ewGatedAdd, rows*d, d, rpf, x, x, o, gate.Buf, 0, 0, gate.Off, gate.Stride)
}

// frameCount returns the frames rows rows of rowsPerFrame cover.
func frameCount(rows, d, rpf int) (int, error) {
	if rows < 0 || d < 0 {
		return 0, fmt.Errorf("rows %d and d %d must not be negative", rows, d)
	}
	if rpf <= 0 {
		return 0, fmt.Errorf("rows per frame %d must be positive", rpf)
	}
	return (rows + rpf - 1) / rpf, nil
}

// elementwise checks the n-element operands of nn_elementwise's op (b
// and c are checked by the caller unless they are n-element operands
// too: Add's y, GatedAdd's o) and records it.
func elementwise(dev *vulkan.Device, batch *vulkan.Batch, op uint32, n, d, rpf int, out, a, b, c *vulkan.Buffer, bOff, bStride, cOff, cStride int) error {
	names := map[uint32][3]string{ewAdd: {"x", "x", "y"}, ewAddRow: {"dst", "y", ""}, ewModulate: {"y", "y", ""}, ewGatedAdd: {"x", "x", "o"}}[op]
	for i, buf := range []*vulkan.Buffer{out, a, b} {
		if names[i] == "" {
			continue
		}
		if err := checkElems(names[i], buf, int64(n), 4, "float32"); err != nil {
			return err
		}
	}
	if _, err := CheckExact(dev); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	for _, v := range []int{bOff, bStride, cOff, cStride} {
		if int64(v) > maxElems {
			return fmt.Errorf("offset or stride %d beyond a kernel's 32-bit indices", v)
		}
	}
	groups, err := grid(dev, int64(n), 64)
	if err != nil {
		return err
	}
	k, err := newKernel(dev, "nn_elementwise", vulkan.KernelSpec{Name: "nn_elementwise", Bindings: 4, PushSize: 32})
	if err != nil {
		return err
	}
	push := words(op, uint32(n), uint32(d), uint32(rpf), uint32(bOff), uint32(bStride), uint32(cOff), uint32(cStride))
	batch.Dispatch(k, groups, push, out, a, b, c)
	return nil
}

// GELUTanh records x = nn.GELUTanh32(x) on n float32 values in place
// (nn.GELUTanh, the DiT's FFN activation): its float32 steps with
// vmath.FMA32 (fma() where the exactness probe found it one rounding,
// else exact.glsl's fma32), vmath.Exp32Clamped and a correctly rounded
// division.
func GELUTanh(dev *vulkan.Device, batch *vulkan.Batch, x *vulkan.Buffer, n int) error {
	if err := activation(dev, batch, 0, x, x, n); err != nil {
		return fmt.Errorf("gpu: GELUTanh: %w", err)
	}
	return nil
}

// SiLU records y = nn.SiLU32(x) on n float32 values (nn.SiLU; y may be x):
// 1 + vmath.Exp32Clamped(−x), then x/d correctly rounded.
func SiLU(dev *vulkan.Device, batch *vulkan.Batch, y, x *vulkan.Buffer, n int) error {
	if err := activation(dev, batch, 1, y, x, n); err != nil {
		return fmt.Errorf("gpu: SiLU: %w", err)
	}
	return nil
}

func activation(dev *vulkan.Device, batch *vulkan.Batch, op uint32, y, x *vulkan.Buffer, n int) error {
	if n < 0 {
		return fmt.Errorf("n %d is negative", n)
	}
	if err := checkElems("x", x, int64(n), 4, "float32"); err != nil {
		return err
	}
	if err := checkElems("y", y, int64(n), 4, "float32"); err != nil {
		return err
	}
	module, err := exactModule(dev, "nn_act")
	if err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	groups, err := grid(dev, int64(n), 64)
	if err != nil {
		return err
	}
	k, err := newKernel(dev, module, vulkan.KernelSpec{Name: module, Bindings: 2, PushSize: 8})
	if err != nil {
		return err
	}
	batch.Dispatch(k, groups, words(op, uint32(n)), y, x)
	return nil
}
