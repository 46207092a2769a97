package memory

import (
	"bytes"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/gemm"
)

// dfOracle is a literal model of Deep Forcing's cache for one layer,
// after the authors' utils/deep_forcing.py (prepare_deep_forcing_cache)
// and, for the clean / before-tail variants, this project's earlier
// reading.
type dfOracle struct {
	mid        []dfTok
	hist       []int       // committed non-sink frames in the tail or awaiting compression
	qbuf       [][]float32 // buffered post-RoPE query tokens [H·D], oldest first
	compressed bool
	// sink_base_abs_start_frame and the sink's shift (the authors').
	sinkBase, sinkShift int
	sinkSet             bool
}

type dfTok struct {
	frame, p int
	reuse    int
}

// dfModes are the Deep Forcing variants the oracle covers: the authors'
// adapter with each fusion, and the earlier clean-query, before-tail one.
var dfModes = []struct {
	name    string
	queries DFQueries
	sink    DFSink
	fusion  DFFusion
}{
	{"authors", DFQueriesEveryCall, DFSinkAuthors, DFFusionSum},
	{"authors-max", DFQueriesEveryCall, DFSinkAuthors, DFFusionMax},
	{"clean-before-tail", DFQueriesClean, DFSinkBeforeTail, DFFusionSum},
}

// TestDeepForcingSelection runs Deep Forcing on a random stream (two calls
// per block: a noisy first call and the clean pass) against a literal
// oracle of its cache: the query buffer (every call's query tokens, or the
// clean passes'), the scores (summed query, or the largest single query),
// the top-budget selection, the reuse cap, chronological order and the
// positions, with the authors' sink bookkeeping (start − tail − sink,
// moved by the change after the first compression) or the sink before the
// tail; for the default cap of 7 and for 1, long enough that each cap
// excludes tokens the scores would have kept.
func TestDeepForcingSelection(t *testing.T) {
	for _, mode := range dfModes {
		for _, maxReuse := range []int{7, 1} {
			t.Run(fmt.Sprintf("%s/reuse%d", mode.name, maxReuse), func(t *testing.T) {
				testDeepForcingSelection(t, maxReuse, mode.queries, mode.sink, mode.fusion)
			})
		}
	}
}

func testDeepForcingSelection(t *testing.T, maxReuse int, queries DFQueries, sinkMode DFSink, fusion DFFusion) {
	cfg := tinyConfig()
	cfg.DeepForcing.MaxReuse = maxReuse
	cfg.DeepForcing.Queries, cfg.DeepForcing.Sink, cfg.DeepForcing.Fusion = queries, sinkMode, fusion
	pol, err := New(NameDeepForcing, cfg)
	if err != nil {
		t.Fatal(err)
	}
	d := newDFCheck(cfg, 21)
	const blocks = 14
	for b := 0; b < blocks; b++ {
		start := b * d.F
		for st := 0; st <= 1; st++ {
			for layer := range d.or {
				o := &d.or[layer]
				if queries == DFQueriesEveryCall {
					q, _, _ := d.s.qkv(b, st, layer)
					d.buffer(o, q, start)
				}
				if st != 0 || 1*d.P+len(o.mid)+len(o.hist)*d.P+d.F*d.P <= d.C*d.P || b == 0 {
					continue
				}
				d.compress(o, layer, start)
			}
			ctx, _ := d.s.call(t, pol, Call{Block: b, Step: st, First: st == 0, Clean: st == 1})
			for layer, cx := range ctx {
				d.checkContext(t, b, st, layer, cx)
			}
			if st == 1 {
				d.commit(b, start)
			}
		}
	}
	// Long enough for the cap to bind: 14 blocks are 10 compressions,
	// and the 8th (block 11) is the first a token can be capped at 7.
	if d.maxSeen != maxReuse || d.capped == 0 {
		t.Fatalf("the reuse cap %d never changed the selection (most compressions survived %d, %d capped candidates would have been kept)", maxReuse, d.maxSeen, d.capped)
	}
	// Steady state: the storage formula of a full cache.
	if maxReuse == 7 {
		sc := storageConfig(cfg)
		if got, want := pol.Bytes(), sc.DeepForcing(); got != want {
			t.Fatalf("bytes %d, want storage formula %d", got, want)
		}
	}
}

