// Package amxsim interprets gemm's generated AMX kernels, so that their code
// — not only their operand layout, which gemm's Go emulation covers — runs
// in the tests of every machine and build, AMX or not.
//
// It executes the text of one TEXT function of a Go assembly file (gemm's
// kernels_amd64.s, or a mutated asmgen output) instruction by instruction:
// the few general-purpose instructions the generator uses, in Go syntax,
// and the AMX instructions, which the generator writes as BYTE directives
// and which the interpreter decodes from the bytes after the Intel SDM's
// encoding table (the comment beside them must say the same; objdump
// checks the generator's encodings in gemm's tests). The machine is
// stricter than the hardware:
//   - every memory access must lie inside one of the segments passed to
//     Run (the hardware would silently read or write a neighbour), and
//     read-only segments are not written;
//   - tile instructions fault without a valid LDTILECFG (palette 1, rows ≤
//     16, colsb ≤ 64, reserved bytes zero), on unconfigured tiles, and
//     TDPBF16PS on shapes that do not match (the hardware's #UD);
//   - the tile state must be released before RET (no tile state may live
//     across a Go call boundary);
//   - arguments are read at the offsets of the Go declaration (Frame);
//   - a step budget catches a loop that would not end.
//
// TDPBF16PS computes each output element with the caller's Dot function (in
// gemm: the project's definition of one AMX block), so the interpreter
// checks the code, and the definition stays in one place.
package amxsim

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// Frame is the ABI0 argument frame of the function: each argument's name
// and byte offset (as the assembly names them, name+off(FP)), and the
// frame's size in bytes.
type Frame struct {
	Offsets map[string]int
	Size    int
}

// Segment is a region of memory the function may access: Bytes is the
// memory itself (little-endian values; the interpreter reads and writes
// it in place).
type Segment struct {
	Name     string
	Bytes    []byte
	ReadOnly bool
}

// Arg is one argument of a call: a pointer to the start of segment Seg
// (Seg ≥ 0), or the value Value (Seg < 0; booleans 0 or 1).
type Arg struct {
	Name  string
	Seg   int
	Value uint64
}

// Dot returns one TDPBF16PS output element: c plus the bfloat16 products
// of the K dword pairs a[k] (A's row) and b[k] (B's column).
type Dot func(c float32, a, b []uint32) float32

// Run calls the program with args on segs (each placed at its own base
// address, far from the others), TDPBF16PS computing with dot, and stops
// with an error after budget instructions. It returns the first fault.
func (p *Program) Run(segs []Segment, args []Arg, dot Dot, budget int) error {
	m := &machine{p: p, local: make([]byte, p.locals), args: make([]byte, p.frame.Size), symAt: map[string]uint64{}, dot: dot}
	base := uint64(1 << 40)
	for _, s := range segs {
		m.segs = append(m.segs, segment{s.Name, base, s.Bytes, s.ReadOnly})
		base += 1 << 40
	}
	for name, d := range p.syms {
		m.segs = append(m.segs, segment{name, base, d, true})
		m.symAt[name] = base
		base += 1 << 32
	}
	for _, a := range args {
		off, ok := p.frame.Offsets[a.Name]
		if !ok {
			return fmt.Errorf("amxsim: %s has no argument %q", p.name, a.Name)
		}
		v := a.Value
		if a.Seg >= 0 {
			if a.Seg >= len(segs) {
				return fmt.Errorf("amxsim: argument %s points to segment %d of %d", a.Name, a.Seg, len(segs))
			}
			v = m.segs[a.Seg].base
		}
		b := m.args[off:]
		for i := 0; i < min(8, len(b)); i++ {
			b[i] = byte(v >> (8 * i))
		}
	}
	// Registers start with garbage, as they would.
	for i := range m.r {
		m.r[i] = 0xdead_beef_0000_0000 | uint64(i)
	}
	return m.exec(budget)
}

// Registers, numbered as in the x86 encoding.
var regs = map[string]int{
	"AX": 0, "CX": 1, "DX": 2, "BX": 3, "SP": 4, "BP": 5, "SI": 6, "DI": 7,
	"R8": 8, "R9": 9, "R10": 10, "R11": 11, "R12": 12, "R13": 13, "R14": 14, "R15": 15,
	"rax": 0, "rcx": 1, "rdx": 2, "rbx": 3, "rsp": 4, "rbp": 5, "rsi": 6, "rdi": 7,
	"r8": 8, "r9": 9, "r10": 10, "r11": 11, "r12": 12, "r13": 13, "r14": 14, "r15": 15,
}

type kind int

const (
	kReg kind = iota
	kImm      // $n
	kMem      // off(base)(index*scale) or off(base)
	kFP       // name+off(FP)
	kSP       // off(SP): the function's locals
	kSym      // sym<>(SB)
)

type operand struct {
	kind       kind
	reg        int // kReg; kMem: base
	index      int // kMem: index register or -1
	scale, off int64
	name       string // kFP: argument; kSym: symbol
}

type instr struct {
	op   string // Go mnemonic, or the Intel mnemonic of an encoded one
	ops  []operand
	tile [3]int // encoded: tile numbers / registers, by op
	jump int    // branch target (instruction index)
	line int    // line in the file
}

