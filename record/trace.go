package record

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"gonum.org/v1/plot/vg"

	"github.com/densitykv/densitykv/attn"
	"github.com/densitykv/densitykv/memory"
	"github.com/densitykv/densitykv/plots"
)

// AttentionTracer wraps a memory policy and, on one denoising step of every
// block (Step == step; the paper's trace uses the 4th pass, step 3),
// measures the attention mass each query frame puts on each source frame,
// summed over layers, heads and the frame's query tokens. It is the policy
// a rollout runs with (every call is forwarded unchanged).
//
// Key provenance: sink rows belong to the sink frames in order; local rows
// to the frames ending with the current block; memory rows of DensityKV to
// their bank entry's source frame (per head). Memory rows of other policies
// and partial-frame parts have no frame and are counted in the last column
// ("memory, frame unknown").
type AttentionTracer struct {
	memory.Policy
	step   int
	frames int // total frames of the rollout

	call memory.Call
	// Mass[qf·(frames+1) + sf]: attention mass of query frame qf on source
	// frame sf (sf = frames: unknown), summed over layers, heads, queries.
	Mass []float64
	// Per layer and head (TraceLayers): the DensityKV authors'
	// temporal_attention_trace accumulators of each traced layer
	// (LayerIndex[i]): LayerMass[i][h·F² + qf·F + sf] is the attention of
	// query frame qf's tokens, averaged over them, on source frame sf
	// (keys of unknown provenance dropped); LayerTokens[i] the visible key
	// count per source frame; LayerCount[i][qf] the traced calls.
	LayerIndex  []int
	LayerMass   [][]float32
	LayerTokens [][]float32
	LayerCount  [][]float32

	qh, kh, vh, oh []float32
	rowsByFrame    [][]int
}

// NewAttentionTracer traces p on denoising step step of a rollout of
// frames latent frames.
func NewAttentionTracer(p memory.Policy, step, frames int) *AttentionTracer {
	return &AttentionTracer{Policy: p, step: step, frames: frames, Mass: make([]float64, frames*(frames+1))}
}

// TraceLayers also keeps the per-head trace of layers (the authors' [B, H,
// F, F] per layer; 8·H·F² bytes each).
func (t *AttentionTracer) TraceLayers(layers []int) {
	H, F := t.Policy.Layout().Heads, t.frames
	t.LayerIndex = append([]int(nil), layers...)
	t.LayerMass, t.LayerTokens, t.LayerCount = make([][]float32, len(layers)), make([][]float32, len(layers)), make([][]float32, len(layers))
	for i := range layers {
		t.LayerMass[i] = make([]float32, H*F*F)
		t.LayerTokens[i] = make([]float32, H*F*F)
		t.LayerCount[i] = make([]float32, F)
	}
}

// LastStats forwards to the wrapped policy (zero when it reports none).
func (t *AttentionTracer) LastStats() memory.Stats {
	if r, ok := t.Policy.(memory.StatsReporter); ok {
		return r.LastStats()
	}
	return memory.Stats{}
}

// Begin records the call and forwards it.
func (t *AttentionTracer) Begin(c memory.Call) error {
	if err := t.Policy.Begin(c); err != nil {
		return err
	}
	t.call = c
	return nil
}

// Attend forwards and, on the traced step, measures the context.
func (t *AttentionTracer) Attend(layer int, q, k, v []float32) (memory.Context, error) {
	ctx, err := t.Policy.Attend(layer, q, k, v)
	if err != nil || !t.traces() {
		return ctx, err
	}
	t.measure(layer, ctx)
	return ctx, nil
}

// traces reports whether the open call is traced.
func (t *AttentionTracer) traces() bool { return !t.call.Clean && t.call.Step == t.step }

// HostCall reports whether the open call must take Attend
// (memory.HostCaller): the traced step, or a policy that does not plan.
func (t *AttentionTracer) HostCall() bool {
	_, plans := t.Policy.(memory.Planner)
	return !plans || t.traces()
}

