package bank

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// snapshotBytes returns the bank's snapshot (a complete, bit-exact image of
// its persistent state).
func snapshotBytes(t testing.TB, b *Bank) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := b.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestConfigValidate(t *testing.T) {
	base := smallConfig()
	cases := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"heads", func(c *Config) { c.Heads = 0 }, "Heads"},
		{"keydim", func(c *Config) { c.KeyDim = -1 }, "KeyDim"},
		{"valuedim", func(c *Config) { c.ValueDim = 0 }, "ValueDim"},
		{"capacity", func(c *Config) { c.Capacity = 0 }, "Capacity"},
		{"descdim", func(c *Config) { c.DescDim = -2 }, "DescDim"},
		{"tau1", func(c *Config) { c.Tau = 1 }, "Tau"},
		{"taunan", func(c *Config) { c.Tau = math.NaN() }, "Tau"},
		{"tauinf", func(c *Config) { c.Tau = math.Inf(1) }, "Tau"},
		{"sigma", func(c *Config) { c.Sigma = 0 }, "sigma"},
		{"p", func(c *Config) { c.P = -1 }, "p ="},
		{"eps", func(c *Config) { c.Eps = 0 }, "eps"},
		{"epsoverflow", func(c *Config) { c.Eps = 1e-30; c.P = 4 }, "overflows"},
		{"delta", func(c *Config) { c.Delta = 0 }, "Delta"},
		{"ordering", func(c *Config) { c.Ordering = 7 }, "Ordering"},
		{"baselines", func(c *Config) { c.Baselines = 7 }, "Baselines"},
		{"eviction", func(c *Config) { c.Eviction = 7 }, "Eviction"},
		{"prefix", func(c *Config) { c.Prefix = 7 }, "Prefix"},
		{"admission", func(c *Config) { c.Admission = 7 }, "Admission"},
		{"payload", func(c *Config) { c.Payload = Payload(2) }, "Payload"},
		{"density", func(c *Config) { c.Density = BF16 }, "Density"},
		{"workers", func(c *Config) { c.Workers = -1 }, "Workers"},
		{"huge", func(c *Config) { c.Capacity = 1 << 30; c.KeyDim = 1 << 20 }, "exceeds"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.mod(&c)
			_, err := New(c)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "bank: ") {
				t.Fatalf("New: err = %v, want mention of %q", err, tc.want)
			}
		})
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	if err := base.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestBadInputLeavesBankUnchanged feeds malformed blocks to a bank that
// already holds states and checks the error and that the bank is
// bit-identical afterwards and still continues like an untouched copy.
func TestBadInputLeavesBankUnchanged(t *testing.T) {
	for _, v := range []variant{variants[0], {"bf16", func(c *Config) { c.Payload = PayloadBF16 }}, {"bf16desc", func(c *Config) { c.Payload = PayloadBF16; c.DescDim = 4 }}} {
		t.Run(v.name, func(t *testing.T) {
			cfg := smallConfig()
			v.mod(&cfg)
			b, _ := New(cfg)
			twin, _ := New(cfg)
			st := newStream(cfg, 7, true, 20)
			for i := 0; i < 4; i++ {
				blk := st.block()
				// Check accepts what Update accepts, and changes nothing.
				if err := b.Check(blk); err != nil {
					t.Fatalf("update %d: Check rejects a good block: %v", i, err)
				}
				if _, err := b.Update(blk); err != nil {
					t.Fatal(err)
				}
				twin.Update(blk)
			}
			good := st.block()
			n := len(good.Source)
			type badBlock struct {
				name string
				blk  func() Block
				want error
				msg  string
			}
			bad := []badBlock{
				{"empty", func() Block { return Block{} }, ErrEmpty, "no keys"},
				{"keys ragged", func() Block { g := good; g.Keys = g.Keys[:len(g.Keys)-1]; return g }, ErrShape, "key values"},
				{"values short", func() Block { g := good; g.Values = g.Values[:len(g.Values)-cfg.ValueDim]; return g }, ErrShape, "value values"},
				{"source short", func() Block { g := good; g.Source = g.Source[:n-1]; return g }, ErrShape, "source ids"},
				{"key NaN", func() Block {
					g := good
					g.Keys = slices.Clone(g.Keys)
					g.Keys[(2*n+n-1)*cfg.KeyDim+1] = float32(math.NaN())
					return g
				}, ErrNonFinite, "keys has NaN at head 2 row " + strconv.Itoa(n-1) + " col 1"},
				{"value Inf", func() Block {
					g := good
					g.Values = slices.Clone(g.Values)
					g.Values[0] = float32(math.Inf(-1))
					return g
				}, ErrNonFinite, "values has Inf at head 0 row 0"},
				{"key huge", func() Block {
					g := good
					g.Keys = slices.Clone(g.Keys)
					g.Keys[cfg.KeyDim] = 3.4e38
					return g
				}, ErrNonFinite, "head 0 row 1"},
			}
			if cfg.DescDim > 0 {
				bad = append(bad, badBlock{"desc missing", func() Block { g := good; g.Desc = nil; return g }, ErrShape, "descriptor"},
					badBlock{"desc NaN", func() Block {
						g := good
						g.Desc = slices.Clone(g.Desc)
						g.Desc[len(g.Desc)-1] = float32(math.NaN())
						return g
					}, ErrNonFinite, "desc has NaN"})
			} else {
				bad = append(bad, badBlock{"desc unexpected", func() Block { g := good; g.Desc = make([]float32, 3); return g }, ErrShape, "DescDim = 0"})
			}
			if cfg.Payload == PayloadBF16 {
				bad = append(bad, badBlock{"value bf16 overflow", func() Block {
					g := good
					g.Values = slices.Clone(g.Values)
					g.Values[n*cfg.ValueDim+2] = 3.4028e38 // finite in float32, Inf once rounded to bfloat16
					return g
				}, ErrNonFinite, "head 1 row 0"})
			}
			before := snapshotBytes(t, b)
			for _, bc := range bad {
				// Check returns exactly the error Update returns, and neither
				// changes the bank.
				cerr := b.Check(bc.blk())
				if !bytes.Equal(before, snapshotBytes(t, b)) {
					t.Fatalf("%s: Check changed the bank", bc.name)
				}
				_, err := b.Update(bc.blk())
				if err == nil || !errors.Is(err, bc.want) || !strings.Contains(err.Error(), bc.msg) || !strings.HasPrefix(err.Error(), "bank: update 4: ") {
					t.Fatalf("%s: err = %v, want %v mentioning %q", bc.name, err, bc.want, bc.msg)
				}
				if cerr == nil || cerr.Error() != err.Error() {
					t.Fatalf("%s: Check = %v, Update = %v", bc.name, cerr, err)
				}
				if !bytes.Equal(before, snapshotBytes(t, b)) {
					t.Fatalf("%s: bank changed after a failed update", bc.name)
				}
			}
			if err := b.Check(good); err != nil {
				t.Fatal(err)
			}
			d1, err1 := b.Update(good)
			d2, err2 := twin.Update(good)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			d1.Timings, d2.Timings = Timings{}, Timings{}
			if !reflect.DeepEqual(d1, d2) || !bytes.Equal(snapshotBytes(t, b), snapshotBytes(t, twin)) {
				t.Fatal("bank diverged from its twin after failed updates")
			}
		})
	}
}

