package memory

import (
	"fmt"
	"slices"
	"testing"
)

// constDesc describes every frame by the same vector, so every pool frame
// is equally similar and ties (newest first) decide: the retrieved frames
// are the TopK newest eligible ones.
type constDesc struct{}

func (constDesc) Dim() int          { return 2 }
func (constDesc) NeedsLatent() bool { return false }
func (constDesc) Describe(int, []float32, [][]float32) ([]float32, error) {
	return []float32{1, 0}, nil
}

// TestLongLiveRAGAuthorsPoolKnownAnswer is the paper's setting (3-frame
// blocks, sink 1, physical cache 12, local window 5, memory_size 6,
// recent_exclude 5; paper_cases.yaml), derived by hand from the authors'
// causal_model_latentmem.py and pipeline/causal_inference.py:
//
//   - the cache fills at blocks 0–3 (frames 0–11); block 4's first call
//     rolls it, evicting frames 1–3 (num_evicted_tokens = 3·P + 12·P −
//     12·P) into cpu_k_frames after that call; every later block evicts
//     its 3 oldest non-sink frames, so at block b (b ≥ 5) the pool that
//     retrieval sees, before the block's own eviction, is frames
//     1 … 3b−12;
//   - num_eligible = num_evicted − recent_exclude, the pool's first
//     entries (pool index i is frame sink_size + i): frames 1 … 3b−17;
//   - with every descriptor equal the 6 newest of them are retrieved:
//     [max(1, 3b−22), 3b−17].
//
// The window pool (frames leaving the 5-frame window) would make frames
// ≤ 3b−8 retrievable instead.
func TestLongLiveRAGAuthorsPoolKnownAnswer(t *testing.T) {
	want := map[RAGPool][][]int{
		RAGPoolPhysical: {
			0: nil, 1: nil, 2: nil, 3: nil, 4: nil, 5: nil,
			6:  {1},
			7:  {1, 2, 3, 4},
			8:  {2, 3, 4, 5, 6, 7},
			9:  {5, 6, 7, 8, 9, 10},
			10: {8, 9, 10, 11, 12, 13},
			11: {11, 12, 13, 14, 15, 16},
		},
		RAGPoolWindow: {
			0: nil, 1: nil, 2: nil,
			3:  {1},
			4:  {1, 2, 3, 4},
			5:  {2, 3, 4, 5, 6, 7},
			6:  {5, 6, 7, 8, 9, 10},
			7:  {8, 9, 10, 11, 12, 13},
			8:  {11, 12, 13, 14, 15, 16},
			9:  {14, 15, 16, 17, 18, 19},
			10: {17, 18, 19, 20, 21, 22},
			11: {20, 21, 22, 23, 24, 25},
		},
	}
	for _, pool := range []RAGPool{RAGPoolPhysical, RAGPoolWindow} {
		t.Run(pool.String(), func(t *testing.T) {
			cfg := Config{Layout: Layout{Height: 1, Width: 2, FramesPerBlock: 3, Layers: 1, Heads: 1, HeadDim: 6}}
			cfg.LongLiveRAG.Pool = pool
			cfg, err := cfg.Resolve()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.SinkFrames != 1 || cfg.CacheFrames != 12 || cfg.WindowFrames != 5 || cfg.LongLiveRAG.TopK != 6 || cfg.LongLiveRAG.ExcludeRecent != 5 {
				t.Fatalf("defaults %+v are not the paper's", cfg)
			}
			pol, err := New(NameLongLiveRAG, cfg)
			if err != nil {
				t.Fatal(err)
			}
			p := pol.(*LongLiveRAG)
			if err := p.SetDescriber(constDesc{}); err != nil {
				t.Fatal(err)
			}
			s := newStream(cfg.Layout, 3)
			for b, w := range want[pool] {
				for st := 0; st <= 1; st++ {
					ctx, _ := s.call(t, p, Call{Block: b, Step: st, First: st == 0, Clean: st == 1})
					if got := ctx[0].Parts.Memory; got != len(w)*2 {
						t.Fatalf("block %d step %d: %d memory tokens, want %d", b, st, got, len(w)*2)
					}
					if got := p.Retrieved(); !slices.Equal(got, w) && len(got)+len(w) > 0 {
						t.Fatalf("block %d: retrieved %v, want %v", b, got, w)
					}
				}
				last := 3*b - 17
				if pool == RAGPoolWindow {
					last = 3*b - 8
				}
				if r := p.Retrieved(); len(r) > 0 && r[len(r)-1] != last {
					t.Fatalf("block %d: newest retrievable frame %d, want %d", b, r[len(r)-1], last)
				}
			}
		})
	}
}

