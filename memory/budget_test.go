package memory

import (
	"math"
	"testing"
)

// TestMatchedBudgets checks the paper's matched capacities: at the default
// configuration the bounded policies see at most one sink frame, five
// window frames and six frame-equivalents of history (18,720 tokens), and on
// a stream every bounded policy's context stays within that bound while
// FullHistory grows past it.
func TestMatchedBudgets(t *testing.T) {
	d := DefaultConfig(DefaultLayout())
	P := d.Layout.TokensPerFrame()
	if d.Capacity != 6*P || d.LongLiveRAG.TopK*P != d.Capacity {
		t.Fatalf("capacity %d, top-k %d frames: not six frames of %d tokens", d.Capacity, d.LongLiveRAG.TopK, P)
	}
	if bound := (d.SinkFrames+d.WindowFrames)*P + d.Capacity; bound != 18720 || bound != d.CacheFrames*P {
		t.Fatalf("sink+window+capacity = %d, cache %d frames", bound, d.CacheFrames)
	}
	if df := (d.CacheFrames - d.SinkFrames - d.DeepForcing.RecentFrames) * P; df != 10920 {
		t.Fatalf("deep forcing keeps %d middle tokens, want 10,920", df)
	}

	cfg := tinyConfig() // capacity 72 = 6 frames of 12 tokens
	bound := cfg.CacheFrames * cfg.Layout.TokensPerFrame()
	for _, name := range Names() {
		p, err := New(name, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if name == NameLongLiveRAG {
			_ = p.(*LongLiveRAG).SetDescriber(KeyMean{Heads: 2, HeadDim: 32})
		}
		s := newStream(cfg.Layout, 17)
		most := 0
		for b := 0; b < 12; b++ {
			for _, c := range s.block(t, p, b, 1) {
				most = max(most, c.Parts.Total())
			}
		}
		switch {
		case name == NameFullHistory && most <= bound:
			t.Fatalf("full history saw at most %d keys, want more than %d", most, bound)
		case name != NameFullHistory && most > bound:
			t.Fatalf("%s: %d keys > matched bound %d", name, most, bound)
		case name != NameFullHistory && name != NameUniformStride && name != NameDensityKV && most != bound:
			t.Fatalf("%s: never reached the matched bound (%d of %d)", name, most, bound)
		}
	}
}

// TestBytesEqualStorageFormulas runs every policy to its steady state and
// checks its live Bytes against the storage package's policy formula.
func TestBytesEqualStorageFormulas(t *testing.T) {
	cfg := tinyConfig()
	cfg.Bank.Tau = 1e9                      // every prefix feasible: the bank fills to capacity
	cfg.LongLiveRAG.Descriptor = RAGKeyMean // H·D = 64 values per frame
	sc := storageConfig(cfg)
	const blocks = 9
	frames := int64(blocks * cfg.Layout.FramesPerBlock)
	want := map[string]int64{
		NameNative:        sc.Native(),
		NameInfinityRoPE:  sc.Native(),
		NameDeepForcing:   sc.DeepForcing(),
		NameLongLiveRAG:   sc.LongLiveRAG(frames),
		NameFullHistory:   sc.FullHistory(frames),
		NameFIFO:          sc.Controls(),
		NameUniformStride: 0, // occupancy between M/2 and M: checked below
		NameDensityKV:     sc.DensityKV(),
	}
	for _, name := range Names() {
		p, err := New(name, cfg)
		if err != nil {
			t.Fatal(err)
		}
		s := newStream(cfg.Layout, 8)
		for b := 0; b < blocks; b++ {
			s.block(t, p, b, 0)
		}
		got := p.Bytes()
		if name == NameUniformStride {
			n := int64(p.(StatsReporter).LastStats().Occupancy[0][0])
			m := storageModel(cfg)
			want[name] = m.KVFrames(int64(cfg.SinkFrames+cfg.WindowFrames)) + m.Provenance(n)
			if n < int64(cfg.Capacity/2) || n > int64(cfg.Capacity) {
				t.Fatalf("uniform stride holds %d tokens, want [%d, %d]", n, cfg.Capacity/2, cfg.Capacity)
			}
		}
		if got != want[name] {
			t.Errorf("%s: live bytes %d, storage formula %d", name, got, want[name])
		}
	}
}

// TestLongLiveRAGDefaultBytes runs LongLive-RAG in its default
// configuration (the built-in 16-channel latent-mean descriptor, no storage
// override) and checks its live bytes after every block against the storage
// formula evaluated with that same 16-d descriptor; the paper's 1,024-d
// descriptor is counted only when DescriptorStorageDim asks for it.
func TestLongLiveRAGDefaultBytes(t *testing.T) {
	for _, override := range []int{0, 1024} {
		cfg := tinyConfig()
		cfg.LongLiveRAG.DescriptorStorageDim = override
		pol, err := New(NameLongLiveRAG, cfg)
		if err != nil {
			t.Fatal(err)
		}
		p := pol.(*LongLiveRAG)
		want := 16
		if override > 0 {
			want = override
		}
		if cfg.LongLiveRAG.Descriptor != RAGLatentMean || cfg.LongLiveRAG.LatentChannels != 16 || p.DescriptorDim() != want {
			t.Fatalf("override %d: descriptor %q with %d channels, DescriptorDim %d, want %d",
				override, cfg.LongLiveRAG.Descriptor, cfg.LongLiveRAG.LatentChannels, p.DescriptorDim(), want)
		}
		sc := storageConfig(cfg)
		sc.DescriptorDim = want
		s := newStream(cfg.Layout, 12)
		F := cfg.Layout.FramesPerBlock
		for b := 0; b < 8; b++ {
			lat := make([]float32, F*16*6*8) // [F][C][H'][W'] of the golden tiny model
			for i := range lat {
				lat[i] = float32(math.Cos(float64(i+1) * float64(b+1) * 0.37))
			}
			s.call(t, p, Call{Block: b, Step: 0, First: true})
			s.call(t, p, Call{Block: b, Step: 1, Clean: true, Latent: lat})
			frames := int64((b + 1) * F)
			if got, formula := p.Bytes(), sc.LongLiveRAG(frames); got != formula {
				t.Fatalf("override %d block %d: live bytes %d, storage formula with %d-d descriptors %d", override, b, got, want, formula)
			}
		}
	}
}
