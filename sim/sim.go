// Package sim drives memory policies over a KV stream, block by block, the
// way a backbone's rollout would, and reports what every policy did.
//
// For every block of the stream, every policy receives the same calls:
// Steps read-only denoising calls (Begin, Attend for every layer, End), then
// the clean pass whose K/V persist. The stream (package synth) only holds the
// clean-pass projections, so denoising calls reuse them; with the default
// Steps = 0 each block is a single call with First and Clean set. Policies
// are driven in lockstep: all Begin, then for each layer every policy's
// Attend on the same q/k/v (each policy gets its own copy, so a policy that
// writes into its inputs cannot affect another), then all End. Observers see
// the contexts of every policy for one layer together, which is what a
// matched comparison (package eval) needs.
//
// Run is deterministic: calls happen in a fixed order on one goroutine, and
// records carry wall times only in their timing fields.
package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/synth"
)

// LayerView is what observers see for one layer of one block's clean pass:
// the stream's inputs (pre-RoPE q and k, raw v, [T][H][D]) and the context
// each policy returned, in policy order. Everything is valid only during the
// callback.
type LayerView struct {
	Block, Layer int
	Q, K, V      []float32
	Contexts     []memory.Context
}

// LayerRecord is one policy's clean-pass record of one layer of one block.
type LayerRecord struct {
	Policy int    // index into the policies passed to Run
	Name   string // policy name
	Block  int
	Layer  int
	Parts  memory.Parts // keys attended by part
	// Occupancy is the historical memory read per head (from
	// memory.StatsReporter; Parts.Memory for every head otherwise).
	Occupancy []int
	// Offered and Admitted count candidate and admitted tokens per head;
	// EvictedMandatory and EvictedCapacity count evictions summed over heads.
	// All are −1 when the policy does not report statistics.
	Offered, Admitted, EvictedMandatory, EvictedCapacity int
	AttendSeconds                                        float64 // wall time of this Attend
}

// BlockRecord is one policy's record of one block (all its calls).
type BlockRecord struct {
	Policy int
	Name   string
	Block  int
	Bytes  int64 // Policy.Bytes after the clean pass
	// UpdateSeconds is the memory-update time the policy reports for the
	// block's calls (memory.StatsReporter), −1 when it does not report.
	UpdateSeconds float64
	// Seconds is the wall time of every Begin, Attend and End of the block.
	Seconds float64
}

// PolicySummary aggregates one policy over the run.
type PolicySummary struct {
	Name          string
	Blocks        int
	PeakBytes     int64
	FinalBytes    int64
	Seconds       float64 // total wall time in the policy
	UpdateSeconds float64 // total reported update time (−1 when unreported)
	Admitted      int64   // Σ admitted tokens per head over layers and blocks (−1 when unreported)
	Evicted       int64   // Σ evictions over heads, layers and blocks (−1 when unreported)
}

// Summary is the result of Run.
type Summary struct {
	Blocks   int
	Policies []PolicySummary
}

// Options configure Run. Every callback is optional; a callback error stops
// the run and is returned wrapped.
type Options struct {
	// Steps read-only denoising calls precede each clean pass (0). They
	// reuse the clean projections, so Run then holds all layers of a block.
	Steps int
	// MaxBlocks stops after that many blocks (0 = the whole stream).
	MaxBlocks int
	// FirstBlock is the index the policies see for the run's first block
	// (memory.Call.Block; the records carry it too): 0 for fresh policies,
	// b for policies restored to their state after block b−1 (a resumed
	// run, with src advanced past those blocks).
	FirstBlock int
	// Context, when set, is checked before every block: once it is done
	// Run returns the summary so far and an error wrapping its error,
	// without starting the block (so the policies stay between blocks).
	Context context.Context
	// ObserveLayer sees every layer of every clean pass with all contexts.
	ObserveLayer func(LayerView) error
	// OnLayer and OnBlock receive the per-policy records.
	OnLayer func(LayerRecord) error
	OnBlock func(BlockRecord) error
	// EndBlock is called once a block is over for every policy, after its
	// records, with the block's index.
	EndBlock func(block int) error
	// Progress is called after every block with the blocks done and the
	// total (−1 when the stream length is unknown).
	Progress func(done, total int)
}

