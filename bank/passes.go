package bank

import (
	"fmt"

	"github.com/densitykv/densitykv/riesz"
)

// Passes are the heavy Soft-Riesz passes of an update, per head h; the
// control flow around them (candidate order, the shared prefix, the
// choice of evictions, the bookkeeping of the commit) is the bank's own,
// on the host, for every backend. Sets passed in are the host's: the
// candidates, the head's bank before the update (or, after Commit, the
// final bank). A backend that keeps the bank's descriptors elsewhere (a
// device) follows the bank by Load and Commit and may ignore the host
// sets of the bank; it must give every output the CPU's bits
// (CPUPasses). cache is the CPU's interaction cache (nil for a backend
// that keeps its own: Bank asks for a host cache only with CPUPasses).
//
// The methods of one head are called in update order; different heads
// may be called concurrently (Config.Workers).
type Passes interface {
	// Candidates gives head h's candidates of the update about to run.
	Candidates(h int, cand riesz.Set)
	// Score is riesz.RowStatsCached of the candidates against the head's
	// bank: ext[x] += Σ_i w, mean and max (each may be nil) as RowStats
	// with the inverse baselines inv; it also keeps the interactions for
	// Scan (in cache when not nil).
	Score(h int, cand, bank riesz.Set, inv []float32, ext, mean, max []float64, cache []float32, ws *riesz.Workspace)
	// Scan is riesz.PrefixScan of the candidates rows, in that order
	// (ordered holds their descriptors, gathered), against the head's
	// bank: the crossing points into cross and, every `every` rows and at
	// the end, the sums S_i(r) into ckpt (a backend may keep those itself:
	// only PrefixSums reads them).
	Scan(h int, rows []int32, ordered, bank riesz.Set, rem []float64, cross []int32, every int, ckpt []float64, cache []float32, ws *riesz.Workspace)
	// PrefixSums writes S_i(r), the sums over the first r scanned rows,
	// into sums [bank.N] (as the last Scan's checkpoint before r plus the
	// column sums of the rows after it).
	PrefixSums(h, r int, ordered, bank riesz.Set, every int, ckpt []float64, sums []float64, ws *riesz.Workspace)
	// OfferSums adds to out[0] Σ_i w(one, bank_i) for a single candidate
	// (sequential admission).
	OfferSums(h int, one, bank riesz.Set, out []float64, ws *riesz.Workspace)
	// Commit tells the backend head h's new bank: the states kept
	// (ascending storage indices of the bank before), then fresh, the
	// admitted candidates in admission order (host set), whose keys and
	// values ([fresh.N][KeyDim], [fresh.N][ValueDim], rounded to the
	// payload) are keys and values; evicted are the others (ascending).
	Commit(h int, kept, evicted []int32, fresh riesz.Set, keys, values []float32)
	// EvictedSums adds to out[i] Σ_e w(final_i, evicted_e) for the first
	// final.N states of the final bank (Sums' row sums).
	EvictedSums(h int, final, evicted riesz.Set, out []float64, ws *riesz.Workspace)
	// SelfSums is riesz.SelfSums over the fresh states (the final bank's
	// last fresh.N).
	SelfSums(h int, fresh riesz.Set, out []float64, ws *riesz.Workspace)
	// Load replaces head h's bank by the given states (a snapshot read)
	// with their keys and values.
	Load(h int, bank riesz.Set, keys, values []float32)
	// Err returns the first error of a pass (a device failure), or nil.
	Err() error
}

// CPUPasses are riesz's tiled passes on the host: the bank's default
// backend, whose bits every other backend reproduces.
type CPUPasses struct{ K riesz.Kernel }

// Candidates does nothing: the passes read the host sets.
func (CPUPasses) Candidates(int, riesz.Set) {}

// Score calls riesz.RowStatsCached.
func (p CPUPasses) Score(_ int, cand, bank riesz.Set, inv []float32, ext, mean, max []float64, cache []float32, ws *riesz.Workspace) {
	p.K.RowStatsCached(cand, bank, inv, ext, mean, max, cache, ws)
}

// Scan calls riesz.ScanRows over the cache, or riesz.PrefixScan.
func (p CPUPasses) Scan(_ int, rows []int32, ordered, bank riesz.Set, rem []float64, cross []int32, every int, ckpt []float64, cache []float32, ws *riesz.Workspace) {
	if cache != nil {
		riesz.ScanRows(cache, bank.N, rows, rem, cross, every, ckpt, ws)
		return
	}
	p.K.PrefixScan(ordered, bank, rem, cross, every, ckpt, ws)
}

// PrefixSums takes the checkpoint and adds the remaining rows' column
// sums (riesz.Kernel.Sums).
func (p CPUPasses) PrefixSums(_ int, r int, ordered, bank riesz.Set, every int, ckpt []float64, sums []float64, ws *riesz.Workspace) {
	m := bank.N
	k := r / every
	full := r == ordered.N && r%every != 0
	switch {
	case full:
		copy(sums, ckpt[k*m:(k+1)*m])
	case k > 0:
		copy(sums, ckpt[(k-1)*m:k*m])
	default:
		clear(sums[:m])
	}
	if rem := r - k*every; rem > 0 && !full {
		p.K.Sums(ordered.Rows(k*every, r), bank, nil, sums, ws)
	}
}

// OfferSums calls riesz.Kernel.Sums.
func (p CPUPasses) OfferSums(_ int, one, bank riesz.Set, out []float64, ws *riesz.Workspace) {
	p.K.Sums(one, bank, out, nil, ws)
}

// Commit does nothing: the passes read the host sets.
func (CPUPasses) Commit(int, []int32, []int32, riesz.Set, []float32, []float32) {}

// EvictedSums calls riesz.Kernel.Sums.
func (p CPUPasses) EvictedSums(_ int, final, evicted riesz.Set, out []float64, ws *riesz.Workspace) {
	p.K.Sums(final, evicted, out, nil, ws)
}

// SelfSums calls riesz.Kernel.SelfSums.
func (p CPUPasses) SelfSums(_ int, fresh riesz.Set, out []float64, ws *riesz.Workspace) {
	p.K.SelfSums(fresh, out, ws)
}

// Load does nothing.
func (CPUPasses) Load(int, riesz.Set, []float32, []float32) {}

// Err returns nil: the host passes do not fail.
func (CPUPasses) Err() error { return nil }

// NewWithPasses is New with the update's passes run by p (see Passes; New
// uses CPUPasses). p's backend decides which variants it supports and is
// constructed for this configuration (package gpu's NewBank).
func NewWithPasses(cfg Config, p Passes) (*Bank, error) {
	if p == nil {
		return nil, fmt.Errorf("bank: NewWithPasses: nil Passes")
	}
	b, err := New(cfg)
	if err != nil {
		return nil, err
	}
	b.pass = p
	_, b.hostPasses = p.(CPUPasses)
	return b, nil
}

// Passes returns the backend of the bank's passes.
func (b *Bank) Passes() Passes { return b.pass }
