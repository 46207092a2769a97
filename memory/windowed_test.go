package memory

import (
	"fmt"
	"testing"
)

// tok is one expected memory token: frame and token index in the frame.
type tok struct{ frame, p int }

// windowSegs returns the expected sink and window frames of block b for the
// windowed policies and the query positions.
func windowSegs(cfg Config, b int) (sink, win []seg, qt []int) {
	F, S, C, W := cfg.Layout.FramesPerBlock, cfg.SinkFrames, cfg.CacheFrames, cfg.WindowFrames
	end := b*F + F
	slot := func(f int) int {
		if end <= C || f < S {
			return f
		}
		return f - (end - C)
	}
	cur := func(f int) int {
		if f >= b*F {
			return f - b*F
		}
		return -1
	}
	for f := 0; f < min(S, end); f++ {
		t := 0 // a committed sink frame is a memory key at t = 0
		if cur(f) >= 0 {
			t = slot(f) // being generated: with its queries
		}
		sink = append(sink, seg{f, t, cur(f)})
	}
	for f := max(S, end-W); f < end; f++ {
		win = append(win, seg{f, slot(f), cur(f)})
	}
	for f := b * F; f < end; f++ {
		qt = append(qt, slot(f))
	}
	return
}

// checkWindowed checks the full context of one layer: sink, the expected
// memory tokens at t = 0, the window, and the query positions.
func (s *stream) checkWindowed(t *testing.T, cfg Config, ctx Context, b, step, layer int, mem []tok) {
	t.Helper()
	l := cfg.Layout
	q, k, v := s.qkv(b, step, layer)
	sink, win, qt := windowSegs(cfg, b)
	n := l.TokensPerFrame() * l.Heads * l.HeadDim
	row := l.Heads * l.HeadDim
	if ctx.Parts != (Parts{Sink: len(sink) * l.TokensPerFrame(), Memory: len(mem), Local: len(win) * l.TokensPerFrame()}) {
		t.Fatalf("block %d layer %d: parts %+v, want sink %d memory %d local %d frames/tokens", b, layer, ctx.Parts, len(sink), len(mem), len(win))
	}
	ms := ctx.Parts.Sink * row
	s.expectFrames(t, Context{K: ctx.K[:ms], V: ctx.V[:ms]}, layer, k, v, sink)
	me := ms + len(mem)*row
	rot0 := map[int][]float32{}
	for i, tk := range mem {
		kk, ok := rot0[tk.frame]
		if !ok {
			kk = rotated(l, s.cleanK[[2]int{tk.frame, layer}], 0)
			rot0[tk.frame] = kk
		}
		if !equal(ctx.K[ms+i*row:ms+(i+1)*row], kk[tk.p*row:(tk.p+1)*row]) {
			t.Fatalf("block %d layer %d: memory entry %d (frame %d token %d): key differs", b, layer, i, tk.frame, tk.p)
		}
		if !equal(ctx.V[ms+i*row:ms+(i+1)*row], s.cleanV[[2]int{tk.frame, layer}][tk.p*row:(tk.p+1)*row]) {
			t.Fatalf("block %d layer %d: memory entry %d: value differs", b, layer, i)
		}
	}
	s.expectFrames(t, Context{K: ctx.K[me:], V: ctx.V[me:]}, layer, k, v, win)
	for f, tq := range qt {
		if !equal(ctx.Q[f*n:(f+1)*n], rotated(l, q[f*n:(f+1)*n], tq)) {
			t.Fatalf("block %d: query frame %d not at t=%d", b, f, tq)
		}
	}
}

// historyTokens lists the non-sink tokens that left the window by block b.
func historyTokens(cfg Config, b int) []tok {
	F, S, W := cfg.Layout.FramesPerBlock, cfg.SinkFrames, cfg.WindowFrames
	var out []tok
	for f := S; f < b*F+F-W; f++ {
		for p := 0; p < cfg.Layout.TokensPerFrame(); p++ {
			out = append(out, tok{f, p})
		}
	}
	return out
}

// controlMemory is the memory a control policy holds after seeing the
// history hist with the given capacity, written from the policies'
// definitions: everything (FullHistory), the newest tokens (FIFO), or every
// st-th token for the smallest power-of-two stride st that fits
// (UniformStride).
func controlMemory(name string, hist []tok, capacity int) []tok {
	switch name {
	case NameFullHistory:
		return hist
	case NameFIFO:
		return hist[max(0, len(hist)-capacity):]
	case NameUniformStride:
		st := 1
		for (len(hist)+st-1)/st > capacity {
			st *= 2
		}
		var mem []tok
		for i := 0; i < len(hist); i += st {
			mem = append(mem, hist[i])
		}
		return mem
	}
	panic("controlMemory: not a control policy: " + name)
}

