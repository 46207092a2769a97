#version 450
// c[i] = a[i] + b[i] * scale + offset for i < n: two arrays added, with a
// push constant (n, scale) and a specialization constant (offset, as
// float bits) reaching the shader. Compiled by glslc into add.spv
// (TestShadersInSync).
layout(local_size_x_id = 1) in; // workgroup size: specialization constant 1

layout(constant_id = 0) const uint offsetBits = 0;

layout(push_constant) uniform Push {
    uint n;
    float scale;
} p;

layout(set = 0, binding = 0) readonly buffer A { float a[]; };
layout(set = 0, binding = 1) readonly buffer B { float b[]; };
layout(set = 0, binding = 2) writeonly buffer C { float c[]; };

void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i >= p.n) {
        return;
    }
    // precise (NoContraction) on both: without it Mesa rewrites
    // fma(x, y, z) + w as fma(x, y, z + w), which rounds differently.
    precise float t = fma(b[i], p.scale, a[i]);
    precise float r = t + uintBitsToFloat(offsetBits);
    c[i] = r;
}
