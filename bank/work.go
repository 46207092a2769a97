package bank

import (
	"time"

	"github.com/densitykv/densitykv/riesz"
)

// The steps of Algorithm 1 (update.go) hand their results to one another as
// values: prepare gives each head's candidates, score an ordering, scan the
// crossings, choosePrefix the prefix plan, chooseEvictions the evictions,
// and commitStates what updateDensities needs. A step takes its previous
// result's buffers back (the append idiom: out = step(in, out)), so an
// update reuses the slices of the last one and allocates nothing per head
// in steady state; headWork keeps those results between updates for that
// reason only.

// headWork is one head's part of an update's transient workspace (pool.go).
type headWork struct {
	cand candidates
	ord  ordering
	scan crossings
	ev   evictions
	spec speculation
	cm   commitBuffers
	// ext1 is the sequential admission's external density of each offered
	// candidate against the bank as it stood when it was offered.
	ext1 []float64

	// The head's decision record, filled by the steps.
	dec   HeadDecision
	m0    int       // occupancy before the update
	evOld int       // evicted states admitted by earlier updates (Decision.Flushed)
	times stepTimes // joint admission: time in the per-head steps (Timings)
}

// reset starts head h's record of an update.
func (w *headWork) reset(m0 int) {
	w.dec = HeadDecision{}
	w.m0, w.evOld = m0, 0
	w.spec.state = specNone
}

// candidates is one head's block as the bank will store it (prepare).
type candidates struct {
	keys   []float32 // [N][KeyDim], rounded to the payload (the caller's block with an F32 payload)
	values []float32 // [N][ValueDim], likewise
	desc   []float32 // [N][dd] density descriptors: the rounded keys, or the block's Desc when DescDim > 0
	norms  []float32 // [N] |desc|²
}

// set returns the candidates' descriptors as a riesz.Set (bf16: they are
// bfloat16 values, whose dot products are gemm's bfloat16 product).
func (c candidates) set(dd int, bf16 bool) riesz.Set {
	return riesz.Set{X: c.desc, Norms: c.norms, N: len(c.norms), D: dd, BF16: bf16}
}

// ordering is step 2's result for one head (score): each candidate's
// external density Σ_i w(k̄_i, x) and ordering score against the bank before
// the update, and π, the candidates in stable ascending score order (source
// order for OrderSource or an empty head, whose scores and external
// densities are 0).
type ordering struct {
	ext   []float64 // [N]
	score []float64 // [N]
	order []int32   // [N] π
	inv   []float32 // scratch: 1/max(b_i, δ) per stored state
}

// crossings is step 3's result for one head (scan): for the scanned
// candidates rows = π(1..R), every stored state's crossing point c_i — the
// first prefix length r at which ρ_i + S_i(r) ≥ τ·max(b_i, δ), or more than
// R — the violator counts v_r = |{i : c_i ≤ r}| for r = 0..R, and the
// prefix sums S_i(r) checkpointed every ckEvery rows and at R, from which
// step 5 finishes S_i(r*).
type crossings struct {
	m     int       // stored states before the update
	rows  []int32   // [R] candidate indices in scan order
	desc  []float32 // [R][dd] the rows' descriptors, gathered
	norms []float32 // [R]
	cross []int32   // [m] c_i
	viol  []int32   // [R+1] v_r
	ckpt  []float64 // [⌈R/ckEvery⌉][m] S_i(ckEvery), S_i(2·ckEvery), …, S_i(R)
	rem   []float64 // scratch: headroom τ·max(b_i, δ) − ρ_i per stored state
}

// ordered returns the scanned rows' descriptors as a riesz.Set (empty when
// the head held nothing: scan gathers them only against a bank).
func (s crossings) ordered(dd int, bf16 bool) riesz.Set {
	if s.m == 0 {
		return riesz.Set{D: dd, BF16: bf16}
	}
	return riesz.Set{X: s.desc[:len(s.rows)*dd], Norms: s.norms[:len(s.rows)], N: len(s.rows), D: dd, BF16: bf16}
}

// prefixPlan is step 4's result (choosePrefix): how many of its scanned
// candidates each head admits — the shared r* of Eq. shared-prefix, or
// with PrefixPerHead each head's own — and what the choice found.
type prefixPlan struct {
	r            []int // [H]
	floorStates  []int // [H] see HeadDecision.FloorStates
	infeasible   bool  // see Decision.Infeasible
	floorBlocked bool  // see Decision.FloorBlocked
}

// accepted returns the largest admitted count (r* when shared).
func (p prefixPlan) accepted() int {
	a := 0
	for _, r := range p.r {
		a = max(a, r)
	}
	return a
}

