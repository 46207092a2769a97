#version 450
// vae_norm_softfma: vae_norm.glsl with the fused multiply-add as
// exact.glsl's fma32 (integer arithmetic: exact on every device), for
// devices whose fma() is not one rounding.
#extension GL_GOOGLE_include_directive : require
#include "exact.glsl"
#include "vae_norm.glsl"
