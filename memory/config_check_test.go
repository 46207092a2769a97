package memory

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// Validation errors name the fields at fault (YAML paths) and their values,
// never a struct dump; Check adds the DensityKV bank's own rules.
func TestConfigErrorsNameFields(t *testing.T) {
	small := Layout{Height: 2, Width: 3, FramesPerBlock: 3, Layers: 1, Heads: 2, HeadDim: 8}
	cases := []struct {
		name   string
		mut    func(*Config)
		fields []string
		msg    string
	}{
		{"heads", func(c *Config) { c.Layout.Heads = -1 }, []string{"layout.heads"}, "layout heads -1 must be positive"},
		{"frames per block", func(c *Config) { c.Layout.FramesPerBlock = -2 }, []string{"layout.frames_per_block"}, "layout frames_per_block -2"},
		{"window", func(c *Config) { c.WindowFrames = 2 }, []string{"window_frames", "layout.frames_per_block"}, "window frames 2 < frames per block 3"},
		{"sigma", func(c *Config) { c.Bank.Sigma = -1 }, []string{"bank.sigma"}, "bank sigma -1"},
		{"ordering", func(c *Config) { c.Bank.Ordering = "median" }, []string{"bank.ordering"}, `bank ordering "median" unknown`},
		{"exclude", func(c *Config) { c.LongLiveRAG.ExcludeRecent = -1 }, []string{"longlive_rag.exclude_recent"}, "exclude recent -1"},
	}
	for _, tc := range cases {
		c := Config{Layout: small}
		tc.mut(&c)
		_, err := c.Resolve()
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