// dfCheck is the Deep Forcing oracle of testDeepForcingSelection: per
// layer, the tokens it keeps (dfOracle), and what the reuse cap changed.
type dfCheck struct {
	cfg                Config
	l                  Layout
	P, F, H, D, row, n int
	R, C, budget       int
	s                  *stream
	or                 []dfOracle
	// capped counts kept-quality candidates the cap excluded; maxSeen is
	// the most compressions a token survived.
	capped, maxSeen int
}

func newDFCheck(cfg Config, seed uint64) *dfCheck {
	l := cfg.Layout
	d := &dfCheck{cfg: cfg, l: l, P: l.TokensPerFrame(), F: l.FramesPerBlock, H: l.Heads, D: l.HeadDim,
		R: cfg.DeepForcing.RecentFrames, C: cfg.CacheFrames, s: newStream(l, seed), or: make([]dfOracle, l.Layers)}
	d.row = d.H * d.D
	d.n = d.P * d.row
	d.budget = (d.C - 1 - d.R) * d.P
	return d
}

// buffer keeps the block's post-RoPE queries (first: its first frame),
// the most recent R frames' worth.
func (d *dfCheck) buffer(o *dfOracle, q []float32, first int) {
	P, R, row, n := d.P, d.R, d.row, d.n
	for f := 0; f < d.F; f++ {
		qr := rotated(d.l, q[f*n:(f+1)*n], first+f)
		for p := 0; p < P; p++ {
			o.qbuf = append(o.qbuf, qr[p*row:(p+1)*row])
		}
	}
	if len(o.qbuf) > R*P {
		o.qbuf = o.qbuf[len(o.qbuf)-R*P:]
	}
}

// compress is the compression at the first call of the block at frame
// start: the middle tokens and the frames leaving the recent window are
// scored against the buffered queries, the best under the reuse cap kept,
// and the sink relocated as the authors do.
func (d *dfCheck) compress(o *dfOracle, layer, start int) {
	P, R, row, maxReuse, budget := d.P, d.R, d.row, d.cfg.DeepForcing.MaxReuse, d.budget
	keep := R - d.F
	leaving := o.hist[:len(o.hist)-keep]
	var cands []dfTok
	cands = append(cands, o.mid...)
	for _, f := range leaving {
		for p := 0; p < P; p++ {
			cands = append(cands, dfTok{f, p, 0})
		}
	}
	keys := make([]float32, len(cands)*row)
	for i, c := range cands {
		copy(keys[i*row:], rotated(d.l, d.s.cleanK[[2]int{c.frame, layer}], c.frame)[c.p*row:(c.p+1)*row])
	}
	score := d.scores(o, keys, len(cands))
	var idx []int
	for i, c := range cands {
		d.maxSeen = max(d.maxSeen, c.reuse)
		if c.reuse < maxReuse {
			idx = append(idx, i)
		}
	}
	sort.SliceStable(idx, func(a, b int) bool { return score[idx[a]] > score[idx[b]] })
	idx = idx[:min(budget, len(idx))]
	// Capped tokens that outscore a kept one (or would fill a free slot):
	// the cap changed the selection.
	for i, c := range cands {
		if c.reuse >= maxReuse && (len(idx) < budget || score[i] > score[idx[len(idx)-1]]) {
			d.capped++
		}
	}
	sort.Ints(idx)
	o.mid = o.mid[:0:0]
	for _, i := range idx {
		c := cands[i]
		c.reuse++
		o.mid = append(o.mid, c)
	}
	o.hist = o.hist[len(leaving):]
	o.compressed = true
	// The official relocation: desired sink start = start − tail frames −
	// sink frames, the tail being the selected tokens and the R-frame
	// recent window; the first compression records it.
	desired := start - (len(o.mid)+R*P)/P - 1
	if o.sinkSet {
		o.sinkShift += desired - o.sinkBase
	}
	o.sinkBase, o.sinkSet = desired, true
}

