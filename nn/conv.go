package nn

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/densitykv/densitykv/gemm"
)

// Conv is a convolution with stride 1 over frames [Cin][h][w] (package
// vae's causal 3-D and 2-D convolutions): KT input frames of temporal
// context, "same" zero padding in space, optionally after a nearest 2×
// upsampling of its input (Apply). Pack prepares it for a precision once.
type Conv struct {
	Cin, Cout  int
	KT, KH, KW int
	Weight     []float32 // [Cout][Cin][KT][KH][KW]
	Bias       []float32 // [Cout]

	packed gemm.PackedA // fp32: Cout × K, column tap·Cin + ci with tap = (dt·KH + dy)·KW + dx
	// packedBF16 is the bf16 operand: Cout × (padded K), the tap groups
	// of one frame each at its offset in offBF16 (see packBF16).
	packedBF16 gemm.PackedA
	offBF16    []int
}

// Pack packs the weights for products at prec (gemm.F32 or gemm.BF16).
func (c *Conv) Pack(prec gemm.Precision) {
	if prec == gemm.BF16 {
		c.packBF16()
		return
	}
	c.pack()
}

// Repack re-packs the bf16 operand when its layout is not the selected
// kernel's (after gemm.Force).
func (c *Conv) Repack() { c.packedBF16.Repack() }

// PackedBytes returns the memory of the packed weights.
func (c *Conv) PackedBytes() int64 { return c.packed.Bytes() + c.packedBF16.Bytes() }

// The convolutions run as GEMMs on package gemm with an implicit im2col:
//
//	out[co][p] = bias[co] + Σ_{tap} Σ_{ci} W[co][ci][tap] · in_tap[ci][shift_tap(p)]  (+ res[co][p])
//
// The weights are packed once as the left operand (Cout × K, K = taps·Cin,
// column tap·Cin + ci). The output pixels are cut into tiles of convTile;
// for each tile and each group of taps, a worker writes the shifted input
// rows straight into gemm.PackedB panels (no whole-frame im2col: a tile's
// operand is at most convGroupDepth × convTile values) and accumulates
// gemm.MulPacked into its tile of C. A tap whose frame is nil (the zero
// frames before a stream's start) is skipped. Each output value is
// computed by one goroutine in a fixed order (taps in order, then gemm's
// fixed depth order), so results do not depend on the number of threads.

const (
	// convTile is the number of output pixels per work item (a multiple
	// of gemm.NR).
	convTile = 128
	// convGroupDepth bounds the depth (taps·Cin) of one MulPacked call,
	// so a group's packed operand stays in L2.
	convGroupDepth = 512
)

// pack packs the weights as the GEMM's left operand, writing gemm.PackedA's
// panel layout directly: A[co][t·Cin + ci] = Weight[co][ci][t] at
// (co/MR)·K·MR + q·MR + co%MR, padding rows zero.
func (c *Conv) pack() {
	const mr = gemm.MR
	taps := c.KT * c.KH * c.KW
	k := taps * c.Cin
	d := c.packed.Resize(c.Cout, k)
	clear(d)
	for co := 0; co < c.Cout; co++ {
		panel := d[(co/mr)*k*mr:]
		for ci := 0; ci < c.Cin; ci++ {
			src := c.Weight[(co*c.Cin+ci)*taps : (co*c.Cin+ci+1)*taps]
			for t, v := range src {
				panel[(t*c.Cin+ci)*mr+co%mr] = v
			}
		}
	}
}

// GroupTaps returns the number of spatial taps per MulPacked call (a group):
// as many as keep a group's depth within convGroupDepth, at least one.
func (c *Conv) GroupTaps() int { return max(1, min(c.KH*c.KW, convGroupDepth/c.Cin)) }

