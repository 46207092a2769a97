package memory

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/densitykv/densitykv/rope"
	"github.com/densitykv/densitykv/storage"
)

// tinyLayout is the golden tiny Wan model's geometry.
func tinyLayout() Layout {
	return Layout{Height: 3, Width: 4, FramesPerBlock: 3, Layers: 2, Heads: 2, HeadDim: 32}
}

func tinyConfig() Config {
	c := Config{Layout: tinyLayout()}
	r, err := c.Resolve()
	if err != nil {
		panic(err)
	}
	return r
}

// stream produces deterministic q/k/v per (block, step, layer) and records
// the clean-pass k/v of every frame as the oracle's cache.
type stream struct {
	lay    Layout
	seed   uint64
	cleanK map[[2]int][]float32 // (frame, layer) → raw k [TPF][H][D]
	cleanV map[[2]int][]float32
	cleanQ map[[2]int][]float32
}

func newStream(l Layout, seed uint64) *stream {
	return &stream{lay: l, seed: seed, cleanK: map[[2]int][]float32{}, cleanV: map[[2]int][]float32{}, cleanQ: map[[2]int][]float32{}}
}

func (s *stream) qkv(block, step, layer int) (q, k, v []float32) {
	r := rand.New(rand.NewPCG(s.seed, uint64(block*1000+step*10+layer)))
	n := s.lay.TokensPerBlock() * s.lay.Heads * s.lay.HeadDim
	q, k, v = make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range q {
		q[i] = float32(r.NormFloat64())
		k[i] = float32(r.NormFloat64())
		v[i] = float32(r.NormFloat64())
	}
	return q, k, v
}

// call runs one forward call through p and returns the contexts per layer
// (copied) and the q/k/v fed.
func (s *stream) call(t *testing.T, p Policy, c Call) (ctx []Context, ks [][]float32) {
	t.Helper()
	if err := p.Begin(c); err != nil {
		t.Fatalf("begin %+v: %v", c, err)
	}
	for l := 0; l < s.lay.Layers; l++ {
		q, k, v := s.qkv(c.Block, c.Step, l)
		cx, err := p.Attend(l, q, k, v)
		if err != nil {
			t.Fatalf("attend block %d step %d layer %d: %v", c.Block, c.Step, l, err)
		}
		ctx = append(ctx, Context{Q: append([]float32(nil), cx.Q...), K: append([]float32(nil), cx.K...), V: append([]float32(nil), cx.V...), Parts: cx.Parts})
		ks = append(ks, k)
		if c.Clean {
			n := s.lay.TokensPerFrame() * s.lay.Heads * s.lay.HeadDim
			for f := 0; f < s.lay.FramesPerBlock; f++ {
				id := c.Block*s.lay.FramesPerBlock + f
				s.cleanK[[2]int{id, l}] = append([]float32(nil), k[f*n:(f+1)*n]...)
				s.cleanV[[2]int{id, l}] = append([]float32(nil), v[f*n:(f+1)*n]...)
				s.cleanQ[[2]int{id, l}] = append([]float32(nil), q[f*n:(f+1)*n]...)
			}
		}
	}
	if err := p.End(); err != nil {
		t.Fatalf("end %+v: %v", c, err)
	}
	return ctx, ks
}

// block runs steps denoising calls and a clean pass of block b; it returns
// the contexts of the last denoising call (or the clean pass when steps = 0).
func (s *stream) block(t *testing.T, p Policy, b, steps int) []Context {
	t.Helper()
	var last []Context
	for st := 0; st < steps; st++ {
		last, _ = s.call(t, p, Call{Block: b, Step: st, First: st == 0})
	}
	ctx, _ := s.call(t, p, Call{Block: b, Step: steps, First: steps == 0, Clean: true})
	if steps == 0 {
		last = ctx
	}
	return last
}

// rotated returns x rotated at temporal t on the frame grid with the
// reference rope package.
func rotated(l Layout, x []float32, t int) []float32 {
	y := append([]float32(nil), x...)
	if err := rope.MustNew(l.HeadDim).Apply(y, l.Heads, rope.Grid(1, l.Height, l.Width, t)); err != nil {
		panic(err)
	}
	return y
}

// seg is one expected context frame: a committed frame id (or a current
// block frame when cur ≥ 0) at temporal position t.
type seg struct {
	frame, t int
	cur      int // index of the frame inside the current block, −1 for a committed frame
}

// expectFrames checks that ctx.K/V hold exactly segs in order.
func (s *stream) expectFrames(t *testing.T, ctx Context, layer int, curK, curV []float32, segs []seg) {
	t.Helper()
	n := s.lay.TokensPerFrame() * s.lay.Heads * s.lay.HeadDim
	if len(ctx.K) != len(segs)*n || len(ctx.V) != len(segs)*n {
		t.Fatalf("context has %d/%d values, want %d frames (%d)", len(ctx.K), len(ctx.V), len(segs), len(segs)*n)
	}
	for i, sg := range segs {
		var k, v []float32
		if sg.cur >= 0 {
			k, v = curK[sg.cur*n:(sg.cur+1)*n], curV[sg.cur*n:(sg.cur+1)*n]
		} else {
			k, v = s.cleanK[[2]int{sg.frame, layer}], s.cleanV[[2]int{sg.frame, layer}]
		}
		want := rotated(s.lay, k, sg.t)
		if !equal(ctx.K[i*n:(i+1)*n], want) {
			t.Fatalf("context frame %d (frame %d, t %d, cur %d): keys differ", i, sg.frame, sg.t, sg.cur)
		}
		if !equal(ctx.V[i*n:(i+1)*n], v) {
			t.Fatalf("context frame %d (frame %d): values differ", i, sg.frame)
		}
	}
}

func equal(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

func nanF() float64 { return math.NaN() }

// storageConfig is the storage package's configuration of cfg, with the
// LongLive-RAG descriptor size its built-in descriptor keeps.
func storageConfig(c Config) storage.Config {
	dd := c.LongLiveRAG.DescriptorStorageDim
	if dd == 0 {
		dd = c.LongLiveRAG.LatentChannels
		if c.LongLiveRAG.Descriptor == RAGKeyMean {
			dd = c.Layout.Heads * c.Layout.HeadDim
		}
	}
	return storage.Config{Model: storageModel(c), SinkFrames: c.SinkFrames, WindowFrames: c.WindowFrames,
		Capacity: c.Capacity, CacheFrames: c.CacheFrames, QueryBufferFrames: c.DeepForcing.RecentFrames,
		DescriptorDim: dd, LatentFPS: 4}
}
