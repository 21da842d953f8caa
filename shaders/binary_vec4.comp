#version 450
// c = a OP b on equal shapes whose size is a multiple of 4: the bandwidth-bound fast path of binary.comp,
// one vec4 (a 16-byte load per operand and a 16-byte store; 8 bytes each in fp16) per invocation.
#include "common.glsl"
#include "storage.glsl"

layout(constant_id = 3) const int OP = 0;  // as in binary.comp: 0 add, 1 sub, 2 mul, 3 div, 4 pow, 5 gated add

layout(std430, set = 0, binding = 0) readonly buffer A { STORE4_T a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { STORE4_T b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer C { STORE4_T c[]; };

layout(push_constant) uniform Params { uint n4; } p;  // output vec4s

vec4 apply(vec4 x, vec4 y) {
    if (OP == 0) return x + y;
    if (OP == 1) return x - y;
    if (OP == 2) return x * y;
    if (OP == 3) return x / y;
    if (OP == 5) {
        precise vec4 gated = x * y;  // rounded before the add, as the Mul and Add it replaces: no fma
        return x + gated;
    }
    return pow(x, y);
}

void main() {
    uint i = flat_index();
    if (i >= p.n4) return;
    c[i] = STORE4(apply(vec4(a[i]), vec4(b[i])));
}
