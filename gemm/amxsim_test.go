package gemm

// amxsim: an interpreter of the generated AMX kernels, so that their code —
// not only their operand layout, which emu-amx covers — runs in the tests
// of every machine and build, AMX or not.
//
// It executes the text of a TEXT function of kernels_amd64.s (or of a
// mutated asmgen.Generate output) instruction by instruction: the few
// general-purpose instructions the generator uses, and the hand-encoded
// AMX instructions, which it decodes by looking their bytes up in
// asmgen.Encoded (whose Intel meaning TestEncodingsObjdump checks with
// objdump), never by trusting the comment beside them. The machine is
// stricter than the hardware:
//   - every memory access must lie inside the Go slice passed for that
//     operand (the hardware would silently read or write a neighbour);
//   - tile instructions fault without a valid LDTILECFG (palette 1,
//     rows ≤ 16, colsb ≤ 64, reserved bytes zero), on unconfigured tiles,
//     and TDPBF16PS on shapes that do not match (as the hardware's #UD);
//   - the tile state must be released before RET (no tile state may live
//     across a Go call boundary);
//   - a step budget catches a loop that would not end.
//
// TDPBF16PS computes the project's definition of one AMX block (what the
// hardware was measured to do; see define.go and emuAMX): per output
// element an even chain over the low bfloat16 halves of the pairs and an
// odd chain over the high halves, both from +0, then C + (even + odd), C's
// denormals read as zero and tiny results flushed.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/densitykv/densitykv/gemm/internal/asmgen"
)

// simAMXKernels are the AMX kernels of kernels_amd64.s run by the
// interpreter, as emulations (never selected automatically): the kernel
// tests that loop over every kernel (TestKernelsExact, TestAPIPathsExact,
// TestAMXChunkResultsUnchanged) run them on every machine.
var simAMXKernels = []struct{ name, fn string }{
	{"sim-amx", "bf16AMX"},
	{"sim-amx-i", "bf16AMXI"},
}

func init() {
	for _, s := range simAMXKernels {
		goKernels = append(goKernels, &kernel{name: s.name, prec: BF16, lay: layoutAMX, amx: simAMXFile(s.fn), emu: true})
	}
}

// simSource is the checked-in assembly file, read once.
var simSource = sync.OnceValues(func() ([]byte, error) { return os.ReadFile("kernels_amd64.s") })

// simAMXFile returns an amxFunc that interprets function fn of the
// checked-in kernels_amd64.s; a file that does not parse makes every call
// panic with the reason (so every test that uses the kernel fails).
func simAMXFile(fn string) amxFunc {
	prog := sync.OnceValues(func() (*simProg, error) {
		src, err := simSource()
		if err != nil {
			return nil, err
		}
		return parseSimProg(src, fn)
	})
	return func(a []uint32, lda, ng int, b []uint32, bStride, nb, kb int, c []float32, ldc int, acc bool) {
		p, err := prog()
		if err != nil {
			panic(err)
		}
		if err := p.runAMX(a, lda, ng, b, bStride, nb, kb, c, ldc, acc); err != nil {
			panic(err)
		}
	}
}

// simArgs is the ABI0 argument frame of an amxFunc kernel:
//
//	func(a *uint32, lda, ng int, b *uint32, bStride, nb, kb int, c *float32, ldc int, acc bool)
var simArgs = map[string]int{"a": 0, "lda": 8, "ng": 16, "b": 24, "bStride": 32, "nb": 40, "kb": 48, "c": 56, "ldc": 64, "acc": 72}

const simArgSize = 73

// Registers, numbered as in the x86 encoding.
var simRegs = map[string]int{
	"AX": 0, "CX": 1, "DX": 2, "BX": 3, "SP": 4, "BP": 5, "SI": 6, "DI": 7,
	"R8": 8, "R9": 9, "R10": 10, "R11": 11, "R12": 12, "R13": 13, "R14": 14, "R15": 15,
	"rax": 0, "rcx": 1, "rdx": 2, "rbx": 3, "rsp": 4, "rbp": 5, "rsi": 6, "rdi": 7,
	"r8": 8, "r9": 9, "r10": 10, "r11": 11, "r12": 12, "r13": 13, "r14": 14, "r15": 15,
}

type simKind int

const (
	simReg   simKind = iota
	simImm           // $n
	simMemOp         // off(base)(index*scale) or off(base)
	simFP            // name+off(FP)
	simSP            // off(SP): the function's locals
	simSym           // sym<>(SB)
)

type simOperand struct {
	kind       simKind
	reg        int // simReg; simMemOp: base
	index      int // simMemOp: index register or -1
	scale, off int64
	name       string // simFP: argument; simSym: symbol
}

type simInstr struct {
	op   string // Go mnemonic, or the Intel mnemonic of an encoded one
	ops  []simOperand
	tile [3]int // encoded: tile numbers / registers, by op
	jump int    // branch target (instruction index)
	line int    // line in the file
}