// AttendPlan forwards a call that is not traced to the policy's plan
// (memory.Planner); a traced call, or a policy that does not plan, is an
// error (HostCall says to take Attend).
func (t *AttentionTracer) AttendPlan(layer int, kv func() (k, v []float32, err error), have memory.HistoryKey) (memory.Plan, error) {
	p, ok := t.Policy.(memory.Planner)
	if !ok || t.traces() {
		return memory.Plan{}, fmt.Errorf("record: attention tracer: block %d step %d layer %d must take Attend (a traced call, or a policy that does not plan)", t.call.Block, t.call.Step, layer)
	}
	return p.AttendPlan(layer, kv, have)
}

func (t *AttentionTracer) measure(layer int, ctx memory.Context) {
	l := t.Policy.Layout()
	H, D, P, F := l.Heads, l.HeadDim, l.TokensPerFrame(), l.FramesPerBlock
	T := F * P
	S := ctx.Parts.Total()
	if S == 0 || len(ctx.Q) < T*H*D || len(ctx.K) < S*H*D {
		return
	}
	end := (t.call.Block + 1) * F
	unknown := t.frames
	var entries [][]int64 // per head, DensityKV memory sources
	var memSrc []int64    // every head: memory row → global token (FIFO, stride, full history, Deep Forcing)
	var ragFrames []int   // every head: LongLive-RAG's retrieved frames, P rows each
	switch p := t.Policy.(type) {
	case *memory.Controls:
		memSrc = p.Sources()
	case *memory.DeepForcing:
		memSrc = p.MiddleSources(layer)
	case *memory.LongLiveRAG:
		ragFrames = p.Retrieved()
	}
	if d, ok := t.Policy.(*memory.DensityKV); ok && layer < len(d.Banks()) {
		bk := d.Banks()[layer]
		for h := 0; h < H; h++ {
			es := bk.Entries(h)
			src := make([]int64, len(es))
			for i, e := range es {
				src[i] = e.Source
			}
			entries = append(entries, src)
		}
	}
	frameOf := func(h, s int) int {
		switch {
		case s < ctx.Parts.Sink:
			return s / P
		case s < ctx.Parts.Sink+ctx.Parts.Memory:
			r := s - ctx.Parts.Sink
			switch {
			case entries != nil:
				if r >= len(entries[h]) {
					return -1 // padding row of a shorter head: masked
				}
				return int(entries[h][r] / int64(P))
			case memSrc != nil && r < len(memSrc):
				return int(memSrc[r] / int64(P))
			case ragFrames != nil && r/P < len(ragFrames):
				return ragFrames[r/P]
			}
			return unknown
		default:
			if ctx.Parts.Local%P != 0 {
				return unknown
			}
			r := s - ctx.Parts.Sink - ctx.Parts.Memory
			return end - ctx.Parts.Local/P + r/P
		}
	}
	scale := float32(1 / math.Sqrt(float64(D)))
	qb := make([]int, F+1)
	for f := range qb {
		qb[f] = f * P
	}
	t.qh = grow32(t.qh, T*D)
	t.oh = grow32(t.oh, T*D)
	for h := 0; h < H; h++ {
		// Group key rows by source frame so each frame is one segment.
		byFrame := map[int][]int{}
		for s := 0; s < S; s++ {
			f := frameOf(h, s)
			if f < 0 {
				continue
			}
			if f > unknown {
				f = unknown
			}
			byFrame[f] = append(byFrame[f], s)
		}
		keysF := make([]int, 0, len(byFrame))
		for f := range byFrame {
			keysF = append(keysF, f)
		}
		sort.Ints(keysF)
		n := 0
		for _, f := range keysF {
			n += len(byFrame[f])
		}
		if n == 0 {
			continue
		}
		t.kh = grow32(t.kh, n*D)
		t.vh = grow32(t.vh, n*D)
		kb := []int{0}
		i := 0
		for _, f := range keysF {
			for _, s := range byFrame[f] {
				copy(t.kh[i*D:(i+1)*D], ctx.K[(s*H+h)*D:(s*H+h+1)*D])
				copy(t.vh[i*D:(i+1)*D], ctx.V[(s*H+h)*D:(s*H+h+1)*D])
				i++
			}
			kb = append(kb, i)
		}
		for tok := 0; tok < T; tok++ {
			copy(t.qh[tok*D:(tok+1)*D], ctx.Q[(tok*H+h)*D:(tok*H+h+1)*D])
		}
		mass := make([]float64, F*len(keysF))
		attn.AttentionMass(t.oh[:T*D], t.qh[:T*D], t.kh[:n*D], t.vh[:n*D], T, n, 1, D, scale, qb, kb, mass)
		li := slices.Index(t.LayerIndex, layer)
		for qf := 0; qf < F; qf++ {
			gq := t.call.Block*F + qf
			if gq >= t.frames {
				continue
			}
			for j, f := range keysF {
				t.Mass[gq*(t.frames+1)+min(f, unknown)] += mass[qf*len(keysF)+j]
				if li >= 0 && f < unknown {
					// The authors' histogram: known sources only, the mass
					// averaged over the frame's query tokens.
					o := (h*t.frames+gq)*t.frames + f
					t.LayerMass[li][o] += float32(mass[qf*len(keysF)+j] / float64(P))
					t.LayerTokens[li][o] += float32(len(byFrame[f]))
				}
			}
		}
	}
	if li := slices.Index(t.LayerIndex, layer); li >= 0 {
		for qf := 0; qf < F; qf++ {
			if gq := t.call.Block*F + qf; gq < t.frames {
				t.LayerCount[li][gq]++
			}
		}
	}
}

