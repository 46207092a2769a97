package nn

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/internal/parallel"
)

// Weights are the element types a Linear holds its weight matrix in:
// float32 values, or bfloat16 bits (uint16, a float32's high half).
type Weights interface{ float32 | uint16 }

// Linear is y = x·Wᵀ + b with W [Out][In] (checkpoint "<name>.weight")
// and b [Out] ("<name>.bias"; nil: no bias). The product is package gemm's
// at a precision (float32, or bfloat16 with float32 accumulation; the bias
// is added in float32 afterwards), computed one of two ways that give the
// same bits:
//
//   - packed (Pack, then Apply): W is packed once for gemm at the model's
//     precision (4 bytes per weight at fp32, 2 at bf16 on the kernels with
//     a bfloat16 layout) and released; Weight returns the values. The DiT
//     (package wan) and LongLive-RAG's autoencoder hold their weights so.
//   - streamed (Scratch.PackInput, then Stream): W stays as it is and each
//     call packs StreamBlock output columns at a time per worker, so that
//     no packed copy of W exists whole (umT5-XXL's 11 GB of bfloat16
//     weights would take 22 GB widened to float32 panels).
//
// Either way y equals gemm.NTAs(prec, rows, Out, In, x, In, W′, In, y,
// Out) + b bit for bit, W′ being W as float32, whatever gemm.Threads() is.
type Linear[T Weights] struct {
	In, Out int
	W       []T       // [Out][In]; nil once packed
	B       []float32 // [Out], or nil

	packed gemm.PackedB // W at the model's precision, once packed
}

// Pack packs W at precision prec for Apply and releases it (bf16 rounds
// float32 weights to nearest even; bfloat16 weights are packed as they
// are).
func (l *Linear[T]) Pack(prec gemm.Precision) {
	switch w := any(l.W).(type) {
	case []float32:
		gemm.PackNTAs(&l.packed, prec, l.Out, l.In, w, l.In)
	case []uint16:
		gemm.PackNTBF16(&l.packed, prec, l.Out, l.In, w, l.In)
	}
	l.W = nil
}

// Repack re-packs bfloat16 weights for the kernel selected now (after
// gemm.Force switched to one with another layout; a no-op otherwise).
func (l *Linear[T]) Repack() { l.packed.Repack() }

// Weight returns W [Out][In] as float32 as the products use it: the
// values, or for packed weights their values at the packed precision
// (bfloat16 roundings in a bf16 model).
func (l *Linear[T]) Weight() []float32 {
	switch w := any(l.W).(type) {
	case []float32:
		if w != nil {
			return w
		}
	case []uint16:
		if w != nil {
			out := make([]float32, len(w))
			for i, h := range w {
				out[i] = widen(h)
			}
			return out
		}
	}
	return l.packed.Unpack()
}

// Bytes returns the memory held by the weights (packed, or as they are)
// and the bias.
func (l *Linear[T]) Bytes() int64 {
	size := int64(4)
	if _, ok := any(l.W).([]uint16); ok {
		size = 2
	}
	n := size*int64(len(l.W)) + 4*int64(len(l.B))
	if l.W == nil {
		n += l.packed.Bytes()
	}
	return n
}

// widen returns the float32 value of bfloat16 bits h (exact).
func widen(h uint16) float32 { return gemm.BF16ToFloat32(h) }

// Apply computes y[rows][Out] = x[rows][In]·Wᵀ + b with the packed
// weights (x rounded to bfloat16 when they are packed at bf16), threaded
// by gemm.
func (l *Linear[T]) Apply(y, x []float32, rows int) {
	if l.W != nil {
		panic(fmt.Sprintf("nn: Linear.Apply before Pack (%d×%d weights)", l.Out, l.In))
	}
	y = y[:rows*l.Out]
	l.packed.Product(rows, x[:rows*l.In], l.In, y, l.Out)
	l.addBias(y, rows)
}

// addBias adds b to each of the rows of y [rows][Out].
func (l *Linear[T]) addBias(y []float32, rows int) {
	if l.B == nil {
		return
	}
	out := l.Out
	parallel.For(rows, 64, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			yr := y[r*out : (r+1)*out]
			for j, b := range l.B {
				yr[j] += b
			}
		}
	})
}

// StreamBlock is the number of output columns one worker packs and
// multiplies at a time in Stream (a multiple of gemm.NR): 128 columns of a
// 10,240-deep weight are 5 MB of float32 panels per worker.
const StreamBlock = 128

// Scratch is what Stream reuses across calls: the packed input and one
// panel buffer per worker. The zero value is ready; one Scratch serves one
// call at a time.
type Scratch struct {
	pa     gemm.PackedA
	panels []*gemm.PackedB
}

// Bytes returns the memory held (gemm's PackedA may hold up to half as
// much again in bfloat16 pair panels, which it does not report).
func (s *Scratch) Bytes() int64 {
	n := int64(cap(s.pa.Data())) * 4
	for _, p := range s.panels {
		n += p.Bytes()
	}
	return n
}

