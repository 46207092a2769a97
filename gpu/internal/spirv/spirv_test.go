package spirv

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// modules reads package gpu's checked-in modules.
func modules(t *testing.T) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob("../../spv/*.spv")
	if err != nil || len(files) == 0 {
		t.Fatalf("no modules in gpu/spv: %v", err)
	}
	ms := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ms[filepath.Base(f)] = b
	}
	return ms
}

// fastModule reports whether a module is a fast-mode one (package gpu
// names them *_fast; its TestFastModules holds the list): not exact, and
// not made so by the generator.
func fastModule(name string) bool { return strings.HasSuffix(name, "_fast.spv") }

// TestRoundTrip parses every module and encodes it again, byte for byte,
// and requires MakeExact to add nothing to an exact module it made.
func TestRoundTrip(t *testing.T) {
	fast := 0
	for name, b := range modules(t) {
		m, err := Parse(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !bytes.Equal(m.Bytes(), b) {
			t.Errorf("%s: Bytes(Parse(b)) differs from b", name)
		}
		if fastModule(name) {
			fast++
			continue
		}
		n := len(m.Insts)
		m.MakeExact()
		if len(m.Insts) != n {
			t.Errorf("%s: MakeExact on an exact module added %d instructions", name, len(m.Insts)-n)
		}
	}
	if fast == 0 {
		t.Error("no fast-mode module parsed (gpu/spv/*_fast.spv)")
	}
}

// TestMakeExact strips an exact module of what MakeExact adds and
// requires it back, checked by CheckExact.
func TestMakeExact(t *testing.T) {
	for name, b := range modules(t) {
		if fastModule(name) {
			continue
		}
		m, _ := Parse(b)
		m.Insts = slices.DeleteFunc(m.Insts, func(in Inst) bool {
			switch in.Op {
			case OpCapability:
				return in.Args[0] == CapDenormPreserve || in.Args[0] == CapSignedZeroInfNanPreserve || in.Args[0] == CapRoundingModeRTE
			case OpExecutionMode:
				return in.Args[1] >= ModeDenormPreserve && in.Args[1] <= ModeRoundingModeRTZ
			case OpDecorate:
				return in.Args[1] == DecorationNoContraction
			}
			return false
		})
		if len(CheckExact(m)) == 0 {
			t.Fatalf("%s: stripped, CheckExact finds nothing", name)
		}
		m.MakeExact()
		if bad := CheckExact(m); len(bad) > 0 {
			t.Errorf("%s: after MakeExact: %s", name, strings.Join(bad, "; "))
		}
		if !bytes.Equal(m.Bytes(), b) {
			t.Logf("%s: MakeExact's order differs from the generator's (fine)", name)
		}
	}
}

// TestParseErrors feeds Parse broken modules.
func TestParseErrors(t *testing.T) {
	good := modules(t)["round_bf16.spv"]
	for _, c := range []struct {
		b    []byte
		want string
	}{
		{good[:18], "not a module"},
		{good[:len(good)-2], "not a module"},
		{append([]byte{1, 2, 3, 4}, good[4:]...), "magic"},
		{append(slices.Clone(good[:20]), 0x11, 0, 9, 0), "word count 9"},
		{append(slices.Clone(good[:20]), 0x11, 0, 0, 0), "word count 0"},
	} {
		if _, err := Parse(c.b); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%d bytes: error %v, want %q", len(c.b), err, c.want)
		}
	}
}

// TestString decodes literal strings.
func TestString(t *testing.T) {
	for _, s := range []string{"", "abc", "abcd", "GLSL.std.450", "SPV_KHR_float_controls"} {
		w := literal(s)
		if got, n := String(append(w, 7)); got != s || n != len(w) {
			t.Errorf("%q: String gives %q in %d words, want %d", s, got, n, len(w))
		}
	}
}

// TestMakeExactExtension: below SPIR-V 1.4 the float controls need
// SPV_KHR_float_controls, once.
func TestMakeExactExtension(t *testing.T) {
	m, _ := Parse(modules(t)["round_bf16.spv"])
	m.Version = 0x00010300
	m.MakeExact()
	m.MakeExact()
	n := 0
	for _, in := range m.Insts {
		if s, _ := String(in.Args); in.Op == OpExtension && s == "SPV_KHR_float_controls" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("SPIR-V 1.3: %d OpExtension SPV_KHR_float_controls, want 1", n)
	}
	m, _ = Parse(modules(t)["round_bf16.spv"])
	m.MakeExact()
	if m.extension("SPV_KHR_float_controls") >= 0 {
		t.Error("SPIR-V 1.5: OpExtension SPV_KHR_float_controls added (core since 1.4)")
	}
}

// TestDropModes removes the 32-bit DenormPreserve of every exact module:
// the mode goes, its capability stays only where another width keeps the
// mode, the rest of the module is unchanged, and keeping everything
// changes nothing.
func TestDropModes(t *testing.T) {
	for name, b := range modules(t) {
		m, err := Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		if m.DropModes(func(uint32, uint32) bool { return true }) || !bytes.Equal(m.Bytes(), b) {
			t.Errorf("%s: keeping every mode changed the module", name)
		}
		count := func(m *Module, op uint16, args ...uint32) int {
			n := 0
			for _, in := range m.Insts {
				if in.Op == op && len(in.Args) >= len(args) && slices.Equal(in.Args[len(in.Args)-len(args):], args) {
					n++
				}
			}
			return n
		}
		had := count(m, OpExecutionMode, ModeDenormPreserve, 32)
		if had == 0 {
			continue // not an exact-mode module
		}
		other := count(m, OpExecutionMode, ModeDenormPreserve, 64)
		before := len(m.Insts)
		if !m.DropModes(func(mode, width uint32) bool { return mode != ModeDenormPreserve || width != 32 }) {
			t.Fatalf("%s: nothing dropped", name)
		}
		if count(m, OpExecutionMode, ModeDenormPreserve, 32) != 0 || count(m, OpExecutionMode, ModeDenormPreserve, 64) != other {
			t.Errorf("%s: DenormPreserve modes after the drop: 32-bit %d, 64-bit %d (had %d)", name,
				count(m, OpExecutionMode, ModeDenormPreserve, 32), count(m, OpExecutionMode, ModeDenormPreserve, 64), other)
		}
		caps := count(m, OpCapability, CapDenormPreserve)
		if (other > 0) != (caps == 1) {
			t.Errorf("%s: %d DenormPreserve capabilities with %d 64-bit modes left", name, caps, other)
		}
		if want := before - had - (1 - caps); len(m.Insts) != want {
			t.Errorf("%s: %d instructions after the drop, want %d", name, len(m.Insts), want)
		}
		if _, err := Parse(m.Bytes()); err != nil {
			t.Errorf("%s: the edited module does not parse: %v", name, err)
		}
	}
}
