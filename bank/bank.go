// Package bank implements the DensityKV bank of one transformer layer: the
// online density-constrained update of the paper ("Online
// Density-Constrained Bank Update") and its supplementary Algorithm 1
// ("Complete Density-Guided KV Bank Update"), every ablation variant, and
// versioned, checksummed snapshots.
//
// A Bank holds, per head, at most M exact K/V pairs with their Soft-Riesz
// density ρ (paper Eq. density, over the head's own bank), a frozen insertion
// baseline b = max(ρ_at_admission, δ) (Eq. insertion-baseline), and
// provenance (source token index, update index at admission). Update applies
// Algorithm 1 to one block of candidates; see its documentation for the
// steps, the variants and the places where the paper is ambiguous.
//
// Invariants after every successful Update (default variants): every state
// satisfies ρ_i < τ·b_i; occupancy ≤ M and equal across heads; ρ equals a
// from-scratch recomputation of the density (up to float rounding); values
// stay paired with their keys. Storage order: surviving states keep their
// previous relative order, then new states follow in admission (prefix)
// order. A returned error leaves the bank bit-identical.
//
// Shapes: blocks are head-major, Keys [H][N][d_k], Values [H][N][d_v],
// Desc [H][N][DescDim]; per-head accessors return [n][d] row-major copies.
//
// Cost. Per head and update the interactions are computed by package
// riesz's fused, tiled passes (never an N×M matrix unless cached, see
// below): one N×M scoring pass (external densities and scores), the prefix
// scan (crossing points and checkpointed prefix sums S_i(r) every 128
// candidates, so S_i(r*) needs at most 127 extra rows), one pass for the
// subtraction of the e evicted states from the F states of the final bank,
// and one symmetric r*×r* pass among the admitted states. When
// workers·N·M·4 bytes fit Config.CacheBytes (512 MiB by default: the paper
// scale on two workers), the scoring pass keeps its N×M interactions for the
// head in flight; the prefix scan reads them instead of recomputing them,
// and the head's evictions are chosen speculatively for its own largest
// feasible prefix while they are cached, with every admitted candidate's
// interactions with those evicted states gathered from the cache. When the
// shared r* equals that prefix (the usual case) the subtraction pass only
// covers the survivors × evicted (old × old, never cached), so a full
// paper-scale update costs about 1.75 interaction passes instead of 2.25;
// otherwise the speculation is discarded and the final × evicted pass runs.
// Heads run in parallel (Config.Workers); scratch is reused across updates;
// results are bit-identical for any worker count and cache setting.
//
// Backends. The passes above are behind the Passes interface (passes.go):
// New runs them on the host (CPUPasses, riesz's tiled passes, the cache
// and the speculation included); NewWithPasses on another backend, such
// as package gpu's (gpu.NewBank), which keeps every head's keys, values
// and descriptors on a device between updates, uploads only candidates
// and runs the passes there with the CPU's bits. The algorithm's control flow
// — candidate order, the shared prefix, the choice of evictions, the
// commit's bookkeeping — is the same code on the host for every backend,
// reading back only the per-row vectors it decides from (external
// densities, scores, crossing points, prefix sums, density updates), so
// the decisions and snapshots are the CPU's. The host also keeps the
// bank's states, which snapshots read, so a checkpoint needs no download.
// A backend refuses, at construction, a variant it has no pass for.
package bank

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/densitykv/densitykv/riesz"
)

// Block is one finalized generation block of N candidates for every head.
type Block struct {
	Keys   []float32 // [H][N][KeyDim], the stored (post-RoPE) keys
	Values []float32 // [H][N][ValueDim]
	// Desc is the density descriptor [H][N][DescDim] when Config.DescDim > 0
	// (e.g. pre-RoPE K or [K;V]); it must be nil otherwise.
	Desc []float32
	// Source is the provenance id of each candidate [N] (global token index).
	// When nil, the bank numbers candidates consecutively from the number of
	// candidates offered so far.
	Source []int64
}

// Entry is the bookkeeping of one stored state.
type Entry struct {
	Source   int64   // source token index
	Admitted int32   // index of the update that admitted it (0-based)
	Density  float64 // cached ρ, rounded to the density dtype
	Baseline float64 // b = max(ρ at admission, δ), rounded to the density dtype
}

// vectors stores [cap][dim] vectors as float32 or bfloat16: a head's keys
// or values in the payload dtype.
type vectors struct {
	dim int
	bf  bool
	f32 []float32
	b16 []uint16
}

