package config

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/memory"
)

// Sizes beyond the limits are configuration errors naming the value and
// the limit (before: --seconds 1e12 panicked in make, 1e8 ran out of
// memory), computed without overflow.
func TestSizeLimits(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(*Config)
		want string
	}{
		{"seconds 1e12", func(c *Config) { c.Stream.Seconds = 1e12 }, "more than the 1048576 a run may have"},
		{"seconds 1e8", func(c *Config) { c.Stream.Seconds = 1e8 }, "4e+08 latent frames"},
		{"seconds 1e308 fps 1e308", func(c *Config) { c.Stream.Seconds, c.Stream.FPS = 1e308, 1e308 }, "latent frames, more than"},
		{"tokens", func(c *Config) { c.Stream.Seconds = 200000; c.Memory.Layout.Height, c.Memory.Layout.Width = 64, 64 }, "tokens, more than the 268435456"},
		{"heads", func(c *Config) { c.Memory.Layout.Heads = 1 << 30 }, "memory.layout.heads (--heads) is 1073741824, want at most 16777216"},
		{"block bytes", func(c *Config) {
			c.Policies = []string{memory.NameFIFO}
			c.Memory.Layout.Heads, c.Memory.Layout.HeadDim, c.Memory.Layout.Layers = 1<<12, 1<<12, 1<<10
		}, "one block's q, k and v are"},
		{"overflowing product", func(c *Config) {
			c.Policies = []string{memory.NameFIFO}
			c.Memory.Layout.Heads, c.Memory.Layout.HeadDim, c.Memory.Layout.Layers, c.Memory.Layout.Height = 1<<24, 1<<24, 1<<24, 1<<24
		}, "more than 9.2e18"},
		{"workers", func(c *Config) { c.Memory.Bank.Workers = 1 << 20 }, "memory.bank.workers (--workers) is 1048576, want at most 4096"},
		{"tau -1", func(c *Config) { c.Memory.Bank.Tau = -1 }, "memory.bank.tau (--tau) is -1, want a finite number > 1"},
		{"tau NaN", func(c *Config) { c.Memory.Bank.Tau = math.NaN() }, "memory.bank.tau (--tau) is NaN, want a finite number > 1"},
		{"stream file without kind file", func(c *Config) { c.Stream.Path = "x.dkvs" }, `stream.path (--stream-file) is "x.dkvs", want "" for stream.kind (--stream) "synthetic"`},
		{"empty name", func(c *Config) { c.Run.Name = "" }, `run.name (--name) is "", want a plain folder name`},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DemoConfig()
			c.set(&cfg)
			_, err := cfg.Resolve()
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
	// At the limit itself a run resolves.
	cfg := DemoConfig()
	cfg.Stream.Seconds = MaxFrames / cfg.Stream.FPS
	if _, err := cfg.Resolve(); err != nil {
		t.Fatalf("%g s (MaxFrames): %v", cfg.Stream.Seconds, err)
	}
}

// A YAML file of many duplicate policies gives a short error naming the
// rule; many bad entries list at most maxErrors of them.
func TestManyPoliciesShortError(t *testing.T) {
	var b strings.Builder
	b.WriteString("policies: [")
	for i := range 500000 {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("fifo")
	}
	b.WriteString("]\n")
	c := DemoConfig()
	if _, err := Decode([]byte(b.String()), &c, true); err != nil {
		t.Fatal(err)
	}
	_, err := c.Resolve()
	if err == nil || len(err.Error()) > 1000 || !strings.Contains(err.Error(), "policies (--policy) is a list of 500000, want each of the") {
		t.Fatalf("err (%d bytes) = %.300v", len(fmt.Sprint(err)), err)
	}
	c = DemoConfig()
	c.Policies = []string{"fifo", "fifo", "native", "native"}
	if _, err := c.Resolve(); err == nil || !strings.Contains(err.Error(), "each policy once") {
		t.Fatalf("duplicates: %v", err)
	}
	var errs errList
	for i := range 1000 {
		errs.add(fmt.Errorf("error %d", i))
	}
	if msg := errs.err().Error(); strings.Count(msg, "\n") != maxErrors || !strings.HasSuffix(msg, "(990 more errors)") {
		t.Fatalf("1000 errors: %q", msg)
	}
}

