package bank

import (
	"reflect"
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
				dc.Timings, dp.Timings = Timings{}, Timings{}
				if !reflect.DeepEqual(dc, dp) {
					t.Fatalf("update %d: decisions differ with the speculative path", u)
				}
				if !reflect.DeepEqual(bc.heads, bp.heads) {
					t.Fatalf("update %d: state differs with the speculative path", u)
				}
			}
			if bp.spec[1]+bp.spec[2] != 0 {
				t.Fatalf("uncached bank speculated: %v", bp.spec)
			}
			t.Logf("speculation (none, reused, discarded): %v", bc.spec)
			if bc.spec[1] == 0 {
				t.Errorf("speculation never reused: %v", bc.spec)
			}
			if cfg.Prefix == PrefixShared && bc.spec[2] == 0 {
				t.Errorf("speculation never discarded: %v", bc.spec)
			}
		})
	}
}