func newVectors(pl Payload, capacity, dim int) vectors {
	p := vectors{dim: dim, bf: pl == PayloadBF16}
	if p.bf {
		p.b16 = make([]uint16, capacity*dim)
	} else {
		p.f32 = make([]float32, capacity*dim)
	}
	return p
}

// set stores row i from src (already representable in the dtype).
func (p *vectors) set(i int, src []float32) {
	if p.bf {
		dst := p.b16[i*p.dim : i*p.dim+p.dim]
		for j, v := range src[:p.dim] {
			dst[j] = uint16(math.Float32bits(v) >> 16)
		}
		return
	}
	copy(p.f32[i*p.dim:i*p.dim+p.dim], src[:p.dim])
}

// get decodes row i into dst.
func (p *vectors) get(i int, dst []float32) {
	if p.bf {
		for j, v := range p.b16[i*p.dim : i*p.dim+p.dim] {
			dst[j] = math.Float32frombits(uint32(v) << 16)
		}
		return
	}
	copy(dst[:p.dim], p.f32[i*p.dim:i*p.dim+p.dim])
}

// move copies row src to row dst.
func (p *vectors) move(dst, src int) {
	if p.bf {
		copy(p.b16[dst*p.dim:dst*p.dim+p.dim], p.b16[src*p.dim:src*p.dim+p.dim])
		return
	}
	copy(p.f32[dst*p.dim:dst*p.dim+p.dim], p.f32[src*p.dim:src*p.dim+p.dim])
}

// RoundBF16 rounds v to the nearest bfloat16 (ties to even) and returns it
// as float32. NaN stays NaN; overflow rounds to ±Inf.
func RoundBF16(v float32) float32 {
	u := math.Float32bits(v)
	if u&0x7fffffff > 0x7f800000 {
		return math.Float32frombits(u | 0x00400000)
	}
	u += 0x7fff + (u>>16)&1
	return math.Float32frombits(u &^ 0xffff)
}

// grow resizes the vectors to n rows, keeping its contents.
func (p *vectors) grow(n int) {
	if p.bf {
		p.b16 = growKeep(p.b16, n*p.dim)
		return
	}
	p.f32 = growKeep(p.f32, n*p.dim)
}

// growKeep returns s resized to length n, keeping its contents.
func growKeep[T any](s []T, n int) []T {
	if n <= cap(s) {
		return s[:n]
	}
	t := make([]T, n, max(n, 2*cap(s)))
	copy(t, s)
	return t
}

// ensure makes room for n states (n ≤ capacity): storage grows with the
// occupancy instead of being allocated for M up front.
func (hd *head) ensure(n, dd int) {
	if n <= len(hd.src) {
		return
	}
	hd.keys.grow(n)
	hd.vals.grow(n)
	hd.desc = growKeep(hd.desc, n*dd)
	hd.norms = growKeep(hd.norms, n)
	hd.src = growKeep(hd.src, n)
	hd.adm = growKeep(hd.adm, n)
	hd.rho = growKeep(hd.rho, n)
	hd.base = growKeep(hd.base, n)
}

// head is one head's bank, in storage order.
type head struct {
	n    int
	keys vectors
	vals vectors
	// desc holds the density descriptors [cap][dd] (the decoded keys when
	// DescDim = 0), except in a bfloat16-payload bank with DescDim = 0,
	// whose passes read the keys' bfloat16 storage itself (descBF16).
	desc  []float32
	norms []float32 // [cap] |desc|²
	src   []int64
	adm   []int32
	rho   []float64
	base  []float64
}

// Bank is the DensityKV bank of one transformer layer. It is not safe for
// concurrent use; Update parallelises over heads internally.
type Bank struct {
	cfg  Config
	kern riesz.Kernel
	pass Passes // the update's passes (CPUPasses{kern} unless NewWithPasses)
	// hostPasses: pass is CPUPasses, which may use the host interaction
	// cache (cacheFor).
	hostPasses bool
	broken     error // a failed pass: the bank refuses further updates
	heads      []head
	updates    int32 // successful updates so far
	offered    int64 // candidates offered so far (default source ids)

	// Borrowed from the package pool during an update (see pool.go).
	tr    *transient
	ws    []riesz.Workspace // one per worker
	cache [][]float32       // per worker: candidate×bank interactions of the head in flight
	work  []headWork        // one per head
	plan  prefixPlan        // step 4's result
	peak  int64             // peak transient bytes seen
}

