#version 450
// dst = src converted between storage precisions, one element per invocation: the seam where a plan's fp32
// and fp16 nodes meet (vk/graph/precision.py). The variant names what it writes: cast.fp16.spv reads fp32 and
// writes fp16 (rounding to nearest even), cast.spv reads fp16 and writes fp32 (exact).
#include "common.glsl"
#include "storage.glsl"

#ifdef FP16
layout(std430, set = 0, binding = 0) readonly buffer Src { float src[]; };
#else
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(std430, set = 0, binding = 0) readonly buffer Src { float16_t src[]; };
#endif
layout(std430, set = 0, binding = 1) writeonly buffer Dst { STORE_T dst[]; };

layout(push_constant) uniform Params { uint n; } p;

void main() {
    uint i = flat_index();
    if (i >= p.n) return;
    dst[i] = STORE(float(src[i]));
}
