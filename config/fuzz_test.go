package config

import (
	"fmt"
	"strings"
	"testing"
)

// FuzzDecodeGenerate: arbitrary YAML decoded as a generate configuration
// never panics; a decoded document has no integer field set from a
// fraction, and the result encodes and decodes back to the same values.
func FuzzDecodeGenerate(f *testing.F) {
	y, _ := MarshalGenerate(GenerateDefaults())
	f.Add(y)
	f.Add([]byte("generate:\n  blocks: 2.5\n"))
	f.Add([]byte("generate:\n  schedule: {steps: [1000, 750.5, 1e300]}\n  texts: [{path: a@3, from_block: 1.5}]\n"))
	f.Add([]byte("memory: {layout: {layers: 2.25, headdim: 7}}\npolicies: [fifo, fifo]\n"))
	f.Add([]byte("run: {seed: -.inf, snapshot_every: 0x10}\ngenerate: {latent_height: 1_000}\n"))
	f.Add([]byte("generate: {texts: [[1.5]], model: {layers: 3.5}}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		gc := GenerateDefaults()
		if _, err := Decode(b, &gc, true); err != nil {
			return
		}
		y, err := MarshalGenerate(gc)
		if err != nil {
			t.Fatal(err)
		}
		back := GenerateDefaults()
		if _, err := Decode(y, &back, true); err != nil {
			t.Fatalf("encoded configuration does not decode: %v\n%s", err, y)
		}
		y2, _ := MarshalGenerate(back)
		if string(y) != string(y2) {
			t.Fatalf("round trip changed the configuration:\n%s\n---\n%s", y, y2)
		}
	})
}

// FuzzParseTextSpec: any --text value either is refused with an error
// naming it, or parses to a path and a block ≥ 0 that print back
// (PATH@BLOCK, as generate rebuilds them) to the same spec.
func FuzzParseTextSpec(f *testing.F) {
	for _, s := range []string{"ctx.safetensors", "ctx.safetensors@3", "runs/v@2/ctx.safetensors@7", "a@b@12", "trailing@",
		"x@-1", "x@+5", "x@-0", "@4", "x@99999999999999999999", "x@0x10", "x@ 3", "", "@", "@@", "x@1_000", "x@٣"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, arg string) {
		ts, err := ParseTextSpec(arg, "context")
		if err != nil {
			if !strings.Contains(err.Error(), fmt.Sprintf("%q", arg)) {
				t.Fatalf("error does not name the value %q: %v", arg, err)
			}
			return
		}
		if ts.FromBlock < 0 || ts.Tensor != "context" || !strings.HasPrefix(arg, ts.Path) {
			t.Fatalf("ParseTextSpec(%q) = %+v", arg, ts)
		}
		if ts.FromBlock > 0 && ts.Path == "" {
			t.Fatalf("ParseTextSpec(%q): block %d without a file", arg, ts.FromBlock)
		}
		again, err := ParseTextSpec(fmt.Sprintf("%s@%d", ts.Path, ts.FromBlock), "context")
		if ts.Path == "" {
			return // "@0": refused as no file, as it should be
		}
		if err != nil || again != ts {
			t.Fatalf("%q → %+v prints back to %+v, %v", arg, ts, again, err)
		}
	})
}
