#version 450
// Fast mode's product on tensor cores (VK_NV_cooperative_matrix): see
// gemm_fast.glsl. Runs only where gpu.FastSupport finds the extension's
// 16×16×16 float16·float16+float32 shape, shaderFloat16, the Vulkan memory
// model and 32-wide subgroups.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#define GEMM_FAST_COOPMAT 1
#include "gemm_fast.glsl"
