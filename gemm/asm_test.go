//go:build amd64 && !noasm

package gemm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/gemm/internal/asmgen"
	"golang.org/x/sys/cpu"
)

// TestGeneratedAssemblyUpToDate requires kernels_amd64.s to be what the
// generator writes.
func TestGeneratedAssemblyUpToDate(t *testing.T) {
	want, err := asmgen.Generate(asmgen.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("kernels_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("kernels_amd64.s is stale: run go generate ./gemm")
	}
}

// TestEncodingsObjdump disassembles every instruction the generator
// encodes by hand (VDPBF16PS and the AMX instructions, which Go's
// assembler lacks) with GNU objdump and requires the mnemonic and operands
// the generator meant. The AMX kernel cannot run on a CPU without AMX, so
// this is the check of its encodings there.
func TestEncodingsObjdump(t *testing.T) {
	objdump, err := exec.LookPath("objdump")
	if err != nil {
		t.Skip("objdump (GNU binutils) is not installed: the hand encodings are unchecked here")
	}
	ins := asmgen.Encoded()
	var blob []byte
	for _, in := range ins {
		blob = append(blob, in.Bytes...)
	}
	f := filepath.Join(t.TempDir(), "enc.bin")
	if err := os.WriteFile(f, blob, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(objdump, "-D", "-b", "binary", "-m", "i386:x86-64", "-M", "intel", f).CombinedOutput()
	if err != nil {
		t.Fatalf("objdump: %v\n%s", err, out)
	}
	line := regexp.MustCompile(`^\s*[0-9a-f]+:\s+((?:[0-9a-f]{2} )+)\s*(.*)$`)
	var got []string
	for _, l := range strings.Split(string(out), "\n") {
		if m := line.FindStringSubmatch(l); m != nil {
			got = append(got, strings.Join(strings.Fields(m[2]), " "))
		}
	}
	if len(got) != len(ins) {
		t.Fatalf("objdump decoded %d instructions from %d encodings:\n%s", len(got), len(ins), out)
	}
	seen := map[string]bool{}
	for i, in := range ins {
		if got[i] != in.Intel {
			t.Errorf("% x: objdump says %q, the generator meant %q", in.Bytes, got[i], in.Intel)
		}
		seen[strings.Fields(in.Intel)[0]] = true
	}
	for _, m := range []string{"vdpbf16ps", "ldtilecfg", "tilerelease", "tilezero", "tileloadd", "tilestored", "tdpbf16ps"} {
		if !seen[m] {
			t.Errorf("no %s among the encodings", m)
		}
	}
}

// TestMXCSRRestored runs every kernel and requires MXCSR's control bits
// (flush-to-zero, denormals-are-zero, rounding, exception masks) to be as
// before. The status flags are not compared: any floating-point
// instruction, in Go code as in the float32 kernels, may set them.
func TestMXCSRRestored(t *testing.T) {
	before := getMXCSR()
	if before&0x8040 != 0 {
		t.Fatalf("MXCSR %#x has FTZ or DAZ set before the kernels ran", before)
	}
	for _, prec := range []Precision{F32, BF16} {
		for _, name := range testKernels(t, prec) {
			withKernel(t, prec, name, func() {
				c := make([]float32, 40*70)
				a := testValues(newRng(1), 40*100, true)
				b := testValues(newRng(2), 70*100, true)
				NTAs(prec, 40, 70, 100, a, 100, b, 100, c, 70)
				if m := getMXCSR(); m&^0x3f != before&^0x3f {
					t.Fatalf("%v %s: MXCSR %#x after the product, %#x before", prec, name, m, before)
				}
			})
		}
	}
}

// TestAVX512BF16KernelSelected fails when the CPU has AVX512_BF16 but the
// exact VDPBF16PS kernel is not installed for bfloat16 products (its
// self-test failed), which would otherwise only show as a slower bench.
func TestAVX512BF16KernelSelected(t *testing.T) {
	if !cpu.X86.HasAVX512F || !cpu.X86.HasAVX512BF16 {
		t.Skip("no AVX512_BF16 here")
	}
	selectKernels()
	k := findKernel(BF16, "avx512bf16")
	if msg := k.check(); msg != "" {
		t.Fatalf("the avx512bf16 kernel fails its self-test on this CPU: %s", msg)
	}
	if !cpu.X86.HasAMXBF16 && auto[BF16] != k {
		t.Fatalf("bfloat16 products run on %s, not avx512bf16 (%s)", auto[BF16].name, reasons[BF16])
	}
}

// TestAMXKernelSelected fails when the CPU and Linux give AMX but an AMX
// kernel fails its self-test or bfloat16 products do not run on one of
// them (the probe measured them 3–10× faster than the other kernels on
// the Xeons tried), which would otherwise only show as a slower bench.
func TestAMXKernelSelected(t *testing.T) {
	selectKernels()
	amx := findKernel(BF16, "amx")
	if amx == nil || amx.unavailable != "" {
		t.Skip("no AMX here")
	}
	for _, name := range []string{"amx", "amx-i"} {
		if msg := findKernel(BF16, name).check(); msg != "" {
			t.Errorf("the %s kernel fails its self-test on this CPU: %s", name, msg)
		}
	}
	if !strings.HasPrefix(auto[BF16].name, "amx") {
		t.Fatalf("bfloat16 products run on %s, not an AMX kernel (%s)", auto[BF16].name, reasons[BF16])
	}
}

// TestMutationsDetected breaks single instructions of the generated
// assembly (asmgen.Mutations) and requires the kernel tests to fail on
// each, through `go test -overlay` on a copy of the file (one mutation by
// default, all of them with DENSITYKV_MUTATIONS=all). A mutation of
// the AMX kernels is run here only on a CPU with AMX; on every machine
// TestAMXSimMutationsDetected runs it in the interpreter. The bfloat16
// rounding loops' mutations are caught by TestRoundKernelsExact.
func TestMutationsDetected(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the package tests once per mutation")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed: %v", err)
	}
	orig, err := asmgen.Generate(asmgen.Options{})
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs("kernels_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	// One mutation per run by default (each costs a build and a test run);
	// DENSITYKV_MUTATIONS=all runs every one.
	names := []string{"bf16-vdp-pair"}
	if !cpu.X86.HasAVX512BF16 {
		names = []string{"bf16-fma256-close"}
		if !cpu.X86.HasAVX2 || !cpu.X86.HasFMA {
			t.Skip("no assembly kernel runs on this CPU")
		}
	}
	if os.Getenv("DENSITYKV_MUTATIONS") == "all" {
		names = names[:0]
		for n := range asmgen.Mutations {
			names = append(names, n)
		}
		slices.Sort(names)
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			mut, err := asmgen.Generate(asmgen.Options{Mutate: name})
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(mut, orig) {
				t.Fatalf("mutation %s does not change the code", name)
			}
			if strings.Contains(name, "amx") && !cpu.X86.HasAMXBF16 {
				return
			}
			if strings.Contains(name, "bf16-vdp") && !cpu.X86.HasAVX512BF16 ||
				(strings.Contains(name, "512") || strings.HasPrefix(name, "round")) && !cpu.X86.HasAVX512F ||
				(strings.Contains(name, "256") || strings.Contains(name, "avx2")) && !cpu.X86.HasAVX2 {
				return
			}
			dir := t.TempDir()
			s := filepath.Join(dir, "kernels_amd64.s")
			if err := os.WriteFile(s, mut, 0o644); err != nil {
				t.Fatal(err)
			}
			ov, _ := json.Marshal(map[string]any{"Replace": map[string]string{abs: s}})
			ovf := filepath.Join(dir, "overlay.json")
			if err := os.WriteFile(ovf, ov, 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(goTool, "test", "-count=1", "-overlay", ovf, "-run", "^(TestKernelsExact|TestMXCSRRestored|TestRoundKernelsExact)$", ".")
			cmd.Env = append(os.Environ(), "GOFLAGS=")
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("mutation %s (%s): the kernel tests still pass\n%s", name, asmgen.Mutations[name], out)
			}
			if !bytes.Contains(out, []byte("FAIL")) {
				t.Fatalf("mutation %s: go test failed without a test failure:\n%s", name, out)
			}
			t.Logf("%s: detected (%s)", name, firstFailure(out))
		})
	}
}