// BF16Offsets returns, for the bfloat16 operand (packBF16), the depth offset of each
// tap group (frame dt, group j: index dt·groups + j) and the padded total
// depth: each group's taps·Cin rounded up to a multiple of BF16Block.
func (c *Conv) BF16Offsets() (off []int, total int) {
	spatial, g := c.KH*c.KW, c.GroupTaps()
	for dt := 0; dt < c.KT; dt++ {
		for s0 := 0; s0 < spatial; s0 += g {
			off = append(off, total)
			total += roundUp(min(g, spatial-s0)*c.Cin, gemm.BF16Block)
		}
	}
	return off, total
}

func roundUp(x, m int) int { return (x + m - 1) / m * m }

// packBF16 packs the weights as a bfloat16 left operand with the padded
// tap groups of BF16Offsets (OperandBF16), rounded to nearest even.
func (c *Conv) packBF16() {
	a, k, off := c.OperandBF16()
	gemm.PackAAs(&c.packedBF16, gemm.BF16, c.Cout, k, a, k)
	c.offBF16 = off
}

// OperandF32 returns the weights as the fp32 product's left operand,
// unpacked: A [Cout][K], K = KT·KH·KW·Cin, A[co][t·Cin + ci] =
// Weight[co][ci][t] with tap t = (dt·KH + dy)·KW + dx.
func (c *Conv) OperandF32() []float32 {
	taps := c.KT * c.KH * c.KW
	k := taps * c.Cin
	a := make([]float32, c.Cout*k)
	for co := 0; co < c.Cout; co++ {
		for ci := 0; ci < c.Cin; ci++ {
			for t, v := range c.Weight[(co*c.Cin+ci)*taps : (co*c.Cin+ci+1)*taps] {
				a[co*k+t*c.Cin+ci] = v
			}
		}
	}
	return a
}

// OperandBF16 returns the weights as the bf16 product's left operand,
// unpacked and not yet rounded: A [Cout][k] with the padded tap groups of
// BF16Offsets (off), A[co][off(dt, group) + (t−s0)·Cin + ci] =
// Weight[co][ci][dt][t], zero in the padding.
func (c *Conv) OperandBF16() (a []float32, k int, off []int) {
	spatial, g := c.KH*c.KW, c.GroupTaps()
	off, k = c.BF16Offsets()
	a = make([]float32, c.Cout*k)
	taps := c.KT * spatial
	for co := 0; co < c.Cout; co++ {
		for ci := 0; ci < c.Cin; ci++ {
			src := c.Weight[(co*c.Cin+ci)*taps : (co*c.Cin+ci+1)*taps]
			for dt := 0; dt < c.KT; dt++ {
				for t := 0; t < spatial; t++ {
					j := t / g
					a[co*k+off[dt*((spatial+g-1)/g)+j]+(t-j*g)*c.Cin+ci] = src[dt*spatial+t]
				}
			}
		}
	}
	return a, k, off
}

// Packed reports whether c is packed for products at prec.
func (c *Conv) Packed(prec gemm.Precision) bool {
	if prec == gemm.BF16 {
		return c.offBF16 != nil
	}
	return c.packed.Bytes() > 0
}

// flops returns the floating-point operations (2 per multiply-add) of one
// output frame of the given pixels when taps of its taps read a frame.
func (c *Conv) flops(taps, pixels int) int64 {
	return 2 * int64(c.Cout) * int64(c.Cin) * int64(taps) * int64(pixels)
}

// convWorker is one worker's scratch: the packed input panels of a tap
// group (at bf16 first written as float32 panels in sp) and the C tile.
type convWorker struct {
	pb gemm.PackedB
	sp []float32
	c  []float32
}

// ConvEngine runs convolutions at one precision (Prec): worker scratch
// reused across calls and a count of the floating-point operations done
// (Flops). An engine is used by one goroutine at a time.
type ConvEngine struct {
	Prec    gemm.Precision
	Flops   int64
	workers []*convWorker
}

func (e *ConvEngine) worker(i int) *convWorker {
	for len(e.workers) <= i {
		e.workers = append(e.workers, &convWorker{})
	}
	return e.workers[i]
}

// Release drops the scratch buffers.
func (e *ConvEngine) Release() { e.workers = nil }

