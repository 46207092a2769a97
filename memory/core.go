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

// frame is one latent frame's clean K/V in every layer: k[l] and v[l] are
// [TokensPerFrame][Heads][HeadDim]. Whether k is RoPE-rotated depends on
// the policy that owns it.
type frame struct {
	ID   int
	K, V [][]float32
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

	pendK, pendV, pendQ [][]float32 // clean-pass copies per layer, committed at End

	rec recacheState // an open recache (Recacher)

	kbuf, vbuf, qbuf []float32
	jobs             []ctxJob
	ctxLen           int
	stats            Stats
	updStart         time.Time
}

func newCore(name string, cfg Config) (*core, error) {
	rt, err := rope.New(cfg.Layout.HeadDim, cfg.RoPETheta)
	if err != nil {
		return nil, fmt.Errorf("memory: %s: %w", name, err)
	}
	l := cfg.Layout
	c := &core{name: name, cfg: cfg, lay: l, rot: rt.NewRotator(l.Height, l.Width),
		tpf: l.TokensPerFrame(), tokens: l.TokensPerBlock(), row: l.Heads * l.HeadDim}
	c.pendK = make([][]float32, l.Layers)
	c.pendV = make([][]float32, l.Layers)
	c.pendQ = make([][]float32, l.Layers)
	return c, nil
}

// Name returns the policy name.
func (c *core) Name() string { return c.name }

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

// stage copies the clean pass's k, v (and q when keepQ) of one layer.
func (c *core) stage(layer int, q, k, v []float32, keepQ bool) {
	if !c.call.Clean {
		return
	}
	c.pendK[layer] = append(c.pendK[layer][:0], k...)
	c.pendV[layer] = append(c.pendV[layer][:0], v...)
	if keepQ {
		c.pendQ[layer] = append(c.pendQ[layer][:0], q...)
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
	}
	c.open = false
	c.stats.Bytes = bytes
}

// blockFrames returns the current block's frames split per layer out of the
// staged clean pass: frames[f].K[l] aliases fresh copies.
func (c *core) stagedFrames() []*frame {
	F := c.lay.FramesPerBlock
	out := make([]*frame, F)
	n := c.tpf * c.row
	for f := 0; f < F; f++ {
		fr := &frame{ID: c.call.Block*F + f, K: make([][]float32, c.lay.Layers), V: make([][]float32, c.lay.Layers)}
		for l := 0; l < c.lay.Layers; l++ {
			fr.K[l] = append([]float32(nil), c.pendK[l][f*n:(f+1)*n]...)
			fr.V[l] = append([]float32(nil), c.pendV[l][f*n:(f+1)*n]...)
		}
		out[f] = fr
	}
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

// ctxReset starts a new context.
func (c *core) ctxReset() {
	c.jobs = c.jobs[:0]
	c.ctxLen = 0
}

// ctxFrame schedules n tokens of k/v (a whole frame when t ≥ 0, rotated at
// temporal position t and the native spatial grid; any rows when t < 0) to
// be appended to the context. The copies and rotations run in queries.
func (c *core) ctxFrame(k, v []float32, t int) {
	c.addJobs(ctxJob{off: c.ctxLen, k: k, v: v, t: t})
	c.ctxLen += len(k)
}

// ctxJob copies k (and v) to offset off of the context (or q to the query
// buffer) and rotates the copied keys when t ≥ 0; p0 is the in-frame index
// of the first token.
type ctxJob struct {
	off  int
	k, v []float32
	t    int
	p0   int
	q    bool
}

// chunkTokens is the parallel work unit.
const chunkTokens = 256

// addJobs splits j into chunks of chunkTokens tokens.
func (c *core) addJobs(j ctxJob) {
	step := chunkTokens * c.row
	for o := 0; o < len(j.k); o += step {
		e := min(o+step, len(j.k))
		cj := j
		cj.off, cj.k, cj.p0 = j.off+o, j.k[o:e], j.p0+o/c.row
		if j.v != nil {
			cj.v = j.v[o:e]
		}
		c.jobs = append(c.jobs, cj)
	}
}

// queries schedules the current block's q at per-frame temporal positions
// ts, then runs every scheduled copy and rotation (in parallel when the work
// is large; the result does not depend on the thread count) and returns the
// rotated queries. The context is c.kbuf, c.vbuf afterwards.
func (c *core) queries(q []float32, ts []int) []float32 {
	n := c.tpf * c.row
	for f, t := range ts {
		c.addJobs(ctxJob{off: f * n, k: q[f*n : (f+1)*n], t: t, q: true})
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
	var next atomic.Int64
	run := func() {
		for {
			i := int(next.Add(1)) - 1
			if i >= len(c.jobs) {
				return
			}
			c.runJob(c.jobs[i])
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
	return c.qbuf
}

func (c *core) runJob(j ctxJob) {
	dst := c.kbuf
	if j.q {
		dst = c.qbuf
	}
	dst = dst[j.off : j.off+len(j.k)]
	copy(dst, j.k)
	if j.v != nil {
		copy(c.vbuf[j.off:j.off+len(j.v)], j.v)
	}
	if j.t < 0 {
		return
	}
	for i := 0; i < len(j.k)/c.row; i++ {
		p := j.p0 + i
		c.rot.Token(dst[i*c.row:(i+1)*c.row], c.lay.Heads, j.t, p/c.lay.Width, p%c.lay.Width)
	}
}

func (c *core) startUpdate() { c.updStart = time.Now() }
func (c *core) stopUpdate()  { c.stats.UpdateSeconds += time.Since(c.updStart).Seconds() }
