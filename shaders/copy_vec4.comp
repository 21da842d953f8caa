#version 450
// dst = src for contiguous tensors whose size is a multiple of 16 bytes, one uvec4 per invocation.
// Also the bandwidth ceiling of `vkocr bench kernels` (some drivers run vkCmdCopyBuffer far below it).
#include "common.glsl"

layout(std430, set = 0, binding = 0) readonly buffer Src { uvec4 src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Dst { uvec4 dst[]; };

layout(push_constant) uniform Params { uint n4; } p;

void main() {
    uint i = flat_index();
    if (i >= p.n4) return;
    dst[i] = src[i];
}
