package attn

import (
	"sync"

	"github.com/densitykv/densitykv/gemm"
)

// The tiled attention works on transposed tiles so that every operand stays
// in the gemm package's packed panel layouts and the softmax runs across
// queries in vector lanes:
//
//	Sᵀ = K·Qᵀ     (key tile × query tile; A = K packed per head, B = Qᵀ
//	               panels of gemm.NR queries packed per query tile). The
//	               product is written straight into the panel layout of a
//	               packed B operand, one panel of NR queries at a time.
//	Pᵀ = exp(scale·Sᵀ − m)  in place, per query lane (online softmax).
//	Oᵀ += Vᵀ·Pᵀ  (A = Vᵀ packed per head, B = Pᵀ as it lies).
//
// Finally out[t] = Oᵀ[:, t] / l[t]. Nothing is packed per key tile at
// float32.
//
// At bfloat16 (AttentionAs with gemm.BF16) the operands are packed as
// bfloat16 — K, Vᵀ and Qᵀ rounded to nearest even — and both products are
// gemm's bfloat16 product (float32 accumulation). Sᵀ goes to a float32
// panel buffer, the online softmax runs on it in float32 as above (row
// sums from the unrounded probabilities), and the probabilities are then
// rounded to bfloat16 as they are packed for Oᵀ += Vᵀ·Pᵀ
// (gemm.PackPanelsAs), as flash attention does on a GPU in bf16.

// packBudget bounds the packed K and Vᵀ held at once (floats): heads are
// processed in groups whose packed operands fit.
const packBudget = 8 << 20

const lanes = gemm.NR // queries per panel

// scratch is one worker's tile state, pooled.
type scratch struct {
	qp  gemm.PackedB // Qᵀ panels of the query tile
	pt  gemm.PackedB // Pᵀ panels of the current key tile
	sp  []float32    // bfloat16 runs: Sᵀ, then Pᵀ, in float32 panels
	ot  []float32    // D×BlockT unnormalised output, transposed
	st  []panelState // per panel of the query tile
	seg []float32    // per panel: nk×lanes unnormalised mass per key segment
}

