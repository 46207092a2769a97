package memory

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// recacheQKV returns random q, k, v of n frames for a recache.
func recacheQKV(l Layout, n int, seed uint64) (q, k, v []float32) {
	r := rand.New(rand.NewPCG(seed, 99))
	m := n * l.TokensPerFrame() * l.Heads * l.HeadDim
	q, k, v = make([]float32, m), make([]float32, m), make([]float32, m)
	for i := range q {
		q[i], k[i], v[i] = float32(r.NormFloat64()), float32(r.NormFloat64()), float32(r.NormFloat64())
	}
	return q, k, v
}

// runRecache runs a recache before block b through p with fresh q/k/v, checks
// its frames and parts, and records the new K/V as the stream's clean K/V
// of those frames (so that later contexts are checked against them). It
// returns the per-layer contexts and the q/k/v.
func runRecache(t *testing.T, s *stream, p Policy, b int, wantFrames []int, wantParts Parts) ([]Context, [][3][]float32) {
	t.Helper()
	rc := p.(Recacher)
	fr := rc.RecacheFrames(b)
	if !slices.Equal(fr, wantFrames) {
		t.Fatalf("recache before block %d: frames %v, want %v", b, fr, wantFrames)
	}
	if err := rc.BeginRecache(b); err != nil {
		t.Fatal(err)
	}
	l := s.lay
	n := l.TokensPerFrame() * l.Heads * l.HeadDim
	var ctxs []Context
	var in [][3][]float32
	for layer := 0; layer < l.Layers; layer++ {
		q, k, v := recacheQKV(l, len(fr), uint64(100*b+layer))
		cx, err := rc.AttendRecache(layer, q, k, v)
		if err != nil {
			t.Fatal(err)
		}
		if cx.Parts.Sink != wantParts.Sink || cx.Parts.Local != wantParts.Local {
			t.Fatalf("recache before block %d layer %d: parts %+v, want sink %d local %d", b, layer, cx.Parts, wantParts.Sink, wantParts.Local)
		}
		ctxs = append(ctxs, Context{Q: append([]float32(nil), cx.Q...), K: append([]float32(nil), cx.K...), V: append([]float32(nil), cx.V...), Parts: cx.Parts})
		in = append(in, [3][]float32{q, k, v})
	}
	if err := rc.EndRecache(); err != nil {
		t.Fatal(err)
	}
	for layer, x := range in {
		for i, id := range fr {
			s.cleanK[[2]int{id, layer}] = append([]float32(nil), x[1][i*n:(i+1)*n]...)
			s.cleanV[[2]int{id, layer}] = append([]float32(nil), x[2][i*n:(i+1)*n]...)
		}
	}
	return ctxs, in
}

// TestNativeRecache pins LongLive's recache (global sink) on Native and
// Infinity-RoPE: before block 2 (start 6 ≤ the 12-frame cache) the range
// starts at frame 0, so every resident frame, the sink included, is
// recomputed; before block 6 (start 18) the 11 resident non-sink frames
// 7–17 are, the sink keeping its K/V. The recache call attends [sink | the
// recomputed frames] with keys and queries at absolute positions (at slots
// 0…n−1 with Infinity-RoPE), and the next block reads the new K/V.
func TestNativeRecache(t *testing.T) {
	for _, name := range []string{NameNative, NameInfinityRoPE} {
		for _, b := range []int{2, 6} {
			t.Run(fmt.Sprintf("%s/block%d", name, b), func(t *testing.T) {
				cfg := tinyConfig()
				p, err := New(name, cfg)
				if err != nil {
					t.Fatal(err)
				}
				l := cfg.Layout
				P, n := l.TokensPerFrame(), l.TokensPerFrame()*l.Heads*l.HeadDim
				s := newStream(l, 31)
				for bb := 0; bb < b; bb++ {
					s.block(t, p, bb, 1)
				}
				start := b * l.FramesPerBlock
				var frames []int
				kept := []seg{}
				if start <= cfg.CacheFrames {
					for f := 0; f < start; f++ {
						frames = append(frames, f)
					}
				} else {
					for f := start - (cfg.CacheFrames - cfg.SinkFrames); f < start; f++ {
						frames = append(frames, f)
					}
					t0 := 0
					kept = append(kept, seg{0, t0, -1})
				}
				reindex := name == NameInfinityRoPE
				oldSink := s.cleanK[[2]int{0, 0}]
				ctxs, in := runRecache(t, s, p, b, frames, Parts{Sink: P, Local: (len(frames) - 1 + len(kept)) * P})
				for layer, cx := range ctxs {
					segs := append([]seg(nil), kept...)
					for i, f := range frames {
						tq := f
						if reindex {
							tq = len(kept) + i
						}
						segs = append(segs, seg{f, tq, i})
					}
					if len(kept) > 0 && layer == 0 {
						// The kept sink is the old one (runRecache recorded only the recomputed frames).
						if !equal(s.cleanK[[2]int{0, 0}], oldSink) {
							t.Fatal("the sink was recomputed")
						}
					}
					s.expectFrames(t, cx, layer, in[layer][1], in[layer][2], segs)
					for i, sg := range segs[len(kept):] {
						if !equal(cx.Q[i*n:(i+1)*n], rotated(l, in[layer][0][i*n:(i+1)*n], sg.t)) {
							t.Fatalf("recache query of frame %d not at t = %d", sg.frame, sg.t)
						}
					}
				}
				// The next block reads the recomputed K/V.
				ctx, _ := s.call(t, p, Call{Block: b, Step: 0, First: true})
				for layer, cx := range ctx {
					_, k, v := s.qkv(b, 0, layer)
					segs, _ := nativeSegs(cfg, b, reindex)
					s.expectFrames(t, cx, layer, k, v, segs)
				}
			})
		}
	}
}

