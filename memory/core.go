package memory

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/densitykv/densitykv/internal/finite"
	"github.com/densitykv/densitykv/rope"
)

// Stats is the per-call record a policy keeps for logging (see
// StatsReporter). Slices are indexed by layer; Occupancy by [layer][head].
// The record is replaced by every Begin and completed by End.
type Stats struct {
	Policy string
	Block  int
	Step   int
	Clean  bool
	First  bool
	// Parts counts the attention keys of this call per layer.
	Parts []Parts
	// Occupancy is the number of historical memory entries per layer and
	// head (bank entries, selected or retrieved tokens) read by this call.
	Occupancy [][]int
	// Offered counts the candidate tokens per head offered to the memory in
	// this call per layer (0 when nothing left the window).
	Offered []int
	// Admitted counts the tokens per head admitted to the memory in this call
	// per layer (the largest over heads when heads differ).
	Admitted []int
	// EvictedMandatory and EvictedCapacity count, per layer and summed over
	// heads, the entries evicted by the growth bound and for capacity.
	EvictedMandatory []int
	EvictedCapacity  []int
	// UpdateSeconds is the wall time spent updating the memory in this call
	// (bank updates, compression, retrieval), excluding context assembly.
	UpdateSeconds float64
	// Bytes is the live persistent state after the call (Policy.Bytes).
	Bytes int64
}

// StatsReporter is implemented by every policy of this package.
type StatsReporter interface {
	// LastStats returns a copy of the record of the latest call.
	LastStats() Stats
}

// core holds what every policy shares: the call protocol, validation, the
// RoPE rotator, the clean-pass staging buffers and the context buffers.
type core struct {
	name string
	cfg  Config
	lay  Layout
	rot  *rope.Rotator

	tpf, tokens, row int // tokens per frame, per block; H·D floats per token

	open      bool
	call      Call
	layer     int
	started   int // blocks begun (the next first call must be block started)
	committed int // blocks whose clean pass ended

	// pend are the clean pass's frames, filled layer by layer during
	// Attend (stage) and committed at End; pendQ its queries per layer and
	// frame (Deep Forcing)
	// (Deep Forcing).
	pend  []*frame
	pendQ [][][]float32
	// compactFrames: stage holds frames whose values are all bfloat16 as
	// bfloat16 (windowed policies).
	compactFrames bool

	rec recacheState // an open recache (Recacher)

	kbuf, vbuf, qbuf []float32
	jobs             []ctxJob
	// planning: the context being laid out is a Plan's (AttendPlan): the
	// current block's frames become segments, the rest history.
	planning bool
	segs     []Segment
	hist     HistoryKey // the history's key (Planner)
	ctxLen   int
	stats    Stats
	updStart time.Time
}

func newCore(name string, cfg Config) (*core, error) {
	rt, err := rope.New(cfg.Layout.HeadDim, cfg.RoPETheta)
	if err != nil {
		return nil, fmt.Errorf("memory: %s: %w", name, err)
	}
	l := cfg.Layout
	c := &core{name: name, cfg: cfg, lay: l, rot: rt.NewRotator(l.Height, l.Width),
		tpf: l.TokensPerFrame(), tokens: l.TokensPerBlock(), row: l.Heads * l.HeadDim}
	c.pendQ = make([][][]float32, l.Layers)
	c.newHistory()
	return c, nil
}

// Name returns the policy name.
func (c *core) Name() string { return c.name }

// blocksCommitted returns the blocks whose clean pass ended.
func (c *core) blocksCommitted() int { return c.committed }

// Layout returns the policy's layout.
func (c *core) Layout() Layout { return c.lay }

// Config returns the resolved configuration the policy was built with.
func (c *core) Config() Config { return c.cfg }

// LastStats returns a copy of the record of the latest call.
func (c *core) LastStats() Stats {
	s := c.stats
	s.Parts = append([]Parts(nil), s.Parts...)
	s.Offered = append([]int(nil), s.Offered...)
	s.Admitted = append([]int(nil), s.Admitted...)
	s.EvictedMandatory = append([]int(nil), s.EvictedMandatory...)
	s.EvictedCapacity = append([]int(nil), s.EvictedCapacity...)
	s.Occupancy = make([][]int, len(c.stats.Occupancy))
	for i, o := range c.stats.Occupancy {
		s.Occupancy[i] = append([]int(nil), o...)
	}
	return s
}