type simProg struct {
	name   string
	frame  int // bytes of locals
	code   []simInstr
	syms   map[string][]byte
	labels map[string]int
}

var (
	simTextRe  = regexp.MustCompile(`^TEXT ·(\w+)\(SB\), [A-Z|]+, \$(\d+)-(\d+)$`)
	simDataRe  = regexp.MustCompile(`^DATA (\w+<>)\+(\d+)\(SB\)/(\d), \$(0x[0-9a-fA-F]+|\d+)$`)
	simGloblRe = regexp.MustCompile(`^GLOBL (\w+<>)\(SB\), [A-Z|]+, \$(\d+)$`)
	simByteRe  = regexp.MustCompile(`BYTE \$0x([0-9a-f]{2})`)
	simMemRe   = regexp.MustCompile(`^(-?\d+)?\((\w+)\)(?:\((\w+)\*([1248])\))?$`)
	simFPRe    = regexp.MustCompile(`^(\w+)\+(\d+)\(FP\)$`)
	simSPRe    = regexp.MustCompile(`^(\d+)\(SP\)$`)
	simSymRe   = regexp.MustCompile(`^(\w+<>)\(SB\)$`)
)

// parseSimProg reads function fn (and the file's DATA symbols) from src.
func parseSimProg(src []byte, fn string) (*simProg, error) {
	p := &simProg{name: fn, syms: map[string][]byte{}, labels: map[string]int{}, frame: -1}
	in, done := false, false
	var fixups []struct {
		at    int
		label string
	}
	sc := bufio.NewScanner(bytes.NewReader(src))
	for ln := 1; sc.Scan(); ln++ {
		line := strings.TrimSpace(sc.Text())
		code, _, _ := strings.Cut(line, "//")
		code = strings.TrimSpace(code)
		errf := func(format string, args ...any) error {
			return fmt.Errorf("amxsim: %s line %d %q: %s", fn, ln, line, fmt.Sprintf(format, args...))
		}
		if m := simDataRe.FindStringSubmatch(code); m != nil {
			off, _ := strconv.Atoi(m[2])
			size, _ := strconv.Atoi(m[3])
			v, err := strconv.ParseUint(m[4], 0, 64)
			if err != nil {
				return nil, errf("%v", err)
			}
			d := p.syms[m[1]]
			for len(d) < off+size {
				d = append(d, 0)
			}
			for i := 0; i < size; i++ {
				d[off+i] = byte(v >> (8 * i))
			}
			p.syms[m[1]] = d
			continue
		}
		if m := simGloblRe.FindStringSubmatch(code); m != nil {
			size, _ := strconv.Atoi(m[2])
			d := p.syms[m[1]]
			if len(d) > size {
				return nil, errf("symbol %s has %d bytes of data, size %d", m[1], len(d), size)
			}
			p.syms[m[1]] = append(d, make([]byte, size-len(d))...)
			continue
		}
		if m := simTextRe.FindStringSubmatch(code); m != nil {
			if m[1] != fn {
				in = false
				continue
			}
			p.frame, _ = strconv.Atoi(m[2])
			if args, _ := strconv.Atoi(m[3]); args != simArgSize {
				return nil, errf("argument frame of %d bytes, want %d (an amxFunc kernel)", args, simArgSize)
			}
			in = true
			continue
		}
		if !in || done || code == "" {
			continue
		}
		if strings.HasSuffix(code, ":") {
			p.labels[strings.TrimSuffix(code, ":")] = len(p.code)
			continue
		}
		if strings.HasPrefix(code, "BYTE ") {
			var enc []byte
			for _, m := range simByteRe.FindAllStringSubmatch(code, -1) {
				x, _ := strconv.ParseUint(m[1], 16, 8)
				enc = append(enc, byte(x))
			}
			ins, intel, err := decodeAMX(enc)
			if err != nil {
				return nil, errf("%v", err)
			}
			if _, comment, _ := strings.Cut(line, "//"); strings.TrimSpace(comment) != intel {
				return nil, errf("the bytes decode as %q, the comment says otherwise", intel)
			}
			ins.line = ln
			p.code = append(p.code, ins)
			continue
		}
		mn, rest, _ := strings.Cut(code, " ")
		ins := simInstr{op: mn, line: ln, jump: -1}
		switch mn {
		case "JMP", "JZ", "JNZ", "JEQ", "JNE":
			fixups = append(fixups, struct {
				at    int
				label string
			}{len(p.code), strings.TrimSpace(rest)})
		case "RET":
			done = true
		default:
			for _, f := range strings.Split(rest, ",") {
				o, err := parseSimOperand(strings.TrimSpace(f))
				if err != nil {
					return nil, errf("%v", err)
				}
				ins.ops = append(ins.ops, o)
			}
		}
		p.code = append(p.code, ins)
	}
	if p.frame < 0 {
		return nil, fmt.Errorf("amxsim: no TEXT ·%s in the file", fn)
	}
	if !done {
		return nil, fmt.Errorf("amxsim: %s has no RET", fn)
	}
	for _, f := range fixups {
		at, ok := p.labels[f.label]
		if !ok {
			return nil, fmt.Errorf("amxsim: %s line %d: no label %q", fn, p.code[f.at].line, f.label)
		}
		p.code[f.at].jump = at
	}
	return p, nil
}

