package amxsim

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/densitykv/densitykv/gemm/internal/asmgen"
)

// The functions under test: gemm's AMX kernels, as the generator writes
// them, with their Go declaration
//
//	func(a *uint32, lda, ng int, b *uint32, bStride, nb, kb int, c *float32, ldc int, acc bool)
var (
	kernels  = []string{"bf16AMX", "bf16AMXI"}
	amxFrame = Frame{Offsets: map[string]int{"a": 0, "lda": 8, "ng": 16, "b": 24, "bStride": 32, "nb": 40, "kb": 48, "c": 56, "ldc": 64, "acc": 72}, Size: 73}
)

func generated(t *testing.T) string {
	t.Helper()
	src, err := asmgen.Generate(asmgen.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return string(src)
}

// call is one kernel call: ng groups of 32 rows of A (lda dwords apart),
// nb panels of 32 columns of B (bStride dwords apart), kb blocks of 16
// dword pairs, C with row stride ldc floats. Its slices end exactly at the
// last element the call may touch.
type call struct {
	ng, nb, kb, lda, bStride, ldc int
	acc                           bool
	a, b                          []uint32
	c                             []float32
}

func newCall(rng *rand.Rand, ng, nb, kb, padA, padB, padC int, acc bool) *call {
	c := &call{ng: ng, nb: nb, kb: kb, lda: 16*kb + padA, bStride: 16*kb*32 + padB, ldc: 32*nb + padC, acc: acc}
	c.a = make([]uint32, (32*ng-1)*c.lda+16*kb)
	c.b = make([]uint32, (nb-1)*c.bStride+16*kb*32)
	c.c = make([]float32, (32*ng-1)*c.ldc+32*nb)
	for i := range c.a {
		c.a[i] = rng.Uint32()
	}
	for i := range c.b {
		c.b[i] = rng.Uint32()
	}
	for i := range c.c {
		c.c[i] = float32(rng.IntN(100))
	}
	return c
}

func le32(x []uint32) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], v)
	}
	return b
}

// run interprets p on the call; C is copied back from its segment.
func (c *call) run(p *Program, dot Dot) error {
	cb := make([]byte, 4*len(c.c))
	for i, v := range c.c {
		binary.LittleEndian.PutUint32(cb[4*i:], math.Float32bits(v))
	}
	acc := uint64(0)
	if c.acc {
		acc = 1
	}
	err := p.Run([]Segment{{"A", le32(c.a), true}, {"B", le32(c.b), true}, {"C", cb, false}},
		[]Arg{{"a", 0, 0}, {"lda", -1, uint64(c.lda)}, {"ng", -1, uint64(c.ng)}, {"b", 1, 0}, {"bStride", -1, uint64(c.bStride)},
			{"nb", -1, uint64(c.nb)}, {"kb", -1, uint64(c.kb)}, {"c", 2, 0}, {"ldc", -1, uint64(c.ldc)}, {"acc", -1, acc}}, dot, 1<<20)
	for i := range c.c {
		c.c[i] = math.Float32frombits(binary.LittleEndian.Uint32(cb[4*i:]))
	}
	return err
}

// sumDot is a stand-in for the bfloat16 definition: c plus a checksum of
// the pairs that identifies which A row and B column met in which order.
func sumDot(c float32, a, b []uint32) float32 {
	s := float64(c)
	for k := range a {
		s = s*1.0001 + float64((a[k]%97)*(b[k]%89))
	}
	return float32(math.Mod(s, 1<<20))
}

