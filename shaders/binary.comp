#version 450
// c = a OP b with ONNX (numpy) broadcasting. The host collapses shapes to rank ≤ 6 and passes element
// strides per input (0 on broadcast axes). BROADCAST=0 is the fast path for equal shapes.
#include "common.glsl"
#include "storage.glsl"

layout(constant_id = 3) const int OP = 0;         // 0 add, 1 sub, 2 mul, 3 div, 4 pow, 5 gated add: a + a·b
layout(constant_id = 4) const int BROADCAST = 1;

layout(std430, set = 0, binding = 0) readonly buffer A { STORE_T a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { STORE_T b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer C { STORE_T c[]; };

layout(push_constant) uniform Params {
    uint n;           // output elements
    uint rank;
    uint shape[6];    // output shape, outermost first
    uint stride_a[6];
    uint stride_b[6];
} p;

float apply(float x, float y) {
    if (OP == 0) return x + y;
    if (OP == 1) return x - y;
    if (OP == 2) return x * y;
    if (OP == 3) return x / y;
    if (OP == 5) {
        precise float gated = x * y;  // rounded before the add, as the Mul and Add it replaces: no fma
        return x + gated;
    }
    return pow(x, y);
}

void main() {
    uint i = flat_index();
    if (i >= p.n) return;
    if (BROADCAST == 0) {
        c[i] = STORE(apply(float(a[i]), float(b[i])));
        return;
    }
    uint ia = 0, ib = 0, rest = i;
    for (int d = int(p.rank) - 1; d >= 0; --d) {
        uint coord = rest % p.shape[d];
        rest /= p.shape[d];
        ia += coord * p.stride_a[d];
        ib += coord * p.stride_b[d];
    }
    c[i] = STORE(apply(float(a[ia]), float(b[ib])));
}
