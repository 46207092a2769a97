package bank

import (
	"math"
	"slices"
	"sort"
)

// oracle is a slow, literal port of Algorithm 1 (paper supplementary,
// "DensityKV update for one Transformer layer") in float64, with direct
// squared differences and from-scratch densities. It is the reference the
// fast bank is tested against. It mirrors the variant readings documented on
// Bank.Update.
type oracle struct {
	cfg   Config
	heads [][]oEntry
	upd   int32
}

type oEntry struct {
	key, desc, val []float64
	src            int64
	adm            int32
	rho, base      float64
}

type oDecision struct {
	accepted int
	admitted [][]int64 // per head, in admission order
	evicted  [][]int64 // per head, sorted
	order    [][]int

	// The decision record's reports (see Decision and HeadDecision), per
	// head where they are per head; summed over the single-candidate steps
	// of sequential admission.
	mandatory, capacity []int // evicted violators / other evictions
	violators           []int // stored states with g_i(r*) ≥ τ
	floorStates         []int // floor-baseline states reaching τ within the block
	empty, flushed      bool
	infeasible          bool // no prefix, not even 0, feasible
	floorBlocked        bool
}

func (o *oracle) w(a, b []float64) float64 {
	var d2 float64
	for i := range a {
		t := a[i] - b[i]
		d2 += t * t
	}
	return math.Pow(o.cfg.Eps+d2/(o.cfg.Sigma*o.cfg.Sigma), -o.cfg.P)
}

// phi returns Φ_A(i) over bank A.
func (o *oracle) phi(A []oEntry, i int) float64 {
	var s float64
	for j := range A {
		if j != i {
			s += o.w(A[i].desc, A[j].desc)
		}
	}
	return s
}

type oCand struct {
	key, desc, val []float64
	src            int64
}

func (o *oracle) base(e oEntry) float64 { return math.Max(e.base, o.cfg.Delta) }

// score returns s_h(x) for the ordering variant.
func (o *oracle) score(B []oEntry, x oCand) float64 {
	switch o.cfg.Ordering {
	case OrderMean:
		var s float64
		for _, e := range B {
			s += o.w(e.desc, x.desc) / o.base(e)
		}
		return s / float64(len(B))
	case OrderMax:
		var s float64
		for _, e := range B {
			s = math.Max(s, o.w(e.desc, x.desc)/o.base(e))
		}
		return s
	}
	return 0
}

// update applies one block: cands[h][x].
func (o *oracle) update(cands [][]oCand) oDecision {
	H := o.cfg.Heads
	N := len(cands[0])
	d := oDecision{admitted: make([][]int64, H), evicted: make([][]int64, H), order: make([][]int, H),
		mandatory: make([]int, H), capacity: make([]int, H), violators: make([]int, H), floorStates: make([]int, H)}
	empty := true
	before := make([][]int64, H) // sources stored before the update
	for h := 0; h < H; h++ {
		if len(o.heads[h]) > 0 {
			empty = false
		}
		for _, e := range o.heads[h] {
			before[h] = append(before[h], e.src)
		}
	}
	d.empty = empty
	// Orders π_h against the bank before the update.
	for h := 0; h < H; h++ {
		B := o.heads[h]
		pi := make([]int, N)
		for i := range pi {
			pi[i] = i
		}
		if len(B) > 0 && o.cfg.Ordering != OrderSource {
			sc := make([]float64, N)
			for x := range sc {
				sc[x] = o.score(B, cands[h][x])
			}
			sort.SliceStable(pi, func(a, b int) bool { return sc[pi[a]] < sc[pi[b]] })
		}
		d.order[h] = pi
	}
	if empty || o.cfg.Admission == AdmitJoint {
		rows := make([][]int, H)
		for h := range rows {
			rows[h] = d.order[h]
		}
		d.accepted = o.joint(cands, rows, &d)
	} else {
		for j := 0; j < N; j++ {
			rows := make([][]int, H)
			for h := range rows {
				rows[h] = []int{d.order[h][j]}
			}
			d.accepted += o.joint(cands, rows, &d)
		}
	}
	if o.cfg.Baselines == BaselinesRefresh {
		for h := range o.heads {
			for i := range o.heads[h] {
				o.heads[h][i].base = math.Max(o.heads[h][i].rho, o.cfg.Delta)
			}
		}
	}
	for h := range d.evicted {
		slices.Sort(d.evicted[h])
	}
	// Flushed: some head lost every state it held before the update.
	for h := 0; h < H; h++ {
		if len(before[h]) == 0 {
			continue
		}
		left := false
		for _, e := range o.heads[h] {
			left = left || slices.Contains(before[h], e.src)
		}
		d.flushed = d.flushed || !left
	}
	o.upd++
	return d
}

