// Package spirv reads and edits SPIR-V modules as words: the header, the
// instruction stream (opcode, word count, operands), the few edits the
// shader generator makes (float-controls capabilities and execution modes,
// NoContraction decorations) and the exact-mode check of package gpu.
// Numbers are those of the SPIR-V 1.6 specification (unified, revision 3)
// and of the GLSL.std.450 extended instruction set.
package spirv

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// Magic is the first word of every SPIR-V module.
const Magic = 0x07230203

// Opcodes used here.
const (
	OpSourceContinued  = 2
	OpSource           = 3
	OpSourceExtension  = 4
	OpName             = 5
	OpMemberName       = 6
	OpString           = 7
	OpLine             = 8
	OpExtension        = 10
	OpExtInstImport    = 11
	OpExtInst          = 12
	OpMemoryModel      = 14
	OpEntryPoint       = 15
	OpExecutionMode    = 16
	OpCapability       = 17
	OpTypeFloat        = 22
	OpDecorate         = 71
	OpMemberDecorate   = 72
	OpDecorationGroup  = 73
	OpGroupDecorate    = 74
	OpGroupMember      = 75
	OpFNegate          = 127
	OpFAdd             = 129
	OpFSub             = 131
	OpFMul             = 133
	OpFDiv             = 136
	OpFRem             = 140
	OpFMod             = 141
	OpVectorTimesScal  = 142
	OpMatrixTimesScal  = 143
	OpVectorTimesMat   = 144
	OpMatrixTimesVec   = 145
	OpMatrixTimesMat   = 146
	OpOuterProduct     = 147
	OpDot              = 148
	OpNoLine           = 317
	OpModuleProcessed  = 330
	OpExecutionModeId  = 331
	OpDecorateId       = 332
	OpDecorateString   = 5632
	OpMemberDecorateSt = 5633
)

// Capabilities, execution modes and decorations used here.
const (
	CapDenormPreserve           = 4464
	CapSignedZeroInfNanPreserve = 4466
	CapRoundingModeRTE          = 4467
	CapCooperativeMatrixNV      = 5357
	CapCooperativeMatrixKHR     = 6022

	ModeDenormPreserve           = 4459
	ModeDenormFlushToZero        = 4460
	ModeSignedZeroInfNanPreserve = 4461
	ModeRoundingModeRTE          = 4462
	ModeRoundingModeRTZ          = 4463

	DecorationNoContraction = 42
)

// Inst is one instruction: its opcode and its operand words (the words
// after the first).
type Inst struct {
	Op   uint16
	Args []uint32
}

// Module is a parsed SPIR-V module.
type Module struct {
	Version   uint32 // header word 1: 0x00MMmm00
	Generator uint32
	Bound     uint32 // every id is below Bound
	Schema    uint32
	Insts     []Inst
}