// New validates cfg and returns an empty bank.
func New(cfg Config) (*Bank, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	k, _ := riesz.New(cfg.Sigma, cfg.P, cfg.Eps)
	b := &Bank{cfg: cfg, kern: k, pass: CPUPasses{K: k}, hostPasses: true}
	b.heads = make([]head, cfg.Heads)
	for h := range b.heads {
		b.heads[h] = head{keys: newVectors(cfg.Payload, 0, cfg.KeyDim), vals: newVectors(cfg.Payload, 0, cfg.ValueDim)}
	}
	return b, nil
}

// Config returns the bank's configuration.
func (b *Bank) Config() Config { return b.cfg }

// Kernel returns the bank's Soft-Riesz kernel.
func (b *Bank) Kernel() riesz.Kernel { return b.kern }

// Updates returns the number of successful updates so far.
func (b *Bank) Updates() int { return int(b.updates) }

// Len returns the occupancy shared by the heads (head 0's occupancy; with
// PrefixPerHead use HeadLen).
func (b *Bank) Len() int { return b.heads[0].n }

// HeadLen returns head h's occupancy.
func (b *Bank) HeadLen(h int) int { return b.heads[b.checkHead(h)].n }

func (b *Bank) checkHead(h int) int {
	if h < 0 || h >= len(b.heads) {
		panic(fmt.Sprintf("bank: head %d out of range [0, %d)", h, len(b.heads)))
	}
	return h
}

// Keys returns head h's stored keys decoded to float32, [n][KeyDim] in
// storage order (a fresh copy).
func (b *Bank) Keys(h int) []float32 {
	hd := &b.heads[b.checkHead(h)]
	out := make([]float32, hd.n*b.cfg.KeyDim)
	for i := 0; i < hd.n; i++ {
		hd.keys.get(i, out[i*b.cfg.KeyDim:])
	}
	return out
}

// Values returns head h's stored values decoded to float32, [n][ValueDim]
// in storage order (a fresh copy).
func (b *Bank) Values(h int) []float32 {
	hd := &b.heads[b.checkHead(h)]
	out := make([]float32, hd.n*b.cfg.ValueDim)
	for i := 0; i < hd.n; i++ {
		hd.vals.get(i, out[i*b.cfg.ValueDim:])
	}
	return out
}

// Interleaved writes rows [r0, r1) of the bank as attention reads it: row
// i holds every head's i-th stored key, [r1−r0][Heads][KeyDim] in dk, and
// value, [r1−r0][Heads][ValueDim] in dv, decoded to float32; a head
// holding i states or fewer has zeros there. It only reads the bank, so
// calls on disjoint row ranges may run concurrently.
func (b *Bank) Interleaved(dk, dv []float32, r0, r1 int) {
	H, dK, dV := len(b.heads), b.cfg.KeyDim, b.cfg.ValueDim
	if r0 < 0 || r1 < r0 || len(dk) < (r1-r0)*H*dK || len(dv) < (r1-r0)*H*dV {
		panic(fmt.Sprintf("bank: Interleaved rows [%d, %d) of %d heads into %d keys and %d values", r0, r1, H, len(dk), len(dv)))
	}
	for i := r0; i < r1; i++ {
		for h := range b.heads {
			hd := &b.heads[h]
			k := dk[((i-r0)*H+h)*dK : ((i-r0)*H+h+1)*dK]
			v := dv[((i-r0)*H+h)*dV : ((i-r0)*H+h+1)*dV]
			if i < hd.n {
				hd.keys.get(i, k)
				hd.vals.get(i, v)
			} else {
				clear(k)
				clear(v)
			}
		}
	}
}

// Descriptors returns head h's density descriptors [n][d] (the keys when
// DescDim = 0), a fresh copy.
func (b *Bank) Descriptors(h int) []float32 {
	hd := &b.heads[b.checkHead(h)]
	if b.descBF16() {
		return b.Keys(h)
	}
	dd := b.cfg.descDim()
	return append([]float32(nil), hd.desc[:hd.n*dd]...)
}

// storedDescDim is the descriptor width a head stores in desc: 0 when the
// passes read the bfloat16 keys (descBF16).
func (b *Bank) storedDescDim() int {
	if b.descBF16() {
		return 0
	}
	return b.cfg.descDim()
}