// scores are the m candidate keys' scores against the buffered queries:
// persistent_context_scores with fusion max (the largest q·k, the products
// as gemm's float32) or mean (against the queries' sum), over H·√D.
func (d *dfCheck) scores(o *dfOracle, keys []float32, m int) []float64 {
	row := d.row
	score := make([]float64, m)
	scale := float64(d.H) * math.Sqrt(float64(d.D))
	if d.cfg.DeepForcing.Fusion == DFFusionMax {
		qm := make([]float32, 0, len(o.qbuf)*row)
		for _, q := range o.qbuf {
			qm = append(qm, q...)
		}
		prod := make([]float32, m*len(o.qbuf))
		gemm.NT(m, len(o.qbuf), row, keys, row, qm, row, prod, len(o.qbuf))
		for i := range score {
			best := float32(math.Inf(-1))
			for _, v := range prod[i*len(o.qbuf) : (i+1)*len(o.qbuf)] {
				best = max(best, v)
			}
			score[i] = float64(best) / scale
		}
		return score
	}
	qs := make([]float64, row)
	for _, q := range o.qbuf {
		for i, v := range q {
			qs[i] += float64(v)
		}
	}
	for i := range score {
		for j := 0; j < row; j++ {
			score[i] += qs[j] * float64(keys[i*row+j])
		}
		score[i] /= scale
	}
	return score
}

// checkContext checks a layer's context of block b's call st against the
// oracle: the sink where its mode puts it, the kept middle tokens, the
// tail and the block's frames, absolute queries, a full cache in steady
// state.
func (d *dfCheck) checkContext(t *testing.T, b, st, layer int, cx Context) {
	t.Helper()
	P, F, row, n, l := d.P, d.F, d.row, d.n, d.l
	maxReuse := d.cfg.DeepForcing.MaxReuse
	o := d.or[layer]
	start := b * F
	q, k, v := d.s.qkv(b, st, layer)
	tail := start
	if len(o.hist) > 0 {
		tail = o.hist[0]
	}
	sinkT := o.sinkShift
	if d.cfg.DeepForcing.Sink == DFSinkBeforeTail {
		sinkT = 0
		if o.compressed {
			sinkT = tail - 1
		}
	}
	if d.cfg.DeepForcing.Sink == DFSinkAuthors && maxReuse == 7 && b >= 5 && sinkT != start-12 {
		t.Fatalf("block %d: the authors' sink at %d, want start − 12 = %d", b, sinkT, start-12)
	}
	var sink, win []seg
	if b == 0 {
		sink = []seg{{0, 0, 0}}
	} else {
		sink = []seg{{0, sinkT, -1}}
		for _, f := range o.hist {
			win = append(win, seg{f, f, -1})
		}
	}
	for f := start; f < start+F; f++ {
		if f > 0 {
			win = append(win, seg{f, f, f - start})
		}
	}
	if cx.Parts != (Parts{Sink: P, Memory: len(o.mid), Local: len(win) * P}) {
		t.Fatalf("block %d layer %d: parts %+v, oracle middle %d tail %d frames", b, layer, cx.Parts, len(o.mid), len(win))
	}
	d.s.expectFrames(t, Context{K: cx.K[:P*row], V: cx.V[:P*row]}, layer, k, v, sink)
	for i, tk := range o.mid {
		want := rotated(l, d.s.cleanK[[2]int{tk.frame, layer}], tk.frame)[tk.p*row : (tk.p+1)*row]
		got := cx.K[(P+i)*row : (P+i+1)*row]
		if !equal(got, want) {
			t.Fatalf("block %d layer %d: middle token %d (frame %d token %d) differs", b, layer, i, tk.frame, tk.p)
		}
	}
	me := (P + len(o.mid)) * row
	d.s.expectFrames(t, Context{K: cx.K[me:], V: cx.V[me:]}, layer, k, v, win)
	for f := 0; f < F; f++ {
		if !equal(cx.Q[f*n:(f+1)*n], rotated(l, q[f*n:(f+1)*n], start+f)) {
			t.Fatalf("block %d: query %d not absolute", b, f)
		}
	}
	if b >= 4 && maxReuse == 7 && cx.Parts.Total() != d.C*P {
		t.Fatalf("block %d: %d keys, want the full %d-token cache", b, cx.Parts.Total(), d.C*P)
	}
}

// commit adds block b's frames (from start) to each layer's tail after
// its clean call, and buffers its clean queries in that mode.
func (d *dfCheck) commit(b, start int) {
	for layer := range d.or {
		o := &d.or[layer]
		for f := start; f < start+d.F; f++ {
			if f > 0 {
				o.hist = append(o.hist, f)
			}
		}
		if d.cfg.DeepForcing.Queries == DFQueriesClean {
			q, _, _ := d.s.qkv(b, 1, layer)
			d.buffer(o, q, start)
		}
	}
}

