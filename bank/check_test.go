package bank

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"slices"
	"testing"
)

// TestCheckMatchesUpdate checks that Check returns exactly the error Update
// would return for every kind of bad block, leaves the bank bit-identical,
// accepts the blocks Update accepts, and that checking a block first does
// not change what the following Update does.
func TestCheckMatchesUpdate(t *testing.T) {
	for _, v := range []variant{
		{"f32", func(c *Config) {}},
		{"bf16", func(c *Config) { c.Payload = BF16 }},
		{"bf16desc", func(c *Config) { c.Payload = BF16; c.DescDim = 4 }},
	} {
		t.Run(v.name, func(t *testing.T) {
			cfg := smallConfig()
			v.mod(&cfg)
			b, _ := New(cfg)
			twin, _ := New(cfg)
			st := newStream(cfg, 11, true, 20)
			for i := 0; i < 3; i++ {
				blk := st.block()
				if err := b.Check(blk); err != nil {
					t.Fatalf("update %d: Check rejects a good block: %v", i, err)
				}
				d1, err1 := b.Update(blk)
				d2, err2 := twin.Update(blk)
				if err1 != nil || err2 != nil {
					t.Fatal(err1, err2)
				}
				d1.Timings, d2.Timings = Timings{}, Timings{}
				if !reflect.DeepEqual(d1, d2) {
					t.Fatalf("update %d: decision after Check differs from the unchecked twin", i)
				}
			}
			good := st.block()
			n := len(good.Source)
			mod := func(f func(g *Block)) Block {
				g := good
				g.Keys, g.Values, g.Desc = slices.Clone(g.Keys), slices.Clone(g.Values), slices.Clone(g.Desc)
				f(&g)
				return g
			}
			bad := []struct {
				name string
				blk  Block
				want error
			}{
				{"empty", Block{}, ErrEmpty},
				{"values short", mod(func(g *Block) { g.Values = g.Values[:len(g.Values)-1] }), ErrShape},
				{"source short", mod(func(g *Block) { g.Source = g.Source[:n-1] }), ErrShape},
				{"key NaN", mod(func(g *Block) { g.Keys[n*cfg.KeyDim+2] = float32(math.NaN()) }), ErrNonFinite},
				{"value Inf", mod(func(g *Block) { g.Values[len(g.Values)-1] = float32(math.Inf(1)) }), ErrNonFinite},
			}
			if cfg.DescDim == 0 { // the keys are the density descriptor
				bad = append(bad, struct {
					name string
					blk  Block
					want error
				}{"key norm", mod(func(g *Block) { g.Keys[(2*n+n-1)*cfg.KeyDim+3] = 1e19 }), ErrNonFinite})
			}
			if cfg.Payload == BF16 {
				bad = append(bad, struct {
					name string
					blk  Block
					want error
				}{"value bf16 overflow", mod(func(g *Block) { g.Values[n*cfg.ValueDim+2] = 3.4028e38 }), ErrNonFinite})
			}
			if cfg.DescDim > 0 {
				bad = append(bad, struct {
					name string
					blk  Block
					want error
				}{"desc norm", mod(func(g *Block) { g.Desc[cfg.DescDim*(n+n-1)] = 1e19 }), ErrNonFinite})
			}
			before := snapshotBytes(t, b)
			for _, bc := range bad {
				cerr := b.Check(bc.blk)
				if cerr == nil || !errors.Is(cerr, bc.want) {
					t.Fatalf("%s: Check = %v, want %v", bc.name, cerr, bc.want)
				}
				if !bytes.Equal(before, snapshotBytes(t, b)) {
					t.Fatalf("%s: Check changed the bank", bc.name)
				}
				_, uerr := b.Update(bc.blk)
				if uerr == nil || uerr.Error() != cerr.Error() {
					t.Fatalf("%s: Check = %q, Update = %v", bc.name, cerr, uerr)
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
				t.Fatal("bank diverged from its twin after Check calls")
			}
		})
	}
}