// TestRunMatchesContract: the generated kernels compute, for every element
// of every 32×32 tile, the Dot of A's row and B's column over each block in
// order, from C (acc) or zero, and leave the padding between C's rows
// alone.
func TestRunMatchesContract(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	src := generated(t)
	for _, fn := range kernels {
		p, err := Parse([]byte(src), fn, amxFrame)
		if err != nil {
			t.Fatal(err)
		}
		for trial := 0; trial < 6; trial++ {
			c := newCall(rng, 1+trial%3, 1+trial%2, 1+trial, trial%3, 5*(trial%2), 3*(trial%3), trial%2 == 1)
			want := append([]float32(nil), c.c...)
			for g := 0; g < 32*c.ng; g++ {
				for j := 0; j < 32*c.nb; j++ {
					x := float32(0)
					if c.acc {
						x = want[g*c.ldc+j]
					}
					for blk := 0; blk < c.kb; blk++ {
						col := make([]uint32, 16)
						for t := range col {
							col[t] = c.b[(j/32)*c.bStride+(blk*16+t)*32+j%32]
						}
						x = sumDot(x, c.a[g*c.lda+blk*16:g*c.lda+blk*16+16], col)
					}
					want[g*c.ldc+j] = x
				}
			}
			if err := c.run(p, sumDot); err != nil {
				t.Fatalf("%s trial %d: %v", fn, trial, err)
			}
			for i := range want {
				if math.Float32bits(c.c[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s trial %d (ng %d nb %d kb %d): C[%d][%d] = %v, want %v", fn, trial, c.ng, c.nb, c.kb, i/c.ldc, i%c.ldc, c.c[i], want[i])
				}
			}
		}
	}
}

// TestFaults: the interpreter rejects what the hardware would fault on or
// what would corrupt memory, so that its passing means something: each
// case edits the generated kernels' text.
func TestFaults(t *testing.T) {
	text := generated(t)
	tileRelease := "BYTE $0xc4; BYTE $0xe2; BYTE $0x78; BYTE $0x49; BYTE $0xc0 // tilerelease"
	cases := []struct{ name, old, new, want string }{
		{"no tilerelease", "\t" + tileRelease + "\n\tRET", "\tRET", "no TILERELEASE"},
		{"B read past its slice", "ADDQ $2048, R8", "ADDQ $4096, R8", "read of 64 bytes at byte"},
		{"C written past its row", "ADDQ $128, R14", "ADDQ $192, R14", "write of 64 bytes"},
		{"no tile configuration", "DATA amxcfg<>+0(SB)/8, $0x0000000000000001", "DATA amxcfg<>+0(SB)/8, $0x0000000000000000", "palette 0"},
		{"tile of 17 rows", "DATA amxcfg<>+48(SB)/8, $0x1010101010101010", "DATA amxcfg<>+48(SB)/8, $0x1010101010101011", "17 rows"},
		{"mismatched tile shapes", "DATA amxcfg<>+16(SB)/8, $0x0040004000400040", "DATA amxcfg<>+16(SB)/8, $0x0040004000400020", "do not match"},
		{"comment disagrees with the bytes", "// tdpbf16ps tmm3,tmm5,tmm7", "// tdpbf16ps tmm3,tmm5,tmm6", "decode as"},
		{"unknown instruction", "DECQ R13", "SUBQ $1, R13\n\tNOTQ R13\n\tNOTQ R13\n\tDECQ R13", "not known"},
		{"argument at a wrong offset", "MOVQ kb+48(FP), R13", "MOVQ kb+40(FP), R13", "not in the function's frame"},
		{"endless loop", "amxpanel:", "spin:\n\tJMP spin\namxpanel:", "still running"},
	}
	for _, c := range cases {
		if !strings.Contains(text, c.old) {
			t.Fatalf("%s: the kernel text has no %q", c.name, c.old)
		}
		edited := strings.ReplaceAll(text, c.old, c.new)
		for _, fn := range kernels {
			p, err := Parse([]byte(edited), fn, amxFrame)
			if err == nil {
				err = newCall(rand.New(rand.NewPCG(1, 2)), 1, 2, 2, 0, 0, 0, false).run(p, sumDot)
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s, %s: error %v, want one containing %q", c.name, fn, err, c.want)
			}
		}
	}
}

// TestDecoder: the decoder reads every AMX instruction the generator
// encodes as the Intel text that gemm's TestEncodingsObjdump checks with
// objdump, and refuses bytes it does not know.
func TestDecoder(t *testing.T) {
	n := 0
	for _, in := range asmgen.Encoded() {
		if !strings.Contains(in.Intel, "tile") && !strings.HasPrefix(in.Intel, "tdp") {
			continue
		}
		n++
		_, intel, err := decode(in.Bytes)
		if err != nil || intel != in.Intel {
			t.Errorf("% x: decoded as %q (%v), asmgen says %q", in.Bytes, intel, err, in.Intel)
		}
	}
	if n < 6 {
		t.Fatalf("only %d AMX instructions in asmgen.Encoded", n)
	}
	for _, enc := range [][]byte{
		{0xc4, 0xe2, 0x4a, 0x5c},             // truncated
		{0xc4, 0xe3, 0x4a, 0x5c, 0xc4},       // map 0F3A
		{0xc4, 0xe2, 0xca, 0x5c, 0xc4},       // W1
		{0xc4, 0xe2, 0x4b, 0x5c, 0xc4},       // pp F2: TDPBF16PS is F3
		{0xc4, 0xe2, 0x4a, 0x5c, 0x04},       // memory operand
		{0xc4, 0xa2, 0x7b, 0x4b, 0x44, 0x1f}, // TILELOADD with a displacement
		{0xc4, 0xa2, 0x7b, 0x4b, 0x04, 0x5f}, // SIB scale 2
	} {
		if _, intel, err := decode(enc); err == nil {
			t.Errorf("% x decoded as %q, want an error", enc, intel)
		}
	}
}
