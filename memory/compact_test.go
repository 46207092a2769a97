package memory

import (
	"bytes"
	"runtime"
	"slices"
	"testing"

	"github.com/densitykv/densitykv/bank"
)

// bf16Stream is newStream whose q/k/v are bfloat16 values (a recorded
// bf16 stream, or a backbone computing in bfloat16).
type bf16Stream struct{ *stream }

func roundAll(xs ...[]float32) {
	for _, x := range xs {
		for i, v := range x {
			x[i] = bank.RoundBF16(v)
		}
	}
}

// heldBytes returns the bytes of the frames a windowed policy holds.
func heldBytes(p *windowed) int64 {
	var n int64
	for _, f := range append(append([]*frame(nil), p.sink...), p.recent...) {
		n += f.bytes()
	}
	return n
}

func windowedOf(p Policy) *windowed {
	switch q := p.(type) {
	case *DensityKV:
		return &q.windowed
	case *Controls:
		return &q.windowed
	case *LongLiveRAG:
		return &q.windowed
	}
	return nil
}

// runSame runs blocks [0, blocks) through a and b, every call's q/k/v from
// s (rounded to bfloat16 when bf), and fails unless their contexts and
// bytes agree.
func runSame(t *testing.T, s *stream, a, b Policy, blocks int, bf bool) {
	t.Helper()
	runSameFrom(t, s, a, b, 0, blocks, bf)
}

// runSameFrom is runSame over blocks [from, to).
func runSameFrom(t *testing.T, s *stream, a, b Policy, from, to int, bf bool) {
	t.Helper()
	for blk := from; blk < to; blk++ {
		for st := 0; st <= 1; st++ {
			c := Call{Block: blk, Step: st, First: st == 0, Clean: st == 1}
			for _, p := range []Policy{a, b} {
				if err := p.Begin(c); err != nil {
					t.Fatal(err)
				}
			}
			for l := 0; l < s.lay.Layers; l++ {
				q, k, v := s.qkv(blk, st, l)
				if bf {
					roundAll(q, k, v)
				}
				q2, k2, v2 := append([]float32(nil), q...), append([]float32(nil), k...), append([]float32(nil), v...)
				ca, err := a.Attend(l, q, k, v)
				if err != nil {
					t.Fatal(err)
				}
				ca = Context{Q: append([]float32(nil), ca.Q...), K: append([]float32(nil), ca.K...), V: append([]float32(nil), ca.V...), Parts: ca.Parts}
				cb, err := b.Attend(l, q2, k2, v2)
				if err != nil {
					t.Fatal(err)
				}
				if ca.Parts != cb.Parts || !equal(ca.K, cb.K) || !equal(ca.V, cb.V) || !equal(ca.Q, cb.Q) {
					t.Fatalf("block %d step %d layer %d: contexts differ", blk, st, l)
				}
			}
			for _, p := range []Policy{a, b} {
				if err := p.End(); err != nil {
					t.Fatal(err)
				}
			}
			if a.Bytes() != b.Bytes() {
				t.Fatalf("block %d: bytes %d vs %d", blk, a.Bytes(), b.Bytes())
			}
		}
	}
}

