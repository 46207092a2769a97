package bank

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
)

// FuzzUpdate drives a small bank with fuzzer-chosen configuration and
// blocks (including NaN, Inf, huge and duplicate values, and wrong shapes):
// Update must never panic; a failed update must leave the bank
// bit-identical; after a successful one the occupancy and (for variants
// that keep it) the growth invariant must hold.
func FuzzUpdate(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	f.Add(bytes.Repeat([]byte{0x3f, 0x80, 0, 0}, 40))
	f.Add(bytes.Repeat([]byte{0x7f, 0xc0, 0, 1, 0, 0, 0, 0}, 30))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 4 {
			return
		}
		h := data[0]
		cfg := Config{Heads: 1 + int(h%3), KeyDim: 1 + int(data[1]%5), ValueDim: 1 + int(data[2]%3),
			Capacity: 1 + int(data[3]%9), Tau: 1.2 + float64(h%4), Sigma: 1, P: float64(1 + h%4), Eps: 1, Delta: 1e-6,
			Ordering: Ordering(h / 3 % 3), Eviction: Eviction(h / 9 % 3), Prefix: Prefix(h / 27 % 2),
			Admission: Admission(h / 54 % 2), Baselines: Baselines(h / 108 % 2), Payload: Payload(1 - data[1]/128), Density: F32 + DType(data[2]/128)*F64}
		b, err := New(cfg)
		if err != nil {
			t.Fatalf("config %+v: %v", cfg, err)
		}
		data = data[4:]
		next := func() (float32, bool) {
			if len(data) < 4 {
				return 0, false
			}
			v := math.Float32frombits(binary.LittleEndian.Uint32(data))
			data = data[4:]
			return v, true
		}
		for u := 0; u < 4 && len(data) > 0; u++ {
			n := 1 + int(data[0]%7)
			data = data[1:]
			blk := Block{Keys: make([]float32, cfg.Heads*n*cfg.KeyDim), Values: make([]float32, cfg.Heads*n*cfg.ValueDim)}
			for i := range blk.Keys {
				v, ok := next()
				if !ok {
					blk.Keys = blk.Keys[:i] // a ragged block
					break
				}
				blk.Keys[i] = v
			}
			before := snapshotBytes(t, b)
			_, err := b.Update(blk)
			if err != nil {
				if !bytes.Equal(before, snapshotBytes(t, b)) {
					t.Fatalf("failed update changed the bank: %v", err)
				}
				continue
			}
			for hh := 0; hh < cfg.Heads; hh++ {
				if b.HeadLen(hh) > cfg.Capacity {
					t.Fatalf("head %d holds %d > %d", hh, b.HeadLen(hh), cfg.Capacity)
				}
				if cfg.Eviction == EvictDensest {
					continue
				}
				for _, e := range b.Entries(hh) {
					if e.Density < 0 || math.IsNaN(e.Density) || e.Baseline < cfg.Delta*(1-1e-6) {
						t.Fatalf("bad entry %+v", e)
					}
					// Huge keys make float32 densities meaningless only
					// through rounding; the ratio check tolerates 1e-5.
					if e.Density >= cfg.Tau*e.Baseline*(1+1e-5) {
						t.Fatalf("head %d: ratio %g ≥ τ = %g", hh, e.Density/e.Baseline, cfg.Tau)
					}
				}
			}
		}
	})
}
