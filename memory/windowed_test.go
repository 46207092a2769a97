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
		sink = append(sink, seg{f, slot(f), cur(f)})
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
					hist := historyTokens(cfg, b)
					var want []tok
					switch name {
					case NameFullHistory:
						want = hist
					case NameFIFO:
						want = hist[max(0, len(hist)-capacity):]
					case NameUniformStride:
						st := 1
						for (len(hist)+st-1)/st > capacity {
							st *= 2
						}
						for i := 0; i < len(hist); i += st {
							want = append(want, hist[i])
						}
					}
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