// Integer keys take integers: a fraction is an error naming line and key
// (yaml.v3 alone truncates heads: 3.9 to 3), in lists and inline structs
// too; integral floats and strings for string keys pass.
func TestDecodeIntegers(t *testing.T) {
	for _, c := range []struct {
		yaml, want string
	}{
		{"memory:\n  layout:\n    heads: 3.9\n", "line 3: memory.layout.heads (--heads) is 3.9, want an integer"},
		{"run: {snapshot_every: 1e300}\n", "run.snapshot_every (--snapshot-every) is 1e300, want an integer"},
		{"run: {seed: .5}\n", "run.seed (--seed) is .5, want an integer"},
		{"memory: {layout: {headdim: 6.5}}\n", "memory.layout.head_dim (--head-dim) is 6.5, want an integer"},
		{"run: {seed: .nan}\n", "run.seed (--seed) is .nan, want an integer"},
	} {
		cfg := DemoConfig()
		if _, err := Decode([]byte(c.yaml), &cfg, true); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want %q", c.yaml, err, c.want)
		}
	}
	gc := GenerateDefaults()
	for _, c := range []struct {
		yaml, want string
	}{
		{"generate:\n  blocks: 2.5\n", "line 2: generate.blocks is 2.5, want an integer"},
		{"generate:\n  schedule: {steps: [1000, 750.5]}\n", "generate.schedule.steps[1] is 750.5, want an integer"},
		{"generate:\n  texts: [{path: a, from_block: 1.5}]\n", "generate.texts[0].from_block is 1.5, want an integer"},
		{"memory: {layout: {layers: 2.25}}\n", "memory.layout.layers (--layers) is 2.25, want an integer"},
	} {
		if _, err := Decode([]byte(c.yaml), &gc, true); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want %q", c.yaml, err, c.want)
		}
	}
	cfg := DemoConfig()
	if _, err := Decode([]byte("memory:\n  layout: {heads: 4.0}\n  bank: {tau: 3}\nrun: {name: '3.5'}\n"), &cfg, true); err != nil || cfg.Memory.Layout.Heads != 4 || cfg.Run.Name != "3.5" {
		t.Fatalf("integral float and a numeric string: %v %+v", err, cfg.Run)
	}
}

// GenerateBlocks and the generate sizes: no overflow, the limit named.
func TestGenerateSizes(t *testing.T) {
	for _, s := range []float64{1e12, math.Inf(1), math.NaN(), -1, 0} {
		if _, err := GenerateBlocks(s, 3); err == nil {
			t.Errorf("GenerateBlocks(%g) passed", s)
		}
	}
	if b, err := GenerateBlocks(5, 3); err != nil || b != 7 {
		t.Fatalf("5 s: %d %v", b, err)
	}
	G := GenerateSection{Blocks: 8, FramesPerBlock: 3, LatentHeight: 6, LatentWidth: 8, Texts: []TextSpec{{Path: "a"}, {Path: "b", FromBlock: 999}}}
	if err := checkGenerateSizes(&G); err == nil || !strings.Contains(err.Error(), "--text b@999 (generate.texts): the prompt would start at block 999, but the run has blocks 0..7") {
		t.Fatalf("@999: %v", err)
	}
	G.Texts = G.Texts[:1]
	G.Blocks = MaxFrames
	if err := checkGenerateSizes(&G); err == nil || !strings.Contains(err.Error(), "more than the 1048576") {
		t.Fatalf("blocks: %v", err)
	}
}