// checkBegin validates call c against the protocol without changing state.
func (c *core) checkBegin(call Call) error {
	if c.open {
		return fmt.Errorf("memory: %s: begin block %d: call for block %d is still open (%d of %d layers attended)", c.name, call.Block, c.call.Block, c.layer, c.lay.Layers)
	}
	if c.rec.open {
		return fmt.Errorf("memory: %s: begin block %d: a recache is open (%d of %d layers attended)", c.name, call.Block, c.rec.layer, c.lay.Layers)
	}
	if call.Block < 0 || call.Step < 0 {
		return fmt.Errorf("memory: %s: begin: block %d step %d must be non-negative", c.name, call.Block, call.Step)
	}
	if call.First {
		if call.Block != c.started {
			return fmt.Errorf("memory: %s: begin: first call of block %d, want block %d", c.name, call.Block, c.started)
		}
		if c.committed != c.started {
			return fmt.Errorf("memory: %s: begin block %d: block %d has no clean pass", c.name, call.Block, c.started-1)
		}
	} else {
		if call.Block != c.started-1 || c.started == 0 {
			return fmt.Errorf("memory: %s: begin: block %d has not been begun with a first call (next first block %d)", c.name, call.Block, c.started)
		}
		if c.committed == c.started {
			return fmt.Errorf("memory: %s: begin: block %d is already committed by its clean pass", c.name, call.Block)
		}
	}
	if call.Latent != nil && len(call.Latent)%c.lay.FramesPerBlock != 0 {
		return fmt.Errorf("memory: %s: begin block %d: latent has %d values, not a multiple of %d frames", c.name, call.Block, len(call.Latent), c.lay.FramesPerBlock)
	}
	if i := finite.First(call.Latent); i >= 0 {
		return fmt.Errorf("memory: %s: begin block %d: latent has %v at index %d", c.name, call.Block, call.Latent[i], i)
	}
	return nil
}

// openCall records an accepted Begin and resets the stats record.
func (c *core) openCall(call Call) {
	c.open, c.call, c.layer = true, call, 0
	if call.First {
		c.started++
		c.newHistory() // the window moves, the memory takes frames
	}
	c.pend = nil
	if call.Clean {
		F := c.lay.FramesPerBlock
		c.pend = make([]*frame, F)
		for f := range c.pend {
			c.pend[f] = newFrame(call.Block*F+f, c.lay.Layers)
		}
	}
	L := c.lay.Layers
	c.stats = Stats{Policy: c.name, Block: call.Block, Step: call.Step, Clean: call.Clean, First: call.First,
		Parts: make([]Parts, L), Occupancy: make([][]int, L), Offered: make([]int, L), Admitted: make([]int, L),
		EvictedMandatory: make([]int, L), EvictedCapacity: make([]int, L)}
	for l := range c.stats.Occupancy {
		c.stats.Occupancy[l] = make([]int, c.lay.Heads)
	}
}

// checkAttend validates one Attend call.
func (c *core) checkAttend(layer int, q, k, v []float32) error {
	if !c.open {
		return fmt.Errorf("memory: %s: attend layer %d: no open call (Begin first)", c.name, layer)
	}
	if layer != c.layer || layer >= c.lay.Layers {
		return fmt.Errorf("memory: %s: block %d step %d: attend layer %d, want layer %d of %d", c.name, c.call.Block, c.call.Step, layer, c.layer, c.lay.Layers)
	}
	want := c.tokens * c.row
	in := [3]struct {
		n string
		x []float32
	}{{"q", q}, {"k", k}, {"v", v}}
	for _, t := range in {
		if len(t.x) != want {
			return fmt.Errorf("memory: %s: block %d layer %d: %s has %d values, want %d tokens × %d heads × %d", c.name, c.call.Block, layer, t.n, len(t.x), c.tokens, c.lay.Heads, c.lay.HeadDim)
		}
	}
	var bad [3]int
	if want >= 1<<18 && runtime.GOMAXPROCS(0) > 1 {
		var wg sync.WaitGroup
		for i := range in {
			wg.Go(func() { bad[i] = finite.First(in[i].x) })
		}
		wg.Wait()
	} else {
		for i := range in {
			bad[i] = finite.First(in[i].x)
		}
	}
	for i, t := range in {
		if j := bad[i]; j >= 0 {
			tok, rem := j/c.row, j%c.row
			return fmt.Errorf("memory: %s: block %d layer %d: %s has %v at token %d head %d dim %d", c.name, c.call.Block, layer, t.n, t.x[j], tok, rem/c.lay.HeadDim, rem%c.lay.HeadDim)
		}
	}
	return nil
}

