package bank

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/densitykv/densitykv/riesz"
)

// Sentinel errors, wrapped with the update index and the value at fault.
var (
	// ErrShape reports a block whose slices do not match the configuration.
	ErrShape = errors.New("shape mismatch")
	// ErrNonFinite reports a NaN or ±Inf input (or one that overflows when
	// stored or squared).
	ErrNonFinite = errors.New("non-finite value")
	// ErrEmpty reports a block with no candidates.
	ErrEmpty = errors.New("empty block")
)

// MaxNorm2 bounds a descriptor's squared norm: |a|² + |b|² − 2a·b must stay
// finite in float32 for every pair.
const MaxNorm2 = 1e37

// ckEvery is the checkpoint interval of the prefix scan (a multiple of
// riesz.TileRows): S_i(r) is kept for r = ckEvery, 2·ckEvery, … so that
// S_i(r*) costs at most ckEvery−1 extra candidate rows.
const ckEvery = riesz.TileRows

// Update applies Algorithm 1 (paper supplementary, "DensityKV update for one
// Transformer layer") to one block and returns the decision record. The
// steps, in paper order, and the functions that implement them (prepare
// validates the block first); each returns its result as a value that the
// next step takes (candidates, ordering, crossings, prefixPlan,
// evictions, committed: see work.go):
//
//  1. initEmpty — empty bank: admit the first min(N, M) candidates in source
//     order and set ρ = Φ over the resulting bank, b = max(ρ, δ);
//  2. score — s_h(x) (Eq. candidate-score, or the max/source variant)
//     against the bank before the update, and a stable ascending sort (ties
//     by input order) giving π_h;
//  3. scan — prefix scan: for every stored state the crossing point c_i,
//     the first prefix length r at which ρ_i + Σ_{j≤r} w(k̄_i, k_{π(j)}) ≥
//     τ·b_i; since w ≥ 0 the violator count is v_r = |{i : c_i ≤ r}|;
//  4. choosePrefix — shared prefix: r* = the LARGEST r ≤ min(N, M) with
//     v_r^h ≤ e_r = max(0, m + r − M) in every head (feasibility is not
//     monotone in r, so every r is tested);
//  5. selectEvictions — every violator at r* (mandatory), then the
//     remaining states of largest projected density ρ̃_i(r*) until e_{r*}
//     are released (ties: earlier storage position first). speculate makes
//     the same choice early, per head, while the head's interactions are
//     cached; selectEvictions keeps it when r* matches (bit-identical);
//  6. commitStates — survivors keep their relative order, then π_h(1..r*)
//     in order;
//  7. updateDensities — exact density update: survivors ρ + Σ_admitted w −
//     Σ_evicted w; new states Σ_old w + Σ_other-new w − Σ_evicted w (as the
//     Wan reference computes it); both clamped at ≥ 0 against float
//     cancellation;
//  8. setBaselines — new states b = max(ρ, δ) in the final bank; survivors
//     keep theirs (BaselinesRefresh resets all).
//
// Readings of ambiguous points:
//   - If no r (not even 0) is feasible — a stored state already at or above
//     τ·b, possible only with EvictDensest, which may keep violators — r* = 0
//     and nothing is evicted (Decision.Infeasible), as the Wan reference does.
//   - PrefixPerHead: each head takes its own largest feasible r with its own
//     occupancy.
//   - AdmitSequential (within-block competition): the order π_h is computed
//     once against the bank before the update; then for j = 1..N the j-th
//     candidate of every head is offered as a single-candidate update
//     (steps 3–8 with N = 1, shared across heads unless PrefixPerHead), so an
//     admitted candidate immediately becomes a stored state with its own
//     baseline that later candidates of the block can push to eviction. An
//     empty bank is still initialised jointly (step 1).
//   - BaselinesRefresh: after every update every baseline becomes
//     max(ρ, δ) of the committed bank.
//   - EvictMandatorySource fills the budget with the smallest source ids
//     (oldest tokens) first.
//   - With a separate descriptor (DescDim > 0) the descriptor is stored in
//     float32 and all densities use it; with BF16 payload and DescDim = 0
//     densities use the BF16-rounded keys, so they always match the stored
//     state.
//
// On error the bank is unchanged, except after a failed pass of a backend
// other than the CPU's (Passes.Err, a device failure found at the end of
// the update): the bank's state is then not to be trusted, and it refuses
// every later update.
func (b *Bank) Update(blk Block) (Decision, error) {
	t0 := time.Now()
	b.acquire()
	defer b.release()
	if b.broken != nil {
		return Decision{}, fmt.Errorf("bank: update %d: a previous update's pass failed: %w", b.updates, b.broken)
	}
	n, err := b.prepare(blk)
	if err != nil {
		return Decision{}, fmt.Errorf("bank: update %d: %w", b.updates, err)
	}
	if !b.hostPasses {
		for h := range b.work {
			b.pass.Candidates(h, b.work[h].cand.set(b.cfg.descDim(), b.descBF16()))
		}
	}
	dec := Decision{Update: int(b.updates), Candidates: n}
	dec.Timings.Validate = time.Since(t0)
	empty := true
	for h := range b.heads {
		b.work[h].reset(b.heads[h].n)
		empty = empty && b.heads[h].n == 0
	}
	dec.Empty = empty
	switch {
	case empty:
		b.initEmpty(&dec, blk, n)
	case b.cfg.Admission == AdmitSequential:
		b.updateSequential(&dec, blk, n)
	default:
		b.updateJoint(&dec, blk, n)
	}
	b.finishDecision(&dec)
	if b.cfg.Baselines == BaselinesRefresh {
		for h := range b.heads {
			hd := &b.heads[h]
			for i := 0; i < hd.n; i++ {
				hd.base[i] = b.roundDensity(math.Max(hd.rho[i], b.cfg.Delta))
			}
		}
	}
	var peak int64
	for h := range b.work {
		peak += b.work[h].bytes()
	}
	for w := range b.ws {
		peak += b.ws[w].Bytes() + int64(cap(b.cache[w]))*4
	}
	b.peak = max(b.peak, peak)
	b.dropBlockRefs()
	if err := b.pass.Err(); err != nil {
		// The host bookkeeping went on with what the failed pass left:
		// the bank's state is not to be trusted any more.
		b.broken = err
		return Decision{}, fmt.Errorf("bank: update %d: %w", b.updates, err)
	}
	b.updates++
	b.offered += int64(n)
	dec.Timings.Total = time.Since(t0)
	return dec, nil
}

