#version 450
// c = a OP b on equal shapes whose size is a multiple of 4: the bandwidth-bound fast path of binary.comp,
// one vec4 (16-byte load per operand, 16-byte store) per invocation.
#include "common.glsl"

layout(constant_id = 3) const int OP = 0;  // as in binary.comp: 0 add, 1 sub, 2 mul, 3 div, 4 pow

layout(std430, set = 0, binding = 0) readonly buffer A { vec4 a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { vec4 b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer C { vec4 c[]; };

layout(push_constant) uniform Params { uint n4; } p;  // output vec4s

vec4 apply(vec4 x, vec4 y) {
    if (OP == 0) return x + y;
    if (OP == 1) return x - y;
    if (OP == 2) return x * y;
    if (OP == 3) return x / y;
    return pow(x, y);
}

void main() {
    uint i = flat_index();
    if (i >= p.n4) return;
    c[i] = apply(a[i], b[i]);
}
