#version 450
// The columns of each row of DB's bitmap that hold its set pixels, so that the host traces contours only
// there: one workgroup per row writes spans[2y] = the first and spans[2y + 1] = one past the last pixel column
// of the 4-pixel words (db_bitmap's packing) that are not 0; an empty row gets (w, 0).
#include "common.glsl"

layout(std430, set = 0, binding = 0) readonly buffer Bitmap { uint bitmap[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Spans { uint spans[]; };

layout(push_constant) uniform Push { uint h, w; } p;

shared uint first_word[256];  // workgroup size is a power of two ≤ 256
shared uint end_word[256];

void main() {
    uint y = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (y >= p.h) return;  // the whole workgroup: no barrier is left waiting
    uint words = p.w / 4u;
    uint t = gl_LocalInvocationID.x;
    uint first = words, end = 0u;
    for (uint i = t; i < words; i += gl_WorkGroupSize.x) {
        if (bitmap[y * words + i] != 0u) {
            first = min(first, i);
            end = i + 1u;  // i only grows
        }
    }
    first_word[t] = first;
    end_word[t] = end;
    barrier();
    for (uint half_ = gl_WorkGroupSize.x / 2u; half_ > 0u; half_ >>= 1u) {
        if (t < half_) {
            first_word[t] = min(first_word[t], first_word[t + half_]);
            end_word[t] = max(end_word[t], end_word[t + half_]);
        }
        barrier();
    }
    if (t == 0u) {
        spans[2u * y] = 4u * first_word[0];
        spans[2u * y + 1u] = 4u * end_word[0];
    }
}
