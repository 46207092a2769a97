package memory

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// Validation errors name the fields at fault (YAML paths) and their values,
// never a struct dump; Check adds the DensityKV bank's own rules.
func TestConfigErrorsNameFields(t *testing.T) {
	small := Layout{Height: 2, Width: 3, FramesPerBlock: 3, Layers: 1, Heads: 2, HeadDim: 8}
	// A variant's name is checked when it is read (SetVariant), the rest
	// by Resolve.
	cases := []struct {
		name   string
		mut    func(*Config) error
		fields []string
		msg    string
	}{
		{"heads", func(c *Config) error { c.Layout.Heads = -1; return nil }, []string{"layout.heads"}, "layout heads -1 must be positive"},
		{"frames per block", func(c *Config) error { c.Layout.FramesPerBlock = -2; return nil }, []string{"layout.frames_per_block"}, "layout frames_per_block -2"},
		{"window", func(c *Config) error { c.WindowFrames = 2; return nil }, []string{"window_frames", "layout.frames_per_block"}, "window frames 2 < frames per block 3"},
		{"sigma", func(c *Config) error { c.Bank.Sigma = -1; return nil }, []string{"bank.sigma"}, "bank sigma -1"},
		{"ordering", func(c *Config) error { return c.SetVariant("bank.ordering", "median") }, []string{"bank.ordering"}, `bank ordering "median" unknown`},
		{"densities", func(c *Config) error { return c.SetVariant("bank.densities", "bf16") }, []string{"bank.densities"}, `bank densities "bf16" unknown (f32, f64)`},
		{"exclude", func(c *Config) error { c.LongLiveRAG.ExcludeRecent = -1; return nil }, []string{"longlive_rag.exclude_recent"}, "exclude recent -1"},
	}
	for _, tc := range cases {
		c := Config{Layout: small}
		err := tc.mut(&c)
		if err == nil {
			_, err = c.Resolve()
		}
		var fe *FieldError
		if !errors.As(err, &fe) || !reflect.DeepEqual(fe.Fields, tc.fields) || !strings.Contains(err.Error(), tc.msg) || strings.Contains(err.Error(), "{") {
			t.Errorf("%s: error %v (fields %v), want fields %v and %q", tc.name, err, fe, tc.fields, tc.msg)
		}
	}
	// τ = 0.5 passes Resolve (τ > 0) but not the bank: Check says so for
	// DensityKV, naming bank.tau, and not for policies without a bank.
	c := Config{Layout: small, Bank: BankConfig{Tau: 0.5}}
	if _, err := c.Resolve(); err != nil {
		t.Fatal(err)
	}
	err := c.Check(NameDensityKV)
	var fe *FieldError
	if !errors.As(err, &fe) || !reflect.DeepEqual(fe.Fields, []string{"bank.tau"}) || !strings.Contains(err.Error(), "Tau = 0.5") {
		t.Fatalf("Check(densitykv) with τ 0.5: %v", err)
	}
	if err := c.Check(NameFIFO); err != nil {
		t.Fatalf("Check(fifo) with τ 0.5: %v", err)
	}
	if _, err := New(NameDensityKV, c); err == nil {
		t.Fatal("New accepted what Check rejects")
	}
	if err := c.Check("lru"); err == nil {
		t.Fatal("Check accepted an unknown policy")
	}
}

// SetVariant reads every variant field from its name (case and
// surrounding space ignored), rejects anything else with a FieldError
// naming the field, the name and the names allowed, and then leaves the
// configuration unchanged; the names round-trip through a snapshot's
// stored configuration.
func TestSetVariant(t *testing.T) {
	paths := VariantPaths()
	if len(paths) != 12 || paths[0] != "bank.ordering" || paths[8] != "longlive_rag.descriptor" || paths[len(paths)-1] != "deep_forcing.fusion" {
		t.Fatalf("variant paths %q", paths)
	}
	for _, path := range paths {
		names := VariantNames(path)
		if len(names) < 2 {
			t.Fatalf("%s: names %q", path, names)
		}
		for _, name := range names {
			var c Config
			for _, in := range []string{name, " " + strings.ToUpper(name) + "\t"} {
				if err := c.SetVariant(path, in); err != nil {
					t.Fatalf("%s = %q: %v", path, in, err)
				}
				got := ""
				for _, v := range c.variants() {
					if v.path == path {
						b, err := v.value.MarshalText()
						if err != nil {
							t.Fatal(err)
						}
						got = string(b)
					}
				}
				if got != name {
					t.Fatalf("%s = %q reads back as %q", path, in, got)
				}
			}
			stored, err := toStored(c).config()
			if err != nil || !reflect.DeepEqual(stored, c) {
				t.Fatalf("%s = %s: stored config %+v, %v", path, name, stored, err)
			}
		}
		var c Config
		if err := c.SetVariant(path, names[1]); err != nil {
			t.Fatal(err)
		}
		before := c
		for _, bad := range []string{"", "nope", names[0] + "x"} {
			err := c.SetVariant(path, bad)
			var fe *FieldError
			if !errors.As(err, &fe) || !reflect.DeepEqual(fe.Fields, []string{path}) || !strings.Contains(err.Error(), fmt.Sprintf("%q unknown (%s)", bad, strings.Join(names, ", "))) {
				t.Fatalf("%s = %q: %v", path, bad, err)
			}
			if !reflect.DeepEqual(c, before) {
				t.Fatalf("%s = %q changed the configuration", path, bad)
			}
		}
	}
	if err := new(Config).SetVariant("bank.tau", "2"); err == nil {
		t.Fatal("SetVariant accepted a field that is not a variant")
	}
	// A snapshot whose stored configuration has an unknown name is bad.
	s := toStored(Config{})
	s.Bank.Eviction = "mandatory+densest"
	if _, err := s.config(); err == nil || !strings.Contains(err.Error(), `"mandatory+densest" unknown`) {
		t.Fatalf("stored eviction mandatory+densest: %v", err)
	}
}