// dropBlockRefs clears the candidate scratch that aliases the caller's
// block (keys and values are used in place with an F32 payload, descriptors
// unless they are BF16-rounded copies), so the pooled scratch does not keep
// the block alive.
func (b *Bank) dropBlockRefs() {
	for h := range b.work {
		c := &b.work[h].cand
		if b.cfg.Payload != PayloadBF16 {
			c.keys, c.values = nil, nil
		}
		if b.cfg.Payload != PayloadBF16 || b.cfg.DescDim > 0 {
			c.desc = nil
		}
	}
}

// prepare validates blk (before any mutation) and fills every head's
// candidates. It returns N.
func (b *Bank) prepare(blk Block) (int, error) {
	c := b.cfg
	H, dk, dv, dd := c.Heads, c.KeyDim, c.ValueDim, c.descDim()
	if len(blk.Keys) == 0 {
		return 0, fmt.Errorf("%w: no keys", ErrEmpty)
	}
	if len(blk.Keys)%(H*dk) != 0 {
		return 0, fmt.Errorf("%w: %d key values is not a multiple of heads·key_dim = %d·%d", ErrShape, len(blk.Keys), H, dk)
	}
	n := len(blk.Keys) / (H * dk)
	if len(blk.Values) != H*n*dv {
		return 0, fmt.Errorf("%w: %d value values, want heads·N·value_dim = %d·%d·%d", ErrShape, len(blk.Values), H, n, dv)
	}
	if c.DescDim > 0 {
		if len(blk.Desc) != H*n*dd {
			return 0, fmt.Errorf("%w: %d descriptor values, want heads·N·desc_dim = %d·%d·%d", ErrShape, len(blk.Desc), H, n, dd)
		}
	} else if blk.Desc != nil {
		return 0, fmt.Errorf("%w: Desc given (%d values) but Config.DescDim = 0", ErrShape, len(blk.Desc))
	}
	if blk.Source != nil && len(blk.Source) != n {
		return 0, fmt.Errorf("%w: %d source ids for %d candidates", ErrShape, len(blk.Source), n)
	}
	if n > math.MaxInt32/2 {
		return 0, fmt.Errorf("%w: %d candidates exceeds %d", ErrShape, n, math.MaxInt32/2)
	}
	// check reports the first non-finite (or bfloat16-overflowing) value of
	// head h's rows of x (head-major [H][n][d]).
	check := func(name string, x []float32, h, d int, bf bool) error {
		x = x[h*n*d : (h+1)*n*d]
		// Fast screen on the bits: every value that can fail below has
		// |bits| > 0x7f7f0000 (above the largest finite bfloat16, or Inf,
		// or NaN); without bfloat16 only Inf and NaN (≥ 0x7f800000).
		lim := uint32(0x7f800000)
		if bf {
			lim = 0x7f7f0001
		}
		bad := false
		for _, v := range x {
			if math.Float32bits(v)&0x7fffffff >= lim {
				bad = true
				break
			}
		}
		if !bad {
			return nil
		}
		for i, v := range x {
			f := float64(v)
			if math.IsNaN(f) || math.IsInf(f, 0) || bf && math.IsInf(float64(RoundBF16(v)), 0) {
				what := "NaN"
				switch {
				case math.IsInf(f, 0):
					what = "Inf"
				case !math.IsNaN(f):
					what = fmt.Sprintf("%v (overflows bfloat16)", v)
				}
				return fmt.Errorf("%w: %s has %s at head %d row %d col %d", ErrNonFinite, name, what, h, i/d, i%d)
			}
		}
		return nil
	}
	bf := c.Payload == PayloadBF16
	// Heads are checked in parallel; the error reported is the first in
	// the sequential order (all keys, then all values, then all
	// descriptors, each head-major), as a sequential scan would find it.
	errs := make([]error, 3*H)
	b.parallel(func(h int, _ *riesz.Workspace) {
		errs[h] = check("keys", blk.Keys, h, dk, bf)
		errs[H+h] = check("values", blk.Values, h, dv, bf)
		if c.DescDim > 0 {
			errs[2*H+h] = check("desc", blk.Desc, h, dd, false)
		}
	})
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	// The candidates (no bank state is touched), heads in parallel.
	nerrs := make([]error, H)
	b.parallel(func(h int, _ *riesz.Workspace) {
		s := &b.work[h].cand
		keys := blk.Keys[h*n*dk : (h+1)*n*dk]
		vals := blk.Values[h*n*dv : (h+1)*n*dv]
		if bf {
			s.keys = grow(s.keys, n*dk)
			s.values = grow(s.values, n*dv)
			for i, v := range keys {
				s.keys[i] = RoundBF16(v)
			}
			for i, v := range vals {
				s.values[i] = RoundBF16(v)
			}
		} else {
			s.keys, s.values = keys, vals
		}
		if c.DescDim > 0 {
			s.desc = blk.Desc[h*n*dd : (h+1)*n*dd]
		} else {
			s.desc = s.keys
		}
		s.norms = grow(s.norms, n)
		riesz.Norms(s.norms, s.desc, n, dd)
		for i, v := range s.norms {
			if !(v <= MaxNorm2) {
				nerrs[h] = fmt.Errorf("%w: descriptor |x|² = %v exceeds %v (distances would overflow float32) at head %d row %d",
					ErrNonFinite, v, float32(MaxNorm2), h, i)
				return
			}
		}
	})
	for _, err := range nerrs {
		if err != nil {
			for h := range b.work {
				s := &b.work[h].cand
				s.keys, s.values, s.desc = nil, nil, nil // drop references to the caller's block
			}
			return 0, err
		}
	}
	return n, nil
}

