#version 450
// out[out_offset + Σ i_d*out_stride_d] = in[in_offset + Σ i_d*in_stride_d], index space of rank ≤ 6.
// Copies 32-bit words, so one pipeline serves float32 and int32. The host merges adjacent axes; concat,
// slice (negative in-strides for negative steps) and transpose are all this one kernel.
#include "common.glsl"

layout(std430, set = 0, binding = 0) readonly buffer In { uint src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Out { uint dst[]; };

layout(push_constant) uniform Params {
    uint n;  // elements of the index space
    uint rank;
    int in_offset;
    uint out_offset;
    uint shape[6];  // index space, outermost first
    int in_stride[6];
    uint out_stride[6];
} p;

void main() {
    uint i = flat_index();
    if (i >= p.n) return;
    int src_index = p.in_offset;
    uint dst_index = p.out_offset, rest = i;
    for (int d = int(p.rank) - 1; d >= 0; --d) {
        uint coord = rest % p.shape[d];
        rest /= p.shape[d];
        src_index += int(coord) * p.in_stride[d];
        dst_index += coord * p.out_stride[d];
    }
    dst[dst_index] = src[src_index];
}