// Program is one parsed function.
type Program struct {
	name   string
	frame  Frame
	locals int // bytes of locals
	code   []instr
	syms   map[string][]byte
	labels map[string]int
}

var (
	textRe  = regexp.MustCompile(`^TEXT ·(\w+)\(SB\), [A-Z|]+, \$(\d+)-(\d+)$`)
	dataRe  = regexp.MustCompile(`^DATA (\w+<>)\+(\d+)\(SB\)/(\d), \$(0x[0-9a-fA-F]+|\d+)$`)
	globlRe = regexp.MustCompile(`^GLOBL (\w+<>)\(SB\), [A-Z|]+, \$(\d+)$`)
	byteRe  = regexp.MustCompile(`BYTE \$0x([0-9a-f]{2})`)
	memRe   = regexp.MustCompile(`^(-?\d+)?\((\w+)\)(?:\((\w+)\*([1248])\))?$`)
	fpRe    = regexp.MustCompile(`^(\w+)\+(\d+)\(FP\)$`)
	spRe    = regexp.MustCompile(`^(\d+)\(SP\)$`)
	symRe   = regexp.MustCompile(`^(\w+<>)\(SB\)$`)
)

// Parse reads function fn (and the file's DATA symbols) from the Go
// assembly src; its arguments must be those of frame.
func Parse(src []byte, fn string, frame Frame) (*Program, error) {
	p := &Program{name: fn, frame: frame, syms: map[string][]byte{}, labels: map[string]int{}, locals: -1}
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
		if m := dataRe.FindStringSubmatch(code); m != nil {
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
		if m := globlRe.FindStringSubmatch(code); m != nil {
			size, _ := strconv.Atoi(m[2])
			d := p.syms[m[1]]
			if len(d) > size {
				return nil, errf("symbol %s has %d bytes of data, size %d", m[1], len(d), size)
			}
			p.syms[m[1]] = append(d, make([]byte, size-len(d))...)
			continue
		}
		if m := textRe.FindStringSubmatch(code); m != nil {
			if m[1] != fn {
				in = false
				continue
			}
			p.locals, _ = strconv.Atoi(m[2])
			if args, _ := strconv.Atoi(m[3]); args != frame.Size {
				return nil, errf("argument frame of %d bytes, want %d", args, frame.Size)
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
			for _, m := range byteRe.FindAllStringSubmatch(code, -1) {
				x, _ := strconv.ParseUint(m[1], 16, 8)
				enc = append(enc, byte(x))
			}
			ins, intel, err := decode(enc)
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
		ins := instr{op: mn, line: ln, jump: -1}
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
				o, err := parseOperand(strings.TrimSpace(f), frame)
				if err != nil {
					return nil, errf("%v", err)
				}
				ins.ops = append(ins.ops, o)
			}
		}
		p.code = append(p.code, ins)
	}
	if p.locals < 0 {
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

// regNames are the 64-bit register names in encoding order (Intel).
var regNames = [16]string{"rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15"}

// decode decodes one AMX instruction from its bytes, after the Intel
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
func decode(enc []byte) (instr, string, error) {
	bad := func(why string) (instr, string, error) {
		return instr{}, "", fmt.Errorf("bytes % x: %s", enc, why)
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
	ins := instr{jump: -1}
	switch {
	case op == 0x49 && pp == ppNoneAMX && modrm == 0xc0 && len(enc) == 5 && vvvv == 0 && r == 0 && x == 0 && b == 0:
		ins.op = "tilerelease"
		return ins, "tilerelease", nil
	case op == 0x49 && pp == ppNoneAMX && mod == 0 && reg&7 == 0 && rm&7 != 4 && rm&7 != 5 && len(enc) == 5 && vvvv == 0:
		ins.op, ins.tile[0] = "ldtilecfg", rm
		return ins, fmt.Sprintf("ldtilecfg [%s]", regNames[rm]), nil
	case op == 0x49 && pp == ppF2AMX && mod == 3 && rm&7 == 0 && reg < 8 && len(enc) == 5 && vvvv == 0 && b == 0:
		ins.op, ins.tile[0] = "tilezero", reg
		return ins, fmt.Sprintf("tilezero tmm%d", reg), nil
	case op == 0x4b && (pp == ppF2AMX || pp == ppF3AMX) && mod == 0 && modrm&7 == 4 && reg < 8 && len(enc) == 6 && vvvv == 0:
		sib := enc[5]
		scale, index, base := sib>>6, int(sib>>3&7|x<<3), int(sib&7|b<<3)
		if scale != 0 || index == 4 || base&7 == 5 {
			return bad("SIB form the generator does not emit")
		}
		mem := fmt.Sprintf("[%s+%s*1]", regNames[base], regNames[index])
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

func parseOperand(s string, frame Frame) (operand, error) {
	if r, ok := regs[s]; ok && s == strings.ToUpper(s) {
		return operand{kind: kReg, reg: r}, nil
	}
	if strings.HasPrefix(s, "$") {
		v, err := strconv.ParseInt(s[1:], 0, 64)
		return operand{kind: kImm, off: v}, err
	}
	if m := fpRe.FindStringSubmatch(s); m != nil {
		off, _ := strconv.Atoi(m[2])
		if want, ok := frame.Offsets[m[1]]; !ok || want != off {
			return operand{}, fmt.Errorf("argument %s at offset %d is not in the function's frame", m[1], off)
		}
		return operand{kind: kFP, name: m[1], off: int64(off)}, nil
	}
	if m := spRe.FindStringSubmatch(s); m != nil {
		off, _ := strconv.Atoi(m[1])
		return operand{kind: kSP, off: int64(off)}, nil
	}
	if m := symRe.FindStringSubmatch(s); m != nil {
		return operand{kind: kSym, name: m[1]}, nil
	}
	if m := memRe.FindStringSubmatch(s); m != nil {
		o := operand{kind: kMem, index: -1, scale: 1}
		if m[1] != "" {
			o.off, _ = strconv.ParseInt(m[1], 10, 64)
		}
		var ok bool
		if o.reg, ok = regs[m[2]]; !ok || m[2] == "SP" {
			return o, fmt.Errorf("base register %q", m[2])
		}
		if m[3] != "" {
			if o.index, ok = regs[m[3]]; !ok {
				return o, fmt.Errorf("index register %q", m[3])
			}
			o.scale, _ = strconv.ParseInt(m[4], 10, 64)
		}
		return o, nil
	}
	return operand{}, fmt.Errorf("operand %q is not one the interpreter knows", s)
}

// segment is one region of the simulated address space.
type segment struct {
	name     string
	base     uint64
	b        []byte
	readOnly bool
}

// machine is the state of one call.
type machine struct {
	p      *Program
	r      [16]uint64
	zf     bool
	args   []byte
	local  []byte
	segs   []segment
	symAt  map[string]uint64
	tiles  [8][16 * 64]byte
	rows   [8]int
	colsb  [8]int
	tileOn bool
	steps  int
	dot    Dot
}

func (m *machine) fault(ins *instr, format string, args ...any) error {
	return fmt.Errorf("amxsim: %s, line %d (%s): %s", m.p.name, ins.line, ins.op, fmt.Sprintf(format, args...))
}

// mem returns the n bytes at addr, which must lie inside one segment.
func (m *machine) mem(ins *instr, addr uint64, n int, write bool) ([]byte, error) {
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
func (m *machine) addr(ins *instr, o operand) (uint64, error) {
	switch o.kind {
	case kMem:
		a := m.r[o.reg] + uint64(o.off)
		if o.index >= 0 {
			a += m.r[o.index] * uint64(o.scale)
		}
		return a, nil
	case kSym:
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
func (m *machine) bytesOf(ins *instr, o operand, n int, write bool) ([]byte, error) {
	switch o.kind {
	case kFP:
		if write {
			return nil, m.fault(ins, "writes argument %s", o.name)
		}
		if int(o.off)+n > len(m.args) {
			return nil, m.fault(ins, "reads %d bytes of argument %s past the frame", n, o.name)
		}
		return m.args[o.off : int(o.off)+n], nil
	case kSP:
		if int(o.off)+n > len(m.local) {
			return nil, m.fault(ins, "local %d(SP) past the %d-byte frame", o.off, len(m.local))
		}
		return m.local[o.off : int(o.off)+n], nil
	case kMem, kSym:
		a, err := m.addr(ins, o)
		if err != nil {
			return nil, err
		}
		return m.mem(ins, a, n, write)
	}
	return nil, m.fault(ins, "operand is not in memory")
}

func (m *machine) read(ins *instr, o operand) (uint64, error) {
	switch o.kind {
	case kReg:
		return m.r[o.reg], nil
	case kImm:
		return uint64(o.off), nil
	}
	b, err := m.bytesOf(ins, o, 8, false)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

func (m *machine) write(ins *instr, o operand, v uint64) error {
	if o.kind == kReg {
		m.r[o.reg] = v
		return nil
	}
	if o.kind == kImm {
		return m.fault(ins, "writes an immediate")
	}
	b, err := m.bytesOf(ins, o, 8, true)
	if err != nil {
		return err
	}
	binary.LittleEndian.PutUint64(b, v)
	return nil
}

// exec runs the program until RET.
func (m *machine) exec(budget int) error {
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
func (m *machine) arith(ins *instr) error {
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
func (m *machine) tileOp(ins *instr) error {
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
		var ar, bc [16]uint32
		for i := 0; i < M; i++ {
			for k := 0; k < K; k++ {
				ar[k] = binary.LittleEndian.Uint32(at[i*64+4*k:])
			}
			for j := 0; j < N; j++ {
				for k := 0; k < K; k++ {
					bc[k] = binary.LittleEndian.Uint32(bt[k*64+4*j:])
				}
				c := math.Float32frombits(binary.LittleEndian.Uint32(dt[i*64+4*j:]))
				binary.LittleEndian.PutUint32(dt[i*64+4*j:], math.Float32bits(m.dot(c, ar[:K], bc[:K])))
			}
		}
	}
	return nil
}