// initEmpty is Algorithm 1 lines 1–6: an empty bank takes the first
// r* = min(N, M) candidates of every head in source order, whatever the
// ordering and admission variants; their densities are computed over the
// new bank (updateDensities: the co-admitted states' interactions) and
// frozen as baselines.
func (b *Bank) initEmpty(dec *Decision, blk Block, n int) {
	clk := startClock()
	r := min(n, b.cfg.Capacity)
	b.parallel(func(h int, ws *riesz.Workspace) {
		w := &b.work[h]
		w.ord = b.score(h, w.cand, nil, w.ord, ws) // identity order, zero scores and external densities
		b.commit(h, blk, w.cand, w.ord.ext, w.ord.order[:r], evictions{r: r}, w.spec, &w.cm, ws)
	})
	dec.Accepted = r
	clk.lap(&dec.Timings.Commit)
}

// updateJoint is Algorithm 1 lines 8–29 for a non-empty bank with joint
// admission: score and order, prefix scan, shared r*, evictions, commit.
func (b *Bank) updateJoint(dec *Decision, blk Block, n int) {
	clk := startClock()
	R := min(n, b.cfg.Capacity)
	// Steps 2 and 3 per head, and step 5 early while the head's
	// interactions are cached.
	b.parallelW(func(h, worker int, ws *riesz.Workspace) { b.orderAndScan(h, worker, n, R, ws) })
	// Step 4: the shared (or per-head) prefix length.
	b.plan = b.choosePrefix(b.plan)
	dec.Accepted = b.plan.accepted()
	b.recordPlan(dec, b.plan)
	clk.scoring(&dec.Timings, b.work)
	// Step 5: eviction (reusing the speculative choice when r* matches).
	b.parallel(func(h int, ws *riesz.Workspace) { b.selectEvictions(h, b.plan.r[h], ws) })
	clk.lap(&dec.Timings.Evict)
	// Steps 6–8: commit, exact density update, baselines.
	b.parallel(func(h int, ws *riesz.Workspace) {
		w := &b.work[h]
		b.commit(h, blk, w.cand, w.ord.ext, w.scan.rows[:b.admitted(h, b.plan)], w.ev, w.spec, &w.cm, ws)
	})
	clk.lap(&dec.Timings.Commit)
}

