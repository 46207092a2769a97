package gpu

// The shaders: every shaders/NAME.comp (GLSL 450; shared code in
// shaders/*.glsl, included with #include "x.glsl") is compiled by
//
//	go generate ./gpu
//
// into spv/NAME.spv, and modules.go embeds them (modules["NAME"]). It needs
// Debian's glslc and spirv-tools (apt-get install glslc spirv-tools). A
// shader is exact-mode unless its name ends in _fast: the generator adds
// the float controls (denormals preserved, signed zeros, Inf and NaN
// preserved, round to nearest even) and NoContraction on every float add,
// subtract, multiply and negate, and refuses a forbidden instruction (see
// internal/spirv.CheckExact and the package documentation). A fast-mode
// shader (the package documentation's "Fast mode") gets neither, is
// validated by spirv-val like the others, and must be listed in
// fast.go's fastModules (TestFastModules). Commit the
// .spv files, spv/GLSLC_VERSION and modules.go with the shader:
// TestSPIRVUpToDate rebuilds them and fails when they differ.
//
// See internal/spvgen for the exact glslc flags.

//go:generate go run ./internal/spvgen