// TestCompactFramesAreExact: fed bfloat16 K/V, the windowed policies hold
// their frames as bfloat16 (half the bytes) and give exactly the contexts
// and bytes of a policy holding them as float32; their snapshots hold the
// compact frames and continue identically.
func TestCompactFramesAreExact(t *testing.T) {
	for _, name := range []string{NameDensityKV, NameFIFO, NameUniformStride, NameFullHistory, NameLongLiveRAG} {
		t.Run(name, func(t *testing.T) {
			cfg := snapConfig()
			a, _ := New(name, cfg)
			b, _ := New(name, cfg)
			windowedOf(b).compactFrames = false
			s := newStream(cfg.Layout, 5)
			runSame(t, s, a, b, 5, true)
			if ha, hb := heldBytes(windowedOf(a)), heldBytes(windowedOf(b)); 2*ha != hb {
				t.Fatalf("frames of %d bytes, float32 frames %d: not held as bfloat16", ha, hb)
			}
			var snap bytes.Buffer
			if err := a.(Snapshotter).Save(&snap); err != nil {
				t.Fatal(err)
			}
			c, _ := New(name, cfg)
			if err := c.(Snapshotter).Load(&snap); err != nil {
				t.Fatal(err)
			}
			if heldBytes(windowedOf(c)) != heldBytes(windowedOf(a)) {
				t.Fatal("restored frames are not compact")
			}
			s2 := newStream(cfg.Layout, 5)
			for blk := 5; blk < 8; blk++ {
				for st := 0; st <= 1; st++ {
					call := Call{Block: blk, Step: st, First: st == 0, Clean: st == 1}
					ca, _ := s.call(t, a, call)
					cc, _ := s2.call(t, c, call)
					for l := range ca {
						if !equal(ca[l].K, cc[l].K) || !equal(ca[l].V, cc[l].V) {
							t.Fatalf("block %d layer %d: restored policy differs", blk, l)
						}
					}
				}
			}
		})
	}
}

// TestReadyFramesAreExact: a DensityKV bank with a bfloat16 payload and the
// post-RoPE-key descriptor keeps the frames that only wait to be offered
// as its bfloat16 candidates (less memory), with contexts, bytes and banks
// identical to a policy keeping them as float32; other variants keep
// float32 frames.
func TestReadyFramesAreExact(t *testing.T) {
	cfg := tinyConfig()
	cfg.Capacity = 30
	a, _ := New(NameDensityKV, cfg)
	b, _ := New(NameDensityKV, cfg)
	b.(*DensityKV).s.ready = false
	s := newStream(cfg.Layout, 9)
	runSame(t, s, a, b, 7, false)
	ready := 0
	for _, f := range a.(*DensityKV).recent {
		if f.Ready {
			ready++
		}
	}
	if ready != cfg.Layout.FramesPerBlock || heldBytes(windowedOf(a)) >= heldBytes(windowedOf(b)) {
		t.Fatalf("%d ready frames, %d vs %d bytes held", ready, heldBytes(windowedOf(a)), heldBytes(windowedOf(b)))
	}
	for l, bk := range a.(*DensityKV).Banks() {
		var x, y bytes.Buffer
		bk.WriteTo(&x)
		b.(*DensityKV).Banks()[l].WriteTo(&y)
		if !bytes.Equal(x.Bytes(), y.Bytes()) {
			t.Fatalf("layer %d banks differ", l)
		}
	}
	for _, mod := range []func(*Config){
		func(c *Config) { c.Bank.Payload = bank.PayloadF32 },
		func(c *Config) { c.Bank.Descriptor = bank.DescKeyValue },
	} {
		c := cfg
		mod(&c)
		p, _ := New(NameDensityKV, c)
		if p.(*DensityKV).s.ready {
			t.Fatalf("%+v: ready frames with a bank that does not read them rounded", c.Bank)
		}
	}
}

