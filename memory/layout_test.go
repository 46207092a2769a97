package memory

import (
	"testing"

	"github.com/densitykv/densitykv/bank"
)

// bf16 returns x rounded to bfloat16 (a copy).
func bf16(x []float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = bank.RoundBF16(v)
	}
	return out
}

// oddConfig is a non-default geometry: 4 frames per block, a 2×5 grid
// (10 tokens per frame), 3 heads of dimension 18 (RoPE split 3/3/3), a
// 6-frame window and a 15-frame cache, so capacity (15 − 1 − 6)·10 = 80
// tokens, LongLive-RAG top-8 frames and a Deep Forcing middle of
// (15 − 1 − 4)·10 = 100 tokens.
func oddConfig(t *testing.T) Config {
	t.Helper()
	c, err := Config{Layout: Layout{Height: 2, Width: 5, FramesPerBlock: 4, Layers: 2, Heads: 3, HeadDim: 18},
		WindowFrames: 6, CacheFrames: 15, LongLiveRAG: LongLiveRAGConfig{Descriptor: RAGKeyMean}}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if c.Capacity != 80 || c.LongLiveRAG.TopK != 8 || c.SinkFrames != 1 || c.DeepForcing.RecentFrames != 4 {
		t.Fatalf("resolved %+v", c)
	}
	return c
}

