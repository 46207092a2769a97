package bank

import (
	"fmt"
	"math"
	"runtime"

	"github.com/densitykv/densitykv/riesz"
)

// Ordering selects how candidates are ordered before the prefix scan
// (Algorithm 1, line "Stably sort candidates").
type Ordering uint8

const (
	// OrderMean sorts by increasing mean-normalised disturbance
	// s(x) = (1/m) Σ_i w(k̄_i, k_x)/max(b_i, δ) (paper Eq. candidate-score; the default).
	OrderMean Ordering = iota
	// OrderMax sorts by increasing max_i w(k̄_i, k_x)/max(b_i, δ) (the authors'
	// public code; the rule the Wan golden rollout uses).
	OrderMax
	// OrderSource keeps the candidates' input order (the "source-order
	// candidates" ablation).
	OrderSource
)

// Baselines selects how insertion baselines evolve.
type Baselines uint8

const (
	// BaselinesFrozen keeps each state's admission baseline (the paper).
	BaselinesFrozen Baselines = iota
	// BaselinesRefresh resets every baseline to max(ρ, δ) after every update
	// (the "refresh density baselines" ablation).
	BaselinesRefresh
)

// Eviction selects how the e_{r*} evictions are chosen.
type Eviction uint8

const (
	// EvictMandatoryDensest evicts every projected violator, then fills the
	// budget with the remaining states of largest projected density ρ̃(r*)
	// (the paper).
	EvictMandatoryDensest Eviction = iota
	// EvictDensest evicts the e_{r*} states of largest ρ̃(r*), violators or
	// not (the "densest-only eviction" ablation). Violators can survive; they
	// are counted in the decision record.
	EvictDensest
	// EvictMandatorySource evicts every violator, then fills the budget with
	// the oldest states by source index (the "mandatory + source eviction"
	// ablation).
	EvictMandatorySource
)

// Prefix selects whether the admitted prefix length is shared by the heads.
type Prefix uint8

const (
	// PrefixShared admits the same number r* of candidates in every head of
	// the layer (paper Eq. shared-prefix); occupancy is equal across heads.
	PrefixShared Prefix = iota
	// PrefixPerHead lets each head choose its own largest feasible prefix
	// (the "independent per-head" ablation); occupancies may differ.
	PrefixPerHead
)

// Admission selects how candidates of one block compete.
type Admission uint8

const (
	// AdmitJoint commits the whole prefix at once (insertion hysteresis, the
	// paper): candidates of one block do not reject one another.
	AdmitJoint Admission = iota
	// AdmitSequential is the "within-block competition" ablation: the block's
	// candidates are offered one at a time, in each head's order, each as a
	// single-candidate update of Algorithm 1, so earlier admissions
	// immediately affect later ones. See Bank.Update for the exact reading.
	AdmitSequential
)

// Payload selects the storage of the stored keys and values.
type Payload uint8

const (
	// PayloadBF16 stores K/V as bfloat16, rounded to nearest even from
	// float32 (the paper's accounting; the default).
	PayloadBF16 Payload = iota
	// PayloadF32 stores K/V as float32.
	PayloadF32
)

// DType returns the payload's element type.
func (p Payload) DType() DType {
	if p == PayloadF32 {
		return F32
	}
	return BF16
}

// Descriptor selects the vector each state's density is measured on. The
// bank itself only knows its dimension (Config.DescDim, from Dim); the
// caller builds the descriptors (package memory).
type Descriptor uint8

const (
	// DescPostRoPEKey is the stored post-RoPE key itself (the paper; the
	// default, DescDim 0).
	DescPostRoPEKey Descriptor = iota
	// DescPreRoPEKey is the key before the rotary embedding.
	DescPreRoPEKey
	// DescKeyValue is [K;V] with the post-RoPE key.
	DescKeyValue
	// DescPreRoPEKeyValue is [K;V] with the pre-RoPE key.
	DescPreRoPEKeyValue
)

// Dim returns the descriptor dimension for heads of dimension headDim, as
// Config.DescDim wants it: 0 for the stored key itself.
func (d Descriptor) Dim(headDim int) int {
	switch d {
	case DescPreRoPEKey:
		return headDim
	case DescKeyValue, DescPreRoPEKeyValue:
		return 2 * headDim
	}
	return 0
}

// WithValues reports whether the descriptor includes the value.
func (d Descriptor) WithValues() bool { return d == DescKeyValue || d == DescPreRoPEKeyValue }

// PreRoPE reports whether the descriptor's key is the one before the
// rotary embedding.
func (d Descriptor) PreRoPE() bool { return d == DescPreRoPEKey || d == DescPreRoPEKeyValue }

// DType is a storage type.
type DType uint8

const (
	// F32 is IEEE float32.
	F32 DType = iota
	// BF16 is bfloat16 with round-to-nearest-even from float32.
	BF16
	// F64 is IEEE float64 (densities and baselines only).
	F64
)

// Size returns the storage size of one element in bytes.
func (d DType) Size() int {
	switch d {
	case BF16:
		return 2
	case F64:
		return 8
	}
	return 4
}