// Apply computes one output frame of c with e's scratch, at e.Prec (c
// packed for it by Pack):
//
//	out[co][y][x] = bias[co] + Σ_{dt<KT, dy<KH, dx<KW, ci<Cin} W[co][ci][dt][dy][dx] · in[dt][ci][y+dy−KH/2][x+dx−KW/2]  (+ res[co][y][x])
//
// in holds the KT input frames [Cin][hs][ws], oldest first (in[KT−1] is
// the current one; nil is a zero frame); values outside the frame are
// zero. With up, each input frame is first upsampled 2× nearest
// (in'[y][x] = in[y/2][x/2]), so the output is [Cout][2hs][2ws];
// otherwise [Cout][hs][ws]. res (nil, or the output's shape) is added; it
// may be out itself.
func (c *Conv) Apply(e *ConvEngine, out []float32, in [][]float32, hs, ws int, up bool, res []float32) {
	ho, wo := hs, ws
	if up {
		ho, wo = 2*hs, 2*ws
	}
	P := ho * wo
	if len(in) != c.KT || len(out) != c.Cout*P || (res != nil && len(res) != len(out)) {
		panic(fmt.Sprintf("nn: conv %d→%d (%d×%d×%d): %d input frames, output %d values for %d×%d pixels", c.Cin, c.Cout, c.KT, c.KH, c.KW, len(in), len(out), ho, wo))
	}
	spatial := c.KH * c.KW
	used := 0
	for dt, f := range in {
		if f == nil {
			continue
		}
		if len(f) != c.Cin*hs*ws {
			panic(fmt.Sprintf("nn: conv %d→%d: input frame %d has %d values, want %d×%d×%d", c.Cin, c.Cout, dt, len(f), c.Cin, hs, ws))
		}
		used += spatial
	}
	if used == 0 {
		panic("nn: conv: no input frame")
	}
	e.Flops += c.flops(used, P)
	g := c.GroupTaps()
	groups := (spatial + g - 1) / g
	bf := e.Prec == gemm.BF16
	tiles := (P + convTile - 1) / convTile
	nw := min(gemm.Threads(), tiles)
	var next atomic.Int64
	run := func(w *convWorker) {
		w.c = grow(w.c, c.Cout*convTile)
		for {
			t := int(next.Add(1) - 1)
			if t >= tiles {
				return
			}
			p0 := t * convTile
			n := min(convTile, P-p0)
			first := true
			for dt, f := range in {
				if f == nil {
					continue
				}
				for s0 := 0; s0 < spatial; s0 += g {
					gs := min(g, spatial-s0)
					k := gs * c.Cin
					if !bf {
						panels := w.pb.Resize(n, k)
						c.fill(panels, k, n, p0, f, hs, ws, wo, up, s0, gs)
						gemm.MulPacked(c.Cout, n, k, &c.packed, 0, (dt*spatial+s0)*c.Cin, &w.pb, 0, 0, w.c, n, !first)
						first = false
						continue
					}
					// bf16: the group's depth padded with zero rows.
					kp := roundUp(k, gemm.BF16Block)
					np := (n + gemm.NR - 1) / gemm.NR
					w.sp = grow(w.sp, np*kp*gemm.NR)
					c.fill(w.sp, kp, n, p0, f, hs, ws, wo, up, s0, gs)
					for jp := 0; jp < np; jp++ {
						clear(w.sp[(jp*kp+k)*gemm.NR : (jp+1)*kp*gemm.NR])
					}
					gemm.PackPanelsAs(&w.pb, gemm.BF16, n, kp, w.sp)
					gemm.MulPacked(c.Cout, n, kp, &c.packedBF16, 0, c.offBF16[dt*groups+s0/g], &w.pb, 0, 0, w.c, n, !first)
					first = false
				}
			}
			for co := 0; co < c.Cout; co++ {
				var r []float32
				if res != nil {
					r = res[co*P+p0 : co*P+p0+n]
				}
				AddBias(out[co*P+p0:co*P+p0+n], w.c[co*n:co*n+n], r, c.Bias[co])
			}
		}
	}
	if nw <= 1 {
		run(e.worker(0))
		return
	}
	var wg sync.WaitGroup
	for i := 0; i < nw; i++ {
		w := e.worker(i)
		wg.Add(1)
		go func() { defer wg.Done(); run(w) }()
	}
	wg.Wait()
}

