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

// headScratch is one head's reusable per-update workspace.
type headScratch struct {
	ck, cv, cd []float32 // this head's candidates (payload-rounded), descriptors
	cn         []float32 // candidate descriptor norms

	ext, score []float64 // per candidate
	order      []int32   // candidate order
	rows       []int32   // candidates considered by the scan, in order

	sd, sn []float32 // descriptors and norms of rows
	rem    []float64 // headroom τ·max(b_i, δ) − ρ_i per stored state
	inv    []float32 // 1/max(b_i, δ)
	cross  []int32   // crossing point per stored state
	ckpt   []float64 // prefix-sum checkpoints
	viol   []int32   // v_r, r = 0..len(rows)
	S      []float64 // S_i(r) at the chosen r
	proj   []float64 // ρ̃_i(r)
	evict  []int32   // evicted storage indices, in eviction order
	isEv   []bool
	idx    []int32
	ed, en []float32 // evicted descriptors and norms
	sub    []float64
	rho    []float64 // new densities in the new storage order

	m             int // occupancy before
	r             int // admitted count
	e             int // evictions
	w0            int // first new state's storage index after commitStates
	dec           HeadDecision
	acc           []float64 // scan accumulators
	tScore, tScan time.Duration
	tSpec         time.Duration
	ext1          []float64
	evOld         int // evicted states admitted by earlier updates

	// Speculative eviction (joint admission with the interaction cache):
	// while head h's candidate×bank interactions are still cached, its
	// evictions are chosen for specR (the head's own largest feasible
	// prefix, which is the shared r* in the common case) and every
	// admitted candidate's interaction with the evicted states is summed
	// from the cache into specEv, so the commit needs no candidate×evicted
	// kernel pass. specR < 0: no speculation.
	specR  int
	specEv []float64 // Σ_{evicted} w(candidate rows[j], ·), j < specR
	gbuf   []float32 // gather scratch
	evs    []int32   // evicted storage indices, ascending
	spec   int       // 0: no speculation, 1: reused, 2: discarded (r* ≠ specR)
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n, n+n/8)
	}
	return s[:n]
}

func (s *headScratch) bytes() int64 {
	f := int64(cap(s.ck)+cap(s.cv)+cap(s.cd)+cap(s.cn)+cap(s.sd)+cap(s.sn)+cap(s.inv)+cap(s.ed)+cap(s.en)) * 4
	f += int64(cap(s.gbuf)+cap(s.evs)) * 4
	d := int64(cap(s.ext)+cap(s.score)+cap(s.rem)+cap(s.acc)+cap(s.ckpt)+cap(s.S)+cap(s.proj)+cap(s.sub)+cap(s.rho)+cap(s.specEv)) * 8
	i := int64(cap(s.order)+cap(s.rows)+cap(s.cross)+cap(s.viol)+cap(s.evict)+cap(s.idx)) * 4
	return f + d + i + int64(cap(s.isEv))
}