// TestPoliciesOnNonDefaultLayout runs all eight policies on oddConfig and
// checks, after every call, the packing bound, the RoPE position of every
// context row (sink, memory, window/tail, queries) against the clean K/V
// rotated with the reference rope package, and, after every block, the live
// bytes against the storage formulas for the state held.
func TestPoliciesOnNonDefaultLayout(t *testing.T) {
	cfg := oddConfig(t)
	l := cfg.Layout
	F, S, C, W := l.FramesPerBlock, cfg.SinkFrames, cfg.CacheFrames, cfg.WindowFrames
	P, H, D := l.TokensPerFrame(), l.Heads, l.HeadDim
	row, n := H*D, P*H*D
	bound := C * P // matched bound: (S + W)·P + capacity = 150
	if (S+W)*P+cfg.Capacity != bound {
		t.Fatalf("matched bound %d ≠ cache %d", (S+W)*P+cfg.Capacity, bound)
	}
	m := storageModel(cfg)
	sc := storageConfig(cfg) // LongLive-RAG key-mean descriptor: H·D = 54 values
	one := m
	one.Layers = 1
	const blocks = 10
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			p, err := New(name, cfg)
			if err != nil {
				t.Fatal(err)
			}
			s := newStream(l, 23)
			most, lastMemory := 0, 0
			for b := 0; b < blocks; b++ {
				end := b*F + F
				var clean []Context
				for st := 0; st <= 1; st++ {
					ctx, _ := s.call(t, p, Call{Block: b, Step: st, First: st == 0, Clean: st == 1})
					clean = ctx
					for layer, cx := range ctx {
						most = max(most, cx.Parts.Total())
						lastMemory = cx.Parts.Memory
						if name != NameFullHistory && cx.Parts.Total() > bound {
							t.Fatalf("block %d layer %d: %d keys > matched bound %d", b, layer, cx.Parts.Total(), bound)
						}
						q, k, v := s.qkv(b, st, layer)
						switch pp := p.(type) {
						case *Native:
							segs, qt := nativeSegs(cfg, b, name == NameInfinityRoPE)
							s.expectFrames(t, cx, layer, k, v, segs)
							for f, tq := range qt {
								if !equal(cx.Q[f*n:(f+1)*n], rotated(l, q[f*n:(f+1)*n], tq)) {
									t.Fatalf("block %d: query frame %d not at t=%d", b, f, tq)
								}
							}
						case *DeepForcing:
							if st == 0 { // the clean pass reads the same cache, but its End has moved on
								checkDeepForcingRows(t, s, cfg, pp, cx, b, layer, q, k, v)
							}
						case *DensityKV:
							s.checkSinkWindow(t, cfg, cx, b, st, layer)
							bk := pp.Banks()[layer]
							ms := cx.Parts.Sink * row
							if cx.Parts.Memory != bk.Len() || bk.Len() > cfg.Capacity {
								t.Fatalf("block %d layer %d: memory %d, bank %d, capacity %d", b, layer, cx.Parts.Memory, bk.Len(), cfg.Capacity)
							}
							for h := 0; h < H; h++ {
								for i, e := range bk.Entries(h) {
									f, hh, ww := l.TokenPos(e.Source)
									tp := hh*l.Width + ww
									if f < S || f >= end-W {
										t.Fatalf("block %d: bank entry from frame %d (sink or window)", b, f)
									}
									// bf16 payload: the bank keeps the rounded t=0 key and value.
									wk := bf16(rotated(l, s.cleanK[[2]int{f, layer}], 0)[tp*row+h*D : tp*row+(h+1)*D])
									wv := bf16(s.cleanV[[2]int{f, layer}][tp*row+h*D : tp*row+(h+1)*D])
									if !equal(cx.K[ms+i*row+h*D:ms+i*row+(h+1)*D], wk) || !equal(cx.V[ms+i*row+h*D:ms+i*row+(h+1)*D], wv) {
										t.Fatalf("block %d layer %d head %d entry %d: not the t=0 clean K/V of frame %d token %d", b, layer, h, i, f, tp)
									}
								}
							}
						case *LongLiveRAG:
							var mem []tok
							for _, f := range pp.Retrieved() {
								for tp := 0; tp < P; tp++ {
									mem = append(mem, tok{f, tp})
								}
							}
							if len(pp.Retrieved()) > cfg.LongLiveRAG.TopK {
								t.Fatalf("block %d: retrieved %v", b, pp.Retrieved())
							}
							s.checkWindowed(t, cfg, cx, b, st, layer, mem)
						case *Controls:
							mem := controlMemory(name, historyTokens(cfg, b), cfg.Capacity)
							if len(pp.Sources()) != len(mem) {
								t.Fatalf("block %d: %d sources, want %d", b, len(pp.Sources()), len(mem))
							}
							s.checkWindowed(t, cfg, cx, b, st, layer, mem)
						}
					}
				}
				// Live bytes after the clean pass, by the storage formulas.
				local := int64(min(end, S) + min(end-S, W)) // sink + window frames held
				var want int64
				switch pp := p.(type) {
				case *Native:
					want = m.KVFrames(int64(min(end, C)))
				case *DeepForcing:
					for _, cx := range clean { // after the commit the cache is what the clean pass read
						nt := int64(cx.Parts.Total())
						want += one.KV(nt) + one.DeepForcingMeta(nt) + one.QueryBuffer(int64(min(end, cfg.DeepForcing.RecentFrames)*P))
					}
				case *DensityKV:
					want = m.KVFrames(local) + bankStates(pp)*m.BankStates(1)
				case *LongLiveRAG:
					want = sc.LongLiveRAG(int64(end))
				case *Controls:
					nm := int64(len(pp.Sources()))
					want = m.KVFrames(local) + m.Provenance(nm)
					if name == NameFullHistory {
						want = m.KVFrames(local) + m.KV(nm)
					}
				}
				if got := p.Bytes(); got != want {
					t.Fatalf("block %d: live bytes %d, storage formula %d", b, got, want)
				}
			}
			// Steady state: the bounded policies that fill their budget
			// reach the matched bound and the storage table's totals.
			steady := map[string]int64{NameNative: sc.Native(), NameInfinityRoPE: sc.Native(), NameFIFO: sc.Controls(),
				NameDeepForcing: sc.DeepForcing(), NameLongLiveRAG: sc.LongLiveRAG(blocks * int64(F)), NameFullHistory: sc.FullHistory(blocks * int64(F))}
			if w, ok := steady[name]; ok && p.Bytes() != w {
				t.Fatalf("final live bytes %d, storage table %d", p.Bytes(), w)
			}
			if (lastMemory == 0) != (name == NameNative || name == NameInfinityRoPE) {
				t.Fatalf("last call read %d memory tokens", lastMemory)
			}
			switch {
			case name == NameFullHistory && most <= bound:
				t.Fatalf("full history read at most %d keys, want more than %d", most, bound)
			case name != NameFullHistory && name != NameUniformStride && name != NameDensityKV && most != bound:
				t.Fatalf("never reached the matched bound (%d of %d)", most, bound)
			}
		})
	}
	if sc.DescriptorDim != H*D {
		t.Fatalf("storage descriptor dim %d, want the key-mean descriptor's %d", sc.DescriptorDim, H*D)
	}
}