// stage copies the clean pass's k, v (and q when keepQ) of one layer into
// the block's pending frames (as bfloat16 where compactFrames allows it
// without loss).
func (c *core) stage(layer int, q, k, v []float32, keepQ bool) {
	if !c.call.Clean {
		return
	}
	n := c.tpf * c.row
	for f, fr := range c.pend {
		kf := append([]float32(nil), k[f*n:(f+1)*n]...)
		vf := append([]float32(nil), v[f*n:(f+1)*n]...)
		if c.compactFrames {
			fr.K[layer], fr.V[layer] = compact(kf), compact(vf)
		} else {
			fr.K[layer], fr.V[layer] = f32Tensor(kf), f32Tensor(vf)
		}
	}
	if keepQ {
		c.pendQ[layer] = make([][]float32, len(c.pend))
		for f := range c.pend {
			c.pendQ[layer][f] = append([]float32(nil), q[f*n:(f+1)*n]...)
		}
	}
}

// checkEnd validates End.
func (c *core) checkEnd() error {
	if !c.open {
		return fmt.Errorf("memory: %s: end: no open call", c.name)
	}
	if c.layer != c.lay.Layers {
		return fmt.Errorf("memory: %s: end block %d step %d: %d of %d layers attended", c.name, c.call.Block, c.call.Step, c.layer, c.lay.Layers)
	}
	return nil
}

// closeCall finishes End.
func (c *core) closeCall(bytes int64) {
	if c.call.Clean {
		c.committed++
		c.newHistory() // the block's frames are history now
	}
	c.open = false
	c.stats.Bytes = bytes
}

// stagedFrames hands over the clean pass's frames (End).
func (c *core) stagedFrames() []*frame {
	out := c.pend
	c.pend = nil
	return out
}

// frameSlot returns the slot (RoPE temporal position) of frame f in a rolling
// cache of CacheFrames frames after frames [0, end) have been written: the
// absolute index before the cache is full, then block-relative.
func (c *core) frameSlot(f, end int) int {
	if end <= c.cfg.CacheFrames || f < c.cfg.SinkFrames {
		return f
	}
	return f - (end - c.cfg.CacheFrames)
}

// ctxReset starts a new context (a Plan's when planning).
func (c *core) ctxReset() {
	c.jobs = c.jobs[:0]
	c.ctxLen = 0
	c.segs = nil
}

// ctxFrame schedules k/v (a whole frame when t ≥ 0, rotated at temporal
// position t and the native spatial grid; any rows when t < 0) to be
// appended to the context. The copies and rotations run in queries.
func (c *core) ctxFrame(k, v tensor, t int) {
	c.addJobs(ctxJob{off: c.ctxLen, n: k.len(), k: k, v: v, t: t})
	c.ctxLen += k.len()
	c.histSeg(k.len() / c.row)
}

// ctxCurrent appends the current block's frame f of k, v ([T][H][D]) to
// the context, its keys rotated at temporal position t: a copy scheduled
// like ctxFrame's, or, when planning, the Plan's segment (k and v are
// then not read, and may be nil).
func (c *core) ctxCurrent(k, v []float32, f, t int) {
	if c.planning {
		c.segs = append(c.segs, Segment{Frame: f, T: t, Rows: c.tpf})
		return
	}
	n := c.tpf * c.row
	c.ctxFrame(f32Tensor(k[f*n:(f+1)*n]), f32Tensor(v[f*n:(f+1)*n]), t)
}

// histSeg records rows rows of history in a Plan's segments.
func (c *core) histSeg(rows int) {
	if !c.planning || rows == 0 {
		return
	}
	if n := len(c.segs); n > 0 && c.segs[n-1].Frame == SegHistory {
		c.segs[n-1].Rows += rows
		return
	}
	c.segs = append(c.segs, Segment{Frame: SegHistory, Rows: rows})
}

// ctxDevice appends, when planning, rows rows that d writes on the
// device (a Plan's SegDevice segment); not part of the history.
func (c *core) ctxDevice(rows int, d DeviceRows) {
	c.segs = append(c.segs, Segment{Frame: SegDevice, Rows: rows, Device: d})
}