// TestSnapshotRoundTrip checks that restore is bit-exact and continues
// identically, for several variants, via WriteTo/Load and SaveFile/LoadFile.
func TestSnapshotRoundTrip(t *testing.T) {
	for _, v := range []variant{variants[0], {"bf16f32desc", func(c *Config) { c.Payload = PayloadBF16; c.Density = F32; c.DescDim = 5 }},
		{"bf16", func(c *Config) { c.Payload = PayloadBF16 }}, {"perhead", func(c *Config) { c.Prefix = PrefixPerHead; c.Tau = 1.3 }}} {
		t.Run(v.name, func(t *testing.T) {
			cfg := smallConfig()
			v.mod(&cfg)
			b, _ := New(cfg)
			st := newStream(cfg, 3, true, 30)
			for i := 0; i < 6; i++ {
				if _, err := b.Update(st.block()); err != nil {
					t.Fatal(err)
				}
			}
			snap := snapshotBytes(t, b)
			r, err := Load(bytes.NewReader(snap))
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "bank.snap")
			if err := b.SaveFile(path); err != nil {
				t.Fatal(err)
			}
			f, err := LoadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
				t.Fatalf("SaveFile left %d files", len(ents))
			}
			for _, x := range []*Bank{r, f} {
				if !bytes.Equal(snap, snapshotBytes(t, x)) || !reflect.DeepEqual(b.heads, x.heads) {
					t.Fatal("restored bank differs")
				}
			}
			for i := 0; i < 4; i++ {
				blk := st.block()
				d1, e1 := b.Update(blk)
				d2, e2 := r.Update(blk)
				if e1 != nil || e2 != nil {
					t.Fatal(e1, e2)
				}
				d1.Timings, d2.Timings = Timings{}, Timings{}
				if !reflect.DeepEqual(d1, d2) || !bytes.Equal(snapshotBytes(t, b), snapshotBytes(t, r)) {
					t.Fatalf("update %d after restore diverged", i)
				}
			}
			// ReadFrom replaces the state of an existing bank.
			var other Bank
			if _, err := other.ReadFrom(bytes.NewReader(snap)); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(snap, snapshotBytes(t, &other)) {
				t.Fatal("ReadFrom differs")
			}
		})
	}
}