// orderAndScan runs head h's steps 2 and 3 (score and order, then the
// prefix scan over the first R candidates in order, from the cached
// interactions when they fit the budget, else recomputed tile by tile) and,
// with the cache, speculate.
func (b *Bank) orderAndScan(h, worker, n, R int, ws *riesz.Workspace) {
	w := &b.work[h]
	t0 := time.Now()
	cache := b.cacheFor(worker, n, b.heads[h].n)
	w.ord = b.score(h, w.cand, cache, w.ord, ws)
	t1 := time.Now()
	w.scan = b.scan(h, w.cand, w.ord.order[:R], cache, w.scan, ws)
	t2 := time.Now()
	if cache != nil {
		w.ev, w.spec = b.speculate(h, w.scan, cache, w.ev, w.spec, ws)
	}
	w.times = stepTimes{score: t1.Sub(t0), scan: t2.Sub(t1), evict: time.Since(t2)}
}

// admitted returns how many of its scanned candidates head h admits under
// plan: a head that held nothing takes them all (the first min(N, M) in
// source order), the others their planned r.
func (b *Bank) admitted(h int, plan prefixPlan) int {
	if s := &b.work[h].scan; s.m == 0 {
		return len(s.rows)
	}
	return plan.r[h]
}

// recordPlan copies what the prefix choice found into the decision records.
func (b *Bank) recordPlan(dec *Decision, plan prefixPlan) {
	dec.Infeasible = dec.Infeasible || plan.infeasible
	dec.FloorBlocked = dec.FloorBlocked || plan.floorBlocked
	for h := range b.work {
		b.work[h].dec.FloorStates += plan.floorStates[h]
	}
}

// score is step 2 for head h: the candidates' external densities and
// scores against the bank before the update (paper Eq. candidate-score, or
// the max/source variant) and the stable ascending order (ties by input
// order; identity for source ordering or an empty head). With a cache it
// also stores the candidate×bank interactions there for scan and
// speculate. o's buffers are reused.
func (b *Bank) score(h int, c candidates, cache []float32, o ordering, ws *riesz.Workspace) ordering {
	hd := &b.heads[h]
	n := len(c.norms)
	o.ext = grow(o.ext, n)
	o.score = grow(o.score, n)
	o.order = grow(o.order, n)
	clear(o.ext)
	clear(o.score)
	for i := range o.order {
		o.order[i] = int32(i)
	}
	if hd.n == 0 {
		return o
	}
	o.inv = grow(o.inv, hd.n)
	for i := 0; i < hd.n; i++ {
		o.inv[i] = float32(1 / math.Max(hd.base[i], b.cfg.Delta))
	}
	var mean, mx []float64
	switch b.cfg.Ordering {
	case OrderMean:
		mean = o.score
	case OrderMax:
		mx = o.score
	}
	b.pass.Score(h, c.set(b.cfg.descDim(), b.descBF16()), b.set(h), o.inv, o.ext, mean, mx, cache, ws)
	if b.cfg.Ordering != OrderSource {
		sc := o.score
		slices.SortStableFunc(o.order, func(x, y int32) int { return cmp.Compare(sc[x], sc[y]) })
	}
	return o
}