// LayerTrace is the per-layer, per-head trace in the shape of the authors'
// export_temporal_attention_trace (format temporal_attention_trace_v2):
// per traced layer, mass and source_token_count [1, H, F, F] averaged over
// the traced calls of each query frame, and count [1, F].
type LayerTrace struct {
	Layers      []int
	Heads       int
	Frames      int
	TokensFrame int
	Mass        [][]float32 // per layer [H][F][F]
	Tokens      [][]float32 // per layer [H][F][F]
	Count       [][]float32 // per layer [F]
}

// Layers returns the per-layer trace so far, averaged over each query
// frame's traced calls (one per block with a single traced step, so the
// averages equal the sums).
func (t *AttentionTracer) Layers() LayerTrace {
	l := t.Policy.Layout()
	H, F := l.Heads, t.frames
	lt := LayerTrace{Layers: t.LayerIndex, Heads: H, Frames: F, TokensFrame: l.TokensPerFrame()}
	for i := range t.LayerIndex {
		m, k := make([]float32, H*F*F), make([]float32, H*F*F)
		for h := 0; h < H; h++ {
			for q := 0; q < F; q++ {
				c := max(t.LayerCount[i][q], 1)
				for s := 0; s < F; s++ {
					o := (h*F+q)*F + s
					m[o], k[o] = t.LayerMass[i][o]/c, t.LayerTokens[i][o]/c
				}
			}
		}
		lt.Mass, lt.Tokens = append(lt.Mass, m), append(lt.Tokens, k)
		lt.Count = append(lt.Count, append([]float32(nil), t.LayerCount[i]...))
	}
	return lt
}

// SetLayers restores the per-layer accumulators from a trace written by
// Layers (a resumed rollout): every count must be 0 or 1, so that the
// averages are the sums.
func (t *AttentionTracer) SetLayers(lt LayerTrace) error {
	H, F := t.Policy.Layout().Heads, t.frames
	if !slices.Equal(lt.Layers, t.LayerIndex) || lt.Heads != H || lt.Frames != F || len(lt.Mass) != len(lt.Layers) || len(lt.Tokens) != len(lt.Layers) || len(lt.Count) != len(lt.Layers) {
		return fmt.Errorf("record: per-layer trace of layers %v, %d heads, %d frames; want layers %v, %d heads, %d frames", lt.Layers, lt.Heads, lt.Frames, t.LayerIndex, H, F)
	}
	for i := range lt.Layers {
		if len(lt.Mass[i]) != H*F*F || len(lt.Tokens[i]) != H*F*F || len(lt.Count[i]) != F {
			return fmt.Errorf("record: per-layer trace of layer %d has the wrong sizes", lt.Layers[i])
		}
		for q, c := range lt.Count[i] {
			if c != 0 && c != 1 {
				return fmt.Errorf("record: per-layer trace of layer %d: query frame %d traced %v times, want 0 or 1", lt.Layers[i], q, c)
			}
		}
		copy(t.LayerMass[i], lt.Mass[i])
		copy(t.LayerTokens[i], lt.Tokens[i])
		copy(t.LayerCount[i], lt.Count[i])
	}
	return nil
}

