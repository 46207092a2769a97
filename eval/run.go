package eval

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/densitykv/densitykv/gemm"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/rope"
	"github.com/densitykv/densitykv/sim"
	"github.com/densitykv/densitykv/synth"
)

// Variant is one evaluated policy configuration: one row of a table.
type Variant struct {
	Group  string        // table the row belongs to ("baselines", "tau", …)
	Label  string        // row label
	Policy string        // memory policy name (memory.New)
	Config memory.Config // its configuration (Layout is set by Run)
	// Default marks the suite's default DensityKV configuration in every
	// table (figures draw it like the DensityKV baseline).
	Default bool
}

// Options configure Run. Zero values select the defaults in brackets.
type Options struct {
	// Base holds the settings shared with the FullHistory reference: sink,
	// window and cache frames, RoPE base (memory defaults).
	Base memory.Config
	// Queries sampled per block (the same tokens for every policy) [64].
	Queries int
	// TopK most-attended history tokens per query for recall [16].
	TopK int
	// CoverageSample, when positive and smaller than the history, measures
	// the coverage radius on that many evenly spaced history keys per layer
	// and head instead of all of them; the sampled max can then be below
	// the true max, and the logit bound no longer holds strictly.
	// 0 (default): every history key, exact.
	CoverageSample int
	// Horizons are block counts at which metrics are reported [B/4, B/2, B].
	Horizons []int
	// Layers evaluated (nil: all). Policies still run every layer.
	Layers []int
	// Workers for the metric computation [GOMAXPROCS].
	Workers int
	// Seed of the query sampling [0].
	Seed uint64
	// Progress is called after every block.
	Progress func(done, total int)
	// Context stops Run between layers of a block when it is cancelled
	// (nil = never); Run then returns an error wrapping ctx.Err().
	Context context.Context

	// onCoverage, when set (tests), is called for every coverage
	// computation, possibly from several goroutines at once.
	onCoverage func(coverageCase)
}

// Metrics are the attention-level measurements of one policy, layer, head
// and horizon. NaN marks undefined values (e.g. no history yet).
type Metrics struct {
	// RelErr is ‖O_p − O_full‖/‖O_full‖ of the attention output of the
	// sampled queries, averaged over the blocks up to the horizon.
	RelErr float64
	// Dropped is the attention mass FullHistory puts on history tokens the
	// policy does not attend, averaged over queries and blocks.
	Dropped float64
	// Recall is the fraction of each query's TopK most-attended (by
	// FullHistory) history tokens that the policy attends.
	Recall float64
	// CoverMax and CoverMean are the max and mean over every history key
	// (tokens that left the local window; a sample with
	// Options.CoverageSample) of the distance to the nearest history key
	// the policy still attends, at the horizon, measured between keys
	// rotated at temporal position 0 (the bank geometry). By the paper's
	// logit bound, for any query q and any history key k the policy
	// dropped, replacing k by its nearest retained key k′ changes the logit
	// by |q·k − q·k′|/√d_k ≤ ‖q‖·CoverMax/√d_k.
	CoverMax, CoverMean float64
	// RetainedAge is the mean age, in latent frames, of the history tokens
	// the policy still attends at the horizon (age = the block's last frame
	// − the token's frame; NaN when it attends no history).
	RetainedAge float64
}

// BlockStat is one policy's record of one block.
type BlockStat struct {
	RelErr, Dropped, Recall float64 // means over evaluated layers and heads
	Memory                  float64 // mean memory entries per head (Parts.Memory)
	Bytes                   int64
	UpdateSeconds           float64 // reported update time (−1 when unreported)
	Seconds                 float64 // wall time in the policy
}

// Result is the outcome of Run.
type Result struct {
	Layout   memory.Layout
	Base     memory.Config
	Blocks   int
	Horizons []int
	Layers   []int // evaluated layers
	Variants []Variant
	// Cells[v][z][i][h]: metrics of variant v at horizon z, evaluated layer
	// Layers[i], head h.
	Cells [][][][]Metrics
	// PerBlock[v][b]: per-block series.
	PerBlock [][]BlockStat
	// FrameCoverage[v][z][f]: fraction of the tokens of latent frame f still
	// attended at horizon z (mean over evaluated layers and heads); frames
	// that are sink or inside the window at that horizon are NaN.
	FrameCoverage [][][]float64
	// Skipped lists variants that could not be built, with the reason.
	Skipped []string
	// Unmatched counts context rows whose value matched no stream token, per
	// variant (should be 0: policies copy values exactly or in BF16).
	Unmatched []int64
	// Collisions counts stream tokens whose BF16 value row hashed like an
	// earlier token of the same layer and head.
	Collisions int64
	// CoverageSample is Options.CoverageSample: 0 when the coverage radius
	// is exact over every history key.
	CoverageSample int
	// Queries and TopK are the resolved Options.Queries and Options.TopK.
	Queries, TopK int
	Seconds       float64
}

