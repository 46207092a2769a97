package t5

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/densitykv/densitykv/gemm"
)

// Linear is y = x·Wᵀ with no bias and W [Out][In] held as bfloat16 bits
// (checkpoint "<name>.weight"). Products run through package gemm one
// block of output columns at a time, so a packed copy of the weights
// never exists whole: at fp32 W is widened to float32 straight into the
// packed panels the micro-kernel reads (widenPanels) and x stays float32;
// at bf16 W is packed as it is (gemm.PackNTBF16, the kernel's native
// bfloat16 layout), x is rounded to bfloat16, and the product is gemm's
// bfloat16 product.
type Linear struct {
	In, Out int
	W       []uint16 // [Out][In] bfloat16 bits
}

// colBlock is the number of output columns one worker widens and
// multiplies at a time (a multiple of gemm.NR): 128 columns of a
// 10,240-deep weight are 5 MB of float32 panels per worker.
const colBlock = 128

// linearWS is the scratch of Linear.forward, reused across calls: the
// packed activations and one panel buffer per worker.
type linearWS struct {
	pa     gemm.PackedA
	panels []*gemm.PackedB
}

// bytes returns the memory held (gemm's PackedA may hold up to half as
// much again in bfloat16 pair panels, which it does not report).
func (ws *linearWS) bytes() int64 {
	n := int64(cap(ws.pa.Data())) * 4
	for _, p := range ws.panels {
		n += p.Bytes()
	}
	return n
}

// forward computes y[rows][Out] = x[rows][In]·Wᵀ at precision prec,
// overwriting y. The result equals gemm.NTAs(prec, rows, Out, In, x, In,
// W′, In, y, Out) bit for bit, where W′ is W widened to float32, whatever
// gemm.Threads() is: every block of columns is computed whole by one
// worker with gemm's summation order.
func (l *Linear) forward(prec gemm.Precision, y, x []float32, rows int, ws *linearWS) {
	gemm.PackAAs(&ws.pa, prec, rows, l.In, x, l.In)
	l.product(y, rows, ws)
}

// product is forward on the rows×In activations already packed in ws.pa
// (by a previous forward of a Linear with the same input, e.g. q before
// k and v), at their precision.
func (l *Linear) product(y []float32, rows int, ws *linearWS) {
	in, out := l.In, l.Out
	if rows == 0 || out == 0 {
		return
	}
	if ws.pa.M() != rows || ws.pa.K() != in {
		panic(fmt.Sprintf("t5: Linear.product: packed input is %d×%d, want %d×%d", ws.pa.M(), ws.pa.K(), rows, in))
	}
	blocks := (out + colBlock - 1) / colBlock
	workers := min(gemm.Threads(), blocks)
	if 2*rows*out*in < 1<<21 {
		workers = 1
	}
	for len(ws.panels) < workers {
		ws.panels = append(ws.panels, new(gemm.PackedB))
	}
	prec := ws.pa.Precision()
	var next atomic.Int64
	run := func(pb *gemm.PackedB) {
		for {
			b := int(next.Add(1) - 1)
			if b >= blocks {
				return
			}
			j0 := b * colBlock
			cols := min(colBlock, out-j0)
			if prec == gemm.F32 {
				widenPanels(pb.Resize(cols, in), l.W[j0*in:(j0+cols)*in], in, cols)
			} else {
				gemm.PackNTBF16(pb, prec, cols, in, l.W[j0*in:(j0+cols)*in], in)
			}
			// Row tiles of gemm.TileM keep the packed activations of one
			// depth chunk in L2 while the widened panels stream past.
			for i0 := 0; i0 < rows; i0 += gemm.TileM {
				gemm.MulPacked(min(gemm.TileM, rows-i0), cols, in, &ws.pa, i0, 0, pb, 0, 0, y[i0*out+j0:], out, false)
			}
		}
	}
	if workers == 1 {
		run(ws.panels[0])
		return
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() { defer wg.Done(); run(ws.panels[w]) }()
	}
	wg.Wait()
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