// TestWindowedRecache pins the recache of the windowed policies: the frames
// they keep raw within the range (the window frames not yet offered to the
// memory, and the sink when the range starts at frame 0) are recomputed,
// attending [kept sink (t = 0) | recomputed sink | memory | recomputed
// window frames] at their rolling-cache slots; frames leaving the window
// afterwards enter the memory with their new K/V.
func TestWindowedRecache(t *testing.T) {
	for _, name := range []string{NameDensityKV, NameFIFO} {
		t.Run(name, func(t *testing.T) {
			cfg := tinyConfig()
			l := cfg.Layout
			P, row := l.TokensPerFrame(), l.Heads*l.HeadDim
			n := P * row
			for _, c := range []struct {
				b      int
				frames []int
				sink   bool
			}{{2, []int{0, 1, 2, 3, 4, 5}, true}, {6, []int{13, 14, 15, 16, 17}, false}} {
				p, err := New(name, cfg)
				if err != nil {
					t.Fatal(err)
				}
				s := newStream(l, 37)
				for bb := 0; bb < c.b; bb++ {
					s.block(t, p, bb, 1)
				}
				end := c.b * l.FramesPerBlock
				local := len(c.frames)
				if c.sink {
					local--
				}
				ctxs, in := runRecache(t, s, p, c.b, c.frames, Parts{Sink: P, Local: local * P})
				for layer, cx := range ctxs {
					var sink, win []seg
					if !c.sink {
						sink = append(sink, seg{0, 0, -1})
					}
					for i, f := range c.frames {
						slot := f
						if end > cfg.CacheFrames {
							slot = f - (end - cfg.CacheFrames)
						}
						if f < cfg.SinkFrames {
							sink = append(sink, seg{f, slot, i})
						} else {
							win = append(win, seg{f, slot, i})
						}
						if !equal(cx.Q[i*n:(i+1)*n], rotated(l, in[layer][0][i*n:(i+1)*n], slot)) {
							t.Fatalf("block %d: recache query of frame %d not at slot %d", c.b, f, slot)
						}
					}
					ms, me := cx.Parts.Sink*row, (cx.Parts.Sink+cx.Parts.Memory)*row
					s.expectFrames(t, Context{K: cx.K[:ms], V: cx.V[:ms]}, layer, in[layer][1], in[layer][2], sink)
					s.expectFrames(t, Context{K: cx.K[me:], V: cx.V[me:]}, layer, in[layer][1], in[layer][2], win)
				}
				for bb := c.b; bb < c.b+2; bb++ {
					ctx := s.block(t, p, bb, 1)
					for layer, cx := range ctx {
						s.checkSinkWindow(t, cfg, cx, bb, 0, layer)
					}
				}
				if f, ok := p.(*Controls); ok && c.b == 6 {
					// Frames 13–15 left the window at block 6: FIFO holds their new keys at t = 0.
					src := f.Sources()
					for i, id := range src {
						fr, h, w := l.TokenPos(id)
						if fr < 13 || fr > 15 {
							continue
						}
						tp := h*l.Width + w
						want := rotated(l, s.cleanK[[2]int{fr, 0}], 0)[tp*row : (tp+1)*row]
						if !equal(f.s.store.k[0][i*row:(i+1)*row], want) {
							t.Fatalf("memory token of frame %d is not the recomputed key", fr)
						}
					}
				}
			}
		})
	}
}

// TestRecacheProtocol checks the recache call's errors: only between
// blocks and before the next block, layer order, sizes, non-finite values;
// a failed call changes nothing, and no other call runs while it is open.
func TestRecacheProtocol(t *testing.T) {
	cfg := tinyConfig()
	p, err := New(NameNative, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rc := p.(Recacher)
	s := newStream(cfg.Layout, 5)
	s.block(t, p, 0, 1)
	if err := rc.BeginRecache(0); err == nil {
		t.Error("recache before block 0 accepted")
	}
	if err := rc.BeginRecache(2); err == nil {
		t.Error("recache before block 2 (block 1 not generated) accepted")
	}
	if err := rc.BeginRecache(1); err != nil {
		t.Fatal(err)
	}
	if err := p.Begin(Call{Block: 1, First: true}); err == nil || !strings.Contains(err.Error(), "recache is open") {
		t.Errorf("a block call during a recache: %v", err)
	}
	if err := rc.EndRecache(); err == nil {
		t.Error("EndRecache before its layers accepted")
	}
	q, k, v := recacheQKV(cfg.Layout, 3, 1)
	if _, err := rc.AttendRecache(1, q, k, v); err == nil {
		t.Error("layer 1 first accepted")
	}
	if _, err := rc.AttendRecache(0, q[:10], k, v); err == nil {
		t.Error("short q accepted")
	}
	k[7] = float32(nanF())
	if _, err := rc.AttendRecache(0, q, k, v); err == nil || !strings.Contains(err.Error(), "NaN") {
		t.Errorf("NaN key: %v", err)
	}
}