// scan is step 3 for head h: the prefix scan over the candidates rows (in
// order) against the bank before the update, reading the interactions from
// cache when it is not nil (written by score for this head and bank). s's
// buffers are reused.
func (b *Bank) scan(h int, c candidates, rows []int32, cache []float32, s crossings, ws *riesz.Workspace) crossings {
	hd := &b.heads[h]
	dd := b.cfg.descDim()
	R := len(rows)
	s.rows = append(s.rows[:0], rows...)
	s.m = hd.n
	s.viol = grow(s.viol, R+1)
	clear(s.viol)
	if hd.n == 0 {
		return s
	}
	s.desc = grow(s.desc, R*dd)
	s.norms = grow(s.norms, R)
	for j, x := range s.rows {
		copy(s.desc[j*dd:j*dd+dd], c.desc[int(x)*dd:int(x)*dd+dd])
		s.norms[j] = c.norms[x]
	}
	s.rem = grow(s.rem, hd.n)
	s.cross = grow(s.cross, hd.n)
	for i := 0; i < hd.n; i++ {
		// Violation g_i(r) ≥ τ ⇔ S_i(r) ≥ τ·max(b_i, δ) − ρ_i.
		s.rem[i] = b.cfg.Tau*math.Max(hd.base[i], b.cfg.Delta) - hd.rho[i]
	}
	s.ckpt = grow(s.ckpt, ((R+ckEvery-1)/ckEvery)*hd.n) // with the final S(R)
	b.pass.Scan(h, s.rows, s.ordered(dd, b.descBF16()), b.set(h), s.rem, s.cross, ckEvery, s.ckpt, cache, ws)
	for _, c := range s.cross[:hd.n] {
		if int(c) <= R {
			s.viol[c]++
		}
	}
	for r := 1; r <= R; r++ {
		s.viol[r] += s.viol[r-1]
	}
	return s
}

// evictions returns e_r = max(0, m + r − M).
func (b *Bank) evictions(m, r int) int { return max(0, m+r-b.cfg.Capacity) }

// feasible reports whether head h's scan allows admitting r candidates:
// v_r ≤ e_r (an empty head takes the first min(N, M) in source order).
func (b *Bank) feasible(s *crossings, r int) bool {
	return s.m == 0 || int(s.viol[r]) <= b.evictions(s.m, r)
}

// choosePrefix is step 4 (paper Eq. shared-prefix): from every head's
// crossings, the LARGEST r ≤ R with v_r^h ≤ e_r in every head (feasibility
// is not monotone in r, so every r is tested), or each head's own with
// PrefixPerHead; and the degenerate-state report. plan's buffers are
// reused.
func (b *Bank) choosePrefix(plan prefixPlan) prefixPlan {
	H := len(b.heads)
	R := len(b.work[0].scan.rows)
	plan.r = grow(plan.r, H)
	plan.floorStates = grow(plan.floorStates, H)
	clear(plan.floorStates)
	plan.infeasible, plan.floorBlocked = false, false
	if b.cfg.Prefix == PrefixShared {
		rs, ok := 0, false
		for r := R; r >= 0 && !ok; r-- {
			ok = true
			for h := range b.heads {
				if !b.feasible(&b.work[h].scan, r) {
					ok = false
					break
				}
			}
			if ok {
				rs = r
			}
		}
		plan.infeasible = !ok
		for h := range plan.r {
			plan.r[h] = rs
		}
	} else {
		for h := range b.heads {
			rs, ok := 0, false
			for r := R; r >= 0 && !ok; r-- {
				if b.feasible(&b.work[h].scan, r) {
					rs, ok = r, true
				}
			}
			plan.infeasible = plan.infeasible || !ok
			plan.r[h] = rs
		}
	}
	// Degenerate-state report: floor-baseline states that reach τ·δ.
	floor := b.roundDensity(b.cfg.Delta)
	for h := range b.heads {
		s := &b.work[h].scan
		hd := &b.heads[h]
		for i := 0; i < s.m; i++ {
			if hd.base[i] <= floor && int(s.cross[i]) <= R {
				plan.floorStates[h]++
				if r := plan.r[h]; r < R && int(s.cross[i]) <= r+1 {
					plan.floorBlocked = true
				}
			}
		}
	}
	return plan
}

// speculate makes head h's eviction choice (chooseEvictions) for its own
// largest feasible prefix while the head's interactions are in cache
// (written by score for this head and bank), and sums every admitted
// candidate's interactions with the chosen evicted states. The choice
// depends only on this head's state, so if the shared prefix turns out
// equal, selectEvictions keeps it unchanged (bit-identical decisions) and
// updateDensities takes Σ_evicted w for the new states from the sums
// instead of a kernel pass. ev's and sp's buffers are reused.
func (b *Bank) speculate(h int, s crossings, cache []float32, ev evictions, sp speculation, ws *riesz.Workspace) (evictions, speculation) {
	sp.state = specNone
	if s.m == 0 {
		return ev, sp
	}
	rs := -1
	for r := len(s.rows); r >= 0; r-- {
		if b.feasible(&s, r) {
			rs = r
			break
		}
	}
	if rs < 0 {
		return ev, sp
	}
	ev = b.chooseEvictions(h, s, rs, ev, ws)
	sp.state, sp.r = specPending, rs
	sp.sums = grow(sp.sums, rs)
	clear(sp.sums)
	if len(ev.order) == 0 || rs == 0 {
		return ev, sp
	}
	sp.cols = append(sp.cols[:0], ev.order...)
	slices.Sort(sp.cols)
	sp.gbuf = grow(sp.gbuf, len(sp.cols)+16)
	b.kern.GatherRowSums(cache, s.m, s.rows[:rs], sp.cols, sp.sums, sp.gbuf)
	return ev, sp
}

