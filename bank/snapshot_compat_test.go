package bank

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/densitykv/densitykv/riesz"
)

// TestSnapshotV1Files reads bank snapshots written by the code before the
// variant types had text names (testdata/snapshot-v1, written at commit
// 10d66bb from smallConfig with Capacity 20 and six updates of
// newStream(cfg, 5, true, 30), once by the pure-Go build (NAME.go.dkvbank)
// and once with the AVX-512 epilogues (NAME.avx512.dkvbank), whose
// densities differ in the last bits). Each must load with the
// configuration it was written with, encode back to the same bytes (the
// on-disk encoding of the variants is unchanged), and hold exactly the
// state this build computes from the same stream.
func TestSnapshotV1Files(t *testing.T) {
	for _, c := range []struct {
		file string
		mod  func(*Config)
	}{
		{"default", func(c *Config) { c.Payload, c.Density = PayloadBF16, F32 }},
		{"variants", func(c *Config) {
			c.Ordering, c.Baselines, c.Eviction, c.Prefix, c.Admission = OrderMax, BaselinesRefresh, EvictMandatorySource, PrefixPerHead, AdmitSequential
			c.Payload, c.Density, c.DescDim = PayloadF32, F64, 4
		}},
		{"densest-source", func(c *Config) {
			c.Ordering, c.Eviction, c.Payload, c.Density = OrderSource, EvictDensest, PayloadBF16, F64
		}},
	} {
		t.Run(c.file, func(t *testing.T) {
			cfg := smallConfig()
			cfg.Capacity = 20
			c.mod(&cfg)
			build := ".go"
			if riesz.SIMD() {
				build = ".avx512"
			}
			raw, err := os.ReadFile(filepath.Join("testdata", "snapshot-v1", c.file+build+".dkvbank"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := Load(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			if got.Config() != cfg {
				t.Fatalf("config %+v, want %+v", got.Config(), cfg)
			}
			var again bytes.Buffer
			if _, err := got.WriteTo(&again); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again.Bytes(), raw) {
				t.Fatal("the loaded snapshot encodes to different bytes")
			}
			want, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			st := newStream(cfg, 5, true, 30)
			for u := 0; u < 6; u++ {
				if _, err := want.Update(st.block()); err != nil {
					t.Fatal(err)
				}
			}
			if got.Updates() != want.Updates() {
				t.Fatalf("%d updates, want %d", got.Updates(), want.Updates())
			}
			for h := 0; h < cfg.Heads; h++ {
				if !slices.Equal(got.Keys(h), want.Keys(h)) || !slices.Equal(got.Values(h), want.Values(h)) ||
					!slices.Equal(got.Descriptors(h), want.Descriptors(h)) || !reflect.DeepEqual(got.Entries(h), want.Entries(h)) {
					t.Fatalf("head %d: the snapshot's state differs from a recomputation", h)
				}
			}
		})
	}
}
