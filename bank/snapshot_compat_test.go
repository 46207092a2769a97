package bank

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestSnapshotV1Files reads bank snapshots written by the code before the
// variant types had text names (testdata/snapshot-v1, written at commit
// 10d66bb from smallConfig with Capacity 20 and six updates of
// newStream(cfg, 5, true, 30), once by the pure-Go build (NAME.go.dkvbank)
// and once with the AVX-512 epilogues (NAME.avx512.dkvbank), whose
// densities differ in the last bits). Each must load with the
// configuration it was written with, encode back to the same bytes (the
// on-disk encoding of the variants is unchanged), and hold the state this
// build computes from the same stream: the same tokens, keys, values,
// descriptors and admission updates, and densities and baselines equal to
// 1e-5 relative (the arithmetic has changed since: one float32 and one
// bfloat16 product definition, exactly rounded epilogues, so the last bits
// of a density are not those of 10d66bb).
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
			for _, build := range []string{".go", ".avx512"} {
				checkSnapshotV1(t, filepath.Join("testdata", "snapshot-v1", c.file+build+".dkvbank"), cfg)
			}
		})
	}
}

// checkSnapshotV1 is TestSnapshotV1Files for one file.
func checkSnapshotV1(t *testing.T, file string, cfg Config) {
	t.Helper()
	raw, err := os.ReadFile(file)
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
			!slices.Equal(got.Descriptors(h), want.Descriptors(h)) {
			t.Fatalf("%s: head %d: the snapshot's vectors differ from a recomputation", file, h)
		}
		ge, we := got.Entries(h), want.Entries(h)
		if len(ge) != len(we) {
			t.Fatalf("%s: head %d: %d entries, recomputation %d", file, h, len(ge), len(we))
		}
		for i := range ge {
			g, w := ge[i], we[i]
			if g.Source != w.Source || g.Admitted != w.Admitted ||
				!closeRel(g.Density, w.Density, 1e-5) || !closeRel(g.Baseline, w.Baseline, 1e-5) {
				t.Fatalf("%s: head %d entry %d: %+v, recomputation %+v", file, h, i, g, w)
			}
		}
	}
}

// closeRel reports whether a and b agree to rel relative to the larger.
func closeRel(a, b, rel float64) bool {
	return math.Abs(a-b) <= rel*math.Max(math.Abs(a), math.Abs(b))
}