// Config configures one layer's bank. The zero values of the enumerations
// are the paper's choices (Density's F32 included); DefaultConfig fills in
// the paper's parameters.
type Config struct {
	Heads    int // attention heads H (≥ 1)
	KeyDim   int // key dimension d_k (≥ 1)
	ValueDim int // value dimension d_v (≥ 1)
	// DescDim is the dimension of a separate density descriptor per candidate
	// (e.g. pre-RoPE K, or [K;V]); 0 (the paper) uses the stored key itself.
	DescDim int

	Capacity int     // M, states per head (≥ 1)
	Tau      float64 // τ > 1, the allowed density growth
	Sigma    float64 // σ > 0, kernel bandwidth
	P        float64 // p > 0, kernel decay
	Eps      float64 // eps > 0
	Delta    float64 // δ > 0, baseline floor

	Ordering  Ordering
	Baselines Baselines
	Eviction  Eviction
	Prefix    Prefix
	Admission Admission

	Payload Payload // storage of K/V
	Density DType   // F32 or F64 storage of densities and baselines

	// Workers is the number of heads processed in parallel (0 = GOMAXPROCS).
	// Results do not depend on it.
	Workers int
	// CacheBytes bounds the candidate×bank interaction cache (N·M float32
	// per worker) that lets the prefix scan reuse the scoring pass instead
	// of recomputing the interactions: 0 = DefaultCacheBytes, < 0 = never
	// cache. Results do not depend on it. Not stored in snapshots.
	CacheBytes int64
}

// DefaultCacheBytes is the default interaction-cache budget (all workers):
// 512 MiB, enough for the paper scale (4680×9360 float32 = 175 MB per
// worker) on two workers.
const DefaultCacheBytes = 512 << 20

// DefaultConfig returns the paper's configuration for Wan2.1-1.3B: 12 heads
// of dimension 128, M = 9360, τ = 2, σ = 8, p = 2, eps = 1, δ = 1e-6, mean
// ordering, frozen baselines, mandatory-densest eviction, shared prefix,
// joint admission, BF16 payload and float32 densities.
func DefaultConfig() Config {
	return Config{
		Heads: 12, KeyDim: 128, ValueDim: 128,
		Capacity: 9360, Tau: 2, Sigma: 8, P: 2, Eps: 1, Delta: 1e-6,
		Payload: PayloadBF16, Density: F32,
	}
}

// descDim returns the dimension the density is computed on.
func (c Config) descDim() int {
	if c.DescDim > 0 {
		return c.DescDim
	}
	return c.KeyDim
}

// WorkerCount returns the number of heads an update processes in parallel:
// Workers, or GOMAXPROCS when it is 0, at most one per head.
func (c Config) WorkerCount() int {
	w := c.Workers
	if w <= 0 {
		w = runtime.GOMAXPROCS(0)
	}
	return max(1, min(w, c.Heads))
}

// maxElems bounds per-head allocations (states × dimension) so that a bad
// configuration fails with an error instead of an out-of-memory crash.
const maxElems = 1 << 34

// Validate checks every field and returns an error naming the first bad one.
func (c Config) Validate() error {
	pos := func(name string, v int) error {
		if v < 1 {
			return fmt.Errorf("bank: config %s = %d must be ≥ 1", name, v)
		}
		return nil
	}
	for _, f := range []struct {
		n string
		v int
	}{{"Heads", c.Heads}, {"KeyDim", c.KeyDim}, {"ValueDim", c.ValueDim}, {"Capacity", c.Capacity}} {
		if err := pos(f.n, f.v); err != nil {
			return err
		}
	}
	if c.DescDim < 0 {
		return fmt.Errorf("bank: config DescDim = %d must be ≥ 0", c.DescDim)
	}
	if c.Heads > 1<<16 || c.KeyDim > 1<<20 || c.ValueDim > 1<<20 || c.DescDim > 1<<20 || c.Capacity > 1<<30 {
		return fmt.Errorf("bank: config too large (Heads %d, KeyDim %d, ValueDim %d, DescDim %d, Capacity %d)",
			c.Heads, c.KeyDim, c.ValueDim, c.DescDim, c.Capacity)
	}
	if int64(c.Capacity)*int64(c.KeyDim+c.ValueDim+c.descDim())*int64(c.Heads) > maxElems {
		return fmt.Errorf("bank: config Heads·Capacity·(KeyDim+ValueDim+DescDim) = %d·%d·%d exceeds %d",
			c.Heads, c.Capacity, c.KeyDim+c.ValueDim+c.descDim(), int64(maxElems))
	}
	if !(c.Tau > 1) || math.IsInf(c.Tau, 0) {
		return fmt.Errorf("bank: config Tau = %v must be finite and > 1", c.Tau)
	}
	if !(c.Delta > 0) || math.IsInf(c.Delta, 0) {
		return fmt.Errorf("bank: config Delta = %v must be finite and > 0", c.Delta)
	}
	if _, err := riesz.New(c.Sigma, c.P, c.Eps); err != nil {
		return fmt.Errorf("bank: config: %w", err)
	}
	if c.Ordering > OrderSource {
		return fmt.Errorf("bank: config Ordering = %d is unknown", c.Ordering)
	}
	if c.Baselines > BaselinesRefresh {
		return fmt.Errorf("bank: config Baselines = %d is unknown", c.Baselines)
	}
	if c.Eviction > EvictMandatorySource {
		return fmt.Errorf("bank: config Eviction = %d is unknown", c.Eviction)
	}
	if c.Prefix > PrefixPerHead {
		return fmt.Errorf("bank: config Prefix = %d is unknown", c.Prefix)
	}
	if c.Admission > AdmitSequential {
		return fmt.Errorf("bank: config Admission = %d is unknown", c.Admission)
	}
	if c.Payload > PayloadF32 {
		return fmt.Errorf("bank: config Payload = %d is unknown", c.Payload)
	}
	if c.Density != F32 && c.Density != F64 {
		return fmt.Errorf("bank: config Density = %v must be f32 or f64", c.Density)
	}
	if c.Workers < 0 {
		return fmt.Errorf("bank: config Workers = %d must be ≥ 0", c.Workers)
	}
	return nil
}
