package memory

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/densitykv/densitykv/bank"
)

// TestSnapshotV1Files reads policy snapshots written by the code before the
// bank variants were typed values (testdata/snapshot-v1, written at commit
// 10d66bb after six blocks, one denoising step each, of
// newStream(layout, 21) on the small layout below with capacity 12). Each
// must load into a policy built from the same configuration and then
// continue exactly like a policy that ran those six blocks itself.
func TestSnapshotV1Files(t *testing.T) {
	lay := Layout{Height: 2, Width: 3, FramesPerBlock: 2, Layers: 2, Heads: 2, HeadDim: 8}
	for _, c := range []struct {
		file, policy string
		mod          func(*Config)
	}{
		{"densitykv-variants", NameDensityKV, func(c *Config) {
			c.Bank.Ordering, c.Bank.Baselines, c.Bank.Eviction, c.Bank.Prefix = bank.OrderMax, bank.BaselinesRefresh, bank.EvictDensest, bank.PrefixPerHead
			c.Bank.Payload, c.Bank.Densities, c.Bank.Descriptor = bank.PayloadF32, bank.F64, bank.DescPreRoPEKeyValue
		}},
		{"densitykv-default", NameDensityKV, func(c *Config) {}},
		{"densitykv-sequential", NameDensityKV, func(c *Config) {
			c.Bank.Ordering, c.Bank.Eviction, c.Bank.Admission, c.Bank.Descriptor = bank.OrderSource, bank.EvictMandatorySource, bank.AdmitSequential, bank.DescKeyValue
		}},
		// Written before the pool option: pooled from the window, and read so.
		{"longlive-rag-keymean", NameLongLiveRAG, func(c *Config) { c.LongLiveRAG.Descriptor, c.LongLiveRAG.Pool = RAGKeyMean, RAGPoolWindow }},
	} {
		t.Run(c.file, func(t *testing.T) {
			cfg := Config{Layout: lay, Capacity: 12}
			c.mod(&cfg)
			got, err := New(c.policy, cfg)
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(filepath.Join("testdata", "snapshot-v1", c.file+".snap"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := got.(Snapshotter).Load(f); err != nil {
				t.Fatal(err)
			}
			want, err := New(c.policy, cfg)
			if err != nil {
				t.Fatal(err)
			}
			s := newStream(lay, 21)
			for b := 0; b < 6; b++ {
				s.block(t, want, b, 1)
			}
			if got.Bytes() != want.Bytes() {
				t.Fatalf("restored bytes %d, want %d", got.Bytes(), want.Bytes())
			}
			s2 := newStream(lay, 21)
			for b := 6; b < 9; b++ {
				for st := 0; st <= 1; st++ {
					call := Call{Block: b, Step: st, First: st == 0, Clean: st == 1}
					cw, _ := s.call(t, want, call)
					cg, _ := s2.call(t, got, call)
					for l := range cw {
						if cw[l].Parts != cg[l].Parts || !equal(cw[l].K, cg[l].K) || !equal(cw[l].V, cg[l].V) || !equal(cw[l].Q, cg[l].Q) {
							t.Fatalf("block %d step %d layer %d: the restored policy's context differs", b, st, l)
						}
					}
				}
			}
		})
	}
}