// panelState is the online-softmax state of one panel of queries.
type panelState struct {
	m, l, alpha [lanes]float32
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// packs holds the packed K and Vᵀ of a group of heads, pooled across calls
// (a Wan-scale call packs 2·S·D floats per head).
type packs struct{ kp, vt []gemm.PackedA }

var packPool = sync.Pool{New: func() any { return new(packs) }}

func growF(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

type problem struct {
	prec       gemm.Precision
	out, q     []float32
	T, S, H, D int
	scale      float32
	kp, vt     []gemm.PackedA // per head of the current group: K and Vᵀ
	h0         int
	qb, kb     []int
	partial    []float64 // per unit: nq×nk mass partials
	nq, nk     int
	qtiles     int
}

func run(prec gemm.Precision, out, q, k, v []float32, T, S, H, D int, scale float32, qb, kb []int, mass []float64) {
	if T == 0 || H == 0 {
		return
	}
	if D == 0 {
		clear(out[:T*H*D])
		if mass == nil {
			return
		}
	}
	p := &problem{prec: prec, out: out, q: q, T: T, S: S, H: H, D: D, scale: scale, qb: qb, kb: kb}
	p.qtiles = (T + BlockT - 1) / BlockT
	if mass != nil {
		p.nq, p.nk = len(qb)-1, len(kb)-1
	}
	group := max(1, min(H, packBudget/(2*S*max(D, 1)+1)))
	pk := packPool.Get().(*packs)
	defer packPool.Put(pk)
	for len(pk.kp) < group {
		pk.kp = append(pk.kp, gemm.PackedA{})
		pk.vt = append(pk.vt, gemm.PackedA{})
	}
	p.kp, p.vt = pk.kp[:group], pk.vt[:group]
	workers := gemm.Threads()
	for h0 := 0; h0 < H; h0 += group {
		g := min(group, H-h0)
		p.h0 = h0
		for i := 0; i < g; i++ {
			gemm.PackAAs(&p.kp[i], prec, S, D, k[(h0+i)*D:], H*D)
			gemm.PackATAs(&p.vt[i], prec, D, S, v[(h0+i)*D:], H*D)
		}
		units := g * p.qtiles
		if mass != nil {
			p.partial = make([]float64, units*p.nq*p.nk)
		}
		w := min(workers, units)
		if work := 4 * float64(T) * float64(S) * float64(D) * float64(g); work < 1<<22 {
			w = 1
		}
		if w == 1 {
			for u := 0; u < units; u++ {
				p.unit(u)
			}
		} else {
			var wg sync.WaitGroup
			for i := 0; i < w; i++ {
				lo, hi := i*units/w, (i+1)*units/w
				wg.Add(1)
				go func() {
					defer wg.Done()
					for u := lo; u < hi; u++ {
						p.unit(u)
					}
				}()
			}
			wg.Wait()
		}
		if mass != nil {
			for u := 0; u < units; u++ {
				for i, x := range p.partial[u*p.nq*p.nk : (u+1)*p.nq*p.nk] {
					mass[i] += x
				}
			}
		}
	}
}

// unit computes one query tile of one head (unit u of the current group).
func (p *problem) unit(u int) {
	hl, qt := u/p.qtiles, u%p.qtiles
	h := p.h0 + hl
	T, S, H, D := p.T, p.S, p.H, p.D
	t0 := qt * BlockT
	rows := min(BlockT, T-t0)
	ld := H * D
	npan := (rows + lanes - 1) / lanes
	kp, vt := &p.kp[hl], &p.vt[hl]

	ws := scratchPool.Get().(*scratch)
	defer scratchPool.Put(ws)
	gemm.PackNTAs(&ws.qp, p.prec, rows, D, p.q[t0*ld+h*D:], ld)
	ws.ot = growF(ws.ot, D*BlockT)
	if cap(ws.st) < npan {
		ws.st = make([]panelState, npan)
	}
	st := ws.st[:npan]
	var seg []float32
	if p.nk > 0 {
		seg = growF(ws.seg, npan*p.nk*lanes)
		ws.seg = seg
		clear(seg)
	}
	ot := ws.ot
	for s0 := 0; s0 < S; s0 += BlockS {
		cols := min(BlockS, S-s0)
		first := s0 == 0
		var pt []float32
		if p.prec == gemm.F32 {
			pt = ws.pt.Resize(rows, cols)
		} else {
			ws.sp = growF(ws.sp, npan*cols*lanes)
			pt = ws.sp
		}
		for jp := 0; jp < npan; jp++ {
			panel := pt[jp*cols*lanes : (jp+1)*cols*lanes]
			nq := min(lanes, rows-jp*lanes)
			gemm.MulPacked(cols, nq, D, kp, s0, 0, &ws.qp, jp*lanes, 0, panel, lanes, false)
			if nq < lanes {
				for s := 0; s < cols; s++ {
					clear(panel[s*lanes+nq : s*lanes+lanes])
				}
			}
			ps := &st[jp]
			softmaxPanel(panel, cols, p.scale, ps, first)
			if !first {
				scaleCols(ot, D, BlockT, jp*lanes, &ps.alpha)
			}
			if seg != nil {
				sp := seg[jp*p.nk*lanes : (jp+1)*p.nk*lanes]
				for j := 0; j < p.nk; j++ {
					acc := (*[lanes]float32)(sp[j*lanes : (j+1)*lanes])
					if !first {
						for i := range acc {
							acc[i] *= ps.alpha[i]
						}
					}
					a, b := max(p.kb[j], s0), min(p.kb[j+1], s0+cols)
					if b > a {
						addRows(panel, a-s0, b-s0, acc)
					}
				}
			}
		}
		if p.prec != gemm.F32 {
			gemm.PackPanelsAs(&ws.pt, p.prec, rows, cols, pt)
		}
		gemm.MulPacked(D, rows, cols, vt, 0, s0, &ws.pt, 0, 0, ot, BlockT, !first)
	}
	// out[t0+r][h] = Oᵀ[:, r] / l[r]
	var inv [BlockT]float32
	for r := 0; r < rows; r++ {
		inv[r] = 1 / st[r/lanes].l[r%lanes]
	}
	for r := 0; r < rows; r++ {
		dst := p.out[(t0+r)*ld+h*D : (t0+r)*ld+h*D+D]
		for d := range dst {
			dst[d] = ot[d*BlockT+r] * inv[r]
		}
	}
	if seg != nil {
		part := p.partial[u*p.nq*p.nk : (u+1)*p.nq*p.nk]
		for r := 0; r < rows; r++ {
			t := t0 + r
			qi := 0
			for p.qb[qi+1] <= t {
				qi++
			}
			jp, lane := r/lanes, r%lanes
			for j := 0; j < p.nk; j++ {
				part[qi*p.nk+j] += float64(seg[(jp*p.nk+j)*lanes+lane]) * float64(inv[r])
			}
		}
	}
}