// joint is one joint admission of the candidates rows[h] (in order).
func (o *oracle) joint(cands [][]oCand, rows [][]int, d *oDecision) int {
	H := o.cfg.Heads
	M := o.cfg.Capacity
	R := min(len(rows[0]), M)
	rstar := make([]int, H)
	// Lines 1–6: an empty head takes the first min(N, M) in source order.
	// Lines 8–16: c_r^h for every r, by direct summation.
	viol := make([][]int, H)
	g := func(h, i, r int) (float64, float64) {
		e := o.heads[h][i]
		p := e.rho
		for j := 0; j < r; j++ {
			p += o.w(e.desc, cands[h][rows[h][j]].desc)
		}
		return p / o.base(e), p
	}
	for h := 0; h < H; h++ {
		viol[h] = make([]int, R+1)
		for r := 0; r <= R; r++ {
			for i := range o.heads[h] {
				if gr, _ := g(h, i, r); gr >= o.cfg.Tau {
					viol[h][r]++
				}
			}
		}
	}
	ev := func(h, r int) int { return max(0, len(o.heads[h])+r-M) }
	feasible := func(h, r int) bool { return len(o.heads[h]) == 0 || viol[h][r] <= ev(h, r) }
	// Line 17: the largest shared r* (0 and infeasible when none is).
	if o.cfg.Prefix == PrefixShared {
		rs, found := 0, false
		for r := R; r >= 0 && !found; r-- {
			ok := true
			for h := 0; h < H; h++ {
				ok = ok && feasible(h, r)
			}
			if ok {
				rs, found = r, true
			}
		}
		d.infeasible = d.infeasible || !found
		for h := range rstar {
			rstar[h] = rs
		}
	} else {
		for h := range rstar {
			found := false
			for r := R; r >= 0 && !found; r-- {
				if feasible(h, r) {
					rstar[h], found = r, true
				}
			}
			d.infeasible = d.infeasible || !found
		}
	}
	// Degenerate states: floor-baseline states (admitted with density ≤ δ)
	// that reach τ·δ within the block, and whether one of them stops the
	// prefix (it would cross at r* + 1 while r* < R).
	for h := 0; h < H; h++ {
		for i, e := range o.heads[h] {
			if e.base > o.cfg.Delta {
				continue
			}
			if gr, _ := g(h, i, R); gr >= o.cfg.Tau {
				d.floorStates[h]++
				if r := rstar[h]; r < R {
					if gr1, _ := g(h, i, r+1); gr1 >= o.cfg.Tau {
						d.floorBlocked = true
					}
				}
			}
		}
	}
	acc := 0
	for h := 0; h < H; h++ {
		B := o.heads[h]
		r := rstar[h]
		acc = max(acc, r)
		e := ev(h, r)
		d.violators[h] += viol[h][r]
		evict := make([]bool, len(B))
		if e > 0 {
			n := 0
			if o.cfg.Eviction != EvictDensest && viol[h][r] <= e {
				for i := range B {
					if gr, _ := g(h, i, r); gr >= o.cfg.Tau {
						evict[i] = true
						n++
					}
				}
			}
			var rest []int
			for i := range B {
				if !evict[i] {
					rest = append(rest, i)
				}
			}
			if o.cfg.Eviction == EvictMandatorySource {
				sort.SliceStable(rest, func(a, b int) bool { return B[rest[a]].src < B[rest[b]].src })
			} else {
				sort.SliceStable(rest, func(a, b int) bool {
					_, pa := g(h, rest[a], r)
					_, pb := g(h, rest[b], r)
					return pa > pb
				})
			}
			for _, i := range rest[:e-n] {
				evict[i] = true
			}
		}
		var next []oEntry
		for i, en := range B {
			if evict[i] {
				if gr, _ := g(h, i, r); gr >= o.cfg.Tau {
					d.mandatory[h]++
				} else {
					d.capacity[h]++
				}
				d.evicted[h] = append(d.evicted[h], en.src)
			} else {
				next = append(next, en)
			}
		}
		first := len(next)
		for j := 0; j < r; j++ {
			c := cands[h][rows[h][j]]
			next = append(next, oEntry{key: c.key, desc: c.desc, val: c.val, src: c.src, adm: o.upd})
			d.admitted[h] = append(d.admitted[h], c.src)
		}
		for i := range next {
			next[i].rho = o.phi(next, i)
		}
		for i := first; i < len(next); i++ {
			next[i].base = math.Max(next[i].rho, o.cfg.Delta)
		}
		o.heads[h] = next
	}
	return acc
}
