// Package asmtext is the one assembly writer of the project's generators:
// gemm's kernels (gemm/internal/asmgen) and the element-wise kernels
// (attn/gen_softmax.go, riesz/gen_epilogue.go, nn/gen_gelu.go,
// nn/gen_ops.go). It holds an instruction buffer, register names, constant
// broadcasts, the one exponential of internal/vmath (Exp32) as an
// instruction sequence, instructions Go's assembler lacks written as bytes
// (Encode, with the list of them for a disassembler check), and the check
// that keeps a checked-in generated file in sync with its generator.
package asmtext

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/densitykv/densitykv/internal/vmath"
)

// Writer accumulates assembly text. The zero value is ready.
type Writer struct {
	b       strings.Builder
	encoded []Instr
}

// I writes one instruction, indented by a tab.
func (w *Writer) I(format string, args ...any) { fmt.Fprintf(&w.b, "\t"+format+"\n", args...) }

// Line writes one line, formatted, as it is (no indent): comments,
// directives, TEXT lines.
func (w *Writer) Line(format string, args ...any) { fmt.Fprintf(&w.b, format+"\n", args...) }

// Instr is one hand-encoded instruction.
type Instr struct {
	Bytes []byte
	Intel string // what `objdump -M intel` must print for Bytes
}

// Encode writes an instruction Go's assembler lacks (VDPBF16PS, the AMX
// tile instructions) as its bytes, with intel, its Intel-syntax meaning,
// as the line's comment; Encoded lists each distinct encoding once.
func (w *Writer) Encode(b []byte, intel string) {
	var s []string
	for _, x := range b {
		s = append(s, fmt.Sprintf("BYTE $0x%02x", x))
	}
	w.I("%s // %s", strings.Join(s, "; "), intel)
	if !slices.ContainsFunc(w.encoded, func(i Instr) bool { return slices.Equal(i.Bytes, b) }) {
		w.encoded = append(w.encoded, Instr{Bytes: b, Intel: intel})
	}
}

// Encoded returns every distinct instruction written by Encode, in order
// of first use.
func (w *Writer) Encoded() []Instr { return w.encoded }

// Label writes a label line.
func (w *Writer) Label(l string) { fmt.Fprintf(&w.b, "%s:\n", l) }

// Text writes s as it is (headers, comments, TEXT lines).
func (w *Writer) Text(s string) { w.b.WriteString(s) }

// String returns the text written so far.
func (w *Writer) String() string { return w.b.String() }

// Broadcast64 sets every float64 lane of ZMM reg to v (through AX).
func (w *Writer) Broadcast64(v float64, reg int) {
	w.I("MOVQ $0x%016x, AX", math.Float64bits(v))
	w.I("VPBROADCASTQ AX, %s", Z(reg))
}

// Broadcast32 sets every 32-bit lane of ZMM reg to bits (through AX).
func (w *Writer) Broadcast32(bits uint32, reg int) {
	w.I("MOVL $0x%08x, AX", bits)
	w.I("VPBROADCASTD AX, %s", Z(reg))
}

// Z, Y and X name vector register n at 512, 256 and 128 bits.
func Z(n int) string { return fmt.Sprintf("Z%d", n) }

// Y names YMM register n.
func Y(n int) string { return fmt.Sprintf("Y%d", n) }

// X names XMM register n.
func X(n int) string { return fmt.Sprintf("X%d", n) }

// TB is the part of testing.TB that CheckGenerated uses.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	TempDir() string
}

// CheckGenerated runs `go run generator -o TMP` in the current directory
// (a package's, as in its tests) and fails unless the output equals the
// checked-in file: edit the generator, then run go generate on the package.
func CheckGenerated(t TB, generator, file string) {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to run %s: %v", generator, err)
	}
	out := filepath.Join(t.TempDir(), strings.TrimSuffix(file, ".s")+".gen.s")
	cmd := exec.Command(goTool, "run", generator, "-o", out)
	cmd.Env = append(os.Environ(), "GOEXPERIMENT=", "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run %s: %v\n%s", generator, err, b)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("%v", err)
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run go generate (go run %s)", file, generator)
	}
}

// ExpPS emits vmath.Exp32 on the float32 lanes of the registers x[k]
// (clamped by the caller to [vmath.Exp32Lo, vmath.Exp32Hi], NaN kept, as
// vmath.Exp32Clamped does), interleaved over k: VMULPS by log2e,
// VRNDSCALEPS $0 (round to nearest even), the reduction in two steps, u =
// FMA(n, −ln2hi, x) and u = FMA(n, −ln2lo, u) by VFMADD231PS, the Horner
// polynomial by VFMADD213PS from the coefficient registers c … c+7
// (vmath.ExpTaylor32), and VSCALEFPS. The results land in q[k]; n[k] and
// u[k] are scratch; log2e, nln2hi and nln2lo hold vmath.Log2e32,
// −vmath.Ln2Hi32 and −vmath.Ln2Lo32. x and q may be the same registers (x
// is read only before q is written).
func (w *Writer) ExpPS(x, n, u, q []int, log2e, nln2hi, nln2lo, c int) {
	deg := len(vmath.ExpTaylor32) - 1
	for k := range x {
		w.I("VMULPS %s, %s, %s", Z(log2e), Z(x[k]), Z(n[k])) // x·log2e
	}
	for k := range x {
		w.I("VRNDSCALEPS $0, %s, %s", Z(n[k]), Z(n[k])) // RoundToEven
	}
	for k := range x {
		w.I("VMOVAPS %s, %s", Z(x[k]), Z(u[k]))
		w.I("VFMADD231PS %s, %s, %s", Z(nln2hi), Z(n[k]), Z(u[k])) // u = FMA(n, −ln2hi, x)
	}
	for k := range x {
		w.I("VFMADD231PS %s, %s, %s", Z(nln2lo), Z(n[k]), Z(u[k])) // u = FMA(n, −ln2lo, u)
	}
	for k := range x {
		w.I("VMOVAPS %s, %s", Z(c+deg), Z(q[k])) // q = c_deg
	}
	for j := deg - 1; j >= 0; j-- {
		for k := range x {
			w.I("VFMADD213PS %s, %s, %s", Z(c+j), Z(u[k]), Z(q[k])) // q = FMA(q, u, c)
		}
	}
	for k := range x {
		w.I("VSCALEFPS %s, %s, %s", Z(n[k]), Z(q[k]), Z(q[k])) // q·2^n
	}
}