// simRegNames are the 64-bit register names in encoding order (Intel).
var simRegNames = [16]string{"rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15"}

// decodeAMX decodes one AMX instruction from its bytes, after the Intel
// SDM's encoding table (all VEX.128.0F38.W0):
//
//	LDTILECFG  m512          NP 49 !(11):000:bbb
//	TILERELEASE              NP 49 C0
//	TILEZERO   tmm           F2 49 11:rrr:000
//	TILELOADD  tmm, sibmem   F2 4B !(11):rrr:100 (SIB: base, index = stride)
//	TILESTORED sibmem, tmm   F3 4B !(11):rrr:100
//	TDPBF16PS  tmm1, tmm2, tmm3   F3 5C 11:rrr:bbb, vvvv = ¬tmm3
//
// It returns the instruction and its Intel syntax as objdump prints it
// (the comment the generator writes beside the bytes must say the same).
// Only the forms the generator emits are accepted: no displacement, SIB
// scale 1, no RBP/R13 base.
func decodeAMX(enc []byte) (simInstr, string, error) {
	bad := func(why string) (simInstr, string, error) {
		return simInstr{}, "", fmt.Errorf("bytes % x: %s", enc, why)
	}
	if len(enc) < 5 || enc[0] != 0xc4 {
		return bad("not a three-byte VEX instruction")
	}
	r, x, b := enc[1]>>7&1^1, enc[1]>>6&1^1, enc[1]>>5&1^1
	if enc[1]&0x1f != 0b00010 {
		return bad("opcode map is not 0F38")
	}
	w, vvvv, l, pp := enc[2]>>7, int(^enc[2]>>3&0xf), enc[2]>>2&1, enc[2]&3
	if w != 0 || l != 0 {
		return bad("not VEX.128.W0")
	}
	op, modrm := enc[3], enc[4]
	mod, reg, rm := modrm>>6, int(modrm>>3&7|r<<3), int(modrm&7|b<<3)
	ins := simInstr{jump: -1}
	switch {
	case op == 0x49 && pp == ppNoneAMX && modrm == 0xc0 && len(enc) == 5 && vvvv == 0 && r == 0 && x == 0 && b == 0:
		ins.op = "tilerelease"
		return ins, "tilerelease", nil
	case op == 0x49 && pp == ppNoneAMX && mod == 0 && reg&7 == 0 && rm&7 != 4 && rm&7 != 5 && len(enc) == 5 && vvvv == 0:
		ins.op, ins.tile[0] = "ldtilecfg", rm
		return ins, fmt.Sprintf("ldtilecfg [%s]", simRegNames[rm]), nil
	case op == 0x49 && pp == ppF2AMX && mod == 3 && rm&7 == 0 && reg < 8 && len(enc) == 5 && vvvv == 0 && b == 0:
		ins.op, ins.tile[0] = "tilezero", reg
		return ins, fmt.Sprintf("tilezero tmm%d", reg), nil
	case op == 0x4b && (pp == ppF2AMX || pp == ppF3AMX) && mod == 0 && modrm&7 == 4 && reg < 8 && len(enc) == 6 && vvvv == 0:
		sib := enc[5]
		scale, index, base := sib>>6, int(sib>>3&7|x<<3), int(sib&7|b<<3)
		if scale != 0 || index == 4 || base&7 == 5 {
			return bad("SIB form the generator does not emit")
		}
		mem := fmt.Sprintf("[%s+%s*1]", simRegNames[base], simRegNames[index])
		if pp == ppF2AMX {
			ins.op, ins.tile = "tileloadd", [3]int{reg, base, index}
			return ins, fmt.Sprintf("tileloadd tmm%d,%s", reg, mem), nil
		}
		ins.op, ins.tile = "tilestored", [3]int{reg, base, index}
		return ins, fmt.Sprintf("tilestored %s,tmm%d", mem, reg), nil
	case op == 0x5c && pp == ppF3AMX && mod == 3 && reg < 8 && rm < 8 && vvvv < 8 && len(enc) == 5:
		ins.op, ins.tile = "tdpbf16ps", [3]int{reg, rm, vvvv}
		return ins, fmt.Sprintf("tdpbf16ps tmm%d,tmm%d,tmm%d", reg, rm, vvvv), nil
	}
	return bad("not an AMX instruction the interpreter knows")
}

