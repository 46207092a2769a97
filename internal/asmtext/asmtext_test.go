package asmtext

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

type recorder struct {
	*testing.T
	failed []string
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = append(r.failed, fmt.Sprintf(format, args...))
}

// TestCheckGenerated: a file equal to its generator's output passes; a
// stale one and a broken generator fail with messages naming them.
func TestCheckGenerated(t *testing.T) {
	t.Chdir(t.TempDir())
	var w Writer
	w.Text("// header\n")
	w.Label("loop")
	w.I("VADDPD %s, %s, %s", Z(1), Y(2), X(3))
	w.Broadcast64(1, 4)
	w.Broadcast32(0x3f800000, 5)
	want := "// header\nloop:\n\tVADDPD Z1, Y2, X3\n\tMOVQ $0x3ff0000000000000, AX\n\tVPBROADCASTQ AX, Z4\n\tMOVL $0x3f800000, AX\n\tVPBROADCASTD AX, Z5\n"
	if w.String() != want {
		t.Fatalf("writer:\n%s\nwant\n%s", w.String(), want)
	}
	gen := "//go:build ignore\n\npackage main\n\nimport (\n\t\"flag\"\n\t\"os\"\n)\n\nfunc main() {\n\tout := flag.String(\"o\", \"x.s\", \"\")\n\tflag.Parse()\n\tos.WriteFile(*out, []byte(%q), 0o644)\n}\n"
	write := func(name, s string) {
		if err := os.WriteFile(name, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("gen.go", fmt.Sprintf(gen, want))
	write("x.s", want)
	r := &recorder{T: t}
	CheckGenerated(r, "gen.go", "x.s")
	if len(r.failed) != 0 {
		t.Fatalf("up-to-date file refused: %v", r.failed)
	}
	write("x.s", want+"\tRET\n")
	CheckGenerated(r, "gen.go", "x.s")
	if len(r.failed) != 1 || !strings.Contains(r.failed[0], "x.s is stale") {
		t.Fatalf("stale file: %v", r.failed)
	}
	write("gen.go", "package main\nfunc main() { broken }\n")
	r.failed = nil
	CheckGenerated(r, "gen.go", "x.s")
	if len(r.failed) == 0 || !strings.Contains(r.failed[0], "go run gen.go") {
		t.Fatalf("broken generator: %v", r.failed)
	}
}

// TestLineAndEncode: Line writes a line as it is; Encode writes the bytes
// as BYTE directives with the meaning as comment and lists each distinct
// encoding once, in order of first use.
func TestLineAndEncode(t *testing.T) {
	var w Writer
	w.Line("// %s", "head")
	w.Encode([]byte{0xc4, 0xe2}, "tdpbf16ps tmm0,tmm4,tmm6")
	w.Encode([]byte{0x62, 0x01}, "vdpbf16ps zmm0,zmm1,zmm2")
	w.Encode([]byte{0xc4, 0xe2}, "tdpbf16ps tmm0,tmm4,tmm6")
	want := "// head\n\tBYTE $0xc4; BYTE $0xe2 // tdpbf16ps tmm0,tmm4,tmm6\n\tBYTE $0x62; BYTE $0x01 // vdpbf16ps zmm0,zmm1,zmm2\n\tBYTE $0xc4; BYTE $0xe2 // tdpbf16ps tmm0,tmm4,tmm6\n"
	if w.String() != want {
		t.Fatalf("writer:\n%s\nwant\n%s", w.String(), want)
	}
	e := w.Encoded()
	if len(e) != 2 || e[0].Intel != "tdpbf16ps tmm0,tmm4,tmm6" || e[1].Bytes[0] != 0x62 {
		t.Fatalf("encoded %+v, want the two distinct encodings in order", e)
	}
}
