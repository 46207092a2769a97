package spirv

import (
	"fmt"
)

// GLSLAllowed lists the GLSL.std.450 instructions an exact-mode module may
// use, by number, with their names: those that are exact by definition
// (integer operations, rounding to an integer, absolute value, sign, the
// exponent operations) and Fma, whose exactness Vulkan does not promise
// (its precision is "inherited from OpFMul and OpFAdd") and package gpu
// checks on each device at run time (CheckExact).
var GLSLAllowed = map[uint32]string{
	2: "RoundEven", 3: "Trunc", 4: "FAbs", 5: "SAbs", 6: "FSign", 7: "SSign",
	8: "Floor", 9: "Ceil", 38: "UMin", 39: "SMin", 41: "UMax", 42: "SMax",
	44: "UClamp", 45: "SClamp", 50: "Fma", 51: "Frexp", 52: "FrexpStruct",
	53: "Ldexp", 73: "FindILsb", 74: "FindSMsb", 75: "FindUMsb",
}

// GLSLNames names the GLSL.std.450 instructions an exact-mode module may
// not use (the others, for the messages): not correctly rounded in Vulkan,
// or with a result the specification leaves open (Round's ties, FMin's and
// FMax's signed zeros and NaN).
var GLSLNames = map[uint32]string{
	1: "Round", 10: "Fract", 11: "Radians", 12: "Degrees", 13: "Sin", 14: "Cos",
	15: "Tan", 16: "Asin", 17: "Acos", 18: "Atan", 19: "Sinh", 20: "Cosh",
	21: "Tanh", 22: "Asinh", 23: "Acosh", 24: "Atanh", 25: "Atan2", 26: "Pow",
	27: "Exp", 28: "Log", 29: "Exp2", 30: "Log2", 31: "Sqrt", 32: "InverseSqrt",
	33: "Determinant", 34: "MatrixInverse", 35: "Modf", 36: "ModfStruct",
	37: "FMin", 40: "FMax", 43: "FClamp", 46: "FMix", 48: "Step",
	49: "SmoothStep", 66: "Length", 67: "Distance", 68: "Cross", 69: "Normalize",
	70: "FaceForward", 71: "Reflect", 72: "Refract", 79: "NMin", 80: "NMax",
	81: "NClamp",
}

// forbidden are the core instructions an exact-mode module may not use:
// Vulkan's division is not correctly rounded, and the vector and matrix
// products leave their order of additions open.
var forbidden = map[uint16]string{
	OpFDiv: "OpFDiv", OpFRem: "OpFRem", OpFMod: "OpFMod", OpDot: "OpDot",
	OpMatrixTimesScal: "OpMatrixTimesScalar", OpVectorTimesMat: "OpVectorTimesMatrix",
	OpMatrixTimesVec: "OpMatrixTimesVector", OpMatrixTimesMat: "OpMatrixTimesMatrix",
	OpOuterProduct: "OpOuterProduct",
}

// CheckExact returns what makes m unfit for exact mode, one message per
// finding (nil when it is fit):
//   - a forbidden instruction: OpFDiv, OpFRem, OpFMod, OpDot, the matrix
//     products, a GLSL.std.450 instruction outside GLSLAllowed, an
//     instruction of another extended set (NonSemantic.* sets excepted),
//     the cooperative-matrix capabilities;
//   - an OpFAdd, OpFSub, OpFMul, OpFNegate or OpVectorTimesScalar result
//     without NoContraction;
//   - a missing capability DenormPreserve, SignedZeroInfNanPreserve or
//     RoundingModeRTE, or an entry point without the execution modes
//     DenormPreserve, SignedZeroInfNanPreserve and RoundingModeRTE for 32 bits
//     and each other float width it uses, or with DenormFlushToZero or
//     RoundingModeRTZ for one of them.
func CheckExact(m *Module) []string {
	var bad []string
	sets := map[uint32]string{}
	noContraction := map[uint32]bool{}
	caps := map[uint32]bool{}
	modes := map[[3]uint32]bool{}
	var entries []uint32
	names := map[uint32]string{}
	for _, in := range m.Insts {
		switch in.Op {
		case OpExtInstImport:
			sets[in.Args[0]], _ = String(in.Args[1:])
		case OpDecorate:
			if in.Args[1] == DecorationNoContraction {
				noContraction[in.Args[0]] = true
			}
		case OpCapability:
			caps[in.Args[0]] = true
		case OpEntryPoint:
			entries = append(entries, in.Args[1])
			names[in.Args[1]], _ = String(in.Args[2:])
		case OpExecutionMode:
			if len(in.Args) == 3 { // the float modes name their width
				modes[[3]uint32{in.Args[0], in.Args[1], in.Args[2]}] = true
			}
		}
	}
	for i, in := range m.Insts {
		at := fmt.Sprintf("instruction %d", i)
		switch {
		case forbidden[in.Op] != "":
			bad = append(bad, fmt.Sprintf("%s: %s (%%%d) is forbidden in exact mode", at, forbidden[in.Op], in.Args[1]))
		case arithmetic[in.Op] != "" && !noContraction[in.Args[1]]:
			bad = append(bad, fmt.Sprintf("%s: %s %%%d lacks NoContraction", at, arithmetic[in.Op], in.Args[1]))
		case in.Op == OpCapability && (in.Args[0] == CapCooperativeMatrixKHR || in.Args[0] == CapCooperativeMatrixNV):
			bad = append(bad, fmt.Sprintf("%s: capability %d (cooperative matrix) is fast mode only", at, in.Args[0]))
		case in.Op == OpExtInst:
			set, op := sets[in.Args[2]], in.Args[3]
			switch {
			case set == "GLSL.std.450" && GLSLAllowed[op] != "":
			case set == "GLSL.std.450":
				name := GLSLNames[op]
				if name == "" {
					name = fmt.Sprint(op)
				}
				bad = append(bad, fmt.Sprintf("%s: GLSL.std.450 %s (%%%d) is not exact in Vulkan: forbidden in exact mode", at, name, in.Args[1]))
			case len(set) > 12 && set[:12] == "NonSemantic.":
			default:
				bad = append(bad, fmt.Sprintf("%s: extended instruction %d of set %q is forbidden in exact mode", at, op, set))
			}
		}
	}
	for _, c := range []struct {
		c    uint32
		name string
	}{{CapDenormPreserve, "DenormPreserve"}, {CapSignedZeroInfNanPreserve, "SignedZeroInfNanPreserve"}, {CapRoundingModeRTE, "RoundingModeRTE"}} {
		if !caps[c.c] {
			bad = append(bad, fmt.Sprintf("capability %s missing", c.name))
		}
	}
	if len(entries) == 0 {
		bad = append(bad, "no entry point")
	}
	for _, e := range entries {
		for _, w := range m.FloatWidths() {
			for _, c := range []struct {
				mode uint32
				name string
				want bool
			}{
				{ModeDenormPreserve, "DenormPreserve", true},
				{ModeSignedZeroInfNanPreserve, "SignedZeroInfNanPreserve", true},
				{ModeRoundingModeRTE, "RoundingModeRTE", true},
				{ModeDenormFlushToZero, "DenormFlushToZero", false},
				{ModeRoundingModeRTZ, "RoundingModeRTZ", false},
			} {
				if modes[[3]uint32{e, c.mode, w}] != c.want {
					verb := "lacks"
					if !c.want {
						verb = "has"
					}
					bad = append(bad, fmt.Sprintf("entry point %q %s execution mode %s %d", names[e], verb, c.name, w))
				}
			}
		}
	}
	return bad
}