// Run drives policies over src from its current position to its end (or
// MaxBlocks). Policies must be fresh (no calls yet), or restored to the
// state after block FirstBlock−1, and share src's layout. Block indices
// passed to the policies count from FirstBlock at the start of the run.
func Run(src synth.Reader, policies []memory.Policy, opt Options) (Summary, error) {
	if err := checkRun(src, policies, opt); err != nil {
		return Summary{}, err
	}
	r := newLockstep(src, policies, opt)
	for done := 0; opt.MaxBlocks == 0 || done < opt.MaxBlocks; done++ {
		b := opt.FirstBlock + done
		if opt.Context != nil {
			if err := opt.Context.Err(); err != nil {
				return r.sum, fmt.Errorf("sim: stopped before block %d: %w", b, err)
			}
		}
		info, err := src.NextBlock()
		if err == io.EOF {
			break
		}
		if err != nil {
			return r.sum, fmt.Errorf("sim: block %d: %w", b, err)
		}
		if err := r.block(b, info); err != nil {
			return r.sum, err
		}
	}
	return r.sum, nil
}

// checkRun checks Run's arguments: policies, all of the stream's layout,
// and non-negative counts.
func checkRun(src synth.Reader, policies []memory.Policy, opt Options) error {
	l := src.Layout()
	if len(policies) == 0 {
		return errors.New("sim: no policies")
	}
	if opt.Steps < 0 || opt.MaxBlocks < 0 || opt.FirstBlock < 0 {
		return fmt.Errorf("sim: steps %d, max blocks %d and first block %d must be ≥ 0", opt.Steps, opt.MaxBlocks, opt.FirstBlock)
	}
	for i, p := range policies {
		if p == nil {
			return fmt.Errorf("sim: policy %d is nil", i)
		}
		if p.Layout() != l {
			return fmt.Errorf("sim: policy %d (%s) layout %+v differs from stream layout %+v", i, p.Name(), p.Layout(), l)
		}
	}
	return nil
}

// scratch holds one block's q, k and v of a layer.
type scratch struct{ q, k, v []float32 }

// lockstep is one Run: the policies driven through every call of a block
// (Begin, Attend per layer, End; Steps denoising calls, then the clean
// one), the stream's layers read once per block, and what the callbacks
// and the summary are told.
type lockstep struct {
	src   synth.Reader
	pols  []memory.Policy
	opt   Options
	l     memory.Layout
	n     int       // values of one layer's q (and k, v) of a block
	total int       // blocks Progress reports (−1: unknown)
	bufs  []scratch // per policy: the layer's inputs, which a policy may overwrite
	cache []scratch // the block's layers when Steps > 0
	sum   Summary
	ctxs  []memory.Context // the layer's context of each policy
	secs  []float64        // the block's seconds in each policy's calls
	upd   []float64        // and in its bank updates
	// parts and attendSecs are the clean pass's, [policy][layer].
	parts      [][]memory.Parts
	attendSecs [][]float64
}

func newLockstep(src synth.Reader, policies []memory.Policy, opt Options) *lockstep {
	l := src.Layout()
	r := &lockstep{src: src, pols: policies, opt: opt, l: l, n: l.TokensPerBlock() * l.Heads * l.HeadDim, total: src.Blocks()}
	if opt.MaxBlocks > 0 && (r.total < 0 || opt.MaxBlocks < r.total) {
		r.total = opt.MaxBlocks
	}
	r.bufs = make([]scratch, len(policies))
	for i := range r.bufs {
		r.bufs[i] = scratch{make([]float32, r.n), make([]float32, r.n), make([]float32, r.n)}
	}
	r.cache = make([]scratch, l.Layers)
	r.sum = Summary{Policies: make([]PolicySummary, len(policies))}
	for i, p := range policies {
		r.sum.Policies[i].Name = p.Name()
		if _, ok := p.(memory.StatsReporter); !ok {
			r.sum.Policies[i].UpdateSeconds, r.sum.Policies[i].Admitted, r.sum.Policies[i].Evicted = -1, -1, -1
		}
	}
	r.ctxs = make([]memory.Context, len(policies))
	r.secs = make([]float64, len(policies))
	r.upd = make([]float64, len(policies))
	r.parts = make([][]memory.Parts, len(policies))
	r.attendSecs = make([][]float64, len(policies))
	for i := range policies {
		r.parts[i] = make([]memory.Parts, l.Layers)
		r.attendSecs[i] = make([]float64, l.Layers)
	}
	return r
}