// checkDeepForcingRows checks one layer's Deep Forcing context row by row:
// the sink at its frame (or, once compressed, just before the tail), the
// compressed middle in chronological order with each key at its own
// absolute frame, the tail and the queries at absolute positions.
func checkDeepForcingRows(t *testing.T, s *stream, cfg Config, p *DeepForcing, cx Context, b, layer int, q, k, v []float32) {
	t.Helper()
	l := cfg.Layout
	F, S := l.FramesPerBlock, cfg.SinkFrames
	P, row := l.TokensPerFrame(), l.Heads*l.HeadDim
	n := P * row
	start := b * F
	mid := p.mid[layer]
	budget := (cfg.CacheFrames - S - cfg.DeepForcing.RecentFrames) * P
	if cx.Parts.Memory != len(mid.Src) || len(mid.Src) > budget {
		t.Fatalf("block %d layer %d: middle %d tokens (state %d), budget %d", b, layer, cx.Parts.Memory, len(mid.Src), budget)
	}
	var sink, tail []seg
	tailStart := start
	if len(p.hist) > 0 {
		tailStart = p.hist[0].ID
	}
	for f := 0; f < min(S, start); f++ {
		t0 := f + p.sinkShift[layer] // the authors' relocation (TestDeepForcingSelection derives it)
		if cfg.DeepForcing.Sink == DFSinkBeforeTail {
			t0 = f
			if p.compressed {
				t0 = tailStart - S + f
			}
		}
		sink = append(sink, seg{f, t0, -1})
	}
	for f := start; f < min(S, start+F); f++ {
		sink = append(sink, seg{f, f, f - start})
	}
	for _, f := range p.hist {
		tail = append(tail, seg{f.ID, f.ID, -1})
	}
	for f := max(S, start); f < start+F; f++ {
		tail = append(tail, seg{f, f, f - start})
	}
	if cx.Parts.Sink != len(sink)*P || cx.Parts.Local != len(tail)*P {
		t.Fatalf("block %d layer %d: parts %+v, want %d sink and %d tail frames", b, layer, cx.Parts, len(sink), len(tail))
	}
	ms := cx.Parts.Sink * row
	me := ms + cx.Parts.Memory*row
	s.expectFrames(t, Context{K: cx.K[:ms], V: cx.V[:ms]}, layer, k, v, sink)
	s.expectFrames(t, Context{K: cx.K[me:], V: cx.V[me:]}, layer, k, v, tail)
	for i, src := range mid.Src {
		f, hh, ww := l.TokenPos(src)
		tp := hh*l.Width + ww
		if f < S || f >= tailStart || (i > 0 && src <= mid.Src[i-1]) {
			t.Fatalf("block %d layer %d: middle token %d from frame %d (tail from %d) out of order or place", b, layer, i, f, tailStart)
		}
		want := rotated(l, s.cleanK[[2]int{f, layer}], f)[tp*row : (tp+1)*row]
		if !equal(cx.K[ms+i*row:ms+(i+1)*row], want) || !equal(cx.V[ms+i*row:ms+(i+1)*row], s.cleanV[[2]int{f, layer}][tp*row:(tp+1)*row]) {
			t.Fatalf("block %d layer %d: middle token %d is not frame %d token %d at its absolute position", b, layer, i, f, tp)
		}
	}
	for f := 0; f < F; f++ {
		if !equal(cx.Q[f*n:(f+1)*n], rotated(l, q[f*n:(f+1)*n], start+f)) {
			t.Fatalf("block %d: query frame %d not at t=%d", b, f, start+f)
		}
	}
}