// fill writes the right operand of one tap group into gemm.PackedB panels
// (element (q, j) at panels[(j/NR)·k·NR + q·NR + j%NR], padding columns
// zero): for the spatial taps s0 ≤ s < s0+gs and output pixels
// p0 ≤ p < p0+n, row q = (s−s0)·Cin + ci and column j = p − p0 hold the
// input pixel the tap reads for p (zero outside the frame). Rows from
// gs·Cin to k (a bf16 group's padding) are left as they are.
func (c *Conv) fill(panels []float32, k, n, p0 int, in []float32, hs, ws, wo int, up bool, s0, gs int) {
	const nr = gemm.NR
	ho := hs
	if up {
		ho = 2 * hs
	}
	plane := hs * ws
	for jp := 0; jp*nr < n; jp++ {
		base := panels[jp*k*nr : (jp+1)*k*nr]
		cols := min(nr, n-jp*nr)
		if cols < nr {
			clear(base)
		}
		p, end := p0+jp*nr, p0+jp*nr+cols
		for p < end {
			y, x := p/wo, p%wo
			run := min(end-p, wo-x)
			jo := p - p0 - jp*nr
			for s := s0; s < s0+gs; s++ {
				sy := y + s/c.KW - c.KH/2
				sx := x + s%c.KW - c.KW/2
				q0 := (s - s0) * c.Cin
				if sy < 0 || sy >= ho {
					for ci := 0; ci < c.Cin; ci++ {
						clear(base[(q0+ci)*nr+jo : (q0+ci)*nr+jo+run])
					}
					continue
				}
				// Columns i < lo and i ≥ hi of the run fall outside the frame.
				lo, hi := max(0, -sx), min(run, wo-sx)
				hi = max(hi, lo)
				if !up && run == nr && lo == 0 && hi == nr {
					// A whole panel row inside the frame (the common case):
					// fixed-size copies, which compile to vector moves.
					GatherRows(base[q0*nr:], in[sy*ws+sx:], plane, c.Cin)
					continue
				}
				if !up {
					for ci := 0; ci < c.Cin; ci++ {
						d := base[(q0+ci)*nr+jo : (q0+ci)*nr+jo+run]
						row := in[ci*plane+sy*ws:]
						clear(d[:lo])
						copy(d[lo:hi], row[sx+lo:sx+hi])
						clear(d[hi:])
					}
					continue
				}
				if run == nr && lo == 0 && hi == nr {
					// Upsampled, a whole panel row inside the frame: output
					// column i reads input column (sx+i)/2, 17 of them.
					off, odd := (sy>>1)*ws+sx>>1, sx&1 // sx odd: 17 input columns
					for ci := 0; ci < c.Cin; ci++ {
						d := (*[nr]float32)(base[(q0+ci)*nr:])
						if odd == 0 {
							row := (*[nr / 2]float32)(in[ci*plane+off:])
							for k, v := range row {
								d[2*k], d[2*k+1] = v, v
							}
							continue
						}
						row := (*[nr/2 + 1]float32)(in[ci*plane+off:])
						for i := range d {
							d[i] = row[(i+1)>>1]
						}
					}
					continue
				}
				for ci := 0; ci < c.Cin; ci++ {
					d := base[(q0+ci)*nr+jo : (q0+ci)*nr+jo+run]
					row := in[ci*plane+(sy>>1)*ws : ci*plane+(sy>>1)*ws+ws]
					clear(d[:lo])
					for i := lo; i < hi; i++ {
						d[i] = row[(sx+i)>>1]
					}
					clear(d[hi:])
				}
			}
			p += run
		}
	}
}

// grow returns s with length n, reusing its storage when large enough.
func grow(s []float32, n int) []float32 {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]float32, n)
}
