#version 450
// out[out_offset + Σ i_d*out_stride_d] = in[in_offset + Σ i_d*in_stride_d], index space of rank ≤ 6.
// Copies elements as they are, never converted: 32-bit words in copy_strided.spv (float32 and int32 share
// it), 16-bit elements in copy_strided.fp16.spv (float16). The host merges adjacent axes; concat, slice
// (negative in-strides for negative steps) and transpose are all this one kernel.
#include "common.glsl"
#include "storage.glsl"

#ifdef FP16
#define ELEMENT_T STORE_T  // float16_t, loaded and stored as it is: a bit-exact 2-byte move
#else
#define ELEMENT_T uint     // words, not floats: int32 bit patterns that read as NaN pass unchanged
#endif

layout(std430, set = 0, binding = 0) readonly buffer In { ELEMENT_T src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Out { ELEMENT_T dst[]; };

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
