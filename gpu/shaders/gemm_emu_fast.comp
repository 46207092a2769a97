#version 450
// Test-only: fast mode's product with the cooperative-matrix multiply
// emulated by scalar float32 loops over the same staged tiles (see
// gemm_fast.glsl), so that its tile loop, edges, depth tail and scaling run
// on any device (lavapipe in CI). Never chosen by a run.
#extension GL_GOOGLE_include_directive : require
#include "gemm_fast.glsl"