// PackInput packs the activations x [rows][in] at precision prec (rounded
// to bfloat16 at bf16) for the Stream calls that follow, e.g. q, k and v
// of one input.
func (s *Scratch) PackInput(prec gemm.Precision, x []float32, rows, in int) {
	gemm.PackAAs(&s.pa, prec, rows, in, x, in)
}

// Stream computes y[rows][Out] = x·Wᵀ + b, overwriting y, from the input
// packed in s and the weights as they are (not packed: see Linear), at
// the packed input's precision. Each block of StreamBlock columns is
// packed and multiplied whole by one worker in gemm's summation order.
func (l *Linear[T]) Stream(y []float32, rows int, s *Scratch) {
	in, out := l.In, l.Out
	if rows == 0 || out == 0 {
		return
	}
	if s.pa.M() != rows || s.pa.K() != in {
		panic(fmt.Sprintf("nn: Linear.Stream: packed input is %d×%d, want %d×%d", s.pa.M(), s.pa.K(), rows, in))
	}
	if len(l.W) != out*in {
		panic(fmt.Sprintf("nn: Linear.Stream: %d weights (packed: %v) for %d×%d", len(l.W), l.W == nil, out, in))
	}
	blocks := (out + StreamBlock - 1) / StreamBlock
	workers := min(gemm.Threads(), blocks)
	if 2*rows*out*in < 1<<21 {
		workers = 1
	}
	for len(s.panels) < workers {
		s.panels = append(s.panels, new(gemm.PackedB))
	}
	var next atomic.Int64
	run := func(pb *gemm.PackedB) {
		for {
			b := int(next.Add(1) - 1)
			if b >= blocks {
				return
			}
			j0 := b * StreamBlock
			cols := min(StreamBlock, out-j0)
			l.packColumns(pb, s.pa.Precision(), j0, cols)
			// Row tiles of gemm.TileM keep the packed activations of one
			// depth chunk in L2 while the panels stream past.
			for i0 := 0; i0 < rows; i0 += gemm.TileM {
				gemm.MulPacked(min(gemm.TileM, rows-i0), cols, in, &s.pa, i0, 0, pb, 0, 0, y[i0*out+j0:], out, false)
			}
		}
	}
	if workers == 1 {
		run(s.panels[0])
	} else {
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() { defer wg.Done(); run(s.panels[w]) }()
		}
		wg.Wait()
	}
	l.addBias(y, rows)
}

// packColumns packs the weights of output columns j0 … j0+cols−1 into pb
// at precision prec: bfloat16 weights widened straight into float32 panels
// at fp32 (widenPanels) or packed natively at bf16, float32 weights
// through gemm.PackNTAs.
func (l *Linear[T]) packColumns(pb *gemm.PackedB, prec gemm.Precision, j0, cols int) {
	in := l.In
	switch w := any(l.W).(type) {
	case []uint16:
		if prec == gemm.F32 {
			widenPanels(pb.Resize(cols, in), w[j0*in:(j0+cols)*in], in, cols)
		} else {
			gemm.PackNTBF16(pb, prec, cols, in, w[j0*in:(j0+cols)*in], in)
		}
	case []float32:
		gemm.PackNTAs(pb, prec, cols, in, w[j0*in:(j0+cols)*in], in)
	}
}

// widenPanels writes the bfloat16 rows w [cols][k] (the weights of cols
// output columns) as float32 into dst in gemm's packed-B panel layout for
// op(B) = wᵀ (k×cols): element (q, j) at dst[(j/NR)·k·NR + q·NR + j%NR],
// zero in the padding columns: the fp32 products' operand (bf16 ones pack
// the bits natively). Eight rows go together: eight sequential reads, one
// contiguous 32-byte write per depth.
func widenPanels(dst []float32, w []uint16, k, cols int) {
	const nr = gemm.NR
	for p := 0; p*nr < cols; p++ {
		panel := dst[p*k*nr : (p+1)*k*nr]
		c := min(nr, cols-p*nr)
		if c < nr {
			clear(panel)
		}
		rows := w[p*nr*k : (p*nr+c)*k]
		s := 0
		for ; s+8 <= c; s += 8 {
			r0, r1 := rows[(s+0)*k:(s+1)*k], rows[(s+1)*k:(s+2)*k]
			r2, r3 := rows[(s+2)*k:(s+3)*k], rows[(s+3)*k:(s+4)*k]
			r4, r5 := rows[(s+4)*k:(s+5)*k], rows[(s+5)*k:(s+6)*k]
			r6, r7 := rows[(s+6)*k:(s+7)*k], rows[(s+7)*k:(s+8)*k]
			for q := range r0 {
				d := panel[q*nr+s : q*nr+s+8 : q*nr+s+8]
				d[0], d[1], d[2], d[3] = widen(r0[q]), widen(r1[q]), widen(r2[q]), widen(r3[q])
				d[4], d[5], d[6], d[7] = widen(r4[q]), widen(r5[q]), widen(r6[q]), widen(r7[q])
			}
		}
		for ; s < c; s++ {
			row := rows[s*k : (s+1)*k]
			for q, h := range row {
				panel[q*nr+s] = widen(h)
			}
		}
	}
}
