package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestHumanBytes(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{{0, "0 B"}, {1023, "1023 B"}, {1024, "1.00 KiB"}, {1536, "1.50 KiB"}, {1 << 20, "1.00 MiB"}, {3 << 30, "3.00 GiB"}, {1795162112, "1.67 GiB"}} {
		if got := humanBytes(c.n); got != c.want {
			t.Errorf("humanBytes(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

func TestPickLayers(t *testing.T) {
	for _, c := range []struct {
		L, n int
		want []int
	}{{4, 6, []int{0, 1, 2, 3}}, {30, 6, []int{0, 6, 12, 17, 23, 29}}, {7, 2, []int{0, 6}}, {1, 6, []int{0}}} {
		got := pickLayers(c.L, c.n)
		if len(got) != len(c.want) {
			t.Fatalf("pickLayers(%d, %d) = %v, want %v", c.L, c.n, got, c.want)
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Fatalf("pickLayers(%d, %d) = %v, want %v", c.L, c.n, got, c.want)
			}
		}
	}
}

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

func TestPlainProgressLines(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf, "simulate", 4, 1, false)
	p.every = 0
	for i := 0; i < 3; i++ {
		p.add(1)
	}
	p.finish()
	out := buf.String()
	if !strings.Contains(out, "simulate: 2/4 (50%)") || !strings.Contains(out, "simulate: 4/4 (100%)") || strings.Contains(out, "\r") {
		t.Fatalf("plain progress output:\n%s", out)
	}
	buf.Reset()
	q := newProgress(&buf, "x", 4, 0, true)
	q.add(4)
	if buf.Len() != 0 {
		t.Fatalf("quiet progress wrote %q", buf.String())
	}
}

// Every YAML path named in error messages has its flag.
func TestYAMLFlagsExist(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	bindConfigFlags(fs, DefaultConfig())
	for path, flag := range yamlFlags {
		if fs.Lookup(flag) == nil {
			t.Errorf("yamlFlags maps %s to --%s, which does not exist", path, flag)
		}
	}
}

// FuzzDecodeConfig: arbitrary YAML never panics; whatever decodes either
// fails validation with a config error or resolves to a configuration that
// survives a YAML round trip unchanged.
func FuzzDecodeConfig(f *testing.F) {
	y, _ := MarshalConfig(DemoConfig())
	f.Add(y)
	f.Add([]byte("memory:\n  bank:\n    tau: -1\n"))
	f.Add([]byte("policies: [densitykv, fifo]\nstream: {seconds: 1e309}\n"))
	f.Add([]byte("run: {name: ../x}\n"))
	f.Add([]byte("memory: {layout: {height: 2, width: 2, framesperblock: 1, layers: 1, heads: 1, headdim: 6}}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeConfig(bytes.NewReader(b), DemoConfig())
		if err != nil {
			return
		}
		r, err := c.Resolve()
		if err != nil {
			if !strings.HasPrefix(err.Error(), "config: ") {
				t.Fatalf("resolve error without the config prefix: %v", err)
			}
			return
		}
		y, err := MarshalConfig(r)
		if err != nil {
			t.Fatal(err)
		}
		back, err := decodeConfig(bytes.NewReader(y), Config{})
		if err != nil {
			t.Fatalf("resolved config does not decode: %v\n%s", err, y)
		}
		r2, err := back.Resolve()
		if err != nil {
			t.Fatalf("resolved config does not resolve again: %v\n%s", err, y)
		}
		y2, _ := MarshalConfig(r2)
		if !bytes.Equal(y, y2) {
			t.Fatalf("round trip changed the config:\n%s\n---\n%s", y, y2)
		}
	})
}

func TestTotalMemory(t *testing.T) {
	if _, err := os.Stat("/proc/meminfo"); err != nil {
		t.Skip("no /proc/meminfo on this system")
	}
	if m := totalMemory(); m < 64<<20 {
		t.Fatalf("totalMemory() = %d bytes, implausible", m)
	}
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
			ts, err := parseTextSpec(c.arg, "context")
			if c.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), c.errHas) {
					t.Fatalf("err = %v, want %q", err, c.errHas)
				}
				return
			}
			if err != nil || ts.Path != c.path || ts.FromBlock != c.block || ts.Tensor != "context" {
				t.Fatalf("parseTextSpec(%q) = %+v, %v; want path %q block %d", c.arg, ts, err, c.path, c.block)
			}
		})
	}
}

// TestTraceHeat checks the attention-trace panel: the column of memory with
// an unknown source frame appears only when some attention went there, the
// policy is in the title, and bad files are errors.
func TestTraceHeat(t *testing.T) {
	tf := attentionTraceJSON{Policy: "densitykv", Step: 3, Frames: 2, Mass: [][]float64{{1, 0, 0}, {0.25, 0.75, 0}}}
	hp, err := traceHeat(tf)
	if err != nil {
		t.Fatal(err)
	}
	if hp.Grid.Cols != 2 || len(hp.Grid.Z) != 4 || hp.Grid.Z[3] != 0.75 || strings.Contains(hp.XLabel, "unknown") {
		t.Fatalf("without unknown-source mass: %d columns, z %v, x label %q", hp.Grid.Cols, hp.Grid.Z, hp.XLabel)
	}
	if !strings.Contains(hp.Title, "densitykv") || !strings.Contains(hp.Title, "pass 4") {
		t.Fatalf("title %q", hp.Title)
	}
	tf.Mass[1] = []float64{0.25, 0.5, 0.25}
	if hp, err = traceHeat(tf); err != nil || hp.Grid.Cols != 3 || hp.Grid.Z[5] != 0.25 || !strings.Contains(hp.XLabel, "column 2: unknown") {
		t.Fatalf("with unknown-source mass: %v, %d columns, z %v, x label %q", err, hp.Grid.Cols, hp.Grid.Z, hp.XLabel)
	}
	tf.Mass = tf.Mass[:1]
	if _, err := traceHeat(tf); err == nil {
		t.Fatal("a trace with a missing row was accepted")
	}
}
