package memory

import (
	"fmt"
	"sync/atomic"

	"github.com/densitykv/densitykv/compute"
	"github.com/densitykv/densitykv/internal/finite"
)

// Planner is implemented by the policies whose context can be described
// rather than materialised, for a backbone that keeps the current block's
// q, k and v where it computed them (a GPU): Native, Infinity-RoPE and
// the windowed policies (DensityKV, LongLive-RAG, FullHistory, FIFO,
// uniform stride); not Deep Forcing, which scores the block's queries.
//
// A layer's context is the history — the rows that do not depend on the
// call's q, k and v: committed sink frames, the memory, the committed
// window or cache frames, their keys rotated as they are read — interleaved with
// the current block's frames, each rotated at its temporal position. The
// history does not change between the calls of a block, so the backbone
// keeps it on the device and AttendPlan sends it again only when its key
// changes: once per block and layer, not once per call.
//
// AttendPlan is Attend for such a backbone: the same protocol (between
// Begin and End, layers in order), the same state changes, Stats and
// errors, and a Plan from which the backbone assembles exactly Attend's
// Context (ExecutePlan is that assembly on the host; the tests hold the
// two equal bit for bit).
type Planner interface {
	Policy
	// AttendPlan returns layer's Plan. kv returns the block's k and v
	// ([T][H][D]: after qk-norm, before RoPE; raw) on the host; it is
	// called only when the policy keeps them (the clean pass) and must not
	// be retained. have is the key of the history the caller holds for
	// this layer (0: none): when it equals the policy's, the Plan's K and
	// V are nil and the caller's copy is current.
	AttendPlan(layer int, kv func() (k, v []float32, err error), have HistoryKey) (Plan, error)
}

// Plans reports whether the policy called name (any spelling New takes)
// is a Planner: every policy but Deep Forcing (which scores the queries
// on the host).
func Plans(name string) bool {
	switch n, _ := canonical(name); n {
	case NameNative, NameInfinityRoPE, NameDensityKV, NameLongLiveRAG, NameFullHistory, NameFIFO, NameUniformStride:
		return true
	}
	return false
}

// HostCaller is implemented by a Planner that wraps a policy (an
// attention tracer): after Begin, HostCall reports whether the open call
// must go through Attend instead — its q, k and v and its context on the
// host — because the wrapper reads them (a traced call) or the wrapped
// policy does not plan. Attend on such a call does not change the
// history, so a caller's copy stays current.
type HostCaller interface {
	HostCall() bool
}

// HistoryKey identifies the history a policy returned for a layer: a
// policy's history of a layer is the same as long as its key is. Keys are
// unique across the policies of a process; 0 is no history.
type HistoryKey uint64

// historyKeys makes the keys, unique in the process.
var historyKeys atomic.Uint64

// NewHistoryKey returns a key no other history of the process has, for a
// Planner outside this package (each time its history changes).
func NewHistoryKey() HistoryKey { return HistoryKey(historyKeys.Add(1)) }

// Plan describes one layer's context (see Planner). The context's rows
// are Segments in order; a history segment's rows are the next rows of
// K and V.
type Plan struct {
	// K and V are the history [rows][H][D] (keys rotated as read), valid
	// until the next call of the policy; nil when the caller's copy
	// (AttendPlan's have) is current, else not nil (empty when there is
	// no history yet).
	K, V     []float32
	Key      HistoryKey
	Segments []Segment
	// QT is the temporal position of each current frame's queries.
	QT         []int
	Parts      Parts
	HeadMemory []int
}

// Segment is a run of context rows: Rows rows of the history (Frame =
// SegHistory), rows the policy keeps on the device (SegDevice: Device
// writes them), or the current block's frame Frame (its keys rotated at
// temporal position T and the native grid; its values as they are).
type Segment struct {
	Frame, T, Rows int
	Device         DeviceRows // SegDevice's rows
}

// Segment.Frame's kinds of rows that are not the current block's.
const (
	SegHistory = -1 // the next rows of the Plan's K and V
	SegDevice  = -2 // rows kept on the device: Segment.Device
)

// DeviceRows is part of a context that a policy keeps on a device itself
// — DensityKV's memory rows when its banks are there (gpu.NewBank) — so a
// backbone on that device copies them there, every call, instead of
// receiving them in the history.
type DeviceRows interface {
	// WriteRows records on be the first rows rows, as attention reads
	// them ([rows][H][D]), into rows row0 … of k and v ([S][H][D]); an
	// error when be is not the device that holds them.
	WriteRows(be compute.Backend, k, v compute.Tensor, row0, rows int) error
	// HostRows writes the same rows on the host (ExecutePlan's reference).
	HostRows(dk, dv []float32, rows int)
}

