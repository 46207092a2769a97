#version 450
// nn_act_softfma: nn_act.glsl with the fused multiply-add as exact.glsl's
// fma32 (integer arithmetic: exact on every device), for devices whose
// fma() is not one rounding. See nn_act.glsl.
#extension GL_GOOGLE_include_directive : require
#include "exact.glsl"
#include "nn_act.glsl"
