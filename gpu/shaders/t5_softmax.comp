#version 450
// t5_softmax: t5_softmax.glsl with the fused multiply-add as the device's
// fma() (used where the exactness probe found it one rounding).
#extension GL_GOOGLE_include_directive : require
#define EXACT_FMA32(a, b, c) fma(a, b, c)
#include "exact.glsl"
#include "t5_softmax.glsl"
