#version 450
// attn_exact: attn.glsl with the float32 product's step as the device's
// fma() (used where the exactness probe found it one rounding, with
// gradual underflow). See attn.glsl.
#extension GL_GOOGLE_include_directive : require
#define EXACT_FMA32(a, b, c) fma(a, b, c)
#include "exact.glsl"
#include "attn.glsl"
