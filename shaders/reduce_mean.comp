#version 450
// ReduceMean over a contiguous block of axes, the tensor viewed as [outer, length, inner]: one workgroup
// per (outer, inner) row, element k at row_base + k * inner; the output is [outer, inner] in order.
#include "common.glsl"
#include "storage.glsl"

// PER_INVOCATION = 1: each invocation owns a whole row instead (rows short and inner long, e.g. a channel
// axis): adjacent invocations then read adjacent elements, and no shared memory is needed.
layout(constant_id = 3) const int PER_INVOCATION = 0;

layout(std430, set = 0, binding = 0) readonly buffer X { STORE_T x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Y { STORE_T y[]; };

layout(push_constant) uniform Params {
    uint rows;     // outer * inner
    uint row_len;  // product of the reduced axes
    uint inner;
} p;

shared float partial[1024];  // workgroup size is a power of two ≤ 1024 (reduce.py mean_local_size)

void main() {
    // Per-invocation rows return one by one, but they never reach a barrier; workgroup rows return together.
    uint row = PER_INVOCATION != 0 ? flat_index() : gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (row >= p.rows) return;
    uint base = (row / p.inner) * p.row_len * p.inner + row % p.inner;
    if (PER_INVOCATION != 0) {
        float s = 0.0;
        for (uint k = 0; k < p.row_len; ++k) s += float(x[base + k * p.inner]);
        y[row] = STORE(s / float(p.row_len));
        return;
    }
    uint t = gl_LocalInvocationID.x;
    uint step = gl_WorkGroupSize.x;
    // Eight strided elements per iteration into separate sums, so their loads are issued together.
    vec4 sums = vec4(0.0), more = vec4(0.0);
    uint k = t, stride = step * p.inner;
    for (; k + 7 * step < p.row_len; k += 8 * step) {
        uint i = base + k * p.inner;
        sums += vec4(float(x[i]), float(x[i + stride]), float(x[i + 2 * stride]), float(x[i + 3 * stride]));
        more += vec4(float(x[i + 4 * stride]), float(x[i + 5 * stride]), float(x[i + 6 * stride]),
                     float(x[i + 7 * stride]));
    }
    for (; k < p.row_len; k += step) sums.x += float(x[base + k * p.inner]);
    sums += more;
    float s = (sums.x + sums.y) + (sums.z + sums.w);
    partial[t] = s;
    barrier();
    for (uint half_ = gl_WorkGroupSize.x / 2; half_ > 0; half_ >>= 1) {
        if (t < half_) partial[t] += partial[t + half_];
        barrier();
    }
    if (t == 0) y[row] = STORE(partial[0] / float(p.row_len));
}
