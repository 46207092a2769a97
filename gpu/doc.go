// Package gpu holds the project's exact kernels for Vulkan compute: GLSL
// compute shaders (shaders/*.comp, shared code in shaders/*.glsl) compiled
// to SPIR-V by a generator (gen.go, internal/spvgen) and embedded
// (modules.go), each computing one CPU definition bit for bit.
//
// # Exact mode
//
// A shader is exact-mode unless its name ends in _fast. The generator makes
// every exact-mode module declare the float controls for 32-bit floats (DenormPreserve,
// SignedZeroInfNanPreserve, RoundingModeRTE; and for any other float width
// it uses) and puts
// NoContraction on every float add, subtract, multiply and negate, so no
// driver may fuse a·b + c: fusion happens only where a shader calls fma.
// It refuses (internal/spirv.CheckExact) division and remainder, the
// vector and matrix products (their order of additions is open), the
// GLSL.std.450 functions that Vulkan does not round correctly (exp, log,
// pow, sqrt, inversesqrt, the trigonometric ones, …) or whose result it
// leaves open (round's ties; fmin, fmax and clamp on floats: signed zeros
// and NaN — use a comparison and a select). Such functions come from
// the project's own exact code in GLSL.
// fma is allowed, but Vulkan lets a driver compute it as a multiply and an
// add; the device probe checks it.
//
// # Building the shaders
//
// go generate ./gpu runs glslc (Debian's glslc) on each shader, edits the
// SPIR-V words in Go (internal/spirv), validates the result with spirv-val
// and writes spv/NAME.spv, spv/GLSLC_VERSION and modules.go. Tests:
// TestSPIRVUpToDate (the checked-in files equal a fresh build; it needs
// the recorded glslc version), TestExactModules (every exact-mode module
// passes CheckExact, and the same rules on spirv-dis's text),
// TestExactCheckCatches (broken modules fail both checks).
package gpu
