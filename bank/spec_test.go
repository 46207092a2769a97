package bank

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestSpeculativeEvictionsBothWays drives banks whose heads disagree on
// their largest feasible prefix, so that the speculative eviction choice
// (made per head while its interactions are cached) is both reused and
// discarded, and checks every update bit for bit against a bank without
// the cache (no speculation), decisions and state.
func TestSpeculativeEvictionsBothWays(t *testing.T) {
	for _, v := range []variant{variants[0], {"max-perhead", func(c *Config) { c.Ordering = OrderMax; c.Prefix = PrefixPerHead }}} {
		t.Run(v.name, func(t *testing.T) {
			cfg := smallConfig()
			cfg.Capacity = 200
			cfg.KeyDim = 8
			cfg.Tau = 1.15
			v.mod(&cfg)
			cached := cfg
			cached.CacheBytes = 1 << 30
			plain := cfg
			plain.CacheBytes = -1
			bc, err := New(cached)
			if err != nil {
				t.Fatal(err)
			}
			bp, err := New(plain)
			if err != nil {
				t.Fatal(err)
			}
			st := newStream(cfg, 7, true, 300)
			// Heads per outcome of their speculative eviction choice: reused
			// or discarded, for the cached and the uncached bank.
			var cachedSpec, plainSpec [2]int
			for u := 0; u < 12; u++ {
				blk := st.block()
				dc, err := bc.Update(blk)
				if err != nil {
					t.Fatal(err)
				}
				dp, err := bp.Update(blk)
				if err != nil {
					t.Fatal(err)
				}
				cachedSpec[0] += dc.Timings.SpecReused
				cachedSpec[1] += dc.Timings.SpecDiscarded
				plainSpec[0] += dp.Timings.SpecReused
				plainSpec[1] += dp.Timings.SpecDiscarded
				dc.Timings, dp.Timings = Timings{}, Timings{}
				if !reflect.DeepEqual(dc, dp) {
					t.Fatalf("update %d: decisions differ with the speculative path", u)
				}
				if !reflect.DeepEqual(bc.heads, bp.heads) {
					t.Fatalf("update %d: state differs with the speculative path", u)
				}
			}
			if plainSpec[0]+plainSpec[1] != 0 {
				t.Fatalf("uncached bank speculated: %v", plainSpec)
			}
			t.Logf("speculation (reused, discarded): %v", cachedSpec)
			if cachedSpec[0] == 0 {
				t.Errorf("speculation never reused: %v", cachedSpec)
			}
			if cfg.Prefix == PrefixShared && cachedSpec[1] == 0 {
				t.Errorf("speculation never discarded: %v", cachedSpec)
			}
		})
	}
}

// TestBF16OverflowBoundary checks the input screen at the bfloat16 overflow
// boundary: the largest float32 that rounds to a finite bfloat16 is stored,
// the next one (a tie rounding to +Inf) is rejected, for either sign, and
// with an F32 payload neither is.
func TestBF16OverflowBoundary(t *testing.T) {
	for _, c := range []struct {
		bits    uint32
		payload Payload
		ok      bool
		msg     string
	}{
		{0x7f7f7fff, PayloadBF16, true, ""},
		{0xff7f7fff, PayloadBF16, true, ""},
		{0x7f7f8000, PayloadBF16, false, "overflows bfloat16"},
		{0xff7f8000, PayloadBF16, false, "overflows bfloat16"},
		{0x7f7f8000, PayloadF32, true, ""},
		{0x7f800000, PayloadF32, false, "values has Inf"},
		{0x7fc00001, PayloadF32, false, "values has NaN"},
	} {
		cfg := smallConfig()
		cfg.Payload = c.payload
		b, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		blk := newStream(cfg, 3, false, 10).block()
		blk.Values = slices.Clone(blk.Values)
		blk.Values[cfg.ValueDim+2] = math.Float32frombits(c.bits)
		_, err = b.Update(blk)
		if c.ok != (err == nil) {
			t.Fatalf("value bits %#x payload %v: err = %v, want ok=%v", c.bits, c.payload, err, c.ok)
		}
		if err != nil && (!errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), "values has") || !strings.Contains(err.Error(), c.msg)) {
			t.Fatalf("value bits %#x: err = %v", c.bits, err)
		}
	}
}