// selectEvictions is step 5 for head h (Algorithm 1, "Initialize R^h …",
// "Add states …"): the evictions for r admitted candidates, reusing the
// speculative choice when it was made for the same r, with their counts
// recorded in the head's decision.
func (b *Bank) selectEvictions(h, r int, ws *riesz.Workspace) {
	w := &b.work[h]
	if w.spec.state == specPending {
		w.spec.state = specDiscarded
		if w.spec.r == r {
			w.spec.state = specReused
		}
	}
	if w.spec.state != specReused {
		w.ev = b.chooseEvictions(h, w.scan, r, w.ev, ws)
	}
	if w.scan.m == 0 {
		return
	}
	w.dec.Violators += int(w.scan.viol[r])
	for _, i := range w.ev.order {
		if int(w.scan.cross[i]) <= r {
			w.dec.Mandatory++
		} else {
			w.dec.Capacity++
		}
	}
}

// chooseEvictions computes S_i(r) and ρ̃_i(r) for head h's stored states
// from the scan's checkpoints and chooses the e_r evictions: every
// violator (unless EvictDensest, or the prefix is infeasible), then the
// remaining states of largest ρ̃_i(r) (ties: earlier storage position
// first), or of smallest source id with EvictMandatorySource. ev's buffers
// are reused.
func (b *Bank) chooseEvictions(h int, s crossings, r int, ev evictions, ws *riesz.Workspace) evictions {
	hd := &b.heads[h]
	m := s.m
	ev.r = r
	ev.order = ev.order[:0]
	if m == 0 {
		return ev
	}
	// S_i(r) from the last checkpoint plus the remaining rows; the scan
	// also kept S_i(R) for the full prefix (the common r* = R).
	ev.sums = grow(ev.sums, m)
	b.pass.PrefixSums(h, r, s.ordered(b.cfg.descDim(), b.descBF16()), b.set(h), ckEvery, s.ckpt, ev.sums, ws)
	ev.proj = grow(ev.proj, m)
	for i := 0; i < m; i++ {
		ev.proj[i] = hd.rho[i] + ev.sums[i]
	}
	e := b.evictions(m, r)
	ev.evicted = grow(ev.evicted, m)
	clear(ev.evicted)
	if e == 0 {
		return ev
	}
	if b.cfg.Eviction != EvictDensest && int(s.viol[r]) <= e {
		for i := 0; i < m; i++ {
			if int(s.cross[i]) <= r {
				ev.order = append(ev.order, int32(i))
				ev.evicted[i] = true
			}
		}
	}
	ev.rest = ev.rest[:0]
	for i := 0; i < m; i++ {
		if !ev.evicted[i] {
			ev.rest = append(ev.rest, int32(i))
		}
	}
	if b.cfg.Eviction == EvictMandatorySource {
		src := hd.src
		slices.SortStableFunc(ev.rest, func(x, y int32) int { return cmp.Compare(src[x], src[y]) })
	} else {
		pj := ev.proj
		slices.SortStableFunc(ev.rest, func(x, y int32) int { return cmp.Compare(pj[y], pj[x]) })
	}
	for _, i := range ev.rest[:e-len(ev.order)] {
		ev.order = append(ev.order, i)
		ev.evicted[i] = true
	}
	return ev
}

// commit applies head h's decision (Algorithm 1, the last three lines of
// the per-head loop): commitStates, then updateDensities, then
// setBaselines. rows are the admitted candidates in admission order, ext
// the candidates' external densities against the bank before the update,
// ev the evictions and sp the speculation (its sums are used when
// reused); cm holds the buffers.
func (b *Bank) commit(h int, blk Block, c candidates, ext []float64, rows []int32, ev evictions, sp speculation, cm *commitBuffers, ws *riesz.Workspace) {
	done := b.commitStates(h, blk, c, ext, rows, ev, cm)
	b.updateDensities(h, done, len(rows), sp, cm, ws)
	b.setBaselines(h, done.w0)
}

