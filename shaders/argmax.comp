#version 450
// ArgMax (first index of the maximum, as ONNX select_last_index=0) and the maximum itself along one axis
// of a tensor viewed as [outer, length, inner]: one workgroup per (outer, inner) row. Each invocation scans
// k = t, t + step, ... keeping the first strict maximum; the tree reduction breaks ties by the smaller
// index, so the result is the first maximum of the row. NaN counts as the largest value (like numpy).
// SOFTMAX = 1: the row holds logits, and the values compared (and the maximum written) are its softmax's,
// worked out as softmax.comp works them out (the max, then the sum of exp(x - max) in the same order over the
// same workgroup, then exp(x - max) · (1 / sum)): index and value are bit for bit those of Softmax then ArgMax,
// without writing the probabilities (a recogniser's 18 710 per time step) and reading them back.
#include "common.glsl"
#include "row_reduce.glsl"

// PER_INVOCATION = 1: each invocation owns a whole row instead (rows short and inner long, e.g. a channel
// axis): adjacent invocations then read adjacent elements, and no shared memory is needed.
layout(constant_id = 3) const int PER_INVOCATION = 0;
layout(constant_id = 4) const int SOFTMAX = 0;

layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Indices { int indices[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Values { float values[]; };

layout(push_constant) uniform Params {
    uint rows;     // outer * inner
    uint row_len;  // the reduced axis
    uint inner;
} p;

#include "row_passes.glsl"

shared float best_value[256];  // workgroup size is a power of two ≤ 256
shared int best_index[256];

const int NO_INDEX = 0x7fffffff;  // loses every tie: invocations that saw no element

// Does (v, i) beat (w, j)? Larger value, NaN above all, ties to the smaller index.
bool beats(float v, int i, float w, int j) {
    if (isnan(v) || isnan(w)) return isnan(v) && (!isnan(w) || i < j);
    return v > w || (v == w && i < j);
}

// The value compared for element x: x itself, or (SOFTMAX) its probability
float m = 0.0, inv_sum = 1.0;
float compared(float e) {
    return SOFTMAX != 0 ? exp(e - m) * inv_sum : e;
}

void main() {
    // Per-invocation rows return one by one, but they never reach a barrier; workgroup rows return together.
    uint row = PER_INVOCATION != 0 ? flat_index() : gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (row >= p.rows) return;
    uint base = (row / p.inner) * p.row_len * p.inner + row % p.inner;
    uint t = PER_INVOCATION != 0 ? 0 : gl_LocalInvocationID.x;
    uint step = PER_INVOCATION != 0 ? 1 : gl_WorkGroupSize.x;

    if (SOFTMAX != 0) {
        // softmax.comp's max and sum, bit for bit (row_passes.glsl)
        m = row_max(base, t, step);
        if (PER_INVOCATION == 0) m = workgroup_max(m);
        float s = row_exp_sum(base, t, step, m);
        inv_sum = 1.0 / (PER_INVOCATION != 0 ? s : workgroup_sum(s));
    }

    float v = uintBitsToFloat(0xff800000u);  // -inf
    int idx = NO_INDEX;
    // Four strided elements per iteration, loaded together, then compared in index order.
    uint k = t;
    for (; k + 3 * step < p.row_len; k += 4 * step) {
        float e[4];
        [[unroll]] for (int j = 0; j < 4; ++j) e[j] = compared(x[base + (k + uint(j) * step) * p.inner]);
        [[unroll]] for (int j = 0; j < 4; ++j) {
            if (beats(e[j], int(k + uint(j) * step), v, idx)) {
                v = e[j];
                idx = int(k + uint(j) * step);
            }
        }
    }
    for (; k < p.row_len; k += step) {
        float e = compared(x[base + k * p.inner]);
        if (beats(e, int(k), v, idx)) {
            v = e;
            idx = int(k);
        }
    }
    if (PER_INVOCATION != 0) {
        indices[row] = idx;
        values[row] = v;
        return;
    }
    best_value[t] = v;
    best_index[t] = idx;
    barrier();
    for (uint s = gl_WorkGroupSize.x / 2; s > 0; s >>= 1) {
        if (t < s && beats(best_value[t + s], best_index[t + s], best_value[t], best_index[t])) {
            best_value[t] = best_value[t + s];
            best_index[t] = best_index[t + s];
        }
        barrier();
    }
    if (t == 0) {
        indices[row] = best_index[0];
        values[row] = best_value[0];
    }
}
