// Command spvgen compiles package gpu's shaders: each shaders/NAME.comp
// (GLSL 450, with #include of shaders/*.glsl) into spv/NAME.spv, and writes
// modules.go, which embeds them. It is run by go generate in package gpu:
//
//	go generate ./gpu    (go run ./internal/spvgen in gpu/)
//
// For each shader it runs
//
//	glslc --target-env=vulkan1.2 -std=450 -O0 -I shaders -fshader-stage=compute
//
// (Debian's glslc, package glslc; no optimisation: spirv-opt's folding
// rules, such as x + 0.0 → x and x·0.0 → 0.0, are wrong for −0, NaN and
// Inf on instructions without NoContraction, and they run before this
// command adds it; the driver optimises anyway), then, for an exact-mode
// module (every shader whose name does not end in _fast), adds the float
// controls (spirv.Module.MakeExact: DenormPreserve, SignedZeroInfNanPreserve
// and RoundingModeRTE for 32-bit floats, NoContraction on every float add,
// subtract, multiply and negate), refuses a module that spirv.CheckExact
// finds unfit, and validates every module with spirv-val --target-env
// vulkan1.2 (Debian's spirv-tools). The output of glslc --version is
// written to spv/GLSLC_VERSION: package gpu's TestSPIRVUpToDate rebuilds
// everything and compares bytes, which needs that version of glslc.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/densitykv/densitykv/gpu/internal/spirv"
)

func main() {
	shaders := flag.String("shaders", "shaders", "folder of the *.comp shaders and their *.glsl includes")
	spv := flag.String("spv", "spv", "output folder of the .spv modules")
	goFile := flag.String("go", "modules.go", "output Go file embedding the modules")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("spvgen: ")
	if err := run(*shaders, *spv, *goFile); err != nil {
		log.Fatal(err)
	}
}

// GLSLCArgs are the arguments glslc gets before the input and output.
var GLSLCArgs = []string{"--target-env=vulkan1.2", "-std=450", "-O0", "-fshader-stage=compute"}

var validName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

func run(shaders, spvDir, goFile string) error {
	for _, tool := range []string{"glslc", "spirv-val"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found: install Debian's glslc and spirv-tools (apt-get install glslc spirv-tools)", tool)
		}
	}
	files, err := filepath.Glob(filepath.Join(shaders, "*.comp"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no shaders in %s/*.comp", shaders)
	}
	sort.Strings(files)
	if err := os.MkdirAll(spvDir, 0o755); err != nil {
		return err
	}
	version, err := exec.Command("glslc", "--version").Output()
	if err != nil {
		return fmt.Errorf("glslc --version: %v", err)
	}
	var names []string
	out := map[string][]byte{}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".comp")
		if !validName.MatchString(name) {
			return fmt.Errorf("%s: a shader's name must match %s", f, validName)
		}
		b, err := compile(f, shaders, !strings.HasSuffix(name, "_fast"))
		if err != nil {
			return err
		}
		out[name] = b
		names = append(names, name)
	}
	// Written only when every shader compiled.
	for _, name := range names {
		if err := os.WriteFile(filepath.Join(spvDir, name+".spv"), out[name], 0o644); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(spvDir, "GLSLC_VERSION"), version, 0o644); err != nil {
		return err
	}
	src, err := format.Source(goSource(filepath.Base(spvDir), names))
	if err != nil {
		return err
	}
	return os.WriteFile(goFile, src, 0o644)
}

// compile runs glslc on one shader, makes an exact module exact, checks
// it, and validates the result.
func compile(file, include string, exact bool) ([]byte, error) {
	tmp, err := os.MkdirTemp("", "spvgen")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	raw := filepath.Join(tmp, "raw.spv")
	args := append(append([]string{}, GLSLCArgs...), "-I", include, file, "-o", raw)
	if out, err := exec.Command("glslc", args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("glslc %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	b, err := os.ReadFile(raw)
	if err != nil {
		return nil, err
	}
	m, err := spirv.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	if exact {
		m.MakeExact()
		if bad := spirv.CheckExact(m); len(bad) > 0 {
			return nil, fmt.Errorf("%s is not fit for exact mode (name it *_fast.comp for a fast-mode shader):\n\t%s", file, strings.Join(bad, "\n\t"))
		}
	}
	b = m.Bytes()
	out := filepath.Join(tmp, "out.spv")
	if err := os.WriteFile(out, b, 0o644); err != nil {
		return nil, err
	}
	if msg, err := exec.Command("spirv-val", "--target-env", "vulkan1.2", out).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("spirv-val %s (after spvgen's edits): %v\n%s", file, err, msg)
	}
	return b, nil
}

// goSource is modules.go: one embedded variable per module and the table.
func goSource(dir string, names []string) []byte {
	var b bytes.Buffer
	b.WriteString("// Code generated by go run ./internal/spvgen; DO NOT EDIT.\n\npackage gpu\n\nimport _ \"embed\"\n\n")
	for _, n := range names {
		fmt.Fprintf(&b, "//go:embed %s/%s.spv\nvar %s []byte\n\n", dir, n, ident(n))
	}
	b.WriteString("// modules holds the SPIR-V of every shader, by name (shaders/NAME.comp).\nvar modules = map[string][]byte{\n")
	for _, n := range names {
		fmt.Fprintf(&b, "\t%q: %s,\n", n, ident(n))
	}
	b.WriteString("}\n")
	return b.Bytes()
}

// ident is a shader's Go variable: spv and its name in camel case.
func ident(name string) string {
	s := "spv"
	for _, p := range strings.Split(name, "_") {
		if p != "" {
			s += strings.ToUpper(p[:1]) + p[1:]
		}
	}
	return s
}