// descRow writes head h's stored state i's descriptor to dst.
func (b *Bank) descRow(h, i int, dst []float32) {
	hd := &b.heads[h]
	if b.descBF16() {
		hd.keys.get(i, dst)
		return
	}
	dd := b.cfg.descDim()
	copy(dst[:dd], hd.desc[i*dd:i*dd+dd])
}

// Entries returns head h's per-state bookkeeping in storage order.
func (b *Bank) Entries(h int) []Entry {
	hd := &b.heads[b.checkHead(h)]
	out := make([]Entry, hd.n)
	for i := range out {
		out[i] = Entry{Source: hd.src[i], Admitted: hd.adm[i], Density: hd.rho[i], Baseline: hd.base[i]}
	}
	return out
}

// BytesPerState returns the persistent bytes of one stored state by the
// paper's accounting: K and V in the payload dtype, two density scalars
// (ρ and b) in the density dtype, an int64 source index and an int32
// admission index; plus DescDim float32 when a separate descriptor is kept.
func (c Config) BytesPerState() int64 {
	n := int64(c.KeyDim+c.ValueDim)*int64(c.Payload.DType().Size()) + 2*int64(c.Density.Size()) + 8 + 4
	if c.DescDim > 0 {
		n += int64(c.DescDim) * 4
	}
	return n
}

// Bytes returns the live persistent bytes of the bank: the sum over heads of
// occupancy × Config.BytesPerState.
func (b *Bank) Bytes() int64 {
	var n int64
	for h := range b.heads {
		n += int64(b.heads[h].n)
	}
	return n * b.cfg.BytesPerState()
}

// PeakScratchBytes returns the largest transient workspace (the per-head
// step buffers, tile workspaces and interaction caches) an update has used
// so far.
func (b *Bank) PeakScratchBytes() int64 { return b.peak }

// roundDensity rounds v to the density dtype.
func (b *Bank) roundDensity(v float64) float64 {
	if b.cfg.Density == F32 {
		return float64(float32(v))
	}
	return v
}

// set returns head h's bank as a riesz.Set.
func (b *Bank) set(h int) riesz.Set {
	hd := &b.heads[h]
	dd := b.cfg.descDim()
	if b.descBF16() {
		return riesz.Set{X16: hd.keys.b16[:hd.n*dd], Norms: hd.norms[:hd.n], N: hd.n, D: dd, BF16: true}
	}
	return riesz.Set{X: hd.desc[:hd.n*dd], Norms: hd.norms[:hd.n], N: hd.n, D: dd, BF16: b.descBF16()}
}

// descBF16 reports whether the density descriptors are bfloat16 values (the
// BF16-rounded keys), so that their dot products are gemm's bfloat16
// product (the float32 product otherwise).
func (b *Bank) descBF16() bool { return b.cfg.Payload == PayloadBF16 && b.cfg.DescDim == 0 }

// parallel runs fn(h, ws) for every head on the bank's workers.
func (b *Bank) parallel(fn func(h int, ws *riesz.Workspace)) {
	b.parallelW(func(h, _ int, ws *riesz.Workspace) { fn(h, ws) })
}

// cacheFor returns worker w's interaction cache for an n×m product, or nil
// when the workers' caches would exceed the budget (Config.CacheBytes).
func (b *Bank) cacheFor(w, n, m int) []float32 {
	budget := b.cfg.CacheBytes
	if budget == 0 {
		budget = DefaultCacheBytes
	}
	need := int64(n) * int64(m)
	if m == 0 || budget < 0 || need*4*int64(len(b.ws)) > budget || !b.hostPasses {
		return nil
	}
	if int64(cap(b.cache[w])) < need {
		b.cache[w] = make([]float32, need)
		adviseHuge(b.cache[w])
	}
	return b.cache[w][:need]
}

// parallelW runs fn(h, worker, ws) for every head on the bank's workers.
func (b *Bank) parallelW(fn func(h, w int, ws *riesz.Workspace)) {
	H := len(b.heads)
	W := len(b.ws)
	if W <= 1 || H == 1 {
		for h := 0; h < H; h++ {
			fn(h, 0, &b.ws[0])
		}
		return
	}
	var next atomic.Int32
	var wg sync.WaitGroup
	for w := 0; w < W; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for {
				h := int(next.Add(1)) - 1
				if h >= H {
					return
				}
				fn(h, w, &b.ws[w])
			}
		}(w)
	}
	wg.Wait()
}