// Mean returns metric f of variant v at horizon z averaged over evaluated
// layers and heads, ignoring NaN (NaN when every cell is NaN).
func (r *Result) Mean(v, z int, f func(Metrics) float64) float64 {
	var s float64
	n := 0
	for _, li := range r.Cells[v][z] {
		for _, m := range li {
			if x := f(m); !math.IsNaN(x) {
				s += x
				n++
			}
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return s / float64(n)
}

// tracker identifies tokens of one evaluated layer and head: BF16 value-row
// hash → global token index (frame·TokensPerFrame + h·Width + w), and the
// key of every token rotated at (0, h, w).
type tracker struct {
	ids   map[uint64]int32
	canon []float32
}

func rowHash(v []float32) uint64 {
	h := uint64(14695981039346656037)
	for _, x := range v {
		h ^= uint64(gemm.RoundBF16(x))
		h *= 1099511628211
	}
	return h
}

type blockCell struct{ relErr, dropped, recall float64 }

type evaluator struct {
	opt      Options
	lay      memory.Layout
	rt       *rope.Table
	layerIdx []int // layer → evaluated index or −1
	trk      [][]*tracker
	nv       int // variants (policies after the reference)
	horizon  map[int]int
	blocks   int
	cells    [][][][]blockCell // [v][b][li][h]
	cover    [][][][][3]float64
	frameCov [][][][]float64 // [v][z][layer·H+head][f]
	unmatch  []int64
	coll     int64
	perBlock [][]BlockStat // [v][b]: costs (OnBlock)
	memSum   [][]float64   // [v][b]: memory entries per head (OnLayer)
	// per-call scratch
	rowIDs [][][]int32 // [policy incl. ref][h][row]
}

// Run evaluates variants against the FullHistory reference on src (from its
// current position) and returns the metrics. Variants whose policy cannot be
// built are skipped and listed in Result.Skipped; identical variants run
// once and share their results.
func Run(src synth.Reader, variants []Variant, opt Options) (*Result, error) {
	start := time.Now()
	opt, layerIdx, err := resolveOptions(src, opt)
	if err != nil {
		return nil, err
	}
	if len(variants) == 0 {
		return nil, errors.New("eval: no variants")
	}
	lay, blocks := src.Layout(), src.Blocks()
	res := &Result{Layout: lay, Base: opt.Base, Blocks: blocks, Horizons: opt.Horizons, Layers: opt.Layers, CoverageSample: opt.CoverageSample,
		Queries: opt.Queries, TopK: opt.TopK}
	policies, vslot, err := buildPolicies(res, variants)
	if err != nil {
		return nil, err
	}
	ev, err := newEvaluator(opt, lay, layerIdx, len(policies)-1, blocks)
	if err != nil {
		return nil, err
	}
	if err := ev.run(src, policies); err != nil {
		return nil, err
	}
	ev.aggregate(res, vslot)
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// resolveOptions fills the defaults of opt for src's layout and length
// (Base resolved, queries, top-k, workers, horizons, layers) and checks
// them; layerIdx maps a layer to its evaluated index or −1.
func resolveOptions(src synth.Reader, opt Options) (_ Options, layerIdx []int, _ error) {
	lay := src.Layout()
	base := opt.Base
	base.Layout = lay
	base, err := base.Resolve()
	if err != nil {
		return opt, nil, fmt.Errorf("eval: base config: %w", err)
	}
	opt.Base = base
	if opt.Queries == 0 {
		opt.Queries = 64
	}
	if opt.TopK == 0 {
		opt.TopK = 16
	}
	if opt.Workers <= 0 {
		opt.Workers = runtime.GOMAXPROCS(0)
	}
	if opt.Queries < 0 || opt.TopK < 0 || opt.CoverageSample < 0 {
		return opt, nil, fmt.Errorf("eval: queries %d, top-k %d, coverage sample %d must be positive", opt.Queries, opt.TopK, opt.CoverageSample)
	}
	blocks := src.Blocks()
	if blocks <= 0 {
		return opt, nil, fmt.Errorf("eval: stream has %d blocks; a known positive length is needed", blocks)
	}
	if len(opt.Horizons) == 0 {
		opt.Horizons = uniqueSorted([]int{max(1, blocks/4), max(1, blocks/2), blocks})
	}
	for _, h := range opt.Horizons {
		if h < 1 || h > blocks {
			return opt, nil, fmt.Errorf("eval: horizon %d outside 1…%d blocks", h, blocks)
		}
	}
	opt.Horizons = uniqueSorted(opt.Horizons)
	if opt.Layers == nil {
		for l := 0; l < lay.Layers; l++ {
			opt.Layers = append(opt.Layers, l)
		}
	}
	layerIdx = make([]int, lay.Layers)
	for i := range layerIdx {
		layerIdx[i] = -1
	}
	for i, l := range opt.Layers {
		if l < 0 || l >= lay.Layers || layerIdx[l] >= 0 {
			return opt, nil, fmt.Errorf("eval: evaluated layer %d invalid or repeated (layers %d)", l, lay.Layers)
		}
		layerIdx[l] = i
	}
	return opt, layerIdx, nil
}

// buildPolicies builds the FullHistory reference (policies[0]) and one
// policy per distinct variant; it sets res.Variants to the variants kept
// and res.Skipped to the others, and returns for each kept variant its
// policy index − 1.
func buildPolicies(res *Result, variants []Variant) (policies []memory.Policy, vslot []int, _ error) {
	ref, err := memory.New(memory.NameFullHistory, res.Base)
	if err != nil {
		return nil, nil, fmt.Errorf("eval: reference: %w", err)
	}
	type key struct {
		policy string
		cfg    memory.Config
	}
	slot := map[key]int{}
	policies = []memory.Policy{ref}
	var kept []Variant
	for _, v := range variants {
		v.Config.Layout = res.Layout
		rc, err := v.Config.Resolve()
		if err != nil {
			res.Skipped = append(res.Skipped, fmt.Sprintf("%s/%s: %v", v.Group, v.Label, err))
			continue
		}
		k := key{v.Policy, rc}
		if s, ok := slot[k]; ok {
			kept = append(kept, v)
			vslot = append(vslot, s)
			continue
		}
		p, err := memory.New(v.Policy, v.Config)
		if err != nil {
			res.Skipped = append(res.Skipped, fmt.Sprintf("%s/%s: %v", v.Group, v.Label, err))
			continue
		}
		slot[k] = len(policies) - 1
		kept = append(kept, v)
		vslot = append(vslot, len(policies)-1)
		policies = append(policies, p)
	}
	if len(kept) == 0 {
		return nil, nil, fmt.Errorf("eval: no variant could be built: %v", res.Skipped)
	}
	res.Variants = kept
	return policies, vslot, nil
}

// newEvaluator allocates the per-variant accumulators of nv policies
// (after the reference) over blocks blocks.
func newEvaluator(opt Options, lay memory.Layout, layerIdx []int, nv, blocks int) (*evaluator, error) {
	ev := &evaluator{opt: opt, lay: lay, layerIdx: layerIdx, nv: nv, blocks: blocks, horizon: map[int]int{}}
	var err error
	if ev.rt, err = rope.New(lay.HeadDim, opt.Base.RoPETheta); err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	for z, h := range opt.Horizons {
		ev.horizon[h-1] = z
	}
	nl, H := len(opt.Layers), lay.Heads
	ev.trk = make([][]*tracker, nl)
	for i := range ev.trk {
		ev.trk[i] = make([]*tracker, H)
		for h := range ev.trk[i] {
			ev.trk[i][h] = &tracker{ids: map[uint64]int32{}}
		}
	}
	frames := blocks * lay.FramesPerBlock
	ev.cells = make([][][][]blockCell, nv)
	ev.cover = make([][][][][3]float64, nv)
	ev.frameCov = make([][][][]float64, nv)
	ev.unmatch = make([]int64, nv)
	ev.perBlock = make([][]BlockStat, nv)
	ev.memSum = make([][]float64, nv)
	for v := range ev.cells {
		ev.cells[v] = make([][][]blockCell, blocks)
		for b := range ev.cells[v] {
			ev.cells[v][b] = make([][]blockCell, nl)
			for i := range ev.cells[v][b] {
				ev.cells[v][b][i] = make([]blockCell, H)
				for h := range ev.cells[v][b][i] {
					ev.cells[v][b][i][h] = blockCell{math.NaN(), math.NaN(), math.NaN()}
				}
			}
		}
		ev.cover[v] = make([][][][3]float64, len(opt.Horizons))
		ev.frameCov[v] = make([][][]float64, len(opt.Horizons))
		for z := range ev.cover[v] {
			ev.cover[v][z] = make([][][3]float64, nl)
			for i := range ev.cover[v][z] {
				ev.cover[v][z][i] = make([][3]float64, H)
			}
			ev.frameCov[v][z] = make([][]float64, nl*H)
			for i := range ev.frameCov[v][z] {
				ev.frameCov[v][z][i] = make([]float64, frames)
			}
		}
		ev.perBlock[v] = make([]BlockStat, blocks)
		ev.memSum[v] = make([]float64, blocks)
	}
	return ev, nil
}

// run drives the reference and the policies over src (package sim),
// observing every layer of every clean pass and recording each policy's
// memory entries and costs per block.
func (ev *evaluator) run(src synth.Reader, policies []memory.Policy) error {
	observe := ev.observe
	if ctx := ev.opt.Context; ctx != nil {
		observe = func(view sim.LayerView) error {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("stopped: %w", err)
			}
			return ev.observe(view)
		}
	}
	_, err := sim.Run(src, policies, sim.Options{
		MaxBlocks:    ev.blocks,
		ObserveLayer: observe,
		OnLayer: func(r sim.LayerRecord) error {
			if r.Policy > 0 {
				ev.memSum[r.Policy-1][r.Block] += float64(r.Parts.Memory) / float64(ev.lay.Layers)
			}
			return nil
		},
		OnBlock: func(r sim.BlockRecord) error {
			if r.Policy > 0 {
				ev.perBlock[r.Policy-1][r.Block] = BlockStat{Bytes: r.Bytes, UpdateSeconds: r.UpdateSeconds, Seconds: r.Seconds}
			}
			return nil
		},
		Progress: ev.opt.Progress,
	})
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	return nil
}

// aggregate fills res's cells, per-block series, frame coverage and
// counts for each kept variant (vslot: its policy index − 1).
func (ev *evaluator) aggregate(res *Result, vslot []int) {
	opt, blocks := ev.opt, ev.blocks
	nl, H := len(opt.Layers), ev.lay.Heads
	frames := blocks * ev.lay.FramesPerBlock
	nz := len(opt.Horizons)
	kept := res.Variants
	res.Cells = make([][][][]Metrics, len(kept))
	res.PerBlock = make([][]BlockStat, len(kept))
	res.FrameCoverage = make([][][]float64, len(kept))
	res.Unmatched = make([]int64, len(kept))
	for vi := range kept {
		p := vslot[vi]
		res.Unmatched[vi] = ev.unmatch[p]
		res.PerBlock[vi] = make([]BlockStat, blocks)
		for b := range res.PerBlock[vi] {
			s := ev.perBlock[p][b]
			s.RelErr, s.Dropped, s.Recall = ev.blockMean(p, b)
			s.Memory = ev.memSum[p][b]
			res.PerBlock[vi][b] = s
		}
		res.Cells[vi] = make([][][]Metrics, nz)
		res.FrameCoverage[vi] = make([][]float64, nz)
		for z, hz := range opt.Horizons {
			res.Cells[vi][z] = make([][]Metrics, nl)
			for i := 0; i < nl; i++ {
				res.Cells[vi][z][i] = make([]Metrics, H)
				for h := 0; h < H; h++ {
					var m Metrics
					m.RelErr = meanOver(hz, func(b int) float64 { return ev.cells[p][b][i][h].relErr })
					m.Dropped = meanOver(hz, func(b int) float64 { return ev.cells[p][b][i][h].dropped })
					m.Recall = meanOver(hz, func(b int) float64 { return ev.cells[p][b][i][h].recall })
					c := ev.cover[p][z][i][h]
					m.CoverMax, m.CoverMean, m.RetainedAge = c[0], c[1], c[2]
					res.Cells[vi][z][i][h] = m
				}
			}
			res.FrameCoverage[vi][z] = ev.frameCoverage(p, z, hz, frames)
		}
	}
	res.Collisions = ev.coll
}

// frameCoverage is policy p's coverage of every frame at horizon z (hz
// blocks), the mean over evaluated layers and heads; sink frames and
// frames inside the window are NaN.
func (ev *evaluator) frameCoverage(p, z, hz, frames int) []float64 {
	nl, H := len(ev.opt.Layers), ev.lay.Heads
	fc := make([]float64, frames)
	ws := ev.windowStart(hz - 1)
	for f := range fc {
		if f < ev.opt.Base.SinkFrames || f >= ws {
			fc[f] = math.NaN()
			continue
		}
		for _, c := range ev.frameCov[p][z] {
			fc[f] += c[f]
		}
		fc[f] /= float64(nl * H)
	}
	return fc
}

func uniqueSorted(x []int) []int {
	x = append([]int(nil), x...)
	sort.Ints(x)
	out := x[:0]
	for i, v := range x {
		if i == 0 || v != x[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func meanOver(n int, f func(b int) float64) float64 {
	var s float64
	c := 0
	for b := 0; b < n; b++ {
		if x := f(b); !math.IsNaN(x) {
			s += x
			c++
		}
	}
	if c == 0 {
		return math.NaN()
	}
	return s / float64(c)
}

func (ev *evaluator) blockMean(p, b int) (relErr, dropped, recall float64) {
	var s [3]float64
	var c [3]int
	for _, li := range ev.cells[p][b] {
		for _, m := range li {
			for k, x := range [3]float64{m.relErr, m.dropped, m.recall} {
				if !math.IsNaN(x) {
					s[k] += x
					c[k]++
				}
			}
		}
	}
	out := [3]float64{}
	for k := range out {
		out[k] = math.NaN()
		if c[k] > 0 {
			out[k] = s[k] / float64(c[k])
		}
	}
	return out[0], out[1], out[2]
}

// windowStart is the first latent frame of the local window of block b;
// non-sink frames before it are history.
func (ev *evaluator) windowStart(b int) int {
	F := ev.lay.FramesPerBlock
	return max(ev.opt.Base.SinkFrames, b*F+F-ev.opt.Base.WindowFrames)
}

// observe is the sim observer: it registers the block's tokens and computes
// every metric of one layer.
func (ev *evaluator) observe(view sim.LayerView) error {
	li := ev.layerIdx[view.Layer]
	if li < 0 {
		return nil
	}
	lay := ev.lay
	H, D, T := lay.Heads, lay.HeadDim, lay.TokensPerBlock()
	b := view.Block
	// Register the block's tokens in every head.
	ang := make([]float64, D) // RotateHead scratch
	for h := 0; h < H; h++ {
		tr := ev.trk[li][h]
		for t := 0; t < T; t++ {
			id := int32(b*T + t)
			off := (t*H + h) * D
			hv := rowHash(view.V[off : off+D])
			if _, dup := tr.ids[hv]; dup {
				ev.coll++
			} else {
				tr.ids[hv] = id
			}
			n := len(tr.canon)
			tr.canon = append(tr.canon, view.K[off:off+D]...)
			p := t % lay.TokensPerFrame()
			ev.rt.RotateHead(tr.canon[n:n+D], rope.Pos{T: 0, H: p / lay.Width, W: p % lay.Width}, ang)
		}
	}
	// Identify the rows of every context.
	np := len(view.Contexts)
	if ev.rowIDs == nil {
		ev.rowIDs = make([][][]int32, np)
		for i := range ev.rowIDs {
			ev.rowIDs[i] = make([][]int32, H)
		}
	}
	for pi, c := range view.Contexts {
		S := c.Parts.Total()
		for h := 0; h < H; h++ {
			tr := ev.trk[li][h]
			ids := ev.rowIDs[pi][h][:0]
			for j := 0; j < S; j++ {
				if padded(c, h, j) {
					ids = append(ids, -1)
					continue
				}
				off := (j*H + h) * D
				id, ok := tr.ids[rowHash(c.V[off:off+D])]
				if !ok {
					id = -1
					if pi > 0 {
						ev.unmatch[pi-1]++
					}
				}
				ids = append(ids, id)
			}
			ev.rowIDs[pi][h] = ids
		}
	}
	// Sampled queries (the same tokens for every policy).
	nq := min(ev.opt.Queries, T)
	r := rand.New(rand.NewPCG(ev.opt.Seed, uint64(b)))
	qs := r.Perm(T)[:nq]
	sort.Ints(qs)
	z, atHorizon := ev.horizon[b]

	var wg sync.WaitGroup
	work := make(chan int)
	for w := 0; w < min(ev.opt.Workers, H); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for h := range work {
				ev.head(view, li, h, qs)
				if atHorizon {
					ev.coverage(view, li, h, z)
				}
			}
		}()
	}
	for h := 0; h < H; h++ {
		work <- h
	}
	close(work)
	wg.Wait()
	return nil
}

// padded reports whether row j of head h is padding (ragged per-head memory).
func padded(c memory.Context, h, j int) bool {
	if c.HeadMemory == nil {
		return false
	}
	m := j - c.Parts.Sink
	return m >= c.HeadMemory[h] && m < c.Parts.Memory
}

func gatherQ(dst, q []float32, qs []int, H, h, D int) []float32 {
	dst = dst[:0]
	for _, t := range qs {
		off := (t*H + h) * D
		dst = append(dst, q[off:off+D]...)
	}
	return dst
}

// head computes fidelity, dropped mass and recall of every policy for head h.
func (ev *evaluator) head(view sim.LayerView, li, h int, qs []int) {
	lay := ev.lay
	H, D := lay.Heads, lay.HeadDim
	nq := len(qs)
	b := view.Block
	tpf := lay.TokensPerFrame()
	sinkEnd, histEnd := int32(ev.opt.Base.SinkFrames*tpf), int32(ev.windowStart(b)*tpf)
	isHist := func(id int32) bool { return id >= sinkEnd && id < histEnd }

	ref := view.Contexts[0]
	refIDs := ev.rowIDs[0][h]
	S0 := ref.Parts.Total()
	qf := gatherQ(make([]float32, 0, nq*D), ref.Q, qs, H, h, D)
	wf := make([]float32, nq*S0)
	of := make([]float32, nq*D)
	Attend(qf, nq, D, ref.K[h*D:], ref.V[h*D:], H*D, S0, nil, wf, of)
	hasHist := histEnd > sinkEnd
	// Each query's TopK most-attended history rows of the reference.
	var tops [][]int
	if hasHist {
		tops = make([][]int, nq)
		eligible := func(j int) bool { return refIDs[j] >= 0 && isHist(refIDs[j]) }
		for i := range tops {
			tops[i] = TopK(nil, wf[i*S0:(i+1)*S0], ev.opt.TopK, eligible)
		}
	}
	kept := make([]bool, b*lay.TokensPerBlock()+lay.TokensPerBlock())
	var qp, wp, op []float32
	for pi := 1; pi < len(view.Contexts); pi++ {
		c := view.Contexts[pi]
		S := c.Parts.Total()
		qp = gatherQ(qp, c.Q, qs, H, h, D)
		wp = grow(wp, nq*S)
		op = grow(op, nq*D)
		var skip func(int) bool
		if c.HeadMemory != nil {
			skip = func(j int) bool { return padded(c, h, j) }
		}
		Attend(qp, nq, D, c.K[h*D:], c.V[h*D:], H*D, S, skip, wp, op)
		cell := blockCell{relErr: RelL2(op, of), dropped: math.NaN(), recall: math.NaN()}
		if hasHist {
			clear(kept)
			for _, id := range ev.rowIDs[pi][h] {
				if id >= 0 {
					kept[id] = true
				}
			}
			var drop, rec float64
			nrec := 0
			for i := 0; i < nq; i++ {
				w := wf[i*S0 : (i+1)*S0]
				for j, id := range refIDs {
					if id >= 0 && isHist(id) && !kept[id] {
						drop += float64(w[j])
					}
				}
				if r := recallOf(tops[i], func(j int) bool { return kept[refIDs[j]] }); !math.IsNaN(r) {
					rec += r
					nrec++
				}
			}
			cell.dropped = drop / float64(nq)
			if nrec > 0 {
				cell.recall = rec / float64(nrec)
			}
		}
		ev.cells[pi-1][b][li][h] = cell
	}
}

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// coverage computes the coverage radius and per-frame coverage of every
// policy for head h at horizon z (the current block). The radius is exact
// over every history key (NearestRetained) unless Options.CoverageSample
// asks for an evenly spaced sample; policies that attend the same history
// tokens share one computation.
func (ev *evaluator) coverage(view sim.LayerView, li, h, z int) {
	lay := ev.lay
	D, tpf := lay.HeadDim, lay.TokensPerFrame()
	tr := ev.trk[li][h]
	lo, hi := ev.opt.Base.SinkFrames*tpf, ev.windowStart(view.Block)*tpf
	nh := hi - lo
	if nh <= 0 {
		for v := 0; v < ev.nv; v++ {
			ev.cover[v][z][li][h] = [3]float64{math.NaN(), math.NaN(), math.NaN()}
		}
		return
	}
	// The measured history keys: all of them, or an evenly spaced sample.
	ns := nh
	if s := ev.opt.CoverageSample; s > 0 && s < nh {
		ns = s
	}
	sample := make([]int32, ns)
	for i := range sample {
		sample[i] = int32(lo + int(int64(i)*int64(nh)/int64(ns)))
	}
	kept := make([]bool, len(tr.canon)/D)
	type radius struct {
		ids       []int32
		mx, mean  float64
		retainedN int
	}
	var done []radius // distinct retained sets measured so far
	var x, rk []float32
	var ids []int32
	for pi := 1; pi < len(view.Contexts); pi++ {
		clear(kept)
		ids = ids[:0]
		for _, id := range ev.rowIDs[pi][h] {
			if id >= int32(lo) && id < int32(hi) && !kept[id] {
				kept[id] = true
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		var mx, mean float64
		cached := false
		for _, d := range done {
			if slices.Equal(d.ids, ids) {
				mx, mean, cached = d.mx, d.mean, true
				break
			}
		}
		if !cached {
			rk = rk[:0]
			for _, id := range ids {
				rk = append(rk, tr.canon[int(id)*D:int(id+1)*D]...)
			}
			x = x[:0]
			for _, id := range sample {
				if !kept[id] {
					x = append(x, tr.canon[int(id)*D:int(id+1)*D]...)
				}
			}
			mx, mean = CoverageRadius(x, len(x)/D, rk, len(rk)/D, D)
			// Kept keys have distance 0.
			mean *= float64(len(x)/D) / float64(ns)
			if len(x) == 0 {
				mx, mean = 0, 0
			}
			done = append(done, radius{ids: slices.Clone(ids), mx: mx, mean: mean})
		}
		if ev.opt.onCoverage != nil {
			ev.opt.onCoverage(coverageCase{layer: li, head: h, horizon: z, policy: pi - 1, canon: tr.canon, lo: lo, hi: hi,
				kept: slices.Clone(kept), max: mx, mean: mean})
		}
		age := math.NaN()
		if nk := len(ids); nk > 0 {
			last := view.Block*lay.FramesPerBlock + lay.FramesPerBlock - 1
			var sum float64
			for id := lo; id < hi; id++ {
				if kept[id] {
					sum += float64(last - id/tpf)
				}
			}
			age = sum / float64(nk)
		}
		ev.cover[pi-1][z][li][h] = [3]float64{mx, mean, age}
		fc := ev.frameCov[pi-1][z][li*lay.Heads+h]
		for f := lo / tpf; f < hi/tpf; f++ {
			n := 0
			for _, k := range kept[f*tpf : (f+1)*tpf] {
				if k {
					n++
				}
			}
			fc[f] = float64(n) / float64(tpf)
		}
	}
}

// coverageCase is what the test hook Options.onCoverage sees of one
// coverage computation: the evaluated layer index, head, horizon index and
// policy (distinct-policy index), the canonical keys of every token so far
// ([token][D], rotated at t = 0), the history range [lo, hi) of token
// indices, which tokens the policy attends, and the reported radius.
type coverageCase struct {
	layer, head, horizon, policy int
	canon                        []float32
	lo, hi                       int
	kept                         []bool
	max, mean                    float64
}