// VEX pp field values.
const (
	ppNoneAMX = 0b00
	ppF3AMX   = 0b10
	ppF2AMX   = 0b11
)

func parseSimOperand(s string) (simOperand, error) {
	if r, ok := simRegs[s]; ok && s == strings.ToUpper(s) {
		return simOperand{kind: simReg, reg: r}, nil
	}
	if strings.HasPrefix(s, "$") {
		v, err := strconv.ParseInt(s[1:], 0, 64)
		return simOperand{kind: simImm, off: v}, err
	}
	if m := simFPRe.FindStringSubmatch(s); m != nil {
		off, _ := strconv.Atoi(m[2])
		if want, ok := simArgs[m[1]]; !ok || want != off {
			return simOperand{}, fmt.Errorf("argument %s at offset %d is not in the amxFunc frame", m[1], off)
		}
		return simOperand{kind: simFP, name: m[1], off: int64(off)}, nil
	}
	if m := simSPRe.FindStringSubmatch(s); m != nil {
		off, _ := strconv.Atoi(m[1])
		return simOperand{kind: simSP, off: int64(off)}, nil
	}
	if m := simSymRe.FindStringSubmatch(s); m != nil {
		return simOperand{kind: simSym, name: m[1]}, nil
	}
	if m := simMemRe.FindStringSubmatch(s); m != nil {
		o := simOperand{kind: simMemOp, index: -1, scale: 1}
		if m[1] != "" {
			o.off, _ = strconv.ParseInt(m[1], 10, 64)
		}
		var ok bool
		if o.reg, ok = simRegs[m[2]]; !ok || m[2] == "SP" {
			return o, fmt.Errorf("base register %q", m[2])
		}
		if m[3] != "" {
			if o.index, ok = simRegs[m[3]]; !ok {
				return o, fmt.Errorf("index register %q", m[3])
			}
			o.scale, _ = strconv.ParseInt(m[4], 10, 64)
		}
		return o, nil
	}
	return simOperand{}, fmt.Errorf("operand %q is not one the interpreter knows", s)
}

// simSeg is one region of the simulated address space.
type simSeg struct {
	name     string
	base     uint64
	b        []byte
	readOnly bool
}

// simMachine is the state of one call.
type simMachine struct {
	p      *simProg
	r      [16]uint64
	zf     bool
	args   [simArgSize]byte
	local  []byte
	segs   []simSeg
	symAt  map[string]uint64
	tiles  [8][16 * 64]byte
	rows   [8]int
	colsb  [8]int
	tileOn bool
	steps  int
}

func (m *simMachine) fault(ins *simInstr, format string, args ...any) error {
	return fmt.Errorf("amxsim: %s, line %d (%s): %s", m.p.name, ins.line, ins.op, fmt.Sprintf(format, args...))
}

// mem returns the n bytes at addr, which must lie inside one segment.
func (m *simMachine) mem(ins *simInstr, addr uint64, n int, write bool) ([]byte, error) {
	for i := range m.segs {
		s := &m.segs[i]
		if addr >= s.base && addr-s.base <= uint64(len(s.b)) && uint64(n) <= uint64(len(s.b))-(addr-s.base) {
			if write && s.readOnly {
				return nil, m.fault(ins, "write to read-only %s", s.name)
			}
			return s.b[addr-s.base : addr-s.base+uint64(n)], nil
		}
	}
	where := "outside every operand"
	for _, s := range m.segs {
		if addr >= s.base && addr < s.base+1<<32 {
			where = fmt.Sprintf("at byte %d of %s, which has %d", addr-s.base, s.name, len(s.b))
		}
	}
	verb := "read"
	if write {
		verb = "write"
	}
	return nil, m.fault(ins, "%s of %d bytes %s", verb, n, where)
}

// addr is the effective address of a memory operand.
func (m *simMachine) addr(ins *simInstr, o simOperand) (uint64, error) {
	switch o.kind {
	case simMemOp:
		a := m.r[o.reg] + uint64(o.off)
		if o.index >= 0 {
			a += m.r[o.index] * uint64(o.scale)
		}
		return a, nil
	case simSym:
		a, ok := m.symAt[o.name]
		if !ok {
			return 0, m.fault(ins, "no symbol %s", o.name)
		}
		return a, nil
	}
	return 0, m.fault(ins, "operand is not a memory reference")
}

// bytesOf returns the bytes an operand of size n refers to (argument,
// local or memory).
func (m *simMachine) bytesOf(ins *simInstr, o simOperand, n int, write bool) ([]byte, error) {
	switch o.kind {
	case simFP:
		if write {
			return nil, m.fault(ins, "writes argument %s", o.name)
		}
		if int(o.off)+n > simArgSize {
			return nil, m.fault(ins, "reads %d bytes of argument %s past the frame", n, o.name)
		}
		return m.args[o.off : int(o.off)+n], nil
	case simSP:
		if int(o.off)+n > len(m.local) {
			return nil, m.fault(ins, "local %d(SP) past the %d-byte frame", o.off, len(m.local))
		}
		return m.local[o.off : int(o.off)+n], nil
	case simMemOp, simSym:
		a, err := m.addr(ins, o)
		if err != nil {
			return nil, err
		}
		return m.mem(ins, a, n, write)
	}
	return nil, m.fault(ins, "operand is not in memory")
}