func grow32(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// TraceFile is attention_trace.json: a trace normalised per query frame.
type TraceFile struct {
	Policy string `json:"policy,omitempty"`
	Step   int    `json:"step"`
	Frames int    `json:"frames"`
	// Mass[q][s] is the fraction of query frame q's attention (averaged
	// over layers, heads and its tokens) on source frame s; the last column
	// is memory whose source frame is unknown.
	Mass [][]float64 `json:"mass"`
}

// File returns the trace so far for attention_trace.json, each query
// frame's row normalised to sum to 1 (all zero for a frame not traced).
func (tr *AttentionTracer) File(policy string) TraceFile {
	F := tr.frames
	out := TraceFile{Policy: policy, Step: tr.step, Frames: F}
	for q := 0; q < F; q++ {
		row := tr.Mass[q*(F+1) : (q+1)*(F+1)]
		var s float64
		for _, v := range row {
			s += v
		}
		r := make([]float64, F+1)
		if s > 0 {
			for i, v := range row {
				r[i] = v / s
			}
		}
		out.Mass = append(out.Mass, r)
	}
	return out
}

// TraceFigure draws the attention trace heat map of attention_trace.json.
func TraceFigure(tf TraceFile) (*plots.Figure, error) {
	hp, err := traceHeat(tf)
	if err != nil {
		return nil, err
	}
	return plots.Heat("attention_trace", 18*vg.Centimeter, 14*vg.Centimeter, hp)
}

// traceHeat is the heat-map panel of TraceFigure.
func traceHeat(tf TraceFile) (plots.HeatPanel, error) {
	F := tf.Frames
	if len(tf.Mass) != F {
		return plots.HeatPanel{}, fmt.Errorf("attention_trace.json: %d rows for %d frames", len(tf.Mass), F)
	}
	z := make([]float64, F*(F+1))
	for q := 0; q < F; q++ {
		if len(tf.Mass[q]) != F+1 {
			return plots.HeatPanel{}, fmt.Errorf("attention_trace.json: row %d has %d values, want %d", q, len(tf.Mass[q]), F+1)
		}
		copy(z[q*(F+1):], tf.Mass[q])
	}
	// The last column (memory whose source frame is unknown) is drawn
	// only when some attention went there.
	const rows = " (layers, heads, tokens summed; rows sum to 1)"
	cols, xl := F, "source frame"+rows
	for q := 0; q < F; q++ {
		if tf.Mass[q][F] > 0 {
			cols, xl = F+1, fmt.Sprintf("source frame, column %d: unknown source", F)+rows
			break
		}
	}
	if cols == F {
		zz := make([]float64, 0, F*F)
		for q := 0; q < F; q++ {
			zz = append(zz, tf.Mass[q][:F]...)
		}
		z = zz
	}
	title := fmt.Sprintf("Attention from each query frame to each source frame (denoising pass %d)", tf.Step+1)
	if tf.Policy != "" {
		title = fmt.Sprintf("%s: attention from each query frame to each source frame, denoising pass %d", tf.Policy, tf.Step+1)
	}
	return plots.HeatPanel{
		Title:  title,
		XLabel: xl, YLabel: "query frame",
		ZLabel: "fraction of the query frame's attention (log)", Grid: plots.Grid{Cols: cols, Rows: F, Z: z}, Log: true, Palette: "magma", ImageY: true,
	}, nil
}