func TestSnapshotRejectsDamage(t *testing.T) {
	cfg := smallConfig()
	b, _ := New(cfg)
	st := newStream(cfg, 5, false, 20)
	for i := 0; i < 3; i++ {
		b.Update(st.block())
	}
	snap := snapshotBytes(t, b)
	for _, cut := range []int{0, 1, 7, snapHeader, snapHeader + 10, len(snap) / 2, len(snap) - 1} {
		if _, err := Load(bytes.NewReader(snap[:cut])); err == nil || !errors.Is(err, ErrSnapshot) {
			t.Fatalf("truncated at %d: err = %v", cut, err)
		}
	}
	for _, pos := range []int{0, 9, 12, snapHeader + 3, len(snap) / 3, len(snap) - 20, len(snap) - 2} {
		bad := slices.Clone(snap)
		bad[pos] ^= 0x10
		if _, err := Load(bytes.NewReader(bad)); err == nil || !errors.Is(err, ErrSnapshot) {
			t.Fatalf("flipped byte %d: err = %v", pos, err)
		}
	}
	// ReadFrom with a bad snapshot (truncated, or a flipped bit caught by
	// the checksum) leaves the bank unchanged.
	flipped := slices.Clone(snap)
	flipped[len(flipped)/2] ^= 1
	for _, bad := range [][]byte{snap[:len(snap)-3], flipped} {
		if _, err := b.ReadFrom(bytes.NewReader(bad)); err == nil {
			t.Fatal("ReadFrom accepted a damaged snapshot")
		}
		if !bytes.Equal(snap, snapshotBytes(t, b)) {
			t.Fatal("failed ReadFrom changed the bank")
		}
	}
	// A failed SaveFile (here: the rename onto a non-empty folder fails)
	// leaves no temporary file behind, and a saved snapshot is intact after
	// a failed overwrite.
	dir := t.TempDir()
	good := filepath.Join(dir, "bank.snap")
	if err := b.SaveFile(good); err != nil {
		t.Fatal(err)
	}
	blocked := filepath.Join(dir, "blocked")
	if err := os.MkdirAll(filepath.Join(blocked, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := b.SaveFile(blocked); err == nil || !strings.Contains(err.Error(), blocked) {
		t.Fatalf("SaveFile onto a folder: error %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Fatalf("%d entries after a failed save, want 2 (a temporary file left behind?)", len(ents))
	}
	if lb, err := LoadFile(good); err != nil || !bytes.Equal(snapshotBytes(t, lb), snap) {
		t.Fatalf("saved snapshot does not reload to the same bank: %v", err)
	}
	if _, err := LoadFile(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("LoadFile of a missing file succeeded")
	}
}

// TestSnapshotLyingLengths: a header and an occupancy that promise far
// more data than follows (here 2^22 states of 2,048 float32 values, 32 GiB)
// give a truncation error after allocating little more than what arrived,
// not an out-of-memory crash.
func TestSnapshotLyingLengths(t *testing.T) {
	cfg := smallConfig()
	cfg.Heads, cfg.KeyDim, cfg.ValueDim, cfg.Capacity = 1, 1024, 1024, 1<<22
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	snap := snapshotBytes(t, b)
	const nAt = snapHeader + 6*8 + 5*8 + 7 + 4 + 8 // head 0's occupancy
	if got := binary.LittleEndian.Uint64(snap[nAt:]); got != 0 {
		t.Fatalf("occupancy field reads %d, want 0 (layout changed?)", got)
	}
	bad := slices.Clone(snap[:nAt+8])
	binary.LittleEndian.PutUint64(bad[12:], 1<<40)
	binary.LittleEndian.PutUint64(bad[nAt:], 1<<22)
	bad = append(bad, make([]byte, 1<<20)...) // 1 MiB of the promised 32 GiB
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	_, err = Load(bytes.NewReader(bad))
	runtime.ReadMemStats(&m1)
	if err == nil || !errors.Is(err, ErrSnapshot) || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("error %v, want a truncated snapshot", err)
	}
	if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > 3*snapChunk {
		t.Fatalf("allocated %d MiB reading 1 MiB", alloc>>20)
	}
}

// TestSnapshotReadsToItsEnd: Load and ReadFrom consume exactly the
// snapshot from a stream that goes on (the memory package's snapshots
// embed banks), and report that many bytes.
func TestSnapshotReadsToItsEnd(t *testing.T) {
	cfg := smallConfig()
	b, _ := New(cfg)
	st := newStream(cfg, 4, false, 20)
	for i := 0; i < 3; i++ {
		b.Update(st.block())
	}
	snap := snapshotBytes(t, b)
	r := bytes.NewReader(append(slices.Clone(snap), "next section"...))
	var nb Bank
	n, err := nb.ReadFrom(r)
	if err != nil || n != int64(len(snap)) || r.Len() != len("next section") {
		t.Fatalf("ReadFrom: %d bytes, err %v, %d left; want %d bytes and 12 left", n, err, r.Len(), len(snap))
	}
	if !bytes.Equal(snapshotBytes(t, &nb), snap) {
		t.Fatal("reloaded bank differs")
	}
}

// FuzzSnapshot feeds arbitrary bytes to the decoder: it must never panic,
// and whatever it accepts must re-encode to the same bytes.
func FuzzSnapshot(f *testing.F) {
	for _, v := range []variant{variants[0], {"bf16", func(c *Config) { c.Payload = PayloadBF16; c.Density = F32; c.DescDim = 2 }}} {
		cfg := smallConfig()
		cfg.Capacity = 6
		cfg.KeyDim = 3
		v.mod(&cfg)
		b, _ := New(cfg)
		st := newStream(cfg, 1, false, 8)
		f.Add(snapshotBytes(f, b))
		for i := 0; i < 2; i++ {
			b.Update(st.block())
			f.Add(snapshotBytes(f, b))
		}
	}
	f.Add([]byte(snapMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := Load(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrSnapshot) {
				t.Fatalf("error not wrapping ErrSnapshot: %v", err)
			}
			return
		}
		if got := snapshotBytes(t, b); !bytes.Equal(got, data[:len(got)]) {
			t.Fatal("accepted snapshot does not re-encode to itself")
		}
	})
}

func TestBytesAndAccessors(t *testing.T) {
	cfg := smallConfig()
	cfg.Payload = PayloadBF16
	cfg.Density = F32
	b, _ := New(cfg)
	if b.Bytes() != 0 || b.Len() != 0 {
		t.Fatal("new bank not empty")
	}
	st := newStream(cfg, 2, true, 20)
	dec, err := b.Update(st.block())
	if err != nil {
		t.Fatal(err)
	}
	if !dec.Empty || dec.Accepted != b.Len() {
		t.Fatalf("first update: empty %v accepted %d len %d", dec.Empty, dec.Accepted, b.Len())
	}
	per := int64((cfg.KeyDim+cfg.ValueDim)*2 + 2*4 + 8 + 4)
	if got := b.Bytes(); got != int64(cfg.Heads*b.Len())*per {
		t.Fatalf("Bytes = %d, want %d", got, int64(cfg.Heads*b.Len())*per)
	}
	for h := 0; h < cfg.Heads; h++ {
		for _, v := range b.Keys(h) {
			if RoundBF16(v) != v {
				t.Fatalf("stored key %v not bf16", v)
			}
		}
	}
}

func TestRoundBF16(t *testing.T) {
	cases := []struct{ in, want float32 }{
		{1, 1},
		{math.Float32frombits(0x3f808000), math.Float32frombits(0x3f800000)}, // tie → even
		{math.Float32frombits(0x3f818000), math.Float32frombits(0x3f820000)}, // tie → even (up)
		{math.Float32frombits(0x3f808001), math.Float32frombits(0x3f810000)},
		{-2.5, -2.5},
		{math.MaxFloat32, float32(math.Inf(1))},
	}
	for _, c := range cases {
		if got := RoundBF16(c.in); got != c.want {
			t.Errorf("RoundBF16(%x) = %x, want %x", math.Float32bits(c.in), math.Float32bits(got), math.Float32bits(c.want))
		}
	}
	if !math.IsNaN(float64(RoundBF16(float32(math.NaN())))) {
		t.Error("NaN not preserved")
	}
}

// TestFlushAndDegenerate checks the degenerate-state reports: a full bank hit
// by N ≥ M is flushed; an isolated admission (density < δ) blocks admission.
func TestFlushAndDegenerate(t *testing.T) {
	cfg := smallConfig()
	cfg.Heads = 1
	cfg.KeyDim = 2
	cfg.ValueDim = 1
	cfg.Capacity = 4
	b, _ := New(cfg)
	mk := func(src int64, pts ...float32) Block {
		n := len(pts) / 2
		blk := Block{Keys: pts, Values: make([]float32, n), Source: make([]int64, n)}
		for i := range blk.Source {
			blk.Source[i] = src + int64(i)
			blk.Values[i] = float32(src + int64(i))
		}
		return blk
	}
	// One isolated state: density 0 < δ, baseline at the floor.
	d, err := b.Update(mk(0, 0, 0))
	if err != nil || d.Accepted != 1 || b.Entries(0)[0].Baseline != cfg.Delta {
		t.Fatalf("first: %v %+v %+v", err, d, b.Entries(0))
	}
	// A far candidate still interacts (w > 0) and pushes it over τ·δ while
	// the bank has room (e_r = 0): admission is blocked.
	d, err = b.Update(mk(1, 10, 10))
	if err != nil || d.Accepted != 0 || !d.FloorBlocked || d.Heads[0].FloorStates != 1 {
		t.Fatalf("blocked: %v accepted %d floorBlocked %v floorStates %d", err, d.Accepted, d.FloorBlocked, d.Heads[0].FloorStates)
	}
	// Fill to capacity with a block of N ≥ M after a flush-capable state.
	b2, _ := New(cfg)
	b2.Update(mk(0, 0, 0, 10, 0, 0, 10, 10, 10))
	if b2.Len() != 4 {
		t.Fatalf("len %d", b2.Len())
	}
	d, err = b2.Update(mk(4, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5))
	if err != nil || !d.Flushed || d.Accepted != 4 || len(d.Heads[0].Evicted) != 4 {
		t.Fatalf("flush: %v %+v", err, d)
	}
}

// TestDeterministicAcrossWorkersAndCache checks that the worker count and
// the interaction cache (scan from the cached scoring pass vs recomputed
// tiles) do not change a single bit of the bank or of the decisions.
func TestDeterministicAcrossWorkersAndCache(t *testing.T) {
	for _, v := range []variant{variants[0], {"max-bf16", func(c *Config) { c.Ordering = OrderMax; c.Payload = PayloadBF16; c.Density = F32 }}} {
		t.Run(v.name, func(t *testing.T) {
			cfg := smallConfig()
			cfg.Capacity = 300 // several tiles and checkpoints
			cfg.KeyDim = 8
			cfg.Tau = 1.4
			v.mod(&cfg)
			var banks []*Bank
			for _, mod := range []func(*Config){
				func(c *Config) { c.Workers = 1 },
				func(c *Config) { c.Workers = 3; c.CacheBytes = -1 },
				func(c *Config) { c.Workers = 2; c.CacheBytes = 1 << 30 },
			} {
				c := cfg
				mod(&c)
				b, err := New(c)
				if err != nil {
					t.Fatal(err)
				}
				banks = append(banks, b)
			}
			st := newStream(cfg, 11, true, 420)
			for u := 0; u < 6; u++ {
				blk := st.block()
				var first Decision
				for i, b := range banks {
					d, err := b.Update(blk)
					if err != nil {
						t.Fatal(err)
					}
					d.Timings = Timings{}
					if i == 0 {
						first = d
						continue
					}
					if !reflect.DeepEqual(d, first) {
						t.Fatalf("update %d: bank %d decision differs", u, i)
					}
				}
				s0 := snapshotBytes(t, banks[0])
				for i, b := range banks[1:] {
					// Snapshots embed Workers; compare the heads instead.
					if !reflect.DeepEqual(b.heads, banks[0].heads) {
						t.Fatalf("update %d: bank %d state differs", u, i+1)
					}
				}
				_ = s0
			}
		})
	}
}

func TestFreeScratch(t *testing.T) {
	cfg := smallConfig()
	b, _ := New(cfg)
	st := newStream(cfg, 4, false, 20)
	b.Update(st.block())
	FreeScratch()
	pool.Lock()
	n := len(pool.free)
	pool.Unlock()
	if n != 0 {
		t.Fatalf("%d pooled workspaces after FreeScratch", n)
	}
	if _, err := b.Update(st.block()); err != nil {
		t.Fatal(err)
	}
	if b.PeakScratchBytes() <= 0 {
		t.Fatal("no scratch accounted")
	}
}

// TestWriteToStreams: WriteTo writes a bank of many states without
// holding its snapshot (it allocates a small fraction of its size), its
// size is SnapshotBytes, and the snapshot reads back bit-exact.
func TestWriteToStreams(t *testing.T) {
	for _, pl := range []Payload{PayloadBF16, PayloadF32} {
		cfg := smallConfig()
		cfg.Payload, cfg.Capacity, cfg.KeyDim, cfg.ValueDim = pl, 4096, 64, 64
		b, _ := New(cfg)
		st := newStream(cfg, 1, true, 4096)
		if _, err := b.Update(st.block()); err != nil {
			t.Fatal(err)
		}
		var cw countingWriter
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		n, err := b.WriteTo(&cw)
		runtime.ReadMemStats(&m1)
		if err != nil || n != cw.n || n != b.SnapshotBytes() || n < 256<<10 {
			t.Fatalf("%v: wrote %d (%d counted, %d expected): %v", pl, n, cw.n, b.SnapshotBytes(), err)
		}
		if alloc := int64(m1.TotalAlloc - m0.TotalAlloc); alloc > n/8+(256<<10) {
			t.Fatalf("%v: a snapshot of %d bytes allocated %d", pl, n, alloc)
		}
		r, err := Load(bytes.NewReader(snapshotBytes(t, b)))
		if err != nil || !bytes.Equal(snapshotBytes(t, r), snapshotBytes(t, b)) {
			t.Fatalf("%v: round trip: %v", pl, err)
		}
	}
}

type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }
