#version 450
// nn_act: nn_act.glsl with the fused multiply-add as the device's fma()
// (used where the exactness probe found it one rounding). See nn_act.glsl.
#extension GL_GOOGLE_include_directive : require
#define EXACT_FMA32(a, b, c) fma(a, b, c)
#include "exact.glsl"
#include "nn_act.glsl"
