#version 450
// LayerNormalization over the trailing `length` elements of each row (ONNX normalises axis..end, so rows
// are contiguous): y = (x - mean) / sqrt(var + eps) * scale + bias, with the biased variance computed in a
// second pass over (x - mean)^2 (no catastrophic cancellation). One workgroup per row.
#include "common.glsl"
#include "storage.glsl"

layout(constant_id = 3) const int HAS_BIAS = 0;

layout(std430, set = 0, binding = 0) readonly buffer X { STORE_T x[]; };
layout(std430, set = 0, binding = 1) readonly buffer Scale { STORE_T scale[]; };
layout(std430, set = 0, binding = 2) readonly buffer Bias { STORE_T bias[]; };  // scale when HAS_BIAS == 0
layout(std430, set = 0, binding = 3) writeonly buffer Y { STORE_T y[]; };

layout(push_constant) uniform Params {
    uint rows;
    uint row_len;  // product of the normalised axes
    float epsilon;
} p;

shared float partial[256];  // workgroup size is a power of two ≤ 256

float workgroup_sum(float v) {
    uint t = gl_LocalInvocationID.x;
    partial[t] = v;
    barrier();
    for (uint s = gl_WorkGroupSize.x / 2; s > 0; s >>= 1) {
        if (t < s) partial[t] += partial[t + s];
        barrier();
    }
    float result = partial[0];
    barrier();  // partial[] is reused by the next reduction
    return result;
}

void main() {
    uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (row >= p.rows) return;  // uniform across the workgroup: no barrier is skipped by part of it
    uint base = row * p.row_len;
    uint t = gl_LocalInvocationID.x, step = gl_WorkGroupSize.x;

    float s = 0.0;
    for (uint k = t; k < p.row_len; k += step) s += float(x[base + k]);
    float mean = workgroup_sum(s) / float(p.row_len);

    float sq = 0.0;
    for (uint k = t; k < p.row_len; k += step) {
        float d = float(x[base + k]) - mean;
        sq += d * d;
    }
    float inv_std = 1.0 / sqrt(workgroup_sum(sq) / float(p.row_len) + p.epsilon);

    for (uint k = t; k < p.row_len; k += step) {
        float v = (float(x[base + k]) - mean) * inv_std * float(scale[k]);
        y[base + k] = STORE(HAS_BIAS != 0 ? v + float(bias[k]) : v);
    }
}