// authorsCache is a literal model of the index arithmetic of the
// authors' rolling KV cache (CausalWanSelfAttention.forward and
// _apply_cache_updates in causal_model_latentmem.py) for one layer, in
// tokens, with the frame held by each cache slot: a block's first call
// rolls a full cache (num_evicted_tokens = num_new + local_end − size,
// the sink's slots kept, the evicted frames appended to cpu_k_frames after
// the call); the block's later calls recompute in place and evict
// nothing.
type authorsCache struct {
	P, size, sink          int // tokens per frame, cache size and sink, in tokens
	localEnd, globalEnd    int
	slots                  []int // frame id per cache slot (frame-aligned)
	cpu                    []int // cpu_k_frames: the pool, in eviction order
	evictedAtLastFirstCall int
}

func (c *authorsCache) firstCall(block, F int) {
	n := F * c.P
	curEnd := (block + 1) * F * c.P
	c.evictedAtLastFirstCall = 0
	var newEnd int
	if curEnd > c.globalEnd && n+c.localEnd > c.size {
		ev := n + c.localEnd - c.size
		rolled := c.localEnd - ev - c.sink
		s, e := c.sink/c.P, ev/c.P
		c.cpu = append(c.cpu, c.slots[s:s+e]...)
		copy(c.slots[s:s+rolled/c.P], c.slots[s+e:s+e+rolled/c.P])
		newEnd = c.localEnd + curEnd - c.globalEnd - ev
		c.evictedAtLastFirstCall = e
	} else {
		newEnd = c.localEnd + curEnd - c.globalEnd
	}
	for len(c.slots) < newEnd/c.P {
		c.slots = append(c.slots, -1)
	}
	for f := 0; f < F; f++ {
		c.slots[newEnd/c.P-F+f] = block*F + f
	}
	c.localEnd, c.globalEnd = newEnd, curEnd
}

// TestLongLiveRAGPhysicalPoolMatchesAuthorsCache compares the physical
// pool, block by block, with the authors' cache arithmetic (authorsCache)
// in several settings: the paper's, LongLive's own (6-frame blocks, sink
// 3), blocks that do not divide the cache, and small caches.
func TestLongLiveRAGPhysicalPoolMatchesAuthorsCache(t *testing.T) {
	for _, c := range []struct{ F, S, C, W int }{
		{3, 1, 12, 5}, {6, 3, 12, 6}, {5, 1, 12, 5}, {3, 1, 6, 5}, {2, 2, 9, 4}, {1, 1, 4, 2}, {4, 2, 15, 7},
	} {
		t.Run(fmt.Sprintf("F%d_S%d_C%d_W%d", c.F, c.S, c.C, c.W), func(t *testing.T) {
			cfg := Config{Layout: Layout{Height: 1, Width: 2, FramesPerBlock: c.F, Layers: 2, Heads: 1, HeadDim: 6},
				SinkFrames: c.S, CacheFrames: c.C, WindowFrames: c.W, DeepForcing: DeepForcingConfig{RecentFrames: c.W}}
			cfg.LongLiveRAG.TopK, cfg.LongLiveRAG.ExcludeRecent = 1000, 1
			pol, err := New(NameLongLiveRAG, cfg)
			if err != nil {
				t.Fatal(err)
			}
			p := pol.(*LongLiveRAG)
			if err := p.SetDescriber(constDesc{}); err != nil {
				t.Fatal(err)
			}
			P := cfg.Layout.TokensPerFrame()
			or := &authorsCache{P: P, size: c.C * P, sink: c.S * P}
			s := newStream(cfg.Layout, 5)
			for b := 0; b < 40/c.F+4; b++ {
				wantPool := slices.Clone(or.cpu) // what retrieval sees at block b
				var wantRetrieved []int
				if len(wantPool) > 1 {
					wantRetrieved = wantPool[:len(wantPool)-1]
				}
				or.firstCall(b, c.F)
				for st := 0; st <= 1; st++ {
					s.call(t, p, Call{Block: b, Step: st, First: st == 0, Clean: st == 1})
				}
				var got []int
				for i := 0; i < p.s.poolLen(); i++ {
					got = append(got, p.s.poolID(i))
				}
				if !slices.Equal(got, wantPool) {
					t.Fatalf("block %d: pool %v, the authors' cpu_k_frames %v", b, got, wantPool)
				}
				if r := p.Retrieved(); !slices.Equal(r, wantRetrieved) && len(r)+len(wantRetrieved) > 0 {
					t.Fatalf("block %d: retrieved %v, want %v", b, r, wantRetrieved)
				}
				// The physical cache's frames (sink aside) are the policy's
				// window and held frames: every committed frame is kept once.
				if got, want := len(p.sink)+len(p.recent)+p.s.poolLen(), (b+1)*c.F; got != want {
					t.Fatalf("block %d: %d frames held, want %d", b, got, want)
				}
			}
		})
	}
}