func firstFailure(out []byte) string {
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, ".go:") {
			return strings.TrimSpace(l)
		}
	}
	return fmt.Sprintf("%.200s", out)
}

// TestVDPBF16PSSemantics probes what VDPBF16PS computes on this CPU, the
// facts the avx512bf16 kernel relies on: per dword lane, the high halves'
// product is added first and the low halves' second, each a fused
// multiply-add (exact product, one rounding to nearest even) with
// denormal inputs and accumulator read as zero and results flushed when
// tiny after rounding — fmaBF16 of the definition — whatever MXCSR holds.
func TestVDPBF16PSSemantics(t *testing.T) {
	if !cpu.X86.HasAVX512F || !cpu.X86.HasAVX512BF16 {
		t.Skip("no AVX512_BF16 here")
	}
	rng := newRng(7)
	bf := func(class int) uint16 {
		s := uint16(rng.IntN(2)) << 15
		m := uint16(rng.IntN(128))
		switch class {
		case 0: // exponents around 1: every rounding matters
			return s | uint16(127+rng.IntN(17)-8)<<7 | m
		case 1: // products that underflow
			return s | uint16(1+rng.IntN(70))<<7 | m
		case 2: // denormal
			return s | uint16(1+rng.IntN(127))
		case 3: // products beyond float32's range
			return s | uint16(190+rng.IntN(64))<<7 | m
		default: // anything, ±Inf and NaN included
			return uint16(rng.Uint32())
		}
	}
	var acc, a, b, out [16]uint32
	n := 0
	for it := 0; it < 20000; it++ {
		cl := it % 5
		for i := range acc {
			a[i] = uint32(bf(cl))<<16 | uint32(bf(cl))
			b[i] = uint32(bf(cl))<<16 | uint32(bf(cl))
			acc[i] = rng.Uint32()
			switch rng.IntN(4) {
			case 0: // cancel the first product: results near zero
				p := float64(bf16Operand(uint16(a[i]>>16))) * float64(bf16Operand(uint16(b[i]>>16)))
				acc[i] = math.Float32bits(float32(-p)) ^ uint32(rng.IntN(3))
			case 1: // denormal accumulator
				acc[i] &= 0x807fffff
			}
		}
		if it == 0 { // the tininess window: 2^-126 − 2^-152 stays, − 1.5·2^-151 flushes
			acc[0], a[0], b[0] = 0x00800000, uint32(RoundBF16(-0x1p-76))<<16, uint32(RoundBF16(0x1p-76))<<16
			acc[1], a[1], b[1] = 0x00800000, uint32(RoundBF16(-0x1.8p-76))<<16, uint32(RoundBF16(0x1p-75))<<16
		}
		vdpProbe(&acc, &a, &b, &out)
		for i := range out {
			x := dazC(math.Float32frombits(acc[i]))
			x = fmaBF16(bf16Operand(uint16(a[i]>>16)), bf16Operand(uint16(b[i]>>16)), x)
			x = fmaBF16(bf16Operand(uint16(a[i])), bf16Operand(uint16(b[i])), x)
			if !sameBits(math.Float32frombits(out[i]), x) {
				t.Fatalf("VDPBF16PS(acc %#08x, a %#08x, b %#08x) = %#08x, the model says %#08x", acc[i], a[i], b[i], out[i], math.Float32bits(x))
			}
			n++
		}
	}
	t.Logf("%d lanes match the model", n)
}
