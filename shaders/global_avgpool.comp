#version 450
// GlobalAveragePool (NCHW): one workgroup per (n, c) plane. Invocations stride over the H*W plane
// (adjacent invocations read adjacent elements), then a tree reduction in shared memory sums the
// partial sums. The workgroup size is a power of two ≤ 1024 (vk/kernels/reduce.py mean_local_size: few long
// planes get the widest); planes beyond 65535 fold into grid y.
#include "common.glsl"
#include "storage.glsl"

layout(std430, set = 0, binding = 0) readonly buffer X { STORE_T x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Y { STORE_T y[]; };

layout(push_constant) uniform Params {
    uint planes;  // N * C
    uint size;    // H * W
} p;

shared float partial[1024];

void main() {
    uint plane = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (plane >= p.planes) return;  // uniform across the workgroup: no barrier is skipped by part of it
    uint t = gl_LocalInvocationID.x;
    uint base = plane * p.size;
    // Eight strided elements per iteration into separate sums, so their loads are issued together.
    uint step = gl_WorkGroupSize.x;
    vec4 sums = vec4(0.0), more = vec4(0.0);
    uint k = t;
    for (; k + 7 * step < p.size; k += 8 * step) {
        uint i = base + k;
        sums += vec4(float(x[i]), float(x[i + step]), float(x[i + 2 * step]), float(x[i + 3 * step]));
        more += vec4(float(x[i + 4 * step]), float(x[i + 5 * step]), float(x[i + 6 * step]),
                     float(x[i + 7 * step]));
    }
    for (; k < p.size; k += step) sums.x += float(x[base + k]);
    sums += more;
    partial[t] = (sums.x + sums.y) + (sums.z + sums.w);
    barrier();
    for (uint s = gl_WorkGroupSize.x / 2; s > 0; s >>= 1) {
        if (t < s) partial[t] += partial[t + s];
        barrier();
    }
    if (t == 0) y[plane] = STORE(partial[0] / float(p.size));
}
