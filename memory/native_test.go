package memory

import (
	"runtime"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/storage"
)

// nativeSegs is the oracle of Native's / Infinity-RoPE's packing: the sink
// frames and the last CacheFrames−SinkFrames frames including the current
// block, at absolute or slot positions.
func nativeSegs(cfg Config, b int, reindex bool) (segs []seg, qt []int) {
	F, S, C := cfg.Layout.FramesPerBlock, cfg.SinkFrames, cfg.CacheFrames
	end := b*F + F
	var ids []int
	for f := 0; f < min(S, end); f++ {
		ids = append(ids, f)
	}
	lo := max(S, end-(C-S))
	for f := lo; f < end; f++ {
		ids = append(ids, f)
	}
	for i, f := range ids {
		t := f
		if reindex {
			t = i
		}
		cur := -1
		if f >= b*F {
			cur = f - b*F
			qt = append(qt, t)
		}
		segs = append(segs, seg{frame: f, t: t, cur: cur})
	}
	return segs, qt
}

func TestNativePackingAndPositions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reindex bool
		sink    int
	}{
		{NameNative, false, 1}, {NameInfinityRoPE, true, 1}, {NameNative, false, 2}, {NameInfinityRoPE, true, 2},
	} {
		t.Run(tc.name+"/sink"+string(rune('0'+tc.sink)), func(t *testing.T) {
			cfg := tinyConfig()
			cfg.SinkFrames = tc.sink
			p, err := New(tc.name, cfg)
			if err != nil {
				t.Fatal(err)
			}
			s := newStream(cfg.Layout, 7)
			n := cfg.Layout.TokensPerFrame() * cfg.Layout.Heads * cfg.Layout.HeadDim
			for b := 0; b < 8; b++ {
				for st := 0; st <= 2; st++ {
					c := Call{Block: b, Step: st, First: st == 0, Clean: st == 2}
					ctx, _ := s.call(t, p, c)
					segs, qt := nativeSegs(cfg, b, tc.reindex)
					for l := range ctx {
						q, k, v := s.qkv(b, st, l)
						s.expectFrames(t, ctx[l], l, k, v, segs)
						for f, tq := range qt {
							if !equal(ctx[l].Q[f*n:(f+1)*n], rotated(cfg.Layout, q[f*n:(f+1)*n], tq)) {
								t.Fatalf("block %d layer %d: query frame %d not at t=%d", b, l, f, tq)
							}
						}
						sinkTok := min(tc.sink, b*3+3) * 12
						if ctx[l].Parts != (Parts{Sink: sinkTok, Local: len(segs)*12 - sinkTok}) {
							t.Fatalf("block %d: parts %+v", b, ctx[l].Parts)
						}
					}
					if b == 5 && tc.reindex && tc.sink == 1 && (qt[0] != 9 || segs[len(segs)-5].t != 7) {
						t.Fatalf("full cache: queries at %v, window start %d; want 9 and 7", qt, segs[len(segs)-5].t)
					}
				}
				// After the clean pass the cache holds min(end, C) frames.
				frames := min(b*3+3, cfg.CacheFrames-cfg.SinkFrames+min(cfg.SinkFrames, b*3+3))
				if got, want := p.Bytes(), storageModel(cfg).KVFrames(int64(frames)); got != want {
					t.Fatalf("block %d: bytes %d, want %d (%d frames)", b, got, want, frames)
				}
			}
		})
	}
}

func storageModel(c Config) storage.Model {
	l := c.Layout
	return storage.Model{Layers: l.Layers, Heads: l.Heads, KeyDim: l.HeadDim, ValueDim: l.HeadDim, TokensPerFrame: l.TokensPerFrame()}
}

func TestNativePaperScaleBytes(t *testing.T) {
	// The steady-state native cache at paper scale is the 12-frame cache.
	c := storage.Paper()
	if got := float64(c.Native()) / storage.GiB; got < 3.21 || got > 3.22 {
		t.Fatalf("native 12-frame cache = %.4f GiB, want 3.21", got)
	}
}

