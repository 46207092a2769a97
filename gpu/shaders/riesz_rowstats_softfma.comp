#version 450
// riesz_rowstats_softfma: riesz_rowstats.glsl with the float32 product's step as
// exact.glsl's fma32 (integer arithmetic: exact on every device), for
// devices whose fma() is not one rounding (lavapipe's is a multiply and
// an add). See riesz_rowstats.glsl.
#extension GL_GOOGLE_include_directive : require
#include "exact.glsl"
#include "riesz_rowstats.glsl"
