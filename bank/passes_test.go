package bank

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/riesz"
)

// foreignPasses are CPUPasses behind another type: the bank treats them as
// a backend other than the CPU's (no host cache, no speculation, Commit and
// Load called), which must not change a bit. They check what Commit is
// told against the bank and can fail on a given call.
type foreignPasses struct {
	CPUPasses
	t       *testing.T
	b       *Bank // the bank they serve, for checking Commit
	commits int
	evicted int
	occ     []int // each head's occupancy after the last Commit
	failAt  int   // Commit call (1-based) that fails; 0: never
	err     error
}

func (p *foreignPasses) Commit(h int, kept, evicted []int32, fresh riesz.Set, keys, values []float32) {
	p.commits++
	if p.commits == p.failAt {
		p.err = errors.New("injected failure")
	}
	cfg := p.b.cfg
	n := p.b.heads[h].n
	if len(kept)+fresh.N != n || len(kept)+len(evicted) != p.occ[h] || len(keys) != fresh.N*cfg.KeyDim || len(values) != fresh.N*cfg.ValueDim {
		p.t.Errorf("Commit head %d: %d kept + %d fresh with %d keys, %d values for %d states; %d evicted of %d", h, len(kept), fresh.N, len(keys), len(values), n, len(evicted), p.occ[h])
		return
	}
	// The fresh keys and values are the bank's last stored rows.
	k, v := p.b.Keys(h), p.b.Values(h)
	if !reflect.DeepEqual(keys, k[len(kept)*cfg.KeyDim:]) || !reflect.DeepEqual(values, v[len(kept)*cfg.ValueDim:]) {
		p.t.Errorf("Commit head %d: the fresh keys or values differ from the bank's last %d rows", h, fresh.N)
	}
	p.evicted += len(evicted)
	p.occ[h] = n
}

func (p *foreignPasses) Err() error { return p.err }

// TestForeignPasses: a bank on a backend other than CPUPasses (here the
// CPU's passes under another type) takes the path a device backend takes
// and makes the same decisions and snapshots as New's, for several
// variants; a failed pass makes Update fail and the bank refuse further
// updates.
func TestForeignPasses(t *testing.T) {
	evicted := 0
	for _, v := range []struct {
		name string
		mod  func(*Config)
	}{
		{"paper", func(*Config) {}},
		{"max-densest-f32", func(c *Config) { c.Ordering, c.Eviction, c.Payload = OrderMax, EvictDensest, PayloadF32 }},
		{"source-perhead-desc", func(c *Config) { c.Ordering, c.Prefix, c.DescDim = OrderSource, PrefixPerHead, 5 }},
		{"sequential", func(c *Config) { c.Admission = AdmitSequential }},
	} {
		t.Run(v.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Heads, cfg.KeyDim, cfg.ValueDim, cfg.Capacity, cfg.Sigma = 3, 8, 6, 40, 1.5
			v.mod(&cfg)
			cpu, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			p := &foreignPasses{CPUPasses: CPUPasses{K: cpu.Kernel()}, t: t}
			fb, err := NewWithPasses(cfg, p)
			if err != nil {
				t.Fatal(err)
			}
			p.b, p.occ = fb, make([]int, cfg.Heads)
			st := newStream(cfg, 7, true, 60)
			for u := range 12 {
				blk := st.block()
				want, err := cpu.Update(blk)
				if err != nil {
					t.Fatal(err)
				}
				got, err := fb.Update(blk)
				if err != nil {
					t.Fatal(err)
				}
				want.Timings, got.Timings = Timings{}, Timings{}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("update %d: decision\n%+v\nwant\n%+v", u, got, want)
				}
				var a, b bytes.Buffer
				if _, err := cpu.WriteTo(&a); err != nil {
					t.Fatal(err)
				}
				if _, err := fb.WriteTo(&b); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(a.Bytes(), b.Bytes()) {
					t.Fatalf("update %d: snapshots differ", u)
				}
			}
			if p.commits == 0 {
				t.Fatal("Commit was never called")
			}
			evicted += p.evicted
			// A failure: this update and every later one fail.
			p.failAt = p.commits + 1
			if _, err := fb.Update(st.block()); err == nil || !strings.Contains(err.Error(), "injected failure") {
				t.Fatalf("Update with a failed pass: %v, want the injected failure", err)
			}
			p.err = nil
			if _, err := fb.Update(st.block()); err == nil || !strings.Contains(err.Error(), "a previous update's pass failed") {
				t.Fatalf("Update after a failed pass: %v, want a refusal", err)
			}
		})
	}
	if evicted == 0 {
		t.Error("no variant evicted a state: the streams test too little")
	}
}