// HistoryRows returns the history's rows (the sum of the history
// segments' rows).
func (p Plan) HistoryRows() int {
	n := 0
	for _, s := range p.Segments {
		if s.Frame == SegHistory {
			n += s.Rows
		}
	}
	return n
}

// newHistory gives the policy's history a new key (its history may have
// changed: a block began, a block was committed, a snapshot was loaded, a
// recache ended).
func (c *core) newHistory() { c.hist = NewHistoryKey() }

// checkAttendPlan validates one AttendPlan call and returns the block's
// k and v on a clean pass (nil otherwise), checked as Attend checks them.
func (c *core) checkAttendPlan(layer int, kv func() (k, v []float32, err error)) (k, v []float32, err error) {
	if !c.open {
		return nil, nil, fmt.Errorf("memory: %s: attend layer %d: no open call (Begin first)", c.name, layer)
	}
	if layer != c.layer || layer >= c.lay.Layers {
		return nil, nil, fmt.Errorf("memory: %s: block %d step %d: attend layer %d, want layer %d of %d", c.name, c.call.Block, c.call.Step, layer, c.layer, c.lay.Layers)
	}
	if !c.call.Clean {
		return nil, nil, nil
	}
	if kv == nil {
		return nil, nil, fmt.Errorf("memory: %s: block %d layer %d: the clean pass needs the block's k and v (no kv)", c.name, c.call.Block, layer)
	}
	if k, v, err = kv(); err != nil {
		return nil, nil, fmt.Errorf("memory: %s: block %d layer %d: reading k and v: %w", c.name, c.call.Block, layer, err)
	}
	want := c.tokens * c.row
	for _, t := range [2]struct {
		n string
		x []float32
	}{{"k", k}, {"v", v}} {
		if len(t.x) != want {
			return nil, nil, fmt.Errorf("memory: %s: block %d layer %d: %s has %d values, want %d tokens × %d heads × %d", c.name, c.call.Block, layer, t.n, len(t.x), c.tokens, c.lay.Heads, c.lay.HeadDim)
		}
		if j := finite.First(t.x); j >= 0 {
			tok, rem := j/c.row, j%c.row
			return nil, nil, fmt.Errorf("memory: %s: block %d layer %d: %s has %v at token %d head %d dim %d", c.name, c.call.Block, layer, t.n, t.x[j], tok, rem/c.lay.HeadDim, rem%c.lay.HeadDim)
		}
	}
	return k, v, nil
}

// laidOut is a policy whose layer context one function lays out
// (windowed, Native), for Attend and AttendPlan alike.
type laidOut interface {
	// layout schedules layer's context (core.ctxFrame, ctxFill,
	// ctxCurrent) with the block's k and v (nil when planning) and
	// returns its parts and the current frames' temporal positions.
	layout(layer int, k, v []float32) (Parts, []int)
	// checkClean checks a clean pass's k and v (nil: nothing to check).
	checkClean(layer int, k, v []float32) error
	// headMemory is Context.HeadMemory of layer.
	headMemory(layer int) []int
}

// attendLaidOut is Attend of p: checked, the clean pass staged, the
// context assembled and the queries rotated.
func (c *core) attendLaidOut(p laidOut, layer int, q, k, v []float32) (Context, error) {
	if err := c.checkAttend(layer, q, k, v); err != nil {
		return Context{}, err
	}
	if err := p.checkClean(layer, k, v); err != nil {
		return Context{}, err
	}
	c.stage(layer, q, k, v, false)
	parts, qt := p.layout(layer, k, v)
	qr, err := c.queries(q, qt)
	if err != nil {
		return Context{}, err
	}
	c.layer++
	return Context{Q: qr, K: c.kbuf, V: c.vbuf, Parts: parts, HeadMemory: p.headMemory(layer)}, nil
}

// planLaidOut is AttendPlan of p (see Planner).
func (c *core) planLaidOut(p laidOut, layer int, kv func() (k, v []float32, err error), have HistoryKey) (Plan, error) {
	k, v, err := c.checkAttendPlan(layer, kv)
	if err != nil {
		return Plan{}, err
	}
	if err := p.checkClean(layer, k, v); err != nil {
		return Plan{}, err
	}
	c.stage(layer, nil, k, v, false)
	pl, err := c.planLayer(have != c.hist, func() (Parts, []int) { return p.layout(layer, nil, nil) })
	if err != nil {
		return Plan{}, err
	}
	pl.HeadMemory = p.headMemory(layer)
	c.layer++
	return pl, nil
}

// AttendPlan is Attend as a Plan (Planner).
func (p *Native) AttendPlan(layer int, kv func() (k, v []float32, err error), have HistoryKey) (Plan, error) {
	return p.planLaidOut(p, layer, kv, have)
}

// AttendPlan is Attend as a Plan (Planner).
func (p *windowed) AttendPlan(layer int, kv func() (k, v []float32, err error), have HistoryKey) (Plan, error) {
	return p.planLaidOut(p, layer, kv, have)
}

// planLayer runs layout (a policy's layer context, as Attend lays it
// out) in planning mode and returns its Plan; when fill, the history is
// assembled into the context buffers (c.kbuf, c.vbuf) and is the Plan's
// K and V.
func (c *core) planLayer(fill bool, layout func() (Parts, []int)) (Plan, error) {
	c.planning = true
	parts, qt := layout()
	c.planning = false
	pl := Plan{Key: c.hist, Segments: c.segs, QT: qt, Parts: parts}
	if !fill {
		c.ctxReset()
		return pl, nil
	}
	if _, err := c.queries(nil, nil); err != nil {
		return Plan{}, err
	}
	pl.K, pl.V = c.kbuf[:c.ctxLen:c.ctxLen], c.vbuf[:c.ctxLen:c.ctxLen]
	if pl.K == nil { // no history yet: still the caller's new copy
		pl.K, pl.V = []float32{}, []float32{}
	}
	return pl, nil
}

// ExecutePlan assembles on the host the context a Plan describes, given
// the history it was made with (hk, hv: a Plan's K and V, or the copy
// kept from the Plan that had its key) and the block's q, k and v
// ([T][H][D], as Attend takes them): q and the current frames' keys
// rotated by rot (rope.Rotator.Frame semantics). It is the reference of
// what a backbone computes from a Plan; the result equals Attend's
// Context bit for bit.
func ExecutePlan(pl Plan, hk, hv, q, k, v []float32, lay Layout, rotFrame func(x []float32, t int)) (Context, error) {
	row := lay.Heads * lay.HeadDim
	n := lay.TokensPerFrame() * row
	if len(q) != lay.FramesPerBlock*n || len(k) != len(q) || len(v) != len(q) {
		return Context{}, fmt.Errorf("memory: ExecutePlan: q, k, v have %d, %d, %d values, want %d", len(q), len(k), len(v), lay.FramesPerBlock*n)
	}
	if hr := pl.HistoryRows() * row; len(hk) != hr || len(hv) != hr {
		return Context{}, fmt.Errorf("memory: ExecutePlan: history has %d and %d values, the plan %d", len(hk), len(hv), hr)
	}
	S := pl.Parts.Total()
	ctx := Context{Q: make([]float32, len(q)), K: make([]float32, 0, S*row), V: make([]float32, 0, S*row), Parts: pl.Parts, HeadMemory: pl.HeadMemory}
	h := 0
	for _, s := range pl.Segments {
		switch s.Frame {
		case SegHistory:
			ctx.K = append(ctx.K, hk[h:h+s.Rows*row]...)
			ctx.V = append(ctx.V, hv[h:h+s.Rows*row]...)
			h += s.Rows * row
			continue
		case SegDevice:
			o := len(ctx.K)
			ctx.K, ctx.V = append(ctx.K, make([]float32, s.Rows*row)...), append(ctx.V, make([]float32, s.Rows*row)...)
			s.Device.HostRows(ctx.K[o:], ctx.V[o:], s.Rows)
			continue
		}
		o := len(ctx.K)
		ctx.K = append(ctx.K, k[s.Frame*n:(s.Frame+1)*n]...)
		ctx.V = append(ctx.V, v[s.Frame*n:(s.Frame+1)*n]...)
		rotFrame(ctx.K[o:o+n], s.T)
	}
	if len(ctx.K) != S*row {
		return Context{}, fmt.Errorf("memory: ExecutePlan: segments give %d rows, parts %d", len(ctx.K)/row, S)
	}
	for f, t := range pl.QT {
		copy(ctx.Q[f*n:(f+1)*n], q[f*n:(f+1)*n])
		rotFrame(ctx.Q[f*n:(f+1)*n], t)
	}
	return ctx, nil
}
