package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/densitykv/densitykv/config"
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
	bindConfigFlags(fs, config.DefaultConfig())
	for path, flag := range config.Flags() {
		if fs.Lookup(flag) == nil {
			t.Errorf("config.Flags() maps %s to --%s, which does not exist", path, flag)
		}
	}
}

func TestTotalMemory(t *testing.T) {
	if _, err := os.Stat("/proc/meminfo"); err != nil {
		t.Skip("no /proc/meminfo on this system")
	}
	if m := totalMemory(); m < 64<<20 {
		t.Fatalf("totalMemory() = %d bytes, implausible", m)
	}
}