// TestRecacheKeepsFramesCompactAndReady: after a recache (LongLive's,
// before block 6, which recomputes window frames and frames waiting to be
// offered) a DensityKV bank that reads bfloat16 candidates holds the
// recomputed frames compact and the waiting ones as its candidates again,
// with recache contexts, later contexts, bytes and banks identical to a
// policy holding every frame as float32.
func TestRecacheKeepsFramesCompactAndReady(t *testing.T) {
	cfg := tinyConfig()
	cfg.Capacity = 30
	a, _ := New(NameDensityKV, cfg)
	b, _ := New(NameDensityKV, cfg)
	b.(*DensityKV).s.ready = false
	windowedOf(b).compactFrames = false
	s := newStream(cfg.Layout, 9)
	runSameFrom(t, s, a, b, 0, 6, true)
	fr := a.(Recacher).RecacheFrames(6)
	if !slices.Equal(fr, b.(Recacher).RecacheFrames(6)) || len(fr) == 0 {
		t.Fatalf("recache frames %v and %v", fr, b.(Recacher).RecacheFrames(6))
	}
	for _, p := range []Policy{a, b} {
		if err := p.(Recacher).BeginRecache(6); err != nil {
			t.Fatal(err)
		}
	}
	for l := 0; l < cfg.Layout.Layers; l++ {
		q, k, v := recacheQKV(cfg.Layout, len(fr), uint64(l+1))
		roundAll(q, k, v)
		q2, k2, v2 := append([]float32(nil), q...), append([]float32(nil), k...), append([]float32(nil), v...)
		ca, err := a.(Recacher).AttendRecache(l, q, k, v)
		if err != nil {
			t.Fatal(err)
		}
		ca = Context{Q: append([]float32(nil), ca.Q...), K: append([]float32(nil), ca.K...), V: append([]float32(nil), ca.V...), Parts: ca.Parts}
		cb, err := b.(Recacher).AttendRecache(l, q2, k2, v2)
		if err != nil {
			t.Fatal(err)
		}
		if ca.Parts != cb.Parts || !equal(ca.K, cb.K) || !equal(ca.V, cb.V) || !equal(ca.Q, cb.Q) {
			t.Fatalf("recache layer %d: contexts differ", l)
		}
	}
	for _, p := range []Policy{a, b} {
		if err := p.(Recacher).EndRecache(); err != nil {
			t.Fatal(err)
		}
	}
	ready, lim := 0, 6*cfg.Layout.FramesPerBlock+cfg.Layout.FramesPerBlock-cfg.WindowFrames
	for _, f := range windowedOf(a).recent {
		if f.Ready != (f.ID < lim) {
			t.Fatalf("after the recache frame %d (window from %d) ready %v", f.ID, lim, f.Ready)
		}
		for l := range f.K {
			if f.K[l].b16 == nil || f.V[l].b16 == nil {
				t.Fatalf("after the recache frame %d layer %d is not held as bfloat16", f.ID, l)
			}
		}
		if f.Ready {
			ready++
		}
	}
	if ready == 0 || !slices.Contains(fr, lim-1) {
		t.Fatalf("the recache (frames %v) did not cover a waiting frame (window from %d)", fr, lim)
	}
	if ha, hb := heldBytes(windowedOf(a)), heldBytes(windowedOf(b)); 2*ha != hb {
		t.Fatalf("after the recache frames of %d bytes, float32 frames %d", ha, hb)
	}
	runSameFrom(t, s, a, b, 6, 9, true)
	for l, bk := range a.(*DensityKV).Banks() {
		var x, y bytes.Buffer
		bk.WriteTo(&x)
		b.(*DensityKV).Banks()[l].WriteTo(&y)
		if !bytes.Equal(x.Bytes(), y.Bytes()) {
			t.Fatalf("layer %d banks differ", l)
		}
	}
}

// TestSaveStreams: Save writes a paper-like state without holding it: the
// bytes it allocates are a small fraction of the snapshot (a buffer, the
// header), for every kind of policy state.
func TestSaveStreams(t *testing.T) {
	lay := Layout{Height: 8, Width: 16, FramesPerBlock: 3, Layers: 4, Heads: 4, HeadDim: 64}
	for _, name := range Names() {
		cfg := Config{Layout: lay, LongLiveRAG: LongLiveRAGConfig{Descriptor: RAGKeyMean}}
		cfg, err := cfg.Resolve()
		if err != nil {
			t.Fatal(err)
		}
		p, _ := New(name, cfg)
		s := newStream(lay, 1)
		for b := 0; b < 6; b++ {
			runBlockNoT(s, p, b)
		}
		var cw countWriter
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		if err := p.(Snapshotter).Save(&cw); err != nil {
			t.Fatal(err)
		}
		runtime.ReadMemStats(&m1)
		alloc := int64(m1.TotalAlloc - m0.TotalAlloc)
		if cw.n < 4<<20 || alloc > cw.n/4+(2<<20) {
			t.Errorf("%s: a snapshot of %d bytes allocated %d bytes", name, cw.n, alloc)
		}
	}
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }
