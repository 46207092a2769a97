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
// Table.Apply). Upload once per layout; Rope and RopeAt read them.
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
	if rt == nil || rt.Buf == nil {
		return fmt.Errorf("gpu: Rope: no RopeTables")
	}
	if frames < 0 || t0 < 0 || t0+frames > rt.Times {
		return fmt.Errorf("gpu: Rope: frames %d … %d outside the tables' temporal positions 0 … %d", t0, t0+frames-1, rt.Times-1)
	}
	if err := ropeRecord(dev, batch, x, tok0, heads, rt, frames*rt.Height*rt.Width, t0, nil); err != nil {
		return fmt.Errorf("gpu: Rope: %w", err)
	}
	return nil
}

// RopePositions holds token positions in device memory for RopeAt, each
// within the RopeTables it was made for.
type RopePositions struct {
	Buf *vulkan.Buffer // (t, h, w) as three uint32 per token
	N   int
	rt  *RopeTables
}

// Positions uploads pos, every position within rt (0 ≤ T < Times, 0 ≤ H <
// Height, 0 ≤ W < Width), for RopeAt.
func (rt *RopeTables) Positions(dev *vulkan.Device, pos []rope.Pos) (*RopePositions, error) {
	v := make([]uint32, 0, 3*max(len(pos), 1))
	for i, p := range pos {
		if p.T < 0 || p.T >= rt.Times || p.H < 0 || p.H >= rt.Height || p.W < 0 || p.W >= rt.Width {
			return nil, fmt.Errorf("gpu: RopeTables.Positions: position %d %+v outside the tables' %d×%d×%d", i, p, rt.Times, rt.Height, rt.Width)
		}
		v = append(v, uint32(p.T), uint32(p.H), uint32(p.W))
	}
	if len(v) == 0 {
		v = append(v, 0)
	}
	buf, err := dev.Alloc(int64(4 * len(v)))
	if err != nil {
		return nil, fmt.Errorf("gpu: RopeTables.Positions: %w", err)
	}
	if err := dev.UploadUint32s(buf, 0, v); err != nil {
		buf.Free()
		return nil, fmt.Errorf("gpu: RopeTables.Positions: %w", err)
	}
	return &RopePositions{Buf: buf, N: len(pos), rt: rt}, nil
}

// Free releases the positions' buffer.
func (p *RopePositions) Free() { p.Buf.Free() }

// RopeAt records the rotation of the p.N tokens tok0 … tok0+p.N−1 of x
// (float32 [token][heads][HeadDim]) in place, token tok0+k at its
// position k, with the CPU's bits of
//
//	rope.Table.Apply(x[tok0·heads·HeadDim:(tok0+p.N)·heads·HeadDim], heads, pos)
//
// (and of rope.Rotator.Token at each position): see Rope.
func RopeAt(dev *vulkan.Device, batch *vulkan.Batch, x *vulkan.Buffer, tok0, heads int, p *RopePositions) error {
	if p == nil || p.rt == nil || p.rt.Buf == nil {
		return fmt.Errorf("gpu: RopeAt: no RopePositions")
	}
	if err := ropeRecord(dev, batch, x, tok0, heads, p.rt, p.N, 0, p.Buf); err != nil {
		return fmt.Errorf("gpu: RopeAt: %w", err)
	}
	return nil
}

// ropeRecord records nn_rope over tokens tokens from tok0: at the
// positions in pos, or (pos nil) frames of rt's grid from t0.
func ropeRecord(dev *vulkan.Device, batch *vulkan.Batch, x *vulkan.Buffer, tok0, heads int, rt *RopeTables, tokens, t0 int, pos *vulkan.Buffer) error {
	if tok0 < 0 || heads <= 0 {
		return fmt.Errorf("tok0 %d, heads %d: want tok0 ≥ 0, heads ≥ 1", tok0, heads)
	}
	hw := rt.Height * rt.Width
	row := int64(heads) * int64(rt.HeadDim)
	if err := checkElems("x", x, (int64(tok0)+int64(tokens))*row, 4, "float32"); err != nil {
		return err
	}
	if err := needFloat64(dev); err != nil {
		return err
	}
	if _, err := CheckExact(dev); err != nil {
		return err
	}
	n := int64(tokens) * int64(heads) * int64(rt.HeadDim/2)
	if n == 0 {
		return nil
	}
	groups, err := grid(dev, n, 64)
	if err != nil {
		return err
	}
	usePos := uint32(1)
	if pos == nil {
		pos, usePos = rt.Buf, 0 // an unused binding
	}
	k, err := newKernel(dev, "nn_rope", vulkan.KernelSpec{Name: "nn_rope", Bindings: 3, PushSize: 52})
	if err != nil {
		return err
	}
	push := words(uint32(n), uint32(int64(tok0)*row), uint32(heads), uint32(rt.HeadDim/2),
		uint32(rt.nt), uint32(rt.nh), uint32(rt.Width), uint32(hw),
		uint32(t0), uint32(rt.timeOff), uint32(rt.hOff), uint32(rt.wOff), usePos)
	batch.Dispatch(k, groups, push, x, rt.Buf, pos)
	return nil
}
