#version 450
// vae_norm: vae_norm.glsl with the fused multiply-add (of exp_def) as the
// device's fma() (used where the exactness probe found it one rounding).
#extension GL_GOOGLE_include_directive : require
#define EXACT_FMA32(a, b, c) fma(a, b, c)
#include "exact.glsl"
#include "vae_norm.glsl"
