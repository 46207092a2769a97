package config

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/bank"
	"github.com/densitykv/densitykv/memory"
)

func TestBlocksRoundUp(t *testing.T) {
	c := DefaultConfig()
	for _, x := range []struct {
		sec    float64
		blocks int
	}{{60, 80}, {30, 40}, {120, 160}, {0.25, 1}, {1, 2}, {0.75, 1}, {0.76, 2}} {
		c.Stream.Seconds = x.sec
		if got := c.Blocks(); got != x.blocks {
			t.Errorf("%v s → %d blocks, want %d", x.sec, got, x.blocks)
		}
	}
}

// FuzzDecode: arbitrary YAML never panics; whatever decodes either fails
// validation with a config error or resolves to a configuration that
// survives a YAML round trip unchanged.
func FuzzDecode(f *testing.F) {
	y, _ := Marshal(DemoConfig())
	f.Add(y)
	f.Add([]byte("memory:\n  bank:\n    tau: -1\n"))
	f.Add([]byte("policies: [densitykv, fifo]\nstream: {seconds: 1e309}\n"))
	f.Add([]byte("run: {name: ../x}\n"))
	f.Add([]byte("memory: {layout: {height: 2, width: 2, framesperblock: 1, layers: 1, heads: 1, headdim: 6}}\n"))
	f.Add([]byte("memory: {layout: {heads: 3.9}}\nstream: {seconds: 1e12}\n"))
	f.Add([]byte("policies: [fifo, fifo, fifo]\nstream: {kind: synthetic, path: x.dkvs}\nrun: {name: ''}\n"))
	f.Add([]byte("memory: {layout: {heads: 16777217, head_dim: 1e300}, bank: {tau: -.inf, workers: 99999}}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c := DemoConfig()
		if _, err := Decode(b, &c, true); err != nil {
			return
		}
		r, err := c.Resolve()
		if err != nil {
			if !strings.HasPrefix(err.Error(), "config: ") {
				t.Fatalf("resolve error without the config prefix: %v", err)
			}
			return
		}
		y, err := Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var back Config
		if _, err := Decode(y, &back, true); err != nil {
			t.Fatalf("resolved config does not decode: %v\n%s", err, y)
		}
		r2, err := back.Resolve()
		if err != nil {
			t.Fatalf("resolved config does not resolve again: %v\n%s", err, y)
		}
		y2, _ := Marshal(r2)
		if !bytes.Equal(y, y2) {
			t.Fatalf("round trip changed the config:\n%s\n---\n%s", y, y2)
		}
	})
}

func TestParseTextSpec(t *testing.T) {
	for _, c := range []struct {
		arg    string
		path   string
		block  int
		errHas string
	}{
		{"ctx.safetensors", "ctx.safetensors", 0, ""},
		{"ctx.safetensors@3", "ctx.safetensors", 3, ""},
		{"ctx.safetensors@0", "ctx.safetensors", 0, ""},
		{"runs/v@2/ctx.safetensors", "runs/v@2/ctx.safetensors", 0, ""},
		{"runs/v@2/ctx.safetensors@7", "runs/v@2/ctx.safetensors", 7, ""},
		{"a@b@12", "a@b", 12, ""},
		{"user@host.pt", "user@host.pt", 0, ""},
		{"trailing@", "trailing@", 0, ""},
		{"ctx.safetensors@-1", "", 0, "must be non-negative"},
		{"ctx.safetensors@99999999999999999999", "", 0, "out of range"},
		{"@4", "", 0, "no file before @4"},
	} {
		t.Run(c.arg, func(t *testing.T) {
			ts, err := ParseTextSpec(c.arg, "context")
			if c.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), c.errHas) {
					t.Fatalf("err = %v, want %q", err, c.errHas)
				}
				return
			}
			if err != nil || ts.Path != c.path || ts.FromBlock != c.block || ts.Tensor != "context" {
				t.Fatalf("ParseTextSpec(%q) = %+v, %v; want path %q block %d", c.arg, ts, err, c.path, c.block)
			}
		})
	}
}

// Decode reads variant names as package bank and memory spell them (case
// and space ignored), names the key, flag and line of an unknown one, and
// reports an empty one as a blank key, leaving the field as it was.
func TestDecodeVariants(t *testing.T) {
	c := DefaultConfig()
	keys, err := Decode([]byte("memory:\n  bank:\n    ordering: ' MAX'\n    eviction: densest\n  longlive_rag: {descriptor: KEY-MEAN}\n"), &c, true)
	if err != nil {
		t.Fatal(err)
	}
	if c.Memory.Bank.Ordering != bank.OrderMax || c.Memory.Bank.Eviction != bank.EvictDensest || c.Memory.LongLiveRAG.Descriptor != memory.RAGKeyMean ||
		!keys.Set["memory.bank.ordering"] || len(keys.Blank) != 0 {
		t.Fatalf("decoded %+v %+v, keys %v", c.Memory.Bank, c.Memory.LongLiveRAG, keys)
	}
	c = DefaultConfig()
	_, err = Decode([]byte("run: {seed: 1}\nmemory:\n  bank:\n    ordering: median\n"), &c, true)
	if err == nil || !strings.Contains(err.Error(), `line 4: memory.bank.ordering (--ordering): bank ordering "median" unknown (mean, max, source)`) {
		t.Fatalf("unknown name: %v", err)
	}
	c = DefaultConfig()
	c.Memory.Bank.Eviction = bank.EvictMandatorySource
	keys, err = Decode([]byte("memory:\n  bank: {eviction: '', tau: 3}\n"), &c, true)
	if err != nil || !keys.Blank["memory.bank.eviction"] || !keys.Set["memory.bank.eviction"] || c.Memory.Bank.Eviction != bank.EvictMandatorySource || c.Memory.Bank.Tau != 3 {
		t.Fatalf("empty name: %v, keys %v, eviction %v", err, keys, c.Memory.Bank.Eviction)
	}
	err = ExplicitZeros(&c, nil, keys, "f.yaml")
	if err == nil || !strings.Contains(err.Error(), `f.yaml: memory.bank.eviction (--eviction) is "", want mandatory-densest, densest or mandatory-source`) {
		t.Fatalf("explicit empty name: %v", err)
	}
}