// evictions is step 5's result for one head (chooseEvictions): for the
// admitted count r, every stored state's S_i(r) and projected density
// ρ̃_i(r) = ρ_i + S_i(r), and the e_r states to evict.
type evictions struct {
	r       int
	sums    []float64 // [m] S_i(r)
	proj    []float64 // [m] ρ̃_i(r)
	order   []int32   // evicted storage indices in eviction order: violators (storage order), then the rule's choice
	evicted []bool    // [m]
	rest    []int32   // scratch: the states not yet evicted, in the rule's order
}

// specState is what became of a head's speculative eviction choice.
type specState uint8

const (
	specNone      specState = iota // none made: no interaction cache, an empty head or no feasible prefix
	specPending                    // made for the head's own largest feasible prefix; r* not known yet
	specReused                     // r* equals that prefix: the choice and its sums stand
	specDiscarded                  // r* differs: step 5 ran again for r*
)

// speculation is head h's eviction choice made early (speculate): for r,
// the head's own largest feasible prefix, while its candidate×bank
// interactions are still cached, with every admitted candidate's
// interactions with the evicted states summed from the cache. The choice
// itself is the head's evictions result.
type speculation struct {
	state specState
	r     int
	sums  []float64 // [r] Σ_{i evicted} w(rows[j], state i), j < r
	cols  []int32   // scratch: evicted storage indices, ascending
	gbuf  []float32 // scratch: gathered interactions
}

// commitBuffers are the commit's buffers (steps 6–8).
type commitBuffers struct {
	evSorted []int32   // evicted storage indices, ascending
	evDesc   []float32 // [e][dd] the evicted descriptors, storage order
	evNorms  []float32 // [e]
	rho      []float64 // [F] densities of the final bank before rounding
	sub      []float64 // [F] Σ_evicted w per state
	// For a backend other than the CPU's: the surviving storage indices
	// (ascending) and the admitted keys and values in admission order.
	kept           []int32
	freshK, freshV []float32
}

// committed is what commitStates leaves for updateDensities.
type committed struct {
	w0      int       // storage index of the first new state
	evicted riesz.Set // the evicted states' descriptors, storage order
	rho     []float64 // [F] each final state's density before the subtraction
}

// stepTimes is the time one head spent in the steps that run per head
// interleaved on the workers (joint admission); Update apportions the
// phase's wall time by them (see Timings).
type stepTimes struct{ score, scan, evict time.Duration }

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/8)
	}
	return s[:n]
}

// bytes returns the capacity of the head's buffers in bytes.
func (w *headWork) bytes() int64 {
	f32 := cap(w.cand.keys) + cap(w.cand.values) + cap(w.cand.desc) + cap(w.cand.norms) + cap(w.ord.inv) +
		cap(w.scan.desc) + cap(w.scan.norms) + cap(w.spec.gbuf) + cap(w.cm.evDesc) + cap(w.cm.evNorms)
	f64 := cap(w.ord.ext) + cap(w.ord.score) + cap(w.scan.ckpt) + cap(w.scan.rem) + cap(w.ev.sums) + cap(w.ev.proj) +
		cap(w.spec.sums) + cap(w.cm.rho) + cap(w.cm.sub) + cap(w.ext1)
	i32 := cap(w.ord.order) + cap(w.scan.rows) + cap(w.scan.cross) + cap(w.scan.viol) + cap(w.ev.order) + cap(w.ev.rest) +
		cap(w.spec.cols) + cap(w.cm.evSorted)
	return int64(f32)*4 + int64(f64)*8 + int64(i32)*4 + int64(cap(w.ev.evicted))
}

// clock apportions an update's wall time to its Timings: lap adds the time
// since the previous lap to one step; scoring splits the phase in which
// the heads ran steps 2, 3 and (speculatively) 5 interleaved on the
// workers in the proportions of the heads' summed step times.
type clock struct{ last time.Time }

func startClock() clock { return clock{time.Now()} }

func (c *clock) lap(d *time.Duration) {
	now := time.Now()
	*d += now.Sub(c.last)
	c.last = now
}

func (c *clock) scoring(t *Timings, work []headWork) {
	var phase time.Duration
	c.lap(&phase)
	var sum stepTimes
	for h := range work {
		sum.score += work[h].times.score
		sum.scan += work[h].times.scan
		sum.evict += work[h].times.evict
	}
	var score, evict time.Duration
	if tot := sum.score + sum.scan + sum.evict; tot > 0 {
		score = time.Duration(float64(phase) * float64(sum.score) / float64(tot))
		evict = time.Duration(float64(phase) * float64(sum.evict) / float64(tot))
	}
	t.Score += score
	t.Evict += evict
	t.Scan += phase - score - evict
}