func (m *simMachine) read(ins *simInstr, o simOperand) (uint64, error) {
	switch o.kind {
	case simReg:
		return m.r[o.reg], nil
	case simImm:
		return uint64(o.off), nil
	}
	b, err := m.bytesOf(ins, o, 8, false)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

func (m *simMachine) write(ins *simInstr, o simOperand, v uint64) error {
	if o.kind == simReg {
		m.r[o.reg] = v
		return nil
	}
	if o.kind == simImm {
		return m.fault(ins, "writes an immediate")
	}
	b, err := m.bytesOf(ins, o, 8, true)
	if err != nil {
		return err
	}
	binary.LittleEndian.PutUint64(b, v)
	return nil
}

// runAMX runs the kernel on the slices as an amxFunc call, after the same
// extent checks as the assembly's wrapper.
func (p *simProg) runAMX(a []uint32, lda, ng int, b []uint32, bStride, nb, kb int, c []float32, ldc int, acc bool) error {
	amxCheck(a, lda, ng, b, bStride, nb, kb, c, ldc)
	if one := uint16(1); *(*byte)(unsafe.Pointer(&one)) != 1 {
		return fmt.Errorf("amxsim: the interpreter reads the slices' memory as little-endian, as on amd64; this host is not")
	}
	// The segments are the slices' own memory (little-endian, as on
	// amd64), so that the kernel writes only what it stores: calls on
	// other goroutines write other parts of the same C.
	ab := unsafe.Slice((*byte)(unsafe.Pointer(&a[0])), 4*len(a))
	bb := unsafe.Slice((*byte)(unsafe.Pointer(&b[0])), 4*len(b))
	cb := unsafe.Slice((*byte)(unsafe.Pointer(&c[0])), 4*len(c))
	m := &simMachine{p: p, local: make([]byte, p.frame), symAt: map[string]uint64{}}
	m.segs = []simSeg{{"A", 1 << 40, ab, true}, {"B", 2 << 40, bb, true}, {"C", 3 << 40, cb, false}}
	base := uint64(4 << 40)
	for name, d := range p.syms {
		m.segs = append(m.segs, simSeg{name, base, d, true})
		m.symAt[name] = base
		base += 1 << 32
	}
	for name, v := range map[string]uint64{"a": 1 << 40, "lda": uint64(lda), "ng": uint64(ng), "b": 2 << 40,
		"bStride": uint64(bStride), "nb": uint64(nb), "kb": uint64(kb), "c": 3 << 40, "ldc": uint64(ldc)} {
		binary.LittleEndian.PutUint64(m.args[simArgs[name]:], v)
	}
	if acc {
		m.args[simArgs["acc"]] = 1
	}
	// Registers start with garbage, as they would.
	for i := range m.r {
		m.r[i] = 0xdead_beef_0000_0000 | uint64(i)
	}
	budget := 64 + 64*ng*nb*(kb+8)
	if err := m.exec(budget); err != nil {
		return err
	}
	return nil
}

// exec runs the program until RET.
func (m *simMachine) exec(budget int) error {
	code := m.p.code
	for pc := 0; ; {
		if pc >= len(code) {
			return fmt.Errorf("amxsim: %s runs past its last instruction", m.p.name)
		}
		ins := &code[pc]
		if m.steps++; m.steps > budget {
			return m.fault(ins, "still running after %d instructions", budget)
		}
		pc++
		var err error
		switch ins.op {
		case "RET":
			if m.tileOn {
				return m.fault(ins, "returns with the tiles still configured (no TILERELEASE)")
			}
			return nil
		case "JMP":
			pc = ins.jump
		case "JZ", "JEQ":
			if m.zf {
				pc = ins.jump
			}
		case "JNZ", "JNE":
			if !m.zf {
				pc = ins.jump
			}
		case "MOVQ":
			var v uint64
			if v, err = m.read(ins, ins.ops[0]); err == nil {
				err = m.write(ins, ins.ops[1], v)
			}
		case "MOVBQZX":
			var bs []byte
			if bs, err = m.bytesOf(ins, ins.ops[0], 1, false); err == nil {
				err = m.write(ins, ins.ops[1], uint64(bs[0]))
			}
		case "LEAQ":
			var a uint64
			if a, err = m.addr(ins, ins.ops[0]); err == nil {
				err = m.write(ins, ins.ops[1], a)
			}
		case "ADDQ", "SUBQ", "SHLQ", "SHRQ", "IMULQ", "ANDQ", "TESTQ", "CMPQ":
			err = m.arith(ins)
		case "DECQ", "INCQ":
			var v uint64
			if v, err = m.read(ins, ins.ops[0]); err == nil {
				if ins.op == "DECQ" {
					v--
				} else {
					v++
				}
				m.zf = v == 0
				err = m.write(ins, ins.ops[0], v)
			}
		case "ldtilecfg", "tileloadd", "tilestored", "tilezero", "tdpbf16ps", "tilerelease":
			err = m.tileOp(ins)
		default:
			err = m.fault(ins, "instruction not known to the interpreter")
		}
		if err != nil {
			return err
		}
	}
}

// arith runs a two-operand integer instruction (Go order: source first).
func (m *simMachine) arith(ins *simInstr) error {
	if len(ins.ops) != 2 {
		return m.fault(ins, "%d operands", len(ins.ops))
	}
	x, err := m.read(ins, ins.ops[0])
	if err != nil {
		return err
	}
	y, err := m.read(ins, ins.ops[1])
	if err != nil {
		return err
	}
	var v uint64
	switch ins.op {
	case "ADDQ":
		v = y + x
	case "SUBQ", "CMPQ":
		v = y - x
	case "SHLQ":
		v = y << (x & 63)
	case "SHRQ":
		v = y >> (x & 63)
	case "IMULQ":
		v = y * x
	case "ANDQ", "TESTQ":
		v = y & x
	}
	if ins.op != "SHLQ" && ins.op != "SHRQ" || x&63 != 0 {
		m.zf = v == 0
	}
	if ins.op == "TESTQ" || ins.op == "CMPQ" {
		return nil
	}
	return m.write(ins, ins.ops[1], v)
}

// tileOp runs an AMX instruction.
func (m *simMachine) tileOp(ins *simInstr) error {
	if ins.op == "ldtilecfg" {
		cfg, err := m.mem(ins, m.r[ins.tile[0]], 64, false)
		if err != nil {
			return err
		}
		if cfg[0] != 1 {
			return m.fault(ins, "palette %d (only palette 1 has tiles)", cfg[0])
		}
		if cfg[1] != 0 {
			return m.fault(ins, "start_row %d", cfg[1])
		}
		// Bytes 2-15, 32-47 (colsb of tiles 8-15) and 56-63 (their
		// rows) are reserved in palette 1.
		for i, x := range cfg {
			if x != 0 && (i >= 2 && i < 16 || i >= 32 && i < 48 || i >= 56) {
				return m.fault(ins, "reserved byte %d of the configuration is %d", i, x)
			}
		}
		for t := 0; t < 8; t++ {
			colsb, rows := int(binary.LittleEndian.Uint16(cfg[16+2*t:])), int(cfg[48+t])
			if colsb > 64 || rows > 16 || (colsb == 0) != (rows == 0) {
				return m.fault(ins, "tile %d configured as %d rows × %d bytes", t, rows, colsb)
			}
			m.rows[t], m.colsb[t] = rows, colsb
		}
		m.tileOn = true
		m.tiles = [8][16 * 64]byte{}
		return nil
	}
	if !m.tileOn {
		return m.fault(ins, "tile instruction without a tile configuration (#UD)")
	}
	tile := func(t int) error {
		if m.rows[t] == 0 {
			return m.fault(ins, "tile %d is not configured (#UD)", t)
		}
		return nil
	}
	switch ins.op {
	case "tilerelease":
		m.tileOn = false
		m.tiles = [8][16 * 64]byte{}
	case "tilezero":
		t := ins.tile[0]
		if err := tile(t); err != nil {
			return err
		}
		m.tiles[t] = [16 * 64]byte{}
	case "tileloadd", "tilestored":
		t, base, stride := ins.tile[0], m.r[ins.tile[1]], m.r[ins.tile[2]]
		if err := tile(t); err != nil {
			return err
		}
		store := ins.op == "tilestored"
		if !store {
			m.tiles[t] = [16 * 64]byte{}
		}
		for r := 0; r < m.rows[t]; r++ {
			row, err := m.mem(ins, base+uint64(r)*stride, m.colsb[t], store)
			if err != nil {
				return fmt.Errorf("row %d of tile %d: %w", r, t, err)
			}
			if store {
				copy(row, m.tiles[t][r*64:])
			} else {
				copy(m.tiles[t][r*64:], row)
			}
		}
	case "tdpbf16ps":
		d, a, b := ins.tile[0], ins.tile[1], ins.tile[2]
		for _, t := range ins.tile {
			if err := tile(t); err != nil {
				return err
			}
		}
		if d == a || d == b || a == b {
			return m.fault(ins, "tiles %d, %d, %d are not distinct (#UD)", d, a, b)
		}
		M, N, K := m.rows[d], m.colsb[d]/4, m.colsb[a]/4
		if m.rows[a] != M || m.colsb[b] != m.colsb[d] || m.rows[b] != K || m.colsb[d]%4 != 0 || m.colsb[a]%4 != 0 {
			return m.fault(ins, "shapes %d×%d += %d×%d · %d×%d (rows × bytes) do not match (#UD)",
				M, m.colsb[d], m.rows[a], m.colsb[a], m.rows[b], m.colsb[b])
		}
		dt, at, bt := &m.tiles[d], &m.tiles[a], &m.tiles[b]
		for i := 0; i < M; i++ {
			for j := 0; j < N; j++ {
				x := dazC(math.Float32frombits(binary.LittleEndian.Uint32(dt[i*64+4*j:])))
				var e, o float32
				for k := 0; k < K; k++ {
					av := binary.LittleEndian.Uint32(at[i*64+4*k:])
					bv := binary.LittleEndian.Uint32(bt[k*64+4*j:])
					e = stepBF16(lo(av), lo(bv), e)
					o = stepBF16(hi(av), hi(bv), o)
				}
				binary.LittleEndian.PutUint32(dt[i*64+4*j:], math.Float32bits(addBF16(x, addBF16(e, o))))
			}
		}
	}
	return nil
}

// simKernelOf returns an emulated kernel that interprets function fn of src.
func simKernelOf(t testing.TB, src []byte, fn string) *kernel {
	t.Helper()
	p, err := parseSimProg(src, fn)
	if err != nil {
		t.Fatal(err)
	}
	return &kernel{name: "sim:" + fn, prec: BF16, lay: layoutAMX, emu: true,
		amx: func(a []uint32, lda, ng int, b []uint32, bStride, nb, kb int, c []float32, ldc int, acc bool) {
			if err := p.runAMX(a, lda, ng, b, bStride, nb, kb, c, ldc, acc); err != nil {
				panic(err)
			}
		}}
}

// TestAMXSimKernels runs the AMX kernels of kernels_amd64.s in the
// interpreter: the start-up self-test, and direct calls on random extents
// (padded strides, guards around every tile of C in a slice that ends at
// the last element the call may write) against emu-amx, bit for bit.
func TestAMXSimKernels(t *testing.T) {
	src, err := simSource()
	if err != nil {
		t.Fatalf("the assembly file: %v", err)
	}
	rng := rand.New(rand.NewPCG(31, 32))
	for _, s := range simAMXKernels {
		k := simKernelOf(t, src, s.fn)
		if msg := selfTest(k); msg != "" {
			t.Fatalf("%s: self-test: %s", s.fn, msg)
		}
		for trial := 0; trial < 12; trial++ {
			ng, nb, kb := 1+rng.IntN(3), 1+rng.IntN(3), 1+rng.IntN(5)
			call := amxCall{ng, nb, kb, kb*BF16Block/2 + rng.IntN(3)*7, kb*BF16Block/2*NR + rng.IntN(3)*5, nb*NR + rng.IntN(3)*3, trial%2 == 1}
			if msg := call.differs(k, rng); msg != "" {
				t.Fatalf("%s: %s", s.fn, msg)
			}
		}
	}
}

// amxCall is the shape of one amxFunc call.
type amxCall struct {
	ng, nb, kb, lda, bStride, ldc int
	acc                           bool
}

// operands returns A and B of random bfloat16 pairs and C of random values
// with guards between its rows, each slice ending at the last element the
// call may touch.
func (c amxCall) operands(rng *rand.Rand) (a, b []uint32, cm []float32) {
	a = make([]uint32, (c.ng*amxRows-1)*c.lda+c.kb*BF16Block/2)
	b = make([]uint32, (c.nb-1)*c.bStride+c.kb*BF16Block/2*NR)
	for i := range a {
		a[i] = bf16Pair(rng)
	}
	for i := range b {
		b[i] = bf16Pair(rng)
	}
	cm = make([]float32, (c.ng*amxRows-1)*c.ldc+c.nb*NR)
	for i := range cm {
		cm[i] = guard
		if i%c.ldc < c.nb*NR {
			cm[i] = float32(rng.NormFloat64())
		}
	}
	return a, b, cm
}

// differs runs the call on kernel k and on emu-amx and describes the first
// element of C that differs, or a panic ("" if none).
func (c amxCall) differs(k *kernel, rng *rand.Rand) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprintf("%+v: panic: %v", c, r)
		}
	}()
	a, b, cm := c.operands(rng)
	want, got := slices.Clone(cm), slices.Clone(cm)
	emuAMX(a, c.lda, c.ng, b, c.bStride, c.nb, c.kb, want, c.ldc, c.acc)
	k.amx(a, c.lda, c.ng, b, c.bStride, c.nb, c.kb, got, c.ldc, c.acc)
	for i := range want {
		if !sameBits(got[i], want[i]) {
			return fmt.Sprintf("%+v: C[%d][%d] = %v (%#08x), want %v (%#08x)", c, i/c.ldc, i%c.ldc,
				got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
	return ""
}

// bf16Pair returns two random bfloat16 values, now and then a special one.
func bf16Pair(rng *rand.Rand) uint32 {
	v := specialValues(rng, 2)
	return uint32(RoundBF16(v[1]))<<16 | uint32(RoundBF16(v[0]))
}

// TestAMXSimMutationsDetected: each asmgen mutation of the AMX kernels
// makes the interpreted kernel fail the self-test (on every machine; the
// other mutations are TestMutationsDetected's, on the CPUs that run them).
func TestAMXSimMutationsDetected(t *testing.T) {
	n := 0
	for name := range asmgen.Mutations {
		if !strings.Contains(name, "amx") {
			continue
		}
		src, err := asmgen.Generate(asmgen.Options{Mutate: name})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range simAMXKernels {
			n++
			k := simKernelOf(t, src, s.fn)
			msg := selfTest(k)
			if msg == "" { // three groups in one call, two panels, three blocks
				msg = amxCall{3, 2, 3, 3*BF16Block/2 + 1, 3*BF16Block/2*NR + 3, 2*NR + 2, true}.differs(k, rand.New(rand.NewPCG(33, 34)))
			}
			if msg == "" {
				t.Errorf("mutation %s (%s): %s still passes the self-test and a direct call", name, asmgen.Mutations[name], s.fn)
			} else {
				t.Logf("%s, %s: %s", name, s.fn, msg)
			}
		}
	}
	if n == 0 {
		t.Fatal("asmgen has no AMX mutation")
	}
}

// TestAMXSimFaults: the interpreter rejects what the hardware would fault
// on or what would corrupt memory, so that its passing means something:
// each case edits the checked-in kernel's text.
func TestAMXSimFaults(t *testing.T) {
	src, err := simSource()
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	tileRelease := "BYTE $0xc4; BYTE $0xe2; BYTE $0x78; BYTE $0x49; BYTE $0xc0 // tilerelease"
	cases := []struct{ name, old, new, want string }{
		{"no tilerelease", "\t" + tileRelease + "\n\tRET", "\tRET", "no TILERELEASE"},
		{"B read past its slice", "ADDQ $2048, R8", "ADDQ $4096, R8", "read of 64 bytes at byte"},
		{"C written past its row", "ADDQ $128, R14", "ADDQ $192, R14", "write of 64 bytes"},
		{"no tile configuration", "DATA amxcfg<>+0(SB)/8, $0x0000000000000001", "DATA amxcfg<>+0(SB)/8, $0x0000000000000000", "palette 0"},
		{"tile of 17 rows", "DATA amxcfg<>+48(SB)/8, $0x1010101010101010", "DATA amxcfg<>+48(SB)/8, $0x1010101010101011", "17 rows"},
		{"comment disagrees with the bytes", "// tdpbf16ps tmm3,tmm5,tmm7", "// tdpbf16ps tmm3,tmm5,tmm6", "decode as"},
		{"unknown instruction", "DECQ R13", "SUBQ $1, R13\n\tNOTQ R13\n\tNOTQ R13\n\tDECQ R13", "not known"},
	}
	for _, c := range cases {
		if !strings.Contains(text, c.old) {
			t.Fatalf("%s: the kernel text has no %q", c.name, c.old)
		}
		edited := strings.ReplaceAll(text, c.old, c.new)
		for _, s := range simAMXKernels {
			p, err := parseSimProg([]byte(edited), s.fn)
			if err == nil {
				err = simRunOnce(p)
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s, %s: error %v, want one containing %q", c.name, s.fn, err, c.want)
			}
		}
	}
}

// simRunOnce runs p on a small call whose B and C end where the call's
// extent ends (so a stride past the edge must fault).
func simRunOnce(p *simProg) error {
	c := amxCall{1, 2, 2, 2 * BF16Block / 2, 2 * BF16Block / 2 * NR, 2 * NR, false}
	a, b, cm := c.operands(rand.New(rand.NewPCG(1, 2)))
	return p.runAMX(a, c.lda, c.ng, b, c.bStride, c.nb, c.kb, cm, c.ldc, c.acc)
}

// TestAMXSimDecoder: the interpreter's decoder reads every AMX instruction
// the generator encodes as the Intel text that TestEncodingsObjdump checks
// with objdump, and refuses bytes it does not know.
func TestAMXSimDecoder(t *testing.T) {
	n := 0
	for _, in := range asmgen.Encoded() {
		if !strings.Contains(in.Intel, "tile") && !strings.HasPrefix(in.Intel, "tdp") {
			continue
		}
		n++
		_, intel, err := decodeAMX(in.Bytes)
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
		if _, intel, err := decodeAMX(enc); err == nil {
			t.Errorf("% x decoded as %q, want an error", enc, intel)
		}
	}
}
