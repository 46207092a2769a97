#version 450
// gemm with the float32 product's step as exact.glsl's fma32 (integer
// arithmetic: exact on every device), for devices whose fma() is not one
// rounding (lavapipe's is a multiply and an add) or that flush denormals.
// See gemm.glsl.
#extension GL_GOOGLE_include_directive : require
#include "exact.glsl"
#define GEMM_FMA(a, b, c) fma32(a, b, c)
#include "gemm_exact.glsl"
#include "gemm.glsl"