// block runs block b: every call of it, then the block's records.
func (r *lockstep) block(b int, info synth.BlockInfo) error {
	clear(r.secs)
	clear(r.upd)
	for step := 0; step <= r.opt.Steps; step++ {
		if err := r.call(b, step, info); err != nil {
			return err
		}
	}
	return r.endBlock(b)
}

// call is one call of block b (step; the clean one is the last): every
// policy's Begin, each layer's Attend, every policy's End.
func (r *lockstep) call(b, step int, info synth.BlockInfo) error {
	clean := step == r.opt.Steps
	call := memory.Call{Block: b, Step: step, Clean: clean, First: step == 0, Latent: info.Latent}
	for i, p := range r.pols {
		t0 := time.Now()
		if err := p.Begin(call); err != nil {
			return fmt.Errorf("sim: block %d step %d: %s: %w", b, step, p.Name(), err)
		}
		r.secs[i] += time.Since(t0).Seconds()
	}
	for layer := 0; layer < r.l.Layers; layer++ {
		if err := r.layer(b, step, layer, clean); err != nil {
			return err
		}
	}
	for i, p := range r.pols {
		if err := r.end(i, p, b, step, clean); err != nil {
			return err
		}
	}
	return nil
}

// inputs returns the layer's q, k and v: read from the stream at step 0
// (and kept when later steps reuse them), the kept ones after.
func (r *lockstep) inputs(b, step, layer int) (q, k, v []float32, err error) {
	if step > 0 {
		c := r.cache[layer]
		return c.q, c.k, c.v, nil
	}
	if q, k, v, err = r.src.Layer(layer); err != nil {
		return nil, nil, nil, fmt.Errorf("sim: block %d layer %d: %w", b, layer, err)
	}
	if r.opt.Steps > 0 { // later calls of the block reuse the layer
		c := &r.cache[layer]
		*c = scratch{append(c.q[:0], q...), append(c.k[:0], k...), append(c.v[:0], v...)}
	}
	return q, k, v, nil
}

// layer attends one layer with every policy (each on its own copy of the
// inputs) and checks the contexts' sizes; the clean call's parts and
// times are kept for the records, and shown to ObserveLayer.
func (r *lockstep) layer(b, step, layer int, clean bool) error {
	q, k, v, err := r.inputs(b, step, layer)
	if err != nil {
		return err
	}
	l := r.l
	for i, p := range r.pols {
		s := r.bufs[i]
		copy(s.q, q)
		copy(s.k, k)
		copy(s.v, v)
		t0 := time.Now()
		c, err := p.Attend(layer, s.q, s.k, s.v)
		dt := time.Since(t0).Seconds()
		r.secs[i] += dt
		if err != nil {
			return fmt.Errorf("sim: block %d step %d layer %d: %s: %w", b, step, layer, p.Name(), err)
		}
		if got, want := len(c.K), c.Parts.Total()*l.Heads*l.HeadDim; got != want || len(c.V) != want || len(c.Q) != r.n {
			return fmt.Errorf("sim: block %d layer %d: %s: context has %d keys, %d values, %d queries for parts %+v (want %d, %d, %d)",
				b, layer, p.Name(), len(c.K), len(c.V), len(c.Q), c.Parts, want, want, r.n)
		}
		r.ctxs[i] = c
		if clean {
			r.parts[i][layer], r.attendSecs[i][layer] = c.Parts, dt
		}
	}
	if clean && r.opt.ObserveLayer != nil {
		if err := r.opt.ObserveLayer(LayerView{Block: b, Layer: layer, Q: q, K: k, V: v, Contexts: r.ctxs}); err != nil {
			return fmt.Errorf("sim: block %d layer %d: observer: %w", b, layer, err)
		}
	}
	return nil
}

