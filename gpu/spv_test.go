package gpu

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/gpu/internal/spirv"
)

// TestSPIRVUpToDate rebuilds every module with the generator into a
// temporary folder and requires the same bytes as the checked-in spv/ and
// modules.go. It needs the glslc recorded in spv/GLSLC_VERSION (Debian
// bookworm's glslc): another version may emit other bytes, so the test
// fails naming both versions rather than compare loosely.
func TestSPIRVUpToDate(t *testing.T) {
	for _, tool := range []string{"glslc", "spirv-val"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: the SPIR-V check needs Debian's glslc and spirv-tools (apt-get install glslc spirv-tools)", tool)
		}
	}
	want, err := os.ReadFile("spv/GLSLC_VERSION")
	if err != nil {
		t.Fatal(err)
	}
	have, err := exec.Command("glslc", "--version").Output()
	if err != nil {
		t.Fatalf("glslc --version: %v", err)
	}
	if !bytes.Equal(want, have) {
		t.Fatalf("gpu/spv was built with\n%s\nbut this glslc is\n%s\nthe check compares bytes, which needs the recorded version (Debian bookworm's glslc); to move to this one, run go generate ./gpu and commit the result", want, have)
	}
	dir := t.TempDir()
	cmd := exec.Command("go", "run", "./internal/spvgen", "-spv", filepath.Join(dir, "spv"), "-go", filepath.Join(dir, "modules.go"))
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run ./internal/spvgen: %v\n%s", err, out)
	}
	files := []string{"modules.go", "spv/GLSLC_VERSION"}
	got, _ := filepath.Glob(filepath.Join(dir, "spv", "*.spv"))
	in, _ := filepath.Glob("spv/*.spv")
	for i := range got {
		got[i] = "spv/" + filepath.Base(got[i])
	}
	if !slices.Equal(got, in) {
		t.Fatalf("the shaders give modules %v, gpu/spv holds %v: run go generate ./gpu (and remove stale .spv files)", got, in)
	}
	for _, f := range append(files, got...) {
		a, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("gpu/%s is stale: run go generate ./gpu", f)
		}
	}
}

