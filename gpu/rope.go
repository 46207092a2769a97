package gpu

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/densitykv/densitykv/rope"
	"github.com/densitykv/densitykv/vulkan"
)

// RopeTables holds in device memory the float64 cosines and sines of a
// rope.Table's angles for a frame layout: temporal positions 0 … Times−1,
// rows 0 … Height−1 and columns 0 … Width−1, each axis's pairs as the CPU
// computes them (math.Sincos of Table.Angles, as rope.Rotator's tables and
// Table.Apply). Upload once per layout; Rope reads them.
type RopeTables struct {
	Buf                  *vulkan.Buffer // (cos, sin) float64 pairs: time, then height, then width
	HeadDim              int
	Times, Height, Width int
	nt, nh, nw           int
	timeOff, hOff, wOff  int // in pairs
}

// NewRopeTables computes t's cosines and sines for times temporal
// positions and a height×width grid on the CPU and uploads them.
func NewRopeTables(dev *vulkan.Device, t *rope.Table, times, height, width int) (*RopeTables, error) {
	if t == nil {
		return nil, fmt.Errorf("gpu: NewRopeTables: nil rope.Table")
	}
	if times <= 0 || height <= 0 || width <= 0 {
		return nil, fmt.Errorf("gpu: NewRopeTables: times %d, height %d and width %d must be positive", times, height, width)
	}
	nt, nh, nw := t.Split()
	rt := &RopeTables{HeadDim: t.HeadDim(), Times: times, Height: height, Width: width, nt: nt, nh: nh, nw: nw,
		hOff: times * nt, wOff: times*nt + height*nh}
	pairs := rt.wOff + width*nw
	if int64(2*pairs) > maxElems {
		return nil, fmt.Errorf("gpu: NewRopeTables: %d pairs, beyond a kernel's 32-bit indices", pairs)
	}
	raw := make([]byte, 0, 16*pairs)
	ang := make([]float64, t.HeadDim()/2)
	axis := func(p rope.Pos, from, to int) {
		for _, a := range t.Angles(ang, p)[from:to] {
			s, c := math.Sincos(a) // rope's sincos
			raw = binary.LittleEndian.AppendUint64(raw, math.Float64bits(c))
			raw = binary.LittleEndian.AppendUint64(raw, math.Float64bits(s))
		}
	}
	for i := 0; i < times; i++ {
		axis(rope.Pos{T: i}, 0, nt)
	}
	for h := 0; h < height; h++ {
		axis(rope.Pos{H: h}, nt, nt+nh)
	}
	for w := 0; w < width; w++ {
		axis(rope.Pos{W: w}, nt+nh, nt+nh+nw)
	}
	buf, err := dev.Alloc(int64(len(raw)))
	if err != nil {
		return nil, fmt.Errorf("gpu: NewRopeTables: %w", err)
	}
	if err := dev.Upload(buf, 0, raw); err != nil {
		buf.Free()
		return nil, fmt.Errorf("gpu: NewRopeTables: %w", err)
	}
	rt.Buf = buf
	return rt, nil
}

// Free releases the tables' buffer.
func (rt *RopeTables) Free() { rt.Buf.Free() }

// Rope records the rotation of frames whole frames of tokens in x in
// place: x holds float32 tokens [token][heads][HeadDim]; tokens tok0 …
// tok0 + frames·Height·Width − 1 are the frames t0 … t0+frames−1, each in
// rope.Grid's order (row by row). Every pair gets the CPU's bits of
//
//	rope.Rotator.Frame(x[(tok0 + f·Height·Width)·heads·HeadDim:], heads, t0+f)
//
// for each f, which is rope.Table.Apply(x[tok0·heads·HeadDim:…], heads,
// rope.Grid(frames, Height, Width, t0)): in float64, x0·c − x1·s and
// x0·s + x1·c with each product rounded before the sum, rounded to
// float32. t0+frames must not pass rt.Times. The device needs
// shaderFloat64 and shaderInt64.
func Rope(dev *vulkan.Device, batch *vulkan.Batch, x *vulkan.Buffer, tok0, heads int, rt *RopeTables, t0, frames int) error {
	if err := ropeRecord(dev, batch, x, tok0, heads, rt, t0, frames); err != nil {
		return fmt.Errorf("gpu: Rope: %w", err)
	}
	return nil
}

func ropeRecord(dev *vulkan.Device, batch *vulkan.Batch, x *vulkan.Buffer, tok0, heads int, rt *RopeTables, t0, frames int) error {
	if rt == nil || rt.Buf == nil {
		return fmt.Errorf("no RopeTables")
	}
	if tok0 < 0 || heads <= 0 || frames < 0 {
		return fmt.Errorf("tok0 %d, heads %d, frames %d: want tok0 ≥ 0, heads ≥ 1, frames ≥ 0", tok0, heads, frames)
	}
	if t0 < 0 || t0+frames > rt.Times {
		return fmt.Errorf("frames %d … %d outside the tables' temporal positions 0 … %d", t0, t0+frames-1, rt.Times-1)
	}
	hw := rt.Height * rt.Width
	row := int64(heads) * int64(rt.HeadDim)
	if err := checkElems("x", x, (int64(tok0)+int64(frames)*int64(hw))*row, 4, "float32"); err != nil {
		return err
	}
	if err := needFloat64(dev); err != nil {
		return err
	}
	if _, err := CheckExact(dev); err != nil {
		return err
	}
	n := int64(frames) * int64(hw) * int64(heads) * int64(rt.HeadDim/2)
	if n == 0 {
		return nil
	}
	groups, err := grid(dev, n, 64)
	if err != nil {
		return err
	}
	k, err := dev.Kernel(vulkan.KernelSpec{Name: "nn_rope", SPIRV: modules["nn_rope"], Bindings: 2, PushSize: 48})
	if err != nil {
		return err
	}
	push := words(uint32(n), uint32(int64(tok0)*row), uint32(heads), uint32(rt.HeadDim/2),
		uint32(rt.nt), uint32(rt.nh), uint32(rt.Width), uint32(hw),
		uint32(t0), uint32(rt.timeOff), uint32(rt.hOff), uint32(rt.wOff))
	batch.Dispatch(k, groups, push, x, rt.Buf)
	return nil
}