// ctxFill schedules rows memory rows to be appended to the context by fill,
// which writes rows [r0, r1) of keys (rotated as they are to be read) and
// values to dk and dv ([r1−r0][H][D] each), in jobs of unit rows (0:
// chunkTokens).
func (c *core) ctxFill(rows, unit int, fill func(dk, dv []float32, r0, r1 int) error) {
	c.addJobs(ctxJob{off: c.ctxLen, n: rows * c.row, fill: fill, t: -1, unit: unit})
	c.ctxLen += rows * c.row
	c.histSeg(rows)
}

// ctxJob copies k (and v) to offset off of the context (or q to the query
// buffer), or runs fill there, and rotates the copied keys when t ≥ 0; p0
// is the in-frame index of the first token (r0 the first memory row for
// fill). n counts the values.
type ctxJob struct {
	off, n int
	k, v   tensor
	fill   func(dk, dv []float32, r0, r1 int) error
	r0     int
	unit   int // rows per job (0: chunkTokens)
	t      int
	p0     int
	q      bool
}

// chunkTokens is the parallel work unit.
const chunkTokens = 256

// addJobs splits j into chunks of chunkTokens tokens (j.unit for a fill).
func (c *core) addJobs(j ctxJob) {
	step := chunkTokens * c.row
	if j.unit > 0 {
		step = j.unit * c.row
	}
	for o := 0; o < j.n; o += step {
		e := min(o+step, j.n)
		cj := j
		cj.off, cj.n, cj.p0, cj.r0 = j.off+o, e-o, j.p0+o/c.row, j.r0+o/c.row
		if j.fill == nil {
			cj.k = j.k.rows(o, e, 1)
			if j.v.len() > 0 {
				cj.v = j.v.rows(o, e, 1)
			}
		}
		c.jobs = append(c.jobs, cj)
	}
}

// queries schedules the current block's q at per-frame temporal positions
// ts, then runs every scheduled copy, fill and rotation (in parallel when
// the work is large; the result does not depend on the thread count) and
// returns the rotated queries. The context is c.kbuf, c.vbuf afterwards.
// An error is a fill's (the first in context order).
func (c *core) queries(q []float32, ts []int) ([]float32, error) {
	n := c.tpf * c.row
	for f, t := range ts {
		c.addJobs(ctxJob{off: f * n, n: n, k: f32Tensor(q[f*n : (f+1)*n]), t: t, q: true})
	}
	c.kbuf = grow(c.kbuf, c.ctxLen)
	c.vbuf = grow(c.vbuf, c.ctxLen)
	c.qbuf = grow(c.qbuf, len(q))
	for _, j := range c.jobs {
		if j.t >= 0 {
			c.rot.Prepare(j.t) // grow the tables before going parallel
		}
	}
	workers := 1
	if c.ctxLen+len(q) >= 1<<20 {
		workers = min(runtime.GOMAXPROCS(0), len(c.jobs))
	}
	errs := make([]error, len(c.jobs))
	var next atomic.Int64
	run := func() {
		for {
			i := int(next.Add(1)) - 1
			if i >= len(c.jobs) {
				return
			}
			errs[i] = c.runJob(c.jobs[i])
		}
	}
	if workers <= 1 {
		run()
	} else {
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Go(run)
		}
		wg.Wait()
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return c.qbuf, nil
}

func (c *core) runJob(j ctxJob) error {
	dst := c.kbuf
	if j.q {
		dst = c.qbuf
	}
	dst = dst[j.off : j.off+j.n]
	if j.fill != nil {
		return j.fill(dst, c.vbuf[j.off:j.off+j.n], j.r0, j.r0+j.n/c.row)
	}
	j.k.into(dst)
	if j.v.len() > 0 {
		j.v.into(c.vbuf[j.off : j.off+j.n])
	}
	if j.t < 0 {
		return nil
	}
	for i := 0; i < j.n/c.row; i++ {
		p := j.p0 + i
		c.rot.Token(dst[i*c.row:(i+1)*c.row], c.lay.Heads, j.t, p/c.lay.Width, p%c.lay.Width)
	}
	return nil
}

func (c *core) startUpdate() { c.updStart = time.Now() }
func (c *core) stopUpdate()  { c.stats.UpdateSeconds += time.Since(c.updStart).Seconds() }
