#version 450
// gemm with the float32 product's step as the device's fma (used where the
// probe found fma fused: one rounding). See gemm.glsl.
#extension GL_GOOGLE_include_directive : require
#define GEMM_FMA(a, b, c) fma(a, b, c)
#include "gemm_exact.glsl"
#include "gemm.glsl"