// commitStates is the commit B ← (B \ R) ⊎ P_{r*} for head h: survivors
// keep their relative order, then the admitted rows follow in admission
// order. It records the admitted and evicted source ids, and returns the
// evicted descriptors for updateDensities and each final state's density
// before the subtraction: ρ_i + S_i(r*) for survivors (the projected
// density), Σ_old w for new states (their external density).
func (b *Bank) commitStates(h int, blk Block, c candidates, ext []float64, rows []int32, ev evictions, cm *commitBuffers) committed {
	w := &b.work[h]
	hd := &b.heads[h]
	cfg := b.cfg
	dd, dk, dv := cfg.descDim(), cfg.KeyDim, cfg.ValueDim
	m, r := hd.n, len(rows)
	// Evicted descriptors (for the subtraction pass) in storage order
	// (the order of the speculative sums), provenance in eviction order.
	ne := len(ev.order)
	cm.evDesc = grow(cm.evDesc, ne*dd)
	cm.evNorms = grow(cm.evNorms, ne)
	cm.evSorted = append(cm.evSorted[:0], ev.order...)
	slices.Sort(cm.evSorted)
	for j, i := range cm.evSorted {
		b.descRow(h, int(i), cm.evDesc[j*dd:j*dd+dd])
		cm.evNorms[j] = hd.norms[i]
	}
	for _, i := range ev.order {
		w.dec.Evicted = append(w.dec.Evicted, hd.src[i])
		w.dec.EvictedDensity = append(w.dec.EvictedDensity, ev.proj[i])
		if hd.adm[i] != b.updates {
			w.evOld++
		}
	}
	final := m - ne + r
	sd := b.storedDescDim()
	hd.ensure(final, sd)
	cm.rho = grow(cm.rho, final)
	// Survivors, in their previous relative order: ρ + S(r).
	k := 0
	for i := 0; i < m; i++ {
		if ev.evicted[i] {
			continue
		}
		cm.rho[k] = hd.rho[i] + ev.sums[i]
		if k != i {
			hd.keys.move(k, i)
			hd.vals.move(k, i)
			copy(hd.desc[k*sd:k*sd+sd], hd.desc[i*sd:i*sd+sd])
			hd.norms[k] = hd.norms[i]
			hd.src[k] = hd.src[i]
			hd.adm[k] = hd.adm[i]
			hd.base[k] = hd.base[i]
		}
		k++
	}
	// New states in admission order: Σ_old w to start with.
	w0 := k
	for _, x32 := range rows {
		x := int(x32)
		hd.keys.set(k, c.keys[x*dk:x*dk+dk])
		hd.vals.set(k, c.values[x*dv:x*dv+dv])
		copy(hd.desc[k*sd:k*sd+sd], c.desc[x*dd:x*dd+sd])
		hd.norms[k] = c.norms[x]
		if blk.Source != nil {
			hd.src[k] = blk.Source[x]
		} else {
			hd.src[k] = b.offered + int64(x)
		}
		hd.adm[k] = b.updates
		cm.rho[k] = 0
		if m > 0 {
			cm.rho[k] = ext[x]
		}
		w.dec.Admitted = append(w.dec.Admitted, hd.src[k])
		k++
	}
	hd.n = final
	w.dec.Accepted += r
	if !b.hostPasses {
		cm.kept = cm.kept[:0]
		for i := 0; i < m; i++ {
			if !ev.evicted[i] {
				cm.kept = append(cm.kept, int32(i))
			}
		}
		cm.freshK = grow(cm.freshK, r*dk)
		cm.freshV = grow(cm.freshV, r*dv)
		for j, x := range rows {
			copy(cm.freshK[j*dk:j*dk+dk], c.keys[int(x)*dk:int(x)*dk+dk])
			copy(cm.freshV[j*dv:j*dv+dv], c.values[int(x)*dv:int(x)*dv+dv])
		}
		b.pass.Commit(h, cm.kept, cm.evSorted, b.set(h).Rows(w0, final), cm.freshK, cm.freshV)
	}
	return committed{w0: w0, evicted: riesz.Set{X: cm.evDesc, Norms: cm.evNorms, N: ne, D: dd, BF16: b.descBF16()}, rho: cm.rho}
}