func TestControlsSelection(t *testing.T) {
	for _, name := range []string{NameFullHistory, NameFIFO, NameUniformStride} {
		for _, capacity := range []int{24, 30, 72} {
			t.Run(fmt.Sprintf("%s/cap%d", name, capacity), func(t *testing.T) {
				cfg := tinyConfig()
				cfg.Capacity = capacity
				p, err := New(name, cfg)
				if err != nil {
					t.Fatal(err)
				}
				s := newStream(cfg.Layout, 3)
				for b := 0; b < 9; b++ {
					want := controlMemory(name, historyTokens(cfg, b), capacity)
					for st := 0; st <= 1; st++ {
						ctx, _ := s.call(t, p, Call{Block: b, Step: st, First: st == 0, Clean: st == 1})
						for l := range ctx {
							s.checkWindowed(t, cfg, ctx[l], b, st, l, want)
						}
					}
					stats := p.(StatsReporter).LastStats()
					if stats.Occupancy[1][1] != len(want) {
						t.Fatalf("block %d: occupancy %d, want %d", b, stats.Occupancy[1][1], len(want))
					}
					// Live bytes: sink + unoffered frames, plus the memory.
					m := storageModel(cfg)
					frames := min(b*3+3, 1) + min(b*3+3-1, 5)
					want2 := m.KVFrames(int64(frames))
					if name == NameFullHistory {
						want2 += m.KV(int64(len(want)))
					} else {
						want2 += m.Provenance(int64(len(want)))
					}
					if p.Bytes() != want2 || stats.Bytes != want2 {
						t.Fatalf("block %d: bytes %d (stats %d), want %d", b, p.Bytes(), stats.Bytes, want2)
					}
				}
			})
		}
	}
}

// checkSinkWindow checks the sink and window parts of one layer's context
// and the query positions (windowSegs), whatever the memory holds.
func (s *stream) checkSinkWindow(t *testing.T, cfg Config, ctx Context, b, step, layer int) {
	t.Helper()
	l := cfg.Layout
	q, k, v := s.qkv(b, step, layer)
	sink, win, qt := windowSegs(cfg, b)
	P, row := l.TokensPerFrame(), l.Heads*l.HeadDim
	if ctx.Parts.Sink != len(sink)*P || ctx.Parts.Local != len(win)*P {
		t.Fatalf("block %d layer %d: parts %+v, want %d sink and %d window frames", b, layer, ctx.Parts, len(sink), len(win))
	}
	ms, me := ctx.Parts.Sink*row, (ctx.Parts.Sink+ctx.Parts.Memory)*row
	s.expectFrames(t, Context{K: ctx.K[:ms], V: ctx.V[:ms]}, layer, k, v, sink)
	s.expectFrames(t, Context{K: ctx.K[me:], V: ctx.V[me:]}, layer, k, v, win)
	n := P * row
	for f, tq := range qt {
		if !equal(ctx.Q[f*n:(f+1)*n], rotated(l, q[f*n:(f+1)*n], tq)) {
			t.Fatalf("block %d: query frame %d not at t=%d", b, f, tq)
		}
	}
}

// TestWindowedMultiFrameSink runs every windowed policy with a four-frame
// sink (more than one block, so block 1 generates the sink's last frame):
// committed sink frames all sit at t = 0 (memory keys), a sink frame being
// generated sits at its slot with its queries, window and queries keep
// their rolling-cache slots, and no sink frame is ever offered to the
// memory.
func TestWindowedMultiFrameSink(t *testing.T) {
	for _, name := range []string{NameDensityKV, NameLongLiveRAG, NameFullHistory, NameFIFO, NameUniformStride} {
		t.Run(name, func(t *testing.T) {
			cfg := tinyConfig()
			cfg.SinkFrames = 4
			cfg.Capacity = 0 // (12 − 4 − 5)·12 = 36
			cfg.LongLiveRAG.Descriptor = RAGKeyMean
			cfg, err := cfg.Resolve()
			if err != nil {
				t.Fatal(err)
			}
			p, err := New(name, cfg)
			if err != nil {
				t.Fatal(err)
			}
			P := cfg.Layout.TokensPerFrame()
			s := newStream(cfg.Layout, 19)
			for b := 0; b < 8; b++ {
				sink, _, _ := windowSegs(cfg, b)
				for _, sg := range sink { // the oracle's geometry, spelled out
					want := 0
					if sg.cur >= 0 {
						want = sg.frame // being generated (block 0 and 1): absolute, with its queries
					}
					if sg.t != want {
						t.Fatalf("block %d: oracle puts sink frame %d at t=%d, want %d", b, sg.frame, sg.t, want)
					}
				}
				for st := 0; st <= 1; st++ {
					ctx, _ := s.call(t, p, Call{Block: b, Step: st, First: st == 0, Clean: st == 1})
					for l := range ctx {
						s.checkSinkWindow(t, cfg, ctx[l], b, st, l)
						if name == NameFullHistory {
							s.checkWindowed(t, cfg, ctx[l], b, st, l, historyTokens(cfg, b))
						}
					}
				}
				var srcs []int64
				switch q := p.(type) {
				case *DensityKV:
					for _, bk := range q.Banks() {
						for h := 0; h < cfg.Layout.Heads; h++ {
							for _, e := range bk.Entries(h) {
								srcs = append(srcs, e.Source)
							}
						}
					}
				case *Controls:
					srcs = q.Sources()
				case *LongLiveRAG:
					for _, f := range q.Retrieved() {
						srcs = append(srcs, int64(f*P))
					}
				}
				for _, src := range srcs {
					if src < int64(cfg.SinkFrames*P) {
						t.Fatalf("block %d: memory holds token %d of a sink frame", b, src)
					}
				}
				if b == 7 && len(srcs) == 0 {
					t.Fatalf("%s: memory still empty at block 7", name)
				}
			}
		})
	}
}
