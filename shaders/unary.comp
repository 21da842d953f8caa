#version 450
// y = f(x) elementwise. Activations share activation.glsl with the fused conv/GEMM epilogues.
#include "common.glsl"
#include "storage.glsl"
#include "activation.glsl"

// OP < 16: activation kinds; 16 sqrt, 17 exp, 18 tanh, 19 neg, 20 abs, 21 reciprocal, 22 erf
layout(constant_id = 3) const int OP = 0;
layout(constant_id = 4) const float ALPHA = 0.0;
layout(constant_id = 5) const float BETA = 0.0;

layout(std430, set = 0, binding = 0) readonly buffer X { STORE_T x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Y { STORE_T y[]; };

layout(push_constant) uniform Params { uint n; } p;

void main() {
    uint i = flat_index();
    if (i >= p.n) return;
    float v = float(x[i]);
    if (OP == 16) v = sqrt(v);
    else if (OP == 17) v = exp(v);
    else if (OP == 18) v = tanh(v);
    else if (OP == 19) v = -v;
    else if (OP == 20) v = abs(v);
    else if (OP == 21) v = 1.0 / v;
    else if (OP == 22) v = erf_approx(v);
    else v = activate(v, OP, ALPHA, BETA);
    y[i] = STORE(v);
}
