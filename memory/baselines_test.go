package memory

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
)

// dfOracle is a literal model of Deep Forcing's cache for one layer.
type dfOracle struct {
	mid        []dfTok
	hist       []int // committed non-sink frames in the tail or awaiting compression
	compressed bool
}

type dfTok struct {
	frame, p int
	reuse    int
}

// TestDeepForcingSelection runs Deep Forcing on a random stream against a
// literal oracle of its cache (scores, top-budget selection, reuse cap,
// chronological order, positions) for the default cap of 7 and for 1, long
// enough that each cap excludes tokens the scores would have kept.
func TestDeepForcingSelection(t *testing.T) {
	for _, maxReuse := range []int{7, 1} {
		t.Run(fmt.Sprintf("reuse%d", maxReuse), func(t *testing.T) {
			cfg := tinyConfig()
			cfg.DeepForcing.MaxReuse = maxReuse
			pol, err := New(NameDeepForcing, cfg)
			if err != nil {
				t.Fatal(err)
			}
			l := cfg.Layout
			P, F, H, D := l.TokensPerFrame(), l.FramesPerBlock, l.Heads, l.HeadDim
			row := H * D
			R, C := cfg.DeepForcing.RecentFrames, cfg.CacheFrames
			budget := (C - 1 - R) * P
			blocks := 14
			s := newStream(l, 21)
			or := make([]dfOracle, l.Layers)
			capped, maxSeen := 0, 0 // kept-quality candidates excluded by the cap; most compressions survived
			for b := 0; b < blocks; b++ {
				// Oracle update at the block's first call.
				for layer := range or {
					o := &or[layer]
					if 1*P+len(o.mid)+len(o.hist)*P+F*P <= C*P || b == 0 {
						continue
					}
					keep := R - F
					leaving := o.hist[:len(o.hist)-keep]
					var cands []dfTok
					cands = append(cands, o.mid...)
					for _, f := range leaving {
						for p := 0; p < P; p++ {
							cands = append(cands, dfTok{f, p, 0})
						}
					}
					qs := make([]float64, row)
					for f := b*F - R; f < b*F; f++ {
						qr := rotated(l, s.cleanQ[[2]int{f, layer}], f)
						for i, v := range qr {
							qs[i%row] += float64(v)
						}
					}
					score := make([]float64, len(cands))
					var idx []int
					for i, c := range cands {
						kr := rotated(l, s.cleanK[[2]int{c.frame, layer}], c.frame)[c.p*row : (c.p+1)*row]
						for h := 0; h < H; h++ {
							for d := 0; d < D; d++ {
								score[i] += qs[h*D+d] * float64(kr[h*D+d])
							}
						}
						score[i] /= float64(H) * math.Sqrt(float64(D))
						maxSeen = max(maxSeen, c.reuse)
						if c.reuse < maxReuse {
							idx = append(idx, i)
						}
					}
					sort.SliceStable(idx, func(a, b int) bool { return score[idx[a]] > score[idx[b]] })
					idx = idx[:min(budget, len(idx))]
					// Capped tokens that outscore a kept one (or would fill a
					// free slot): the cap changed the selection.
					for i, c := range cands {
						if c.reuse >= maxReuse && (len(idx) < budget || score[i] > score[idx[len(idx)-1]]) {
							capped++
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
				}
				for st := 0; st <= 1; st++ {
					ctx, _ := s.call(t, pol, Call{Block: b, Step: st, First: st == 0, Clean: st == 1})
					for layer, cx := range ctx {
						o := or[layer]
						q, k, v := s.qkv(b, st, layer)
						tail := b * F
						if len(o.hist) > 0 {
							tail = o.hist[0]
						}
						sinkT := 0
						if o.compressed {
							sinkT = tail - 1
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
						for f := b * F; f < b*F+F; f++ {
							if f > 0 {
								win = append(win, seg{f, f, f - b*F})
							}
						}
						if cx.Parts != (Parts{Sink: P, Memory: len(o.mid), Local: len(win) * P}) {
							t.Fatalf("block %d layer %d: parts %+v, oracle middle %d tail %d frames", b, layer, cx.Parts, len(o.mid), len(win))
						}
						s.expectFrames(t, Context{K: cx.K[:P*row], V: cx.V[:P*row]}, layer, k, v, sink)
						for i, tk := range o.mid {
							want := rotated(l, s.cleanK[[2]int{tk.frame, layer}], tk.frame)[tk.p*row : (tk.p+1)*row]
							got := cx.K[(P+i)*row : (P+i+1)*row]
							if !equal(got, want) {
								t.Fatalf("block %d layer %d: middle token %d (frame %d token %d) differs", b, layer, i, tk.frame, tk.p)
							}
						}
						me := (P + len(o.mid)) * row
						s.expectFrames(t, Context{K: cx.K[me:], V: cx.V[me:]}, layer, k, v, win)
						n := P * row
						for f := 0; f < F; f++ {
							if !equal(cx.Q[f*n:(f+1)*n], rotated(l, q[f*n:(f+1)*n], b*F+f)) {
								t.Fatalf("block %d: query %d not absolute", b, f)
							}
						}
						if b >= 4 && maxReuse == 7 && cx.Parts.Total() != C*P {
							t.Fatalf("block %d: %d keys, want the full %d-token cache", b, cx.Parts.Total(), C*P)
						}
					}
				}
				for layer := range or {
					for f := b * F; f < b*F+F; f++ {
						if f > 0 {
							or[layer].hist = append(or[layer].hist, f)
						}
					}
				}
			}
			// Long enough for the cap to bind: 14 blocks are 10 compressions,
			// and the 8th (block 11) is the first a token can be capped at 7.
			if maxSeen != maxReuse || capped == 0 {
				t.Fatalf("the reuse cap %d never changed the selection (most compressions survived %d, %d capped candidates would have been kept)", maxReuse, maxSeen, capped)
			}
			// Steady state: the storage formula of a full cache.
			if maxReuse == 7 {
				sc := storageConfig(cfg)
				if got, want := pol.Bytes(), sc.DeepForcing(); got != want {
					t.Fatalf("bytes %d, want storage formula %d", got, want)
				}
			}
		})
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