// end ends policy i's call; after the clean call it reports the policy's
// layers (OnLayer) and adds them to the summary.
func (r *lockstep) end(i int, p memory.Policy, b, step int, clean bool) error {
	t0 := time.Now()
	if err := p.End(); err != nil {
		return fmt.Errorf("sim: block %d step %d: %s: end: %w", b, step, p.Name(), err)
	}
	r.secs[i] += time.Since(t0).Seconds()
	sr, ok := p.(memory.StatsReporter)
	var st memory.Stats
	if ok {
		st = sr.LastStats()
		r.upd[i] += st.UpdateSeconds
	}
	if !clean {
		return nil
	}
	for layer := 0; layer < r.l.Layers; layer++ {
		rec := r.layerRecord(i, p, b, layer, st, ok)
		if r.opt.OnLayer != nil {
			if err := r.opt.OnLayer(rec); err != nil {
				return fmt.Errorf("sim: block %d layer %d: layer callback: %w", b, layer, err)
			}
		}
	}
	return nil
}

// layerRecord is policy i's record of a layer of block b's clean call
// (from its statistics st when it reports them: ok), counted into the
// summary.
func (r *lockstep) layerRecord(i int, p memory.Policy, b, layer int, st memory.Stats, ok bool) LayerRecord {
	ps := &r.sum.Policies[i]
	rec := LayerRecord{Policy: i, Name: p.Name(), Block: b, Layer: layer, Parts: r.parts[i][layer],
		Offered: -1, Admitted: -1, EvictedMandatory: -1, EvictedCapacity: -1, AttendSeconds: r.attendSecs[i][layer]}
	if ok && layer < len(st.Occupancy) {
		rec.Occupancy = append([]int(nil), st.Occupancy[layer]...)
		rec.Offered, rec.Admitted = at(st.Offered, layer), at(st.Admitted, layer)
		rec.EvictedMandatory, rec.EvictedCapacity = at(st.EvictedMandatory, layer), at(st.EvictedCapacity, layer)
		ps.Admitted += int64(max(rec.Admitted, 0))
		ps.Evicted += int64(max(rec.EvictedMandatory, 0) + max(rec.EvictedCapacity, 0))
		return rec
	}
	rec.Occupancy = make([]int, r.l.Heads)
	for h := range rec.Occupancy {
		rec.Occupancy[h] = rec.Parts.Memory
	}
	return rec
}

// endBlock reports block b of every policy (OnBlock), counts it into the
// summary, and calls EndBlock and Progress.
func (r *lockstep) endBlock(b int) error {
	for i, p := range r.pols {
		ps := &r.sum.Policies[i]
		bytes := p.Bytes()
		ps.Blocks++
		ps.FinalBytes = bytes
		ps.PeakBytes = max(ps.PeakBytes, bytes)
		ps.Seconds += r.secs[i]
		rec := BlockRecord{Policy: i, Name: p.Name(), Block: b, Bytes: bytes, UpdateSeconds: -1, Seconds: r.secs[i]}
		if _, ok := p.(memory.StatsReporter); ok {
			rec.UpdateSeconds = r.upd[i]
			ps.UpdateSeconds += r.upd[i]
		}
		if r.opt.OnBlock != nil {
			if err := r.opt.OnBlock(rec); err != nil {
				return fmt.Errorf("sim: block %d: block callback: %w", b, err)
			}
		}
	}
	r.sum.Blocks++
	if r.opt.EndBlock != nil {
		if err := r.opt.EndBlock(b); err != nil {
			return fmt.Errorf("sim: block %d: %w", b, err)
		}
	}
	if r.opt.Progress != nil {
		r.opt.Progress(r.sum.Blocks, r.total)
	}
	return nil
}

func at(s []int, i int) int {
	if i < len(s) {
		return s[i]
	}
	return -1
}
