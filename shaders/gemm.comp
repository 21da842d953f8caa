#version 450
// out[z] = act(alpha · A[z] · B[z] + beta · C) (+ R[z]) for batch z = gl_WorkGroupID.z: ONNX MatMul (batched,
// numpy broadcasting of the batch dims) and Gemm (2-D, C broadcast to (M, N), fused activation); R, of out's
// shape, is the Add that shape_fusion.fuse_residual folded in. The product is rounded to the storage type before
// R is added, as the MatMul stored it: the fused answer is the two nodes' own, bit for bit, in fp16 too (without
// that rounding one of 770 lines of ppocrv6-small's fp16 plan read differently on an H100).
// Every operand is addressed through element strides, so transposes and broadcasts need no copy: the host
// merges batch dims (≤ 4) and passes per-operand batch strides (0 on broadcast dims).
#include "common.glsl"
#include "storage.glsl"
#include "activation.glsl"

layout(constant_id = 8) const bool A_K_FAST = true;  // A row-major (not transposed)
layout(constant_id = 9) const bool B_N_FAST = true;  // B row-major (not transposed)
layout(constant_id = 10) const bool RESIDUAL = false;  // add R last

layout(std430, set = 0, binding = 0) readonly buffer BufA { STORE_T a[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufB { STORE_T b[]; };
layout(std430, set = 0, binding = 2) readonly buffer BufC { STORE_T c[]; };
layout(std430, set = 0, binding = 3) writeonly buffer BufOut { STORE_T y[]; };
layout(std430, set = 0, binding = 4) readonly buffer BufResidual { STORE_T residual[]; };

layout(push_constant) uniform Params {
    uint M, N, K;
    uint a_m, a_k;       // element strides of A along m and k
    uint b_k, b_n;
    uint c_m, c_n;       // 0 on broadcast axes of C
    uint has_c;
    float alpha, beta;
    uint act;            // ACTIVATION_IDS
    float act_alpha, act_beta;
    uint batch_rank;     // merged batch dims, outermost first
    uint batch_shape[4];
    uint batch_a[4];     // element strides of A / B per batch dim (0 where broadcast)
    uint batch_b[4];
} p;

uint base_a, base_b, base_y;

float load_a(uint batch, uint m, uint k) { return float(a[base_a + m * p.a_m + k * p.a_k]); }

uvec4 b_column(uint batch, uint n) { return uvec4(base_b + n * p.b_n, 0, 0, 0); }

float load_b(uint batch, uint k, uint n, uvec4 col) { return float(b[col.x + k * p.b_k]); }

void store_c(uint batch, uint m, uint n, float acc) {
    float v = p.alpha * acc;
    if (p.has_c != 0) v += p.beta * float(c[m * p.c_m + n * p.c_n]);
    v = activate(v, int(p.act), p.act_alpha, p.act_beta);
    uint at = base_y + m * p.N + n;
    if (RESIDUAL) v = as_stored(v) + float(residual[at]);
    y[at] = STORE(v);
}

// one element at a time (vector stores ran rec's MatMuls 13 % slower on an H100; conv2d.comp has them)
bool store_c4(uint batch, uint m, uint n, vec4 acc) { return false; }

#include "gemm_tile.glsl"

void main() {
    uint batch = gl_WorkGroupID.z;
    base_a = 0;
    base_b = 0;
    uint rest = batch;
    for (int d = int(p.batch_rank) - 1; d >= 0; --d) {
        uint coord = rest % p.batch_shape[d];
        rest /= p.batch_shape[d];
        base_a += coord * p.batch_a[d];
        base_b += coord * p.batch_b[d];
    }
    base_y = batch * p.M * p.N;
    gemm_tile(batch, p.M, p.N, p.K);
}