// updateDensities is the exact density maintenance of head h's committed
// bank (supplementary Eq. density-update): every state subtracts its
// interactions with the evicted states, and the r new states add their
// interactions with each other, so that a new state's density is Φ over
// the final bank. The interactions among previously retained states are
// never recomputed. Densities are clamped at ≥ 0 against float
// cancellation and rounded to the density dtype.
func (b *Bank) updateDensities(h int, done committed, r int, sp speculation, cm *commitBuffers, ws *riesz.Workspace) {
	hd := &b.heads[h]
	w0, final, rho := done.w0, hd.n, done.rho
	fs := b.set(h)
	if done.evicted.N > 0 {
		// Row sums of final × evicted (cheaper than column sums); the new
		// states' part comes from the speculative sums over the cached
		// interactions when the speculation was for this prefix.
		rows := final
		if sp.state == specReused {
			rows = w0
			for j := 0; j < r; j++ {
				rho[w0+j] -= sp.sums[j]
			}
		}
		cm.sub = grow(cm.sub, rows)
		clear(cm.sub)
		b.pass.EvictedSums(h, fs.Rows(0, rows), done.evicted, cm.sub, ws)
		for i := 0; i < rows; i++ {
			rho[i] -= cm.sub[i]
		}
	}
	if final > w0 {
		b.pass.SelfSums(h, fs.Rows(w0, final), rho[w0:final], ws)
	}
	for i := 0; i < final; i++ {
		hd.rho[i] = b.roundDensity(math.Max(0, rho[i]))
	}
}

// setBaselines freezes the insertion baseline b_i = max(ρ_i, δ) of every
// state of head h from w0 on (the newly admitted ones); survivors keep
// theirs (BaselinesRefresh resets all of them after the update, in Update).
func (b *Bank) setBaselines(h, w0 int) {
	hd := &b.heads[h]
	for i := w0; i < hd.n; i++ {
		hd.base[i] = b.roundDensity(math.Max(hd.rho[i], b.cfg.Delta))
	}
}

// finishDecision completes the decision: each head's record with its
// ordering (per candidate) and occupancy, Flushed, and how the
// speculative evictions fared (Timings).
func (b *Bank) finishDecision(dec *Decision) {
	dec.Heads = make([]HeadDecision, len(b.heads))
	for h := range b.heads {
		w := &b.work[h]
		d := w.dec
		d.Order = append([]int32(nil), w.ord.order...)
		d.Score = append([]float64(nil), w.ord.score...)
		d.External = append([]float64(nil), w.ord.ext...)
		d.Len = b.heads[h].n
		dec.Heads[h] = d
		if w.m0 > 0 && w.evOld == w.m0 {
			dec.Flushed = true
		}
		switch w.spec.state {
		case specReused:
			dec.Timings.SpecReused++
		case specDiscarded:
			dec.Timings.SpecDiscarded++
		}
	}
}

// updateSequential is the within-block competition ablation (see Update):
// the order is computed once against the bank before the update, then the
// j-th candidate of every head is offered as a single-candidate update.
func (b *Bank) updateSequential(dec *Decision, blk Block, n int) {
	clk := startClock()
	b.parallel(func(h int, ws *riesz.Workspace) {
		w := &b.work[h]
		w.ord = b.score(h, w.cand, nil, w.ord, ws)
	})
	clk.lap(&dec.Timings.Score)
	for j := 0; j < n; j++ {
		b.parallel(func(h int, ws *riesz.Workspace) { b.offerOne(h, j, n, ws) })
		b.plan = b.choosePrefix(b.plan)
		dec.Accepted += b.plan.accepted()
		b.recordPlan(dec, b.plan)
		clk.lap(&dec.Timings.Scan)
		b.parallel(func(h int, ws *riesz.Workspace) { b.selectEvictions(h, b.plan.r[h], ws) })
		clk.lap(&dec.Timings.Evict)
		b.parallel(func(h int, ws *riesz.Workspace) {
			w := &b.work[h]
			b.commit(h, blk, w.cand, w.ext1, w.scan.rows[:b.admitted(h, b.plan)], w.ev, w.spec, &w.cm, ws)
		})
		clk.lap(&dec.Timings.Commit)
	}
}

// offerOne prepares head h's j-th single-candidate step of a sequential
// update: the candidate π(j)'s external density against the current bank,
// and the scan with it alone.
func (b *Bank) offerOne(h, j, n int, ws *riesz.Workspace) {
	w := &b.work[h]
	x := w.ord.order[j]
	dd := b.cfg.descDim()
	w.ext1 = grow(w.ext1, n)
	w.ext1[x] = 0
	one := riesz.Set{X: w.cand.desc[int(x)*dd : int(x)*dd+dd], Norms: w.cand.norms[x : x+1], N: 1, D: dd, BF16: b.descBF16()}
	b.pass.OfferSums(h, one, b.set(h), w.ext1[x:x+1], ws)
	w.scan = b.scan(h, w.cand, w.ord.order[j:j+1], nil, w.scan, ws)
}
