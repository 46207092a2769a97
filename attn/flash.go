package attn

import (
	"math"
	"sync"

	"github.com/densitykv/densitykv/gemm"
)

// packBudget bounds the packed K and V panels held at once (floats): heads
// are processed in groups whose packed operands fit.
const packBudget = 8 << 20

// scratch is one worker's tile state, pooled.
type scratch struct {
	sc   []float32 // BlockT×BlockS scores, then probabilities
	o    []float32 // BlockT×D unnormalised output
	m, l []float32 // running max and sum per row
	seg  []float64 // BlockT×nk per-row mass per key segment (unnormalised)
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func growF(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

type problem struct {
	out, q         []float32
	T, S, H, D     int
	scale          float32
	kp, vp         []gemm.PackedB // per head of the current group
	h0             int
	qb, kb         []int
	partial        []float64 // per unit: nq×nk mass partials
	nq, nk, qtiles int
}

func run(out, q, k, v []float32, T, S, H, D int, scale float32, qb, kb []int, mass []float64) {
	if T == 0 || H == 0 {
		return
	}
	if D == 0 {
		clear(out[:T*H*D])
		return
	}
	p := &problem{out: out, q: q, T: T, S: S, H: H, D: D, scale: scale, qb: qb, kb: kb}
	p.qtiles = (T + BlockT - 1) / BlockT
	if mass != nil {
		p.nq, p.nk = len(qb)-1, len(kb)-1
	}
	group := max(1, min(H, packBudget/(2*S*D+1)))
	p.kp = make([]gemm.PackedB, group)
	p.vp = make([]gemm.PackedB, group)
	workers := gemm.Threads()
	for h0 := 0; h0 < H; h0 += group {
		g := min(group, H-h0)
		p.h0 = h0
		for i := 0; i < g; i++ {
			gemm.PackNT(&p.kp[i], S, D, k[(h0+i)*D:], H*D)
			gemm.PackNN(&p.vp[i], D, S, v[(h0+i)*D:], H*D)
		}
		units := g * p.qtiles
		if mass != nil {
			p.partial = make([]float64, units*p.nq*p.nk)
		}
		w := min(workers, units)
		if work := 4 * float64(T) * float64(S) * float64(D) * float64(g); work < 1<<22 {
			w = 1
		}
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
	qa := p.q[t0*ld+h*D:]
	kp, vp := &p.kp[hl], &p.vp[hl]

	ws := scratchPool.Get().(*scratch)
	ws.sc = growF(ws.sc, BlockT*BlockS)
	ws.o = growF(ws.o, BlockT*D)
	ws.m = growF(ws.m, BlockT)
	ws.l = growF(ws.l, BlockT)
	var seg []float64
	if p.nk > 0 {
		if cap(ws.seg) < BlockT*p.nk {
			ws.seg = make([]float64, BlockT*p.nk)
		}
		seg = ws.seg[:BlockT*p.nk]
		clear(seg)
	}
	m, l, o, sc := ws.m[:rows], ws.l[:rows], ws.o, ws.sc
	for r := range m {
		m[r] = float32(math.Inf(-1))
		l[r] = 0
	}
	for s0 := 0; s0 < S; s0 += BlockS {
		cols := min(BlockS, S-s0)
		kp.ProductSub(rows, qa, ld, s0, s0+cols, 0, D, sc, BlockS, false)
		for r := 0; r < rows; r++ {
			row := sc[r*BlockS : r*BlockS+cols]
			mnew := max(m[r], rowMax(row, p.scale))
			if math.IsInf(float64(mnew), -1) {
				mnew = 0 // all scores -Inf so far: keep probabilities at 0
			}
			alpha := expf(m[r] - mnew)
			sum := expRow(row, p.scale, mnew)
			if s0 > 0 {
				l[r] = l[r]*alpha + sum
				or := o[r*D : r*D+D]
				for i := range or {
					or[i] *= alpha
				}
			} else {
				l[r] = sum
			}
			m[r] = mnew
			if seg != nil {
				sr := seg[r*p.nk : r*p.nk+p.nk]
				if s0 > 0 {
					for i := range sr {
						sr[i] *= float64(alpha)
					}
				}
				for j := 0; j < p.nk; j++ {
					a, b := max(p.kb[j], s0), min(p.kb[j+1], s0+cols)
					if b <= a {
						continue
					}
					var s float32
					for _, x := range row[a-s0 : b-s0] {
						s += x
					}
					sr[j] += float64(s)
				}
			}
		}
		vp.ProductSub(rows, sc, BlockS, 0, D, s0, s0+cols, o, D, s0 > 0)
	}
	for r := 0; r < rows; r++ {
		inv := 1 / l[r]
		dst := p.out[(t0+r)*ld+h*D : (t0+r)*ld+h*D+D]
		for i, x := range o[r*D : r*D+D] {
			dst[i] = x * inv
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
			inv := 1 / float64(l[r])
			for j, x := range seg[r*p.nk : r*p.nk+p.nk] {
				part[qi*p.nk+j] += x * inv
			}
		}
	}
	scratchPool.Put(ws)
}