// FuzzParsePromptSpec: any --prompt value parses to a schedule entry or an
// error; a parsed TEXT@BLOCK written back parses to the same entry.
func FuzzParsePromptSpec(f *testing.F) {
	for _, s := range []string{"a heron", "a heron@0", "b@20", "meet me @ noon", "x@-1", "@3", "shot@24fps", "a@99999999999999999999", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, arg string) {
		p, err := ParsePromptSpec(arg)
		if err != nil {
			if !strings.Contains(err.Error(), "--prompt") {
				t.Fatalf("%q: error %v does not name --prompt", arg, err)
			}
			return
		}
		if p.FromBlock < 0 {
			t.Fatalf("%q: block %d", arg, p.FromBlock)
		}
		if p.FromBlock == 0 && p.Text == arg {
			return // no schedule in it
		}
		back, err := ParsePromptSpec(p.Text + "@" + strconv.Itoa(p.FromBlock))
		if err != nil || back != p {
			t.Fatalf("%q → %+v → %+v (%v)", arg, p, back, err)
		}
	})
}

// TestResolveSchedule: --text and --prompt entries form one schedule that
// starts at block 0 with distinct blocks; prompts need the text encoder's
// files (named: runinput's tests check that they exist); the VAE
// statistics come in pairs of finite values, positive std.
func TestResolveSchedule(t *testing.T) {
	dir := t.TempDir()
	file := func(name string) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ckpt, text, enc, tok, vae := file("w.safetensors"), file("t.safetensors"), file("enc.pth"), file("spiece.model"), file("vae.pth")
	base := func() GenerateConfig {
		gc := GenerateDefaults()
		gc.Generate.Arch, gc.Generate.Checkpoint, gc.Generate.LatentHeight, gc.Generate.LatentWidth, gc.Generate.Blocks = "tiny", ckpt, 6, 8, 4
		gc.Generate.TextEncoder, gc.Generate.Tokenizer = enc, tok
		gc.Run.Out = dir
		return gc
	}
	for _, c := range []struct {
		name string
		mod  func(*GenerateSection)
		want string
	}{
		{"mixed", func(g *GenerateSection) {
			g.Texts = []TextSpec{{Path: text, FromBlock: 2}}
			g.Prompts = []PromptSpec{{Text: "a"}, {Text: "b", FromBlock: 3}}
		}, ""},
		{"no start", func(g *GenerateSection) { g.Prompts = []PromptSpec{{Text: "a", FromBlock: 1}} }, "must start at block 0"},
		{"same block", func(g *GenerateSection) {
			g.Texts = []TextSpec{{Path: text}}
			g.Prompts = []PromptSpec{{Text: "a"}}
		}, "both start at block 0"},
		{"out of order", func(g *GenerateSection) {
			g.Prompts = []PromptSpec{{Text: "a"}, {Text: "b", FromBlock: 3}, {Text: "c", FromBlock: 2}}
		}, "not after"},
		{"no encoder", func(g *GenerateSection) { g.Prompts, g.TextEncoder = []PromptSpec{{Text: "a"}}, "" }, "need --text-encoder"},
		{"nothing", func(g *GenerateSection) {}, "--prompt"},
		{"prompts file and prompt", func(g *GenerateSection) { g.Prompts, g.PromptsFile = []PromptSpec{{Text: "a"}}, text }, "leave out --text and --prompt"},
		{"vae stats pair", func(g *GenerateSection) {
			g.Prompts, g.VAE, g.VAEMean = []PromptSpec{{Text: "a"}}, vae, []float32{0}
		}, "give both"},
		{"vae std", func(g *GenerateSection) {
			g.Prompts, g.VAE, g.VAEMean, g.VAEStd = []PromptSpec{{Text: "a"}}, vae, []float32{0, 0}, []float32{1, 0}
		}, "--vae-std value 1"},
		{"stats without vae", func(g *GenerateSection) {
			g.Prompts, g.VAEMean, g.VAEStd = []PromptSpec{{Text: "a"}}, []float32{0}, []float32{1}
		}, "without --vae"},
	} {
		gc := base()
		c.mod(&gc.Generate)
		err := gc.Resolve(NewKeys(), "test")
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want mention of %q", c.name, err, c.want)
		}
		if c.want == "" && (len(gc.Generate.PromptSchedule()) != 3 || gc.Generate.TextCache != dir+"/text_cache") {
			t.Errorf("%s: schedule %+v, cache %q", c.name, gc.Generate.PromptSchedule(), gc.Generate.TextCache)
		}
	}
}
