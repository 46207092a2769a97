package bank

import "time"

// Decision is the record of one Update, for logging and analysis.
type Decision struct {
	Update     int // index of this update (0-based)
	Candidates int // N
	// Accepted is r*, the admitted prefix length shared by the heads. With
	// PrefixPerHead it is the largest per-head prefix (see HeadDecision).
	// With AdmitSequential it is the number of candidate positions admitted.
	Accepted int
	// Empty reports that the bank was empty before the update (the first
	// min(N, M) candidates were admitted in source order).
	Empty bool
	// Flushed reports that every previously stored state was evicted (e.g.
	// a full bank hit by a block with N ≥ M).
	Flushed bool
	// Infeasible reports that no prefix length, not even 0, satisfied
	// v_r ≤ e_r in every head (a state already above τ·b, possible only
	// under ablation variants); r* was then set to 0 and nothing evicted.
	Infeasible bool
	// FloorBlocked reports that admission stopped short of min(N, M) while
	// some head held a state whose baseline is at the floor δ (its admission
	// density was below δ) and that would cross τ·δ at prefix r*+1: such
	// states block all admission until evicted.
	FloorBlocked bool
	Heads        []HeadDecision
	Timings      Timings
}

// HeadDecision is one head's part of a Decision.
type HeadDecision struct {
	Accepted int     // this head's admitted count (= Decision.Accepted when shared)
	Admitted []int64 // source ids admitted, in admission order
	// Evicted lists the source ids removed by this update: mandatory
	// evictions first (storage order), then capacity evictions in the order
	// chosen.
	Evicted []int64
	// EvictedDensity is each evicted state's projected density ρ̃_i(r*) =
	// ρ_i + S_i(r*), in the order of Evicted (the authors' lineage field
	// evicted_density).
	EvictedDensity []float64
	Mandatory      int // evictions of projected violators (g_i(r*) ≥ τ)
	Capacity       int // additional evictions to free e_{r*} slots
	// Violators is the number of previously stored states with g_i(r*) ≥ τ
	// (equal to Mandatory except under EvictDensest or an infeasible update).
	// With AdmitSequential it is summed over the single-candidate steps.
	Violators int
	// FloorStates counts previously stored states whose baseline is at the
	// floor δ and whose projected ratio reaches τ within this block (summed
	// over the steps with AdmitSequential).
	FloorStates int
	// Order lists candidate indices (0..N−1) in this head's ordering.
	Order []int32
	// Score is each candidate's ordering score (indexed by candidate, 0 for
	// source ordering or an empty bank).
	Score []float64
	// External is each candidate's external density Σ_i w(k̄_i, k_x) over
	// the bank as it was before the update (indexed by candidate).
	External []float64
	Len      int // occupancy after the update
}

// Timings splits an update's wall time by Algorithm 1 step (see Update for
// the step numbers). Scoring, scanning and speculative eviction run per head
// interleaved on the workers; their phase's wall time is apportioned by the
// heads' summed time in each. It also counts how the speculative eviction
// choices fared, which shows in the Evict and Commit times.
type Timings struct {
	Validate time.Duration `json:"validate_ns"` // input validation and candidate preparation
	Score    time.Duration `json:"score_ns"`    // scoring and ordering (step 2)
	Scan     time.Duration `json:"scan_ns"`     // prefix scan and r* (steps 3–4)
	Evict    time.Duration `json:"evict_ns"`    // eviction choice, speculative or not (step 5)
	Commit   time.Duration `json:"commit_ns"`   // commit, exact density update, baselines (steps 6–8; step 1 for an empty bank)
	Total    time.Duration `json:"total_ns"`
	// SpecReused and SpecDiscarded count the heads whose eviction choice
	// was made speculatively, while their candidate×bank interactions were
	// cached, for their own largest feasible prefix, and then kept because
	// the shared r* was the same, or discarded (step 5 ran again for r*).
	// Heads without a cached pass, an empty head or no feasible prefix
	// make no such choice.
	SpecReused    int `json:"spec_reused,omitempty"`
	SpecDiscarded int `json:"spec_discarded,omitempty"`
}