// TestLongLiveRAGRetrieval checks retrieval, context and bytes against an
// oracle for both pools on the tiny layout (cache 12, sink 1, window 5,
// 3-frame blocks): the physical pool holds frames [1, 3b−11) at block b,
// the window pool frames [1, 3b−2).
func TestLongLiveRAGRetrieval(t *testing.T) {
	for _, pool := range []RAGPool{RAGPoolPhysical, RAGPoolWindow} {
		t.Run(pool.String(), func(t *testing.T) { testLongLiveRAGRetrieval(t, pool) })
	}
}

func testLongLiveRAGRetrieval(t *testing.T, poolKind RAGPool) {
	cfg := tinyConfig()
	cfg.LongLiveRAG.TopK = 2
	cfg.LongLiveRAG.ExcludeRecent = 2
	cfg.LongLiveRAG.Pool = poolKind
	pol, err := New(NameLongLiveRAG, cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := pol.(*LongLiveRAG)
	// Frame descriptors on the unit circle: angle 0.9·f (mod 2π).
	ang := func(f int) float64 { return math.Mod(0.9*float64(f), 2*math.Pi) }
	if err := p.SetDescriber(angleDesc{ang}); err != nil {
		t.Fatal(err)
	}
	s := newStream(cfg.Layout, 9)
	P := cfg.Layout.TokensPerFrame()
	end := map[RAGPool]func(b int) int{RAGPoolPhysical: func(b int) int { return 3*b - 11 }, RAGPoolWindow: func(b int) int { return 3*b - 2 }}[poolKind]
	for b := 0; b < 12; b++ {
		// Oracle: pool = frames [1, end(b)), minus the 2 most recent, top 2
		// by cosine to frame 3b−1 (ties: newer), chronological.
		var pool []int
		for f := 1; f < end(b); f++ {
			pool = append(pool, f)
		}
		var picked []int
		if len(pool) > 2 {
			el := pool[:len(pool)-2]
			sort.SliceStable(el, func(i, j int) bool {
				ci, cj := math.Cos(ang(el[i])-ang(3*b-1)), math.Cos(ang(el[j])-ang(3*b-1))
				if ci != cj {
					return ci > cj
				}
				return el[i] > el[j]
			})
			picked = append(picked, el[:min(2, len(el))]...)
			sort.Ints(picked)
		}
		var mem []tok
		for _, f := range picked {
			for p := 0; p < P; p++ {
				mem = append(mem, tok{f, p})
			}
		}
		for st := 0; st <= 1; st++ {
			ctx, _ := s.call(t, p, Call{Block: b, Step: st, First: st == 0, Clean: st == 1})
			for layer := range ctx {
				s.checkWindowed(t, cfg, ctx[layer], b, st, layer, mem)
			}
		}
		if got := p.Retrieved(); fmt.Sprint(got) != fmt.Sprint(picked) && !(len(got) == 0 && len(picked) == 0) {
			t.Fatalf("block %d: retrieved %v, want %v", b, got, picked)
		}
		// Bytes: every committed frame's K/V plus a 2-value descriptor each.
		frames := int64(3*b + 3)
		if got, want := p.Bytes(), storageModel(cfg).KVFrames(frames)+frames*2*2; got != want {
			t.Fatalf("block %d: bytes %d, want %d", b, got, want)
		}
	}
}

type angleDesc struct{ ang func(int) float64 }

func (angleDesc) Dim() int          { return 2 }
func (angleDesc) NeedsLatent() bool { return false }
func (a angleDesc) Describe(f int, _ []float32, _ [][]float32) ([]float32, error) {
	return []float32{float32(math.Cos(a.ang(f))), float32(math.Sin(a.ang(f)))}, nil
}

func TestLongLiveRAGDescriptors(t *testing.T) {
	// LatentMean: per-channel spatial mean, L2-normalised.
	lat := []float32{1, 3, 0, 0, -2, -2} // 3 channels × 2 positions
	d, err := LatentMean{Channels: 3}.Describe(0, lat, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{2 / float32(math.Sqrt(8)), 0, -2 / float32(math.Sqrt(8))}
	for i := range want {
		if math.Abs(float64(d[i]-want[i])) > 1e-7 {
			t.Fatalf("latent mean %v, want %v", d, want)
		}
	}
	if _, err := (LatentMean{Channels: 4}).Describe(3, lat, nil); err == nil || !strings.Contains(err.Error(), "frame 3 latent has 6 values") {
		t.Fatalf("bad latent: %v", err)
	}
	// Clean passes without latents are rejected by the default descriptor.
	cfg := tinyConfig()
	cfg.LongLiveRAG.Pool = RAGPoolWindow // frames 1..9 pooled by block 5
	p, _ := New(NameLongLiveRAG, cfg)
	if err := p.Begin(Call{Block: 0, First: true, Clean: true}); err == nil || !strings.Contains(err.Error(), "no latent") {
		t.Fatalf("missing latent: %v", err)
	}
	if err := p.Begin(Call{Block: 0, First: true, Clean: true, Latent: make([]float32, 3*16*48+3)}); err == nil {
		t.Fatal("bad latent length accepted")
	}
	// With latents the default descriptor drives retrieval end to end.
	s := newStream(cfg.Layout, 4)
	for b := 0; b < 6; b++ {
		lat := make([]float32, 3*16*48)
		for i := range lat {
			lat[i] = float32(math.Sin(float64(i*(b+1)) * 0.01))
		}
		if err := p.Begin(Call{Block: b, First: true, Clean: true, Latent: lat}); err != nil {
			t.Fatal(err)
		}
		for layer := 0; layer < 2; layer++ {
			q, k, v := s.qkv(b, 0, layer)
			if _, err := p.Attend(layer, q, k, v); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.End(); err != nil {
			t.Fatal(err)
		}
	}
	if st := p.(StatsReporter).LastStats(); st.Parts[0].Memory != 6*12 {
		t.Fatalf("block 5 retrieved %d tokens, want 72 (top 6 of the 7 eligible frames 1..7)", st.Parts[0].Memory)
	}
}

// TestDeepForcingReuseCap is a hand-built known answer for the reuse cap
// under budget pressure. One token per frame, one block per frame, one head
// of dimension 6 (RoPE pairs split 1/1/1, so on a 1×1 grid only dims 0–1
// rotate), sink 1, cache 4, recent 1: the compressed middle holds 2 tokens
// and, once full, every block compresses the 2 middle tokens and the frame
// that left the tail. Every query is e₂ and frame f's key is s_f·e₂, so a
// token's score is s_f/√6: frames 1, 3 and 5 score 100, 90 and 80, every
// other frame f scores f − 3 (frame 2: 1, frame 4: 2). The cap, not the
// score, decides which tokens go: with MaxReuse 2, frames 1 and 3 lose to
// frame 5 at block 6 after two compressions, and frame 5 loses to frames 7
// and 8 at block 9; with the default 7, frames 1 and 3 hold the middle for
// seven compressions (blocks 4–10) and are dropped for frame 10 at block 11.
func TestDeepForcingReuseCap(t *testing.T) {
	score := func(f int) float32 {
		switch f {
		case 1:
			return 100
		case 3:
			return 90
		case 5:
			return 80
		case 2:
			return 1
		case 4:
			return 2
		}
		return float32(f - 3)
	}
	type tk struct{ frame, reuse int }
	for _, tc := range []struct {
		maxReuse int // 0: the default
		mid      map[int][]tk
	}{
		{2, map[int][]tk{
			4: {{1, 1}, {3, 1}}, 5: {{1, 2}, {3, 2}},
			6: {{5, 1}}, 7: {{5, 1}}, // only frame 5 is eligible; block 7 fits without compressing
			8: {{5, 2}, {7, 1}}, 9: {{7, 2}, {8, 1}}, 10: {{8, 2}, {9, 1}}, 11: {{9, 2}, {10, 1}},
			12: {{10, 2}, {11, 1}}, 13: {{11, 2}, {12, 1}},
		}},
		{0, map[int][]tk{
			4: {{1, 1}, {3, 1}}, 5: {{1, 2}, {3, 2}}, 6: {{1, 3}, {3, 3}}, 7: {{1, 4}, {3, 4}},
			8: {{1, 5}, {3, 5}}, 9: {{1, 6}, {3, 6}}, 10: {{1, 7}, {3, 7}},
			11: {{10, 1}}, 12: {{10, 1}}, 13: {{11, 1}, {12, 1}},
		}},
	} {
		t.Run(fmt.Sprintf("reuse%d", tc.maxReuse), func(t *testing.T) {
			cfg := Config{Layout: Layout{Height: 1, Width: 1, FramesPerBlock: 1, Layers: 1, Heads: 1, HeadDim: 6},
				SinkFrames: 1, CacheFrames: 4, WindowFrames: 2, DeepForcing: DeepForcingConfig{RecentFrames: 1, MaxReuse: tc.maxReuse}}
			pol, err := New(NameDeepForcing, cfg)
			if err != nil {
				t.Fatal(err)
			}
			p := pol.(*DeepForcing)
			if tc.maxReuse == 0 && p.Config().DeepForcing.MaxReuse != 7 {
				t.Fatalf("default max reuse %d, want 7", p.Config().DeepForcing.MaxReuse)
			}
			for b := 0; b < 14; b++ {
				if err := p.Begin(Call{Block: b, First: true, Clean: true}); err != nil {
					t.Fatal(err)
				}
				q := []float32{0, 0, 1, 0, 0, 0}
				k := []float32{0, 0, score(b), 0, 0, 0}
				v := []float32{float32(b), 0, 0, 0, 0, 0}
				ctx, err := p.Attend(0, q, k, v)
				if err != nil {
					t.Fatal(err)
				}
				want := tc.mid[b]
				if ctx.Parts.Memory != len(want) || ctx.Parts.Total() > 4 {
					t.Fatalf("block %d: parts %+v, want %d middle tokens within the 4-token cache", b, ctx.Parts, len(want))
				}
				for i, w := range want {
					r := ctx.Parts.Sink + i
					if f := int(ctx.V[r*6]); f != w.frame || ctx.K[r*6+2] != score(w.frame) {
						t.Fatalf("block %d: middle token %d is frame %d (key %v), want frame %d", b, i, f, ctx.K[r*6+2], w.frame)
					}
					if got := p.mid[0].Reuse[i]; int(got) != w.reuse {
						t.Fatalf("block %d: frame %d survived %d compressions, want %d", b, w.frame, got, w.reuse)
					}
				}
				if err := p.End(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestDeepForcingAuthorsKnownAnswer is a hand-built known answer for the
// three differences between the DensityKV authors' Deep Forcing adapter
// (utils/deep_forcing.py) and the earlier reading. One token per frame,
// one head of dimension 6 on a 1×1 grid (only dims 0–1 rotate, by t
// radians at temporal position t), 3 frames per block, sink 1, cache 12,
// recent 4: the first compression is at block 4 (frames 12–14), whose
// candidates are frames 1–10 for 7 middle slots. Frame f's key is (1, 0,
// s_f, 0, 0, 0) with s = −10, −9, 1, 2, …, 8 for frames 1–10, so q·k =
// q₂·s_f. Every noisy call's queries have q₂ = +1, every clean pass's −1.
//
//   - every-call queries (the authors'): at block 4's first call the buffer
//     holds frame 11's clean query and the block's three noisy ones, Σq₂ =
//     +2, so the top 7 by s: frames 4–10;
//   - clean queries: the last four clean frames, Σq₂ = −4: frames 1–7;
//   - max fusion: max(+s, −s) = |s|: frames 1, 2 and 6–10.
//
// The sink (key (1, 0, …) of frame 0) stays at 0 after the first
// compression and then sits at start − 12 with the authors' relocation
// (block 5: position 3, key (cos 3, sin 3)), or at start − 2 before the
// tail (block 5: 13).
func TestDeepForcingAuthorsKnownAnswer(t *testing.T) {
	s := map[int]float32{1: -10, 2: -9, 3: 1, 4: 2, 5: 3, 6: 4, 7: 5, 8: 6, 9: 7, 10: 8}
	for _, c := range []struct {
		name    string
		queries DFQueries
		sink    DFSink
		fusion  DFFusion
		mid     []int // block 4's middle frames
		sinkPos [3]int
	}{
		{"authors", DFQueriesEveryCall, DFSinkAuthors, DFFusionSum, []int{4, 5, 6, 7, 8, 9, 10}, [3]int{0, 3, 6}},
		{"authors-max", DFQueriesEveryCall, DFSinkAuthors, DFFusionMax, []int{1, 2, 6, 7, 8, 9, 10}, [3]int{0, 3, 6}},
		{"clean-before-tail", DFQueriesClean, DFSinkBeforeTail, DFFusionSum, []int{1, 2, 3, 4, 5, 6, 7}, [3]int{10, 13, 16}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := Config{Layout: Layout{Height: 1, Width: 1, FramesPerBlock: 3, Layers: 1, Heads: 1, HeadDim: 6},
				SinkFrames: 1, CacheFrames: 12, WindowFrames: 5,
				DeepForcing: DeepForcingConfig{RecentFrames: 4, Queries: c.queries, Sink: c.sink, Fusion: c.fusion}}
			pol, err := New(NameDeepForcing, cfg)
			if err != nil {
				t.Fatal(err)
			}
			for b := 0; b < 7; b++ {
				for step := 0; step <= 1; step++ {
					clean := step == 1
					q, k, v := make([]float32, 18), make([]float32, 18), make([]float32, 18)
					for f := 0; f < 3; f++ {
						id := 3*b + f
						q[f*6+2] = 1
						if clean {
							q[f*6+2] = -1
						}
						k[f*6], k[f*6+2], v[f*6] = 1, s[id], float32(id)
					}
					if err := pol.Begin(Call{Block: b, Step: step, First: step == 0, Clean: clean}); err != nil {
						t.Fatal(err)
					}
					ctx, err := pol.Attend(0, q, k, v)
					if err != nil {
						t.Fatal(err)
					}
					if b == 4 && !clean {
						var mid []int
						for i := 0; i < ctx.Parts.Memory; i++ {
							mid = append(mid, int(ctx.V[(ctx.Parts.Sink+i)*6]))
						}
						if fmt.Sprint(mid) != fmt.Sprint(c.mid) || ctx.Parts.Total() != 12 {
							t.Fatalf("block 4: middle frames %v, want %v (parts %+v)", mid, c.mid, ctx.Parts)
						}
					}
					if b >= 4 && !clean {
						pos := float64(c.sinkPos[b-4])
						if math.Abs(float64(ctx.K[0])-math.Cos(pos)) > 1e-6 || math.Abs(float64(ctx.K[1])-math.Sin(pos)) > 1e-6 {
							t.Fatalf("block %d: sink key (%v, %v), want it at position %v: (%v, %v)", b, ctx.K[0], ctx.K[1], pos, math.Cos(pos), math.Sin(pos))
						}
					}
					if err := pol.End(); err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
}

// TestDeepForcingRefusesVersion1Snapshot checks that a snapshot from
// before the authors' adapter (clean-pass query frames, no sink
// bookkeeping) is refused with an error that says so, not resumed with
// another buffer: a format-1 (gob) snapshot without a state version and a
// format-2 one whose Deep Forcing state is version 1.
func TestDeepForcingRefusesVersion1Snapshot(t *testing.T) {
	cfg := tinyConfig()
	pol, err := New(NameDeepForcing, cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := pol.(*DeepForcing)
	v1 := snapshotV1(t, p.core, dfStateV1{QBuf: make([][]qframe, cfg.Layout.Layers)})
	var v2 bytes.Buffer
	if err := p.snapSave(&v2, func(sw *snapWriter) { sw.int(1); sw.frames(nil); sw.bool(false) }); err != nil { // more fields follow the version
		t.Fatal(err)
	}
	for name, snap := range map[string][]byte{"format 1": v1, "format 2": v2.Bytes()} {
		err = p.Load(bytes.NewReader(snap))
		if !errors.Is(err, ErrSnapshot) || !strings.Contains(err.Error(), "version-1") {
			t.Fatalf("%s, version-1 state: %v", name, err)
		}
	}
	var ok bytes.Buffer
	if err := p.Save(&ok); err != nil {
		t.Fatal(err)
	}
	if err := p.Load(bytes.NewReader(ok.Bytes())); err != nil {
		t.Fatalf("version-2 snapshot: %v", err)
	}
}

// snapshotV1 returns a format-1 snapshot of c's header and state (magic,
// payload length, CRC-32, gob payload).
func snapshotV1(t *testing.T, c *core, state any) []byte {
	t.Helper()
	var pl bytes.Buffer
	enc := gob.NewEncoder(&pl)
	if err := enc.Encode(snapHeader{Policy: c.name, Config: toStored(c.cfg), Started: c.started, Committed: c.committed}); err != nil {
		t.Fatal(err)
	}
	if err := enc.Encode(state); err != nil {
		t.Fatal(err)
	}
	out := []byte(snapMagicV1)
	out = binary.LittleEndian.AppendUint64(out, uint64(pl.Len()))
	out = binary.LittleEndian.AppendUint32(out, crc32.ChecksumIEEE(pl.Bytes()))
	return append(out, pl.Bytes()...)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
