package memory

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/bank"
)

func snapConfig() Config {
	c := tinyConfig()
	c.Capacity = 30
	c.LongLiveRAG.Descriptor = RAGKeyMean
	c.Bank.Payload = bank.PayloadF32
	return c
}

// TestSnapshotContinuation saves every policy at several points, restores
// into a fresh policy and checks that both continue with bit-identical
// contexts and bytes.
func TestSnapshotContinuation(t *testing.T) {
	for _, name := range Names() {
		for _, at := range []int{0, 2, 5} {
			t.Run(fmt.Sprintf("%s/at%d", name, at), func(t *testing.T) {
				cfg := snapConfig()
				a, err := New(name, cfg)
				if err != nil {
					t.Fatal(err)
				}
				s := newStream(cfg.Layout, 13)
				for b := 0; b < at; b++ {
					s.block(t, a, b, 1)
				}
				var buf bytes.Buffer
				err = a.(Snapshotter).Save(&buf)
				if err != nil {
					t.Fatal(err)
				}
				raw := append([]byte(nil), buf.Bytes()...)
				b2, _ := New(name, cfg)
				if err := b2.(Snapshotter).Load(&buf); err != nil {
					t.Fatal(err)
				}
				if a.Bytes() != b2.Bytes() {
					t.Fatalf("restored bytes %d, want %d", b2.Bytes(), a.Bytes())
				}
				s2 := newStream(cfg.Layout, 13)
				s2.cleanK, s2.cleanV, s2.cleanQ = s.cleanK, s.cleanV, s.cleanQ
				for b := at; b < at+4; b++ {
					for st := 0; st <= 1; st++ {
						c := Call{Block: b, Step: st, First: st == 0, Clean: st == 1}
						ca, _ := s.call(t, a, c)
						cb, _ := s2.call(t, b2, c)
						for l := range ca {
							if ca[l].Parts != cb[l].Parts || !equal(ca[l].K, cb[l].K) || !equal(ca[l].V, cb[l].V) || !equal(ca[l].Q, cb[l].Q) {
								t.Fatalf("saved at %d: block %d step %d layer %d: contexts differ after restore (%+v vs %+v)", at, b, st, l, ca[l].Parts, cb[l].Parts)
							}
						}
					}
				}
				// Corrupt, truncated and foreign snapshots are rejected and leave the policy unchanged.
				fresh, _ := New(name, cfg)
				before := fresh.Bytes()
				bad := append([]byte(nil), raw...)
				bad[len(bad)-3] ^= 0x40
				for _, tc := range []struct {
					data []byte
					want string
				}{
					{bad, "checksum"},
					{raw[:len(raw)/2], "truncated"},
					{raw[:5], "header"},
					{append([]byte("XXXXXXXX"), raw[8:]...), "magic"},
				} {
					err := fresh.(Snapshotter).Load(bytes.NewReader(tc.data))
					if err == nil || !errors.Is(err, ErrSnapshot) || !strings.Contains(err.Error(), tc.want) {
						t.Fatalf("load %s: %v", tc.want, err)
					}
					if fresh.Bytes() != before {
						t.Fatal("failed load changed the policy")
					}
				}
				other := NameNative
				if name == NameNative {
					other = NameFIFO
				}
				o, _ := New(other, cfg)
				if err := o.(Snapshotter).Load(bytes.NewReader(raw)); err == nil || !strings.Contains(err.Error(), "snapshot is of policy") {
					t.Fatalf("foreign snapshot: %v", err)
				}
				cfg2 := cfg
				cfg2.WindowFrames = 6
				d, _ := New(name, cfg2)
				if err := d.(Snapshotter).Load(bytes.NewReader(raw)); err == nil || !strings.Contains(err.Error(), "config") {
					t.Fatalf("config mismatch: %v", err)
				}
			})
		}
	}
}

func TestSnapshotOpenCall(t *testing.T) {
	p, _ := New(NameNative, tinyConfig())
	if err := p.Begin(Call{Block: 0, First: true, Clean: true}); err != nil {
		t.Fatal(err)
	}
	if err := p.(Snapshotter).Save(&bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "open") {
		t.Fatalf("save during call: %v", err)
	}
}

// FuzzSnapshotLoad feeds arbitrary bytes to Load: it must never panic and
// must either fail or leave a usable policy (that runs another block). The
// seeds are every policy's snapshot on a small layout (small inputs keep
// the fuzzer fast), DensityKV's with bank-candidate frames.
func FuzzSnapshotLoad(f *testing.F) {
	cfg := Config{Layout: Layout{Height: 2, Width: 3, FramesPerBlock: 2, Layers: 2, Heads: 1, HeadDim: 8}, Capacity: 12,
		LongLiveRAG: LongLiveRAGConfig{Descriptor: RAGKeyMean}}
	cfg, err := cfg.Resolve()
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range Names() {
		p, _ := New(name, cfg)
		s := newStream(cfg.Layout, 1)
		for b := 0; b < 4; b++ {
			runBlockNoT(s, p, b)
		}
		var buf bytes.Buffer
		if err := p.(Snapshotter).Save(&buf); err == nil {
			f.Add(name, buf.Bytes())
		}
	}
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		p, err := New(name, cfg)
		if err != nil {
			return
		}
		if err := p.(Snapshotter).Load(bytes.NewReader(data)); err != nil {
			return
		}
		_ = p.Bytes()
		// The restored policy runs its next block.
		st, ok := p.(interface{ blocksCommitted() int })
		if !ok {
			return
		}
		s := newStream(cfg.Layout, 2)
		if err := runBlockErr(s, p, st.blocksCommitted()); err != nil {
			t.Fatalf("%s: a loaded snapshot fails its next block: %v", name, err)
		}
	})
}

// runBlockErr runs one clean-only block and returns its first error.
func runBlockErr(s *stream, p Policy, b int) error {
	if err := p.Begin(Call{Block: b, First: true, Clean: true}); err != nil {
		return err
	}
	for l := 0; l < s.lay.Layers; l++ {
		q, k, v := s.qkv(b, 0, l)
		if _, err := p.Attend(l, q, k, v); err != nil {
			return err
		}
	}
	return p.End()
}

// runBlockNoT runs one clean-only block without a testing.T.
func runBlockNoT(s *stream, p Policy, b int) {
	if err := p.Begin(Call{Block: b, First: true, Clean: true}); err != nil {
		panic(err)
	}
	for l := 0; l < s.lay.Layers; l++ {
		q, k, v := s.qkv(b, 0, l)
		if _, err := p.Attend(l, q, k, v); err != nil {
			panic(err)
		}
	}
	if err := p.End(); err != nil {
		panic(err)
	}
}