// exactModules returns the exact-mode modules by name.
func exactModules(t *testing.T) map[string]*spirv.Module {
	t.Helper()
	ms := map[string]*spirv.Module{}
	for name, b := range modules {
		if strings.HasSuffix(name, "_fast") {
			continue
		}
		m, err := spirv.Parse(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ms[name] = m
	}
	if len(ms) == 0 {
		t.Fatal("no exact-mode modules")
	}
	return ms
}

// TestExactModules checks every exact-mode module in Go (spirv.CheckExact)
// and, as a second opinion, on spirv-dis's text (textCheck).
func TestExactModules(t *testing.T) {
	dis, disErr := exec.LookPath("spirv-dis")
	for name, m := range exactModules(t) {
		if bad := spirv.CheckExact(m); len(bad) > 0 {
			t.Errorf("%s:\n\t%s", name, strings.Join(bad, "\n\t"))
		}
		if disErr != nil {
			continue
		}
		if bad := textCheck(t, dis, m.Bytes()); len(bad) > 0 {
			t.Errorf("%s (spirv-dis):\n\t%s", name, strings.Join(bad, "\n\t"))
		}
	}
	if disErr != nil {
		t.Skipf("the Go check passed; spirv-dis (Debian's spirv-tools) not found, so its second opinion did not run")
	}
}

// TestExactCheckCatches breaks the modules in the ways the checks look
// for and requires both checks to notice each.
func TestExactCheckCatches(t *testing.T) {
	dis, disErr := exec.LookPath("spirv-dis")
	mutations := map[string]func(m *spirv.Module) bool{
		"NoContraction dropped": func(m *spirv.Module) bool {
			n := len(m.Insts)
			m.Insts = slices.DeleteFunc(m.Insts, func(in spirv.Inst) bool {
				return in.Op == spirv.OpDecorate && in.Args[1] == spirv.DecorationNoContraction
			})
			return len(m.Insts) < n
		},
		"RoundingModeRTE dropped": func(m *spirv.Module) bool {
			n := len(m.Insts)
			m.Insts = slices.DeleteFunc(m.Insts, func(in spirv.Inst) bool {
				return in.Op == spirv.OpExecutionMode && in.Args[1] == spirv.ModeRoundingModeRTE
			})
			return len(m.Insts) < n
		},
		"OpFMul made OpFDiv": func(m *spirv.Module) bool {
			for i, in := range m.Insts {
				if in.Op == spirv.OpFMul {
					m.Insts[i].Op = spirv.OpFDiv
					return true
				}
			}
			return false
		},
		"Fma made FMix": func(m *spirv.Module) bool {
			for i, in := range m.Insts {
				if in.Op == spirv.OpExtInst && in.Args[3] == 50 {
					m.Insts[i].Args = slices.Clone(in.Args)
					m.Insts[i].Args[3] = 46
					return true
				}
			}
			return false
		},
	}
	for what, mutate := range mutations {
		applied := 0
		for name, m := range exactModules(t) {
			m, _ := spirv.Parse(m.Bytes()) // a copy
			if !mutate(m) {
				continue
			}
			applied++
			if bad := spirv.CheckExact(m); len(bad) == 0 {
				t.Errorf("%s with %s: CheckExact found nothing", name, what)
			}
			if disErr == nil && len(textCheck(t, dis, m.Bytes())) == 0 {
				t.Errorf("%s with %s: the spirv-dis check found nothing", name, what)
			}
		}
		if applied == 0 {
			t.Errorf("%s: no module to apply it to", what)
		}
	}
}

var (
	disAssign = regexp.MustCompile(`^%(\d+) = (Op\w+)(.*)$`)
	disPlain  = regexp.MustCompile(`^(Op\w+)(.*)$`)
)

// textCheck is CheckExact's rules read off spirv-dis --raw-id's text.
func textCheck(t *testing.T, dis string, b []byte) []string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "m.spv")
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(dis, "--raw-id", "--no-header", "--no-color", f).CombinedOutput()
	if err != nil {
		t.Fatalf("spirv-dis: %v\n%s", err, out)
	}
	allowed := map[string]bool{}
	for _, n := range spirv.GLSLAllowed {
		allowed[n] = true
	}
	forbidden := map[string]bool{"OpFDiv": true, "OpFRem": true, "OpFMod": true, "OpDot": true,
		"OpMatrixTimesScalar": true, "OpVectorTimesMatrix": true, "OpMatrixTimesVector": true,
		"OpMatrixTimesMatrix": true, "OpOuterProduct": true}
	arith := map[string]bool{"OpFAdd": true, "OpFSub": true, "OpFMul": true, "OpFNegate": true, "OpVectorTimesScalar": true}
	glsl := map[string]bool{}
	precise := map[string]bool{}
	var results [][2]string // id, op
	var bad []string
	text := map[string]bool{}
	widths := map[string]bool{"32": true}
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		text[line] = true
		if m := disAssign.FindStringSubmatch(line); m != nil {
			id, op, rest := m[1], m[2], strings.Fields(m[3])
			switch {
			case op == "OpExtInstImport" && len(rest) > 0 && rest[0] == `"GLSL.std.450"`:
				glsl["%"+id] = true
			case op == "OpExtInst" && len(rest) > 2:
				if !glsl[rest[1]] || !allowed[rest[2]] {
					bad = append(bad, "forbidden: "+line)
				}
			case forbidden[op]:
				bad = append(bad, "forbidden: "+line)
			case op == "OpTypeFloat" && len(rest) > 0:
				widths[rest[0]] = true
			case arith[op]:
				results = append(results, [2]string{id, op})
			}
		} else if m := disPlain.FindStringSubmatch(line); m != nil && m[1] == "OpDecorate" {
			if f := strings.Fields(m[2]); len(f) == 2 && f[1] == "NoContraction" {
				precise[strings.TrimPrefix(f[0], "%")] = true
			}
		}
	}
	for _, r := range results {
		if !precise[r[0]] {
			bad = append(bad, fmt.Sprintf("%s %%%s lacks NoContraction", r[1], r[0]))
		}
	}
	for _, c := range []string{"DenormPreserve", "SignedZeroInfNanPreserve", "RoundingModeRTE"} {
		if !text["OpCapability "+c] {
			bad = append(bad, "capability "+c+" missing")
		}
		for w := range widths {
			found := false
			for l := range text {
				if strings.HasPrefix(l, "OpExecutionMode ") && strings.HasSuffix(l, " "+c+" "+w) {
					found = true
				}
			}
			if !found {
				bad = append(bad, "execution mode "+c+" "+w+" missing")
			}
		}
	}
	return bad
}

// TestGeneratorRefuses runs the generator on a shader that divides and
// requires it to refuse, naming the shader and OpFDiv, and to write
// nothing; the same shader named _fast compiles.
func TestGeneratorRefuses(t *testing.T) {
	if _, err := exec.LookPath("glslc"); err != nil {
		t.Fatalf("glslc not found: the generator needs Debian's glslc (apt-get install glslc spirv-tools)")
	}
	src := "#version 450\nlayout(local_size_x = 1) in;\nlayout(binding = 0) buffer B { float v[]; };\nvoid main() { v[0] = v[1] / v[2]; }\n"
	for _, c := range []struct {
		name string
		ok   bool
	}{{"divide", false}, {"divide_fast", true}} {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "shaders"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "shaders", c.name+".comp"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("go", "run", "./internal/spvgen", "-shaders", filepath.Join(dir, "shaders"), "-spv", filepath.Join(dir, "spv"), "-go", filepath.Join(dir, "modules.go"))
		cmd.Env = append(os.Environ(), "GOFLAGS=")
		out, err := cmd.CombinedOutput()
		_, statErr := os.Stat(filepath.Join(dir, "spv", c.name+".spv"))
		switch {
		case c.ok && (err != nil || statErr != nil):
			t.Errorf("%s: %v, %v\n%s", c.name, err, statErr, out)
		case !c.ok && (err == nil || !strings.Contains(string(out), "divide.comp is not fit for exact mode") || !strings.Contains(string(out), "OpFDiv")):
			t.Errorf("%s: the generator did not refuse it: %v\n%s", c.name, err, out)
		case !c.ok && statErr == nil:
			t.Errorf("%s: refused, but spv/%s.spv written", c.name, c.name)
		}
	}
}