// Parse reads a SPIR-V module in little-endian words.
func Parse(b []byte) (*Module, error) {
	if len(b)%4 != 0 || len(b) < 20 {
		return nil, fmt.Errorf("spirv: %d bytes: not a module (a header of 5 words and whole words)", len(b))
	}
	w := make([]uint32, len(b)/4)
	for i := range w {
		w[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	if w[0] != Magic {
		return nil, fmt.Errorf("spirv: magic %#08x, want %#08x (little-endian)", w[0], Magic)
	}
	m := &Module{Version: w[1], Generator: w[2], Bound: w[3], Schema: w[4]}
	for i := 5; i < len(w); {
		n, op := int(w[i]>>16), uint16(w[i])
		if n == 0 || i+n > len(w) {
			return nil, fmt.Errorf("spirv: instruction at word %d (opcode %d) has word count %d, %d words left", i, op, n, len(w)-i)
		}
		m.Insts = append(m.Insts, Inst{Op: op, Args: w[i+1 : i+n]})
		i += n
	}
	return m, nil
}

// Bytes encodes the module.
func (m *Module) Bytes() []byte {
	n := 5
	for _, in := range m.Insts {
		n += 1 + len(in.Args)
	}
	b := make([]byte, 0, 4*n)
	b = binary.LittleEndian.AppendUint32(b, Magic)
	for _, v := range []uint32{m.Version, m.Generator, m.Bound, m.Schema} {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	for _, in := range m.Insts {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(in.Args)+1)<<16|uint32(in.Op))
		for _, v := range in.Args {
			b = binary.LittleEndian.AppendUint32(b, v)
		}
	}
	return b
}

// String decodes a literal string operand (nul-terminated, packed four
// bytes a word, little-endian) and returns it with the number of words it
// takes.
func String(args []uint32) (string, int) {
	var s []byte
	for i, v := range args {
		for k := 0; k < 4; k++ {
			c := byte(v >> (8 * k))
			if c == 0 {
				return string(s), i + 1
			}
			s = append(s, c)
		}
	}
	return string(s), len(args)
}

// arithmetic are the float instructions that round (or, for OpFNegate,
// could be folded into one that does): each result of an exact-mode
// module carries NoContraction.
var arithmetic = map[uint16]string{
	OpFNegate:         "OpFNegate",
	OpFAdd:            "OpFAdd",
	OpFSub:            "OpFSub",
	OpFMul:            "OpFMul",
	OpVectorTimesScal: "OpVectorTimesScalar",
}

// preamble reports whether op belongs to the sections before the types
// (capabilities to annotations).
func preamble(op uint16) bool {
	switch op {
	case OpCapability, OpExtension, OpExtInstImport, OpMemoryModel, OpEntryPoint,
		OpExecutionMode, OpExecutionModeId, OpString, OpSourceExtension, OpSource,
		OpSourceContinued, OpName, OpMemberName, OpModuleProcessed, OpDecorate,
		OpMemberDecorate, OpDecorationGroup, OpGroupDecorate, OpGroupMember,
		OpDecorateId, OpDecorateString, OpMemberDecorateSt, OpLine, OpNoLine:
		return true
	}
	return false
}

// lastIndex returns the index after the last instruction of m with one of
// the opcodes, or -1 when there is none.
func (m *Module) lastIndex(ops ...uint16) int {
	at := -1
	for i, in := range m.Insts {
		for _, op := range ops {
			if in.Op == op {
				at = i + 1
			}
		}
	}
	return at
}

func (m *Module) insert(at int, ins ...Inst) {
	m.Insts = append(m.Insts[:at], append(ins, m.Insts[at:]...)...)
}

// MakeExact turns a compiled module into an exact-mode module: the
// capabilities DenormPreserve, SignedZeroInfNanPreserve and RoundingModeRTE
// (with OpExtension "SPV_KHR_float_controls" below SPIR-V 1.4, where they
// are not core), the execution modes DenormPreserve, SignedZeroInfNanPreserve and
// RoundingModeRTE on every entry point for 32-bit floats and every other
// float width the module declares (FloatWidths),
// and NoContraction on the result of every OpFAdd, OpFSub, OpFMul,
// OpFNegate and OpVectorTimesScalar that lacks it. Whatever it already has
// stays.
func (m *Module) MakeExact() {
	has := map[[3]uint32]bool{} // (capability) or (entry, mode, width)
	decorated := map[uint32]bool{}
	var entries []uint32
	for _, in := range m.Insts {
		switch in.Op {
		case OpCapability:
			has[[3]uint32{in.Args[0]}] = true
		case OpEntryPoint:
			entries = append(entries, in.Args[1])
		case OpExecutionMode:
			if len(in.Args) == 3 {
				has[[3]uint32{in.Args[0], in.Args[1], in.Args[2]}] = true
			}
		case OpDecorate:
			if in.Args[1] == DecorationNoContraction {
				decorated[in.Args[0]] = true
			}
		}
	}
	var decos []Inst
	for _, in := range m.Insts {
		if _, ok := arithmetic[in.Op]; ok && !decorated[in.Args[1]] {
			decorated[in.Args[1]] = true
			decos = append(decos, Inst{Op: OpDecorate, Args: []uint32{in.Args[1], DecorationNoContraction}})
		}
	}
	// Decorations last in the annotation section (before the first type).
	at := 0
	for at < len(m.Insts) && preamble(m.Insts[at].Op) {
		at++
	}
	m.insert(at, decos...)

	var modes []Inst
	for _, e := range entries {
		for _, w := range m.FloatWidths() {
			for _, mode := range []uint32{ModeDenormPreserve, ModeSignedZeroInfNanPreserve, ModeRoundingModeRTE} {
				if !has[[3]uint32{e, mode, w}] {
					modes = append(modes, Inst{Op: OpExecutionMode, Args: []uint32{e, mode, w}})
				}
			}
		}
	}
	at = m.lastIndex(OpEntryPoint, OpExecutionMode, OpExecutionModeId)
	m.insert(at, modes...)

	var caps []Inst
	for _, c := range []uint32{CapDenormPreserve, CapSignedZeroInfNanPreserve, CapRoundingModeRTE} {
		if !has[[3]uint32{c}] {
			caps = append(caps, Inst{Op: OpCapability, Args: []uint32{c}})
		}
	}
	if m.Version < 0x00010400 && m.extension("SPV_KHR_float_controls") < 0 {
		caps = append(caps, Inst{Op: OpExtension, Args: literal("SPV_KHR_float_controls")})
	}
	m.insert(m.lastIndex(OpCapability), caps...)
}

// extension returns the index of OpExtension name, or -1.
func (m *Module) extension(name string) int {
	for i, in := range m.Insts {
		if s, _ := String(in.Args); in.Op == OpExtension && s == name {
			return i
		}
	}
	return -1
}

// literal encodes a literal string operand.
func literal(s string) []uint32 {
	b := append([]byte(s), 0)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	w := make([]uint32, len(b)/4)
	for i := range w {
		w[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return w
}

// FloatWidths returns 32 and the other widths of the module's float types,
// in increasing order.
func (m *Module) FloatWidths() []uint32 {
	seen := map[uint32]bool{32: true}
	for _, in := range m.Insts {
		if in.Op == OpTypeFloat {
			seen[in.Args[1]] = true
		}
	}
	var ws []uint32
	for _, w := range []uint32{16, 32, 64} {
		if seen[w] {
			ws = append(ws, w)
		}
	}
	return ws
}

// capabilityOf maps each float-controls execution mode to its capability.
var capabilityOf = map[uint32]uint32{
	ModeDenormPreserve:           CapDenormPreserve,
	ModeSignedZeroInfNanPreserve: CapSignedZeroInfNanPreserve,
	ModeRoundingModeRTE:          CapRoundingModeRTE,
}

// DropModes removes the float-controls execution modes (DenormPreserve,
// SignedZeroInfNanPreserve, RoundingModeRTE) for which keep(mode, width)
// is false, and each of their capabilities that no remaining mode uses.
// It reports whether anything was removed. A driver that lacks a mode
// must not be given a module declaring it (Vulkan's valid usage); what
// the mode promised is then checked by running code (package gpu's
// exactness probe), not declared.
func (m *Module) DropModes(keep func(mode, width uint32) bool) bool {
	used := map[uint32]bool{}
	n := len(m.Insts)
	m.Insts = slices.DeleteFunc(m.Insts, func(in Inst) bool {
		if in.Op != OpExecutionMode || len(in.Args) != 3 {
			return false
		}
		c, ok := capabilityOf[in.Args[1]]
		if !ok {
			return false
		}
		if keep(in.Args[1], in.Args[2]) {
			used[c] = true
			return false
		}
		return true
	})
	if len(m.Insts) == n {
		return false
	}
	m.Insts = slices.DeleteFunc(m.Insts, func(in Inst) bool {
		if in.Op != OpCapability {
			return false
		}
		for _, c := range capabilityOf {
			if in.Args[0] == c {
				return !used[c]
			}
		}
		return false
	})
	return true
}