// Update applies Algorithm 1 (paper supplementary, "DensityKV update for one
// Transformer layer") to one block and returns the decision record. The
// steps, in paper order, and the functions that implement them (prepare
// validates the block first):
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
// On error the bank is unchanged.
func (b *Bank) Update(blk Block) (Decision, error) {
	t0 := time.Now()
	b.acquire()
	defer b.release()
	n, err := b.prepare(blk)
	if err != nil {
		return Decision{}, fmt.Errorf("bank: update %d: %w", b.updates, err)
	}
	dec := Decision{Update: int(b.updates), Candidates: n}
	dec.Timings.Validate = time.Since(t0)
	for h := range b.heads {
		b.scratch[h].dec = HeadDecision{}
		b.scratch[h].evOld = 0
		b.scratch[h].specR = -1
		b.scratch[h].spec = 0
	}
	empty := true
	for h := range b.heads {
		if b.heads[h].n > 0 {
			empty = false
		}
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
	dec.Heads = make([]HeadDecision, len(b.heads))
	for h := range b.heads {
		b.spec[b.scratch[h].spec]++
		dec.Heads[h] = b.scratch[h].dec
		dec.Heads[h].Len = b.heads[h].n
	}
	if b.cfg.Baselines == BaselinesRefresh {
		for h := range b.heads {
			hd := &b.heads[h]
			for i := 0; i < hd.n; i++ {
				hd.base[i] = b.roundDensity(math.Max(hd.rho[i], b.cfg.Delta))
			}
		}
	}
	var peak int64
	for h := range b.scratch {
		peak += b.scratch[h].bytes()
	}
	for w := range b.ws {
		peak += b.ws[w].Bytes() + int64(cap(b.cache[w]))*4
	}
	b.peak = max(b.peak, peak)
	b.dropBlockRefs()
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
	for h := range b.scratch {
		sc := &b.scratch[h]
		if b.cfg.Payload != BF16 {
			sc.ck, sc.cv = nil, nil
		}
		if b.cfg.Payload != BF16 || b.cfg.DescDim > 0 {
			sc.cd = nil
		}
	}
}

// prepare validates blk (before any mutation) and fills every head's
// candidate scratch. It returns N.
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
	bf := c.Payload == BF16
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
	// Candidate scratch (no bank state is touched), heads in parallel.
	nerrs := make([]error, H)
	b.parallel(func(h int, _ *riesz.Workspace) {
		s := &b.scratch[h]
		keys := blk.Keys[h*n*dk : (h+1)*n*dk]
		vals := blk.Values[h*n*dv : (h+1)*n*dv]
		if bf {
			s.ck = grow(s.ck, n*dk)
			s.cv = grow(s.cv, n*dv)
			for i, v := range keys {
				s.ck[i] = RoundBF16(v)
			}
			for i, v := range vals {
				s.cv[i] = RoundBF16(v)
			}
		} else {
			s.ck, s.cv = keys, vals
		}
		if c.DescDim > 0 {
			s.cd = blk.Desc[h*n*dd : (h+1)*n*dd]
		} else {
			s.cd = s.ck
		}
		s.cn = grow(s.cn, n)
		riesz.Norms(s.cn, s.cd, n, dd)
		for i, v := range s.cn {
			if !(v <= MaxNorm2) {
				nerrs[h] = fmt.Errorf("%w: descriptor |x|² = %v exceeds %v (distances would overflow float32) at head %d row %d",
					ErrNonFinite, v, float32(MaxNorm2), h, i)
				return
			}
		}
	})
	for _, err := range nerrs {
		if err != nil {
			for h := range b.scratch {
				s := &b.scratch[h]
				s.ck, s.cv, s.cd = nil, nil, nil // drop references to the caller's block
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
	t := time.Now()
	r := min(n, b.cfg.Capacity)
	b.parallel(func(h int, ws *riesz.Workspace) {
		s := &b.scratch[h]
		b.score(h, n, ws) // identity order, zero scores and external densities
		s.rows = append(s.rows[:0], s.order[:r]...)
		s.m, s.r = 0, r
		s.evict = s.evict[:0]
		b.commit(h, blk, s.ext, ws)
	})
	dec.Accepted = r
	dec.Timings.Commit = time.Since(t)
	b.finishDecision(dec)
}

// updateJoint is Algorithm 1 lines 8–29 for a non-empty bank with joint
// admission: score and order, prefix scan, shared r*, evictions, commit.
func (b *Bank) updateJoint(dec *Decision, blk Block, n int) {
	t := time.Now()
	R := min(n, b.cfg.Capacity)
	// Steps 2 and 3 per head: score and order, then the prefix scan over
	// the ordered candidates (from the cached interactions when they fit
	// the budget, else recomputed tile by tile).
	b.parallelW(func(h, w int, ws *riesz.Workspace) {
		s := &b.scratch[h]
		t0 := time.Now()
		cache := b.cacheFor(w, n, b.heads[h].n)
		b.scoreCached(h, n, cache, ws)
		t1 := time.Now()
		s.rows = append(s.rows[:0], s.order[:R]...)
		b.scanCached(h, cache, ws)
		t2 := time.Now()
		if cache != nil {
			b.speculate(h, cache, ws)
		}
		s.tScore, s.tScan, s.tSpec = t1.Sub(t0), t2.Sub(t1), time.Since(t2)
	})
	// Step 4: the shared (or per-head) prefix length.
	b.choosePrefix(dec)
	// The heads ran interleaved on the workers: the phase's wall time is
	// split between scoring, scanning and (speculative) eviction in the
	// proportions of the heads' summed step times.
	var sc, sn, sp time.Duration
	for h := range b.scratch {
		sc += b.scratch[h].tScore
		sn += b.scratch[h].tScan
		sp += b.scratch[h].tSpec
	}
	el := time.Since(t)
	if tot := sc + sn + sp; tot > 0 {
		dec.Timings.Score = time.Duration(float64(el) * float64(sc) / float64(tot))
		dec.Timings.Evict = time.Duration(float64(el) * float64(sp) / float64(tot))
	}
	dec.Timings.Scan = el - dec.Timings.Score - dec.Timings.Evict
	t = time.Now()
	// Step 5: eviction (reusing the speculative choice when r* matches).
	b.parallel(func(h int, ws *riesz.Workspace) { b.selectEvictions(h, ws) })
	dec.Timings.Evict += time.Since(t)
	t = time.Now()
	// Steps 6–8: commit, exact density update, baselines.
	b.parallel(func(h int, ws *riesz.Workspace) {
		b.commit(h, blk, s2ext(&b.scratch[h]), ws)
	})
	dec.Timings.Commit = time.Since(t)
	b.finishDecision(dec)
}

func s2ext(s *headScratch) []float64 { return s.ext }

// score computes head h's external densities and scores against the bank
// before the update and the stable ascending order (paper Eq.
// candidate-score; identity for source ordering or an empty head).
func (b *Bank) score(h, n int, ws *riesz.Workspace) { b.scoreCached(h, n, nil, ws) }

// scoreCached is score that also stores the candidate×bank interactions in
// cache when it is not nil.
func (b *Bank) scoreCached(h, n int, cache []float32, ws *riesz.Workspace) {
	s := &b.scratch[h]
	hd := &b.heads[h]
	s.ext = grow(s.ext, n)
	s.score = grow(s.score, n)
	s.order = grow(s.order, n)
	clear(s.ext)
	clear(s.score)
	for i := range s.order {
		s.order[i] = int32(i)
	}
	if hd.n == 0 {
		return
	}
	s.inv = grow(s.inv, hd.n)
	for i := 0; i < hd.n; i++ {
		s.inv[i] = float32(1 / math.Max(hd.base[i], b.cfg.Delta))
	}
	cs := riesz.Set{X: s.cd, Norms: s.cn, N: n, D: b.cfg.descDim(), BF16: b.descBF16()}
	var mean, mx []float64
	switch b.cfg.Ordering {
	case OrderMean:
		mean = s.score
	case OrderMax:
		mx = s.score
	}
	b.kern.RowStatsCached(cs, b.set(h), s.inv, s.ext, mean, mx, cache, ws)
	if b.cfg.Ordering != OrderSource {
		sc := s.score
		slices.SortStableFunc(s.order, func(x, y int32) int { return cmp.Compare(sc[x], sc[y]) })
	}
}

// scan runs the prefix scan of head h over the candidates s.rows (in order)
// and fills s.cross, s.ckpt and s.viol (v_r for r = 0..len(rows)).
func (b *Bank) scan(h int, ws *riesz.Workspace) { b.scanCached(h, nil, ws) }

// scanCached is scan reading the interactions from cache (written by
// scoreCached for the same head and bank) when it is not nil.
func (b *Bank) scanCached(h int, cache []float32, ws *riesz.Workspace) {
	s := &b.scratch[h]
	hd := &b.heads[h]
	dd := b.cfg.descDim()
	R := len(s.rows)
	s.m = hd.n
	s.viol = grow(s.viol, R+1)
	clear(s.viol)
	if hd.n == 0 {
		return
	}
	s.sd = grow(s.sd, R*dd)
	s.sn = grow(s.sn, R)
	for j, x := range s.rows {
		copy(s.sd[j*dd:j*dd+dd], s.cd[int(x)*dd:int(x)*dd+dd])
		s.sn[j] = s.cn[x]
	}
	s.rem = grow(s.rem, hd.n)
	s.cross = grow(s.cross, hd.n)
	for i := 0; i < hd.n; i++ {
		// Violation g_i(r) ≥ τ ⇔ S_i(r) ≥ τ·max(b_i, δ) − ρ_i.
		s.rem[i] = b.cfg.Tau*math.Max(hd.base[i], b.cfg.Delta) - hd.rho[i]
	}
	s.ckpt = grow(s.ckpt, ((R+ckEvery-1)/ckEvery)*hd.n) // with the final S(R)
	if cache != nil {
		riesz.ScanRows(cache, hd.n, s.rows, s.rem, s.cross, ckEvery, s.ckpt, ws)
	} else {
		b.kern.PrefixScan(riesz.Set{X: s.sd, Norms: s.sn, N: R, D: dd, BF16: b.descBF16()}, b.set(h), s.rem, s.cross, ckEvery, s.ckpt, ws)
	}
	for _, c := range s.cross[:hd.n] {
		if int(c) <= R {
			s.viol[c]++
		}
	}
	for r := 1; r <= R; r++ {
		s.viol[r] += s.viol[r-1]
	}
}

// evictions returns e_r = max(0, m + r − M).
func (b *Bank) evictions(m, r int) int { return max(0, m+r-b.cfg.Capacity) }

// choosePrefix sets every head's admitted count (paper Eq. shared-prefix).
func (b *Bank) choosePrefix(dec *Decision) {
	R := len(b.scratch[0].rows)
	feasible := func(h, r int) bool {
		s := &b.scratch[h]
		if s.m == 0 {
			return true // empty head: the first min(N, M) in source order
		}
		return int(s.viol[r]) <= b.evictions(s.m, r)
	}
	if b.cfg.Prefix == PrefixShared {
		rs, ok := 0, false
		for r := R; r >= 0 && !ok; r-- {
			ok = true
			for h := range b.heads {
				if !feasible(h, r) {
					ok = false
					break
				}
			}
			if ok {
				rs = r
			}
		}
		dec.Infeasible = !ok
		for h := range b.heads {
			b.scratch[h].r = rs
		}
		dec.Accepted = rs
	} else {
		for h := range b.heads {
			rs, ok := 0, false
			for r := R; r >= 0 && !ok; r-- {
				if feasible(h, r) {
					rs, ok = r, true
				}
			}
			if !ok {
				dec.Infeasible = true
			}
			b.scratch[h].r = rs
			dec.Accepted = max(dec.Accepted, rs)
		}
	}
	// Degenerate-state report: floor-baseline states that reach τ·δ.
	floor := b.roundDensity(b.cfg.Delta)
	for h := range b.heads {
		s := &b.scratch[h]
		hd := &b.heads[h]
		if s.m == 0 {
			continue
		}
		for i := 0; i < s.m; i++ {
			if hd.base[i] <= floor && int(s.cross[i]) <= R {
				s.dec.FloorStates++
				if s.r < R && int(s.cross[i]) <= s.r+1 {
					dec.FloorBlocked = true
				}
			}
		}
	}
}

// speculate runs head h's eviction choice for its own largest feasible
// prefix while the head's interactions are in cache (written by scoreCached
// for this head and bank), and sums every admitted candidate's interactions
// with the chosen evicted states into s.specEv. The choice depends only on
// this head's state, so if the shared prefix turns out equal to specR,
// selectEvictions reuses it unchanged (bit-identical decisions) and commit
// takes Σ_evicted w for the new states from specEv instead of a kernel pass.
func (b *Bank) speculate(h int, cache []float32, ws *riesz.Workspace) {
	s := &b.scratch[h]
	s.specR = -1
	if s.m == 0 {
		return
	}
	rs := -1
	for r := len(s.rows); r >= 0; r-- {
		if int(s.viol[r]) <= b.evictions(s.m, r) {
			rs = r
			break
		}
	}
	if rs < 0 {
		return
	}
	s.r = rs
	b.chooseEvictions(h, ws)
	s.specR = rs
	s.specEv = grow(s.specEv, rs)
	clear(s.specEv)
	if len(s.evict) == 0 || rs == 0 {
		return
	}
	s.evs = append(s.evs[:0], s.evict...)
	slices.Sort(s.evs)
	s.gbuf = grow(s.gbuf, len(s.evs)+16)
	b.kern.GatherRowSums(cache, s.m, s.rows[:rs], s.evs, s.specEv, s.gbuf)
}

// selectEvictions computes S_i(r) and ρ̃_i(r) and chooses head h's
// e_r evictions (Algorithm 1, "Initialize R^h …", "Add states …"), reusing
// the speculative choice when it was made for the same r, and records the
// eviction counts in the head's decision.
func (b *Bank) selectEvictions(h int, ws *riesz.Workspace) {
	s := &b.scratch[h]
	switch {
	case s.specR >= 0 && s.specR == s.r:
		s.spec = 1
	case s.specR >= 0:
		s.spec = 2
		s.specR = -1
	}
	if s.specR < 0 {
		b.chooseEvictions(h, ws)
	}
	if s.m == 0 {
		return
	}
	s.dec.Violators += int(s.viol[s.r])
	for _, i := range s.evict {
		if int(s.cross[i]) <= s.r {
			s.dec.Mandatory++
		} else {
			s.dec.Capacity++
		}
	}
}

// chooseEvictions is the eviction choice of selectEvictions (s.S, s.proj,
// s.e, s.evict, s.isEv for s.r) without touching the decision record.
func (b *Bank) chooseEvictions(h int, ws *riesz.Workspace) {
	s := &b.scratch[h]
	hd := &b.heads[h]
	m, r := s.m, s.r
	s.evict = s.evict[:0]
	s.e = 0
	if m == 0 {
		return
	}
	dd := b.cfg.descDim()
	// S_i(r) from the last checkpoint plus the remaining rows; the scan
	// also kept S_i(R) for the full prefix (the common r* = R).
	s.S = grow(s.S, m)
	k := r / ckEvery
	full := r == len(s.rows) && r%ckEvery != 0
	switch {
	case full:
		copy(s.S, s.ckpt[k*m:(k+1)*m])
	case k > 0:
		copy(s.S, s.ckpt[(k-1)*m:k*m])
	default:
		clear(s.S)
	}
	if rem := r - k*ckEvery; rem > 0 && !full {
		a := riesz.Set{X: s.sd[k*ckEvery*dd : r*dd], Norms: s.sn[k*ckEvery : r], N: rem, D: dd, BF16: b.descBF16()}
		b.kern.Sums(a, b.set(h), nil, s.S, ws)
	}
	s.proj = grow(s.proj, m)
	for i := 0; i < m; i++ {
		s.proj[i] = hd.rho[i] + s.S[i]
	}
	e := b.evictions(m, r)
	s.isEv = grow(s.isEv, m)
	clear(s.isEv)
	viol := int(s.viol[r])
	feasible := viol <= e
	if e == 0 {
		return
	}
	s.e = e
	if b.cfg.Eviction != EvictDensest && feasible {
		for i := 0; i < m; i++ {
			if int(s.cross[i]) <= r {
				s.evict = append(s.evict, int32(i))
				s.isEv[i] = true
			}
		}
	}
	s.idx = s.idx[:0]
	for i := 0; i < m; i++ {
		if !s.isEv[i] {
			s.idx = append(s.idx, int32(i))
		}
	}
	if b.cfg.Eviction == EvictMandatorySource {
		src := hd.src
		slices.SortStableFunc(s.idx, func(x, y int32) int { return cmp.Compare(src[x], src[y]) })
	} else {
		pj := s.proj
		slices.SortStableFunc(s.idx, func(x, y int32) int { return cmp.Compare(pj[y], pj[x]) })
	}
	for _, i := range s.idx[:e-len(s.evict)] {
		s.evict = append(s.evict, i)
		s.isEv[i] = true
	}
}

// commit applies head h's decision (Algorithm 1, the last three lines of
// the per-head loop): commitStates, then updateDensities, then
// setBaselines. ext holds the candidates' external densities against the
// bank before the update.
func (b *Bank) commit(h int, blk Block, ext []float64, ws *riesz.Workspace) {
	b.commitStates(h, blk, ext)
	b.updateDensities(h, ws)
	b.setBaselines(h)
}

// commitStates is the commit B ← (B \ R) ⊎ P_{r*} for head h: survivors
// keep their relative order, then the admitted prefix follows in admission
// order. It records the admitted and evicted source ids, keeps the evicted
// descriptors for updateDensities, and leaves in s.rho each state's density
// before the subtraction: ρ_i + S_i(r*) for survivors (the projected
// density), Σ_old w for new states (their external density ext).
func (b *Bank) commitStates(h int, blk Block, ext []float64) {
	s := &b.scratch[h]
	hd := &b.heads[h]
	c := b.cfg
	dd, dk, dv := c.descDim(), c.KeyDim, c.ValueDim
	m, r := s.m, s.r
	if m == 0 {
		r = min(len(s.rows), c.Capacity)
		s.r = r
	}
	// Evicted descriptors (for the subtraction pass) in storage order
	// (the order of the speculative sums), provenance in eviction order.
	ne := len(s.evict)
	s.ed = grow(s.ed, ne*dd)
	s.en = grow(s.en, ne)
	s.evs = append(s.evs[:0], s.evict...)
	slices.Sort(s.evs)
	for j, i := range s.evs {
		copy(s.ed[j*dd:j*dd+dd], hd.desc[int(i)*dd:int(i)*dd+dd])
		s.en[j] = hd.norms[i]
	}
	for _, i := range s.evict {
		s.dec.Evicted = append(s.dec.Evicted, hd.src[i])
		if hd.adm[i] != b.updates {
			s.evOld++
		}
	}
	final := m - ne + r
	hd.ensure(final, dd)
	s.rho = grow(s.rho, final)
	// Survivors, in their previous relative order: ρ + S(r).
	w := 0
	for i := 0; i < m; i++ {
		if s.isEv[i] {
			continue
		}
		s.rho[w] = hd.rho[i] + s.S[i]
		if w != i {
			hd.keys.move(w, i)
			hd.vals.move(w, i)
			copy(hd.desc[w*dd:w*dd+dd], hd.desc[i*dd:i*dd+dd])
			hd.norms[w] = hd.norms[i]
			hd.src[w] = hd.src[i]
			hd.adm[w] = hd.adm[i]
			hd.base[w] = hd.base[i]
		}
		w++
	}
	// New states in admission order: Σ_old w to start with.
	s.w0 = w
	for j := 0; j < r; j++ {
		x := int(s.rows[j])
		hd.keys.set(w, s.ck[x*dk:x*dk+dk])
		hd.vals.set(w, s.cv[x*dv:x*dv+dv])
		copy(hd.desc[w*dd:w*dd+dd], s.cd[x*dd:x*dd+dd])
		hd.norms[w] = s.cn[x]
		if blk.Source != nil {
			hd.src[w] = blk.Source[x]
		} else {
			hd.src[w] = b.offered + int64(x)
		}
		hd.adm[w] = b.updates
		s.rho[w] = 0
		if m > 0 {
			s.rho[w] = ext[x]
		}
		s.dec.Admitted = append(s.dec.Admitted, hd.src[w])
		w++
	}
	hd.n = final
	s.dec.Accepted += r
}

// updateDensities is the exact density maintenance of the committed bank
// (supplementary Eq. density-update): every state subtracts its
// interactions with the evicted states, and the new states add their
// interactions with each other, so that a new state's density is Φ over the
// final bank. The interactions among previously retained states are never
// recomputed. Densities are clamped at ≥ 0 against float cancellation and
// rounded to the density dtype.
func (b *Bank) updateDensities(h int, ws *riesz.Workspace) {
	s := &b.scratch[h]
	hd := &b.heads[h]
	ne, w0, final := len(s.evict), s.w0, hd.n
	fs := b.set(h)
	if ne > 0 {
		// Row sums of final × evicted (cheaper than column sums); the new
		// states' part comes from the speculative sums over the cached
		// interactions when the speculation was for this prefix.
		rows := final
		if s.specR == s.r && s.m > 0 {
			rows = w0
			for j := 0; j < s.r; j++ {
				s.rho[w0+j] -= s.specEv[j]
			}
		}
		s.sub = grow(s.sub, rows)
		clear(s.sub)
		b.kern.Sums(fs.Rows(0, rows), riesz.Set{X: s.ed, Norms: s.en, N: ne, D: b.cfg.descDim(), BF16: b.descBF16()}, s.sub, nil, ws)
		for i := 0; i < rows; i++ {
			s.rho[i] -= s.sub[i]
		}
	}
	if final > w0 {
		b.kern.SelfSums(fs.Rows(w0, final), s.rho[w0:final], ws)
	}
	for i := 0; i < final; i++ {
		hd.rho[i] = b.roundDensity(math.Max(0, s.rho[i]))
	}
}

// setBaselines freezes the insertion baseline b_i = max(ρ_i, δ) of every
// newly admitted state; survivors keep theirs (BaselinesRefresh resets all
// of them after the update, in Update).
func (b *Bank) setBaselines(h int) {
	hd := &b.heads[h]
	for i := b.scratch[h].w0; i < hd.n; i++ {
		hd.base[i] = b.roundDensity(math.Max(hd.rho[i], b.cfg.Delta))
	}
}

// finishDecision copies the per-candidate records into the decision.
func (b *Bank) finishDecision(dec *Decision) {
	for h := range b.heads {
		s := &b.scratch[h]
		s.dec.Order = append([]int32(nil), s.order...)
		s.dec.Score = append([]float64(nil), s.score...)
		s.dec.External = append([]float64(nil), s.ext...)
		if s.m > 0 && s.evOld == s.m {
			dec.Flushed = true
		}
	}
}

// updateSequential is the within-block competition ablation (see Update).
func (b *Bank) updateSequential(dec *Decision, blk Block, n int) {
	t := time.Now()
	b.parallel(func(h int, ws *riesz.Workspace) { b.score(h, n, ws) })
	dec.Timings.Score = time.Since(t)
	m0 := make([]int, len(b.heads))
	for h := range b.heads {
		m0[h] = b.heads[h].n
	}
	for j := 0; j < n; j++ {
		t = time.Now()
		b.parallel(func(h int, ws *riesz.Workspace) {
			s := &b.scratch[h]
			x := s.order[j]
			s.rows = append(s.rows[:0], x)
			// External density of this candidate against the current bank.
			s.ext1 = grow(s.ext1, n)
			dd := b.cfg.descDim()
			one := riesz.Set{X: s.cd[int(x)*dd : int(x)*dd+dd], Norms: s.cn[x : x+1], N: 1, D: dd, BF16: b.descBF16()}
			e1 := []float64{0}
			b.kern.Sums(one, b.set(h), e1, nil, ws)
			s.ext1[x] = e1[0]
			b.scan(h, ws)
		})
		var step Decision
		b.choosePrefix(&step)
		dec.Infeasible = dec.Infeasible || step.Infeasible
		dec.FloorBlocked = dec.FloorBlocked || step.FloorBlocked
		dec.Timings.Scan += time.Since(t)
		t = time.Now()
		b.parallel(func(h int, ws *riesz.Workspace) { b.selectEvictions(h, ws) })
		dec.Timings.Evict += time.Since(t)
		t = time.Now()
		b.parallel(func(h int, ws *riesz.Workspace) {
			s := &b.scratch[h]
			b.commit(h, blk, s.ext1, ws)
		})
		dec.Timings.Commit += time.Since(t)
		dec.Accepted += step.Accepted
	}
	for h := range b.heads {
		s := &b.scratch[h]
		s.dec.Order = append([]int32(nil), s.order...)
		s.dec.Score = append([]float64(nil), s.score...)
		s.dec.External = append([]float64(nil), s.ext...)
		if m0[h] > 0 && s.evOld == m0[h] {
			dec.Flushed = true
		}
	}
}
