#version 450
// Softmax along one axis of a tensor viewed as [outer, length, inner]: one workgroup per (outer, inner)
// row, element k at row_base + k * inner. Numerically stable: max first, then sum of exp(x - max), then
// write exp(x - max) / sum. Invocations stride over long rows; shared-memory tree reductions combine them.
// CACHE > 0 (rows of at most workgroup size * CACHE, e.g. the recogniser's 6625 classes): each invocation
// keeps its CACHE elements in registers, so the row is read once instead of three times, and all of an
// invocation's loads are issued together.
#include "common.glsl"
#include "storage.glsl"
#include "row_reduce.glsl"

// PER_INVOCATION = 1: each invocation owns a whole row instead (rows short and inner long, e.g. a channel
// axis): adjacent invocations then read adjacent elements, and no shared memory is needed.
layout(constant_id = 3) const int PER_INVOCATION = 0;
layout(constant_id = 4) const int CACHE = 0;  // elements per invocation kept in registers; 0: re-read the row
const int MAX_CACHE = 32;                     // entries past CACHE are never touched (and compiled away)

layout(std430, set = 0, binding = 0) readonly buffer X { STORE_T x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Y { STORE_T y[]; };

layout(push_constant) uniform Params {
    uint rows;     // outer * inner
    uint row_len;  // the reduced axis
    uint inner;
} p;

#include "row_passes.glsl"

#define NEG_INF uintBitsToFloat(0xff800000u)

// The row held in registers: element t + j * step in v[j] (-inf past the end, so it adds exp(-inf) = 0).
void softmax_cached(uint base, uint t, uint step) {
    float v[MAX_CACHE];
    float m = NEG_INF;
    [[unroll]] for (int j = 0; j < CACHE; ++j) {
        uint k = t + uint(j) * step;
        float e = float(x[base + min(k, p.row_len - 1) * p.inner]);  // clamped: the load stays in bounds
        v[j] = k < p.row_len ? e : NEG_INF;
        m = max(m, v[j]);
    }
    m = workgroup_max(m);
    float s = 0.0;
    [[unroll]] for (int j = 0; j < CACHE; ++j) {
        v[j] = exp(v[j] - m);
        s += v[j];
    }
    float inv_sum = 1.0 / workgroup_sum(s);
    [[unroll]] for (int j = 0; j < CACHE; ++j) {
        uint k = t + uint(j) * step;
        if (k < p.row_len) y[base + k * p.inner] = STORE(v[j] * inv_sum);
    }
}

// Elements k .. k + 7·step of the row's probabilities out, from their logits in a and b (row_passes.glsl's ROW_LOAD8)
#define STORE8(a, b, k) \
    y[ROW_AT(k, 0)] = STORE(exp(a.x - m) * inv_sum); y[ROW_AT(k, 1)] = STORE(exp(a.y - m) * inv_sum); \
    y[ROW_AT(k, 2)] = STORE(exp(a.z - m) * inv_sum); y[ROW_AT(k, 3)] = STORE(exp(a.w - m) * inv_sum); \
    y[ROW_AT(k, 4)] = STORE(exp(b.x - m) * inv_sum); y[ROW_AT(k, 5)] = STORE(exp(b.y - m) * inv_sum); \
    y[ROW_AT(k, 6)] = STORE(exp(b.z - m) * inv_sum); y[ROW_AT(k, 7)] = STORE(exp(b.w - m) * inv_sum)

void main() {
    // Per-invocation rows return one by one, but they never reach a barrier; workgroup rows return together.
    uint row = PER_INVOCATION != 0 ? flat_index() : gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (row >= p.rows) return;
    uint base = (row / p.inner) * p.row_len * p.inner + row % p.inner;
    uint t = PER_INVOCATION != 0 ? 0 : gl_LocalInvocationID.x;
    uint step = PER_INVOCATION != 0 ? 1 : gl_WorkGroupSize.x;
    if (PER_INVOCATION == 0 && CACHE > 0) {
        softmax_cached(base, t, step);
        return;
    }

    // Each pass loads eight strided elements together, then takes them one by one in index order: the same max,
    // sum and probabilities as one at a time, bit for bit (the first two passes: row_passes.glsl)
    float m = row_max(base, t, step);
    if (PER_INVOCATION == 0) m = workgroup_max(m);
    float s = row_exp_sum(base, t, step, m);
    float inv_sum = 1.0 / (PER_INVOCATION != 0 ? s : workgroup_sum(s));

    uint k = t;
    for (; k + 7 * step < p.row_len; k += 8 * step) {
        vec4 a, b;
        ROW_LOAD8(a, b, k);
        STORE8(a, b, k);
    }
    for (; k < p.row_len; k += step) {
        uint i = base + k * p.inner;
        y[i] = STORE(exp(float(x[i]) - m) * inv_sum);
    }
}