func TestProtocolErrors(t *testing.T) {
	cfg := tinyConfig()
	s := newStream(cfg.Layout, 1)
	q, k, v := s.qkv(0, 0, 0)
	bad := append([]float32(nil), k...)
	bad[12*64+33] = float32(nanF())
	cfg.LongLiveRAG.Descriptor = RAGKeyMean
	for _, name := range Names() {
		p, err := New(name, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name string
			run  func() error
			want string
		}{
			{"attend before begin", func() error { _, err := p.Attend(0, q, k, v); return err }, "no open call"},
			{"end before begin", func() error { return p.End() }, "no open call"},
			{"not first", func() error { return p.Begin(Call{Block: 0}) }, "has not been begun"},
			{"skip block", func() error { return p.Begin(Call{Block: 1, First: true}) }, "want block 0"},
			{"negative", func() error { return p.Begin(Call{Block: -1, First: true}) }, "non-negative"},
			{"begin", func() error { return p.Begin(Call{Block: 0, First: true}) }, ""},
			{"begin twice", func() error { return p.Begin(Call{Block: 0, First: true}) }, "still open"},
			{"layer order", func() error { _, err := p.Attend(1, q, k, v); return err }, "want layer 0"},
			{"short q", func() error { _, err := p.Attend(0, q[1:], k, v); return err }, "q has"},
			{"nan k", func() error { _, err := p.Attend(0, q, bad, v); return err }, "k has NaN at token 12 head 1 dim 1"},
			{"end early", func() error { return p.End() }, "0 of 2 layers"},
			{"attend 0", func() error { _, err := p.Attend(0, q, k, v); return err }, ""},
			{"attend 1", func() error { _, err := p.Attend(1, q, k, v); return err }, ""},
			{"attend 2", func() error { _, err := p.Attend(2, q, k, v); return err }, "want layer 2"},
			{"end", func() error { return p.End() }, ""},
			{"next block without clean pass", func() error { return p.Begin(Call{Block: 1, First: true}) }, "no clean pass"},
		} {
			err := tc.run()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("%s: %s: %v", name, tc.name, err)
				}
				continue
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "memory: "+name) {
				t.Fatalf("%s: %s: error %v, want one containing %q", name, tc.name, err, tc.want)
			}
		}
	}
}

func TestNewAndConfig(t *testing.T) {
	if _, err := New("nope", tinyConfig()); err == nil || !strings.Contains(err.Error(), "unknown policy \"nope\"") {
		t.Fatalf("unknown name: %v", err)
	}
	for _, alias := range []string{"Native", "INFINITY_ROPE", "infinity-rope"} {
		if p, err := New(alias, tinyConfig()); err != nil || p.Layout() != tinyLayout() {
			t.Fatalf("%s: %v", alias, err)
		}
	}
	d := DefaultConfig(DefaultLayout())
	if d.Capacity != 9360 || d.WindowFrames != 5 || d.CacheFrames != 12 || d.SinkFrames != 1 || d.Bank.Sigma != 8 || d.LongLiveRAG.TopK != 6 {
		t.Fatalf("defaults %+v", d)
	}
	if tinyConfig().Capacity != 72 {
		t.Fatalf("tiny capacity %d, want 72", tinyConfig().Capacity)
	}
	// A variant's name is checked when it is read (SetVariant: the YAML
	// and flag path), the rest by New.
	for _, tc := range []struct {
		mut  func(*Config) error
		want string
	}{
		{func(c *Config) error { c.WindowFrames = 2; return nil }, "window frames 2"},
		{func(c *Config) error { c.Layout.HeadDim = 7; return nil }, "head dim 7"},
		{func(c *Config) error { return c.SetVariant("bank.ordering", "median") }, "ordering \"median\""},
		{func(c *Config) error { c.Bank.Ordering = 9; return nil }, "ordering \"Ordering(9)\""},
		{func(c *Config) error { c.Bank.Tau = -1; return nil }, "tau -1"},
		{func(c *Config) error { c.Capacity = -3; return nil }, "capacity -3"},
		{func(c *Config) error { return c.SetVariant("longlive_rag.descriptor", "clip") }, "descriptor \"clip\""},
		{func(c *Config) error { c.CacheFrames = 3; return nil }, "cache frames 3"},
	} {
		c := Config{Layout: tinyLayout()}
		err := tc.mut(&c)
		if err == nil {
			_, err = New(NameNative, c)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("config error %v, want %q", err, tc.want)
		}
	}
}

// TestParallelAssembly runs a layout large enough for the parallel context
// assembly and checks Native and FIFO contexts against the oracle, with one
// and with several threads.
func TestParallelAssembly(t *testing.T) {
	for _, procs := range []int{1, 3} {
		old := runtime.GOMAXPROCS(procs)
		cfg := Config{Layout: Layout{Height: 16, Width: 16, FramesPerBlock: 3, Layers: 1, Heads: 8, HeadDim: 64}}
		cfg, _ = cfg.Resolve()
		if cfg.CacheFrames*cfg.Layout.TokensPerFrame()*8*64 < 1<<20 {
			t.Fatal("layout too small for the parallel path")
		}
		nat, _ := New(NameNative, cfg)
		fifo, _ := New(NameFIFO, cfg)
		sn, sf := newStream(cfg.Layout, 4), newStream(cfg.Layout, 4)
		for b := 0; b < 6; b++ {
			ctx := sn.block(t, nat, b, 0)
			segs, _ := nativeSegs(cfg, b, false)
			_, k, v := sn.qkv(b, 0, 0)
			sn.expectFrames(t, ctx[0], 0, k, v, segs)
			ctx = sf.block(t, fifo, b, 0)
			hist := historyTokens(cfg, b)
			sf.checkWindowed(t, cfg, ctx[0], b, 0, 0, hist[max(0, len(hist)-cfg.Capacity):])
		}
		runtime.GOMAXPROCS(old)
	}
}
