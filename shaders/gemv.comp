#version 450
// A matrix-vector product for batch z = gl_WorkGroupID.z, a whole workgroup reducing over K:
//   y[z, r] = epilogue(Σ_k A[z, r, k] · x[z, k]),  r < R
// the products whose GEMM has one output column (a 1×1 convolution on a 1×1 map: A = the weights, x = the
// image's channels) or one output row (MatMul/Gemm [1, K] @ [K, N]: A = Bᵀ through its strides). The tiled GEMM
// walks such a K one tile after another on a few workgroups; here ROWS rows share a workgroup and LANES
// invocations split each row's K, so every row costs K / LANES loads per invocation and one reduction.
// The epilogue is conv2d.comp's and gemm.comp's store_c in one: alpha · sum (+ beta · bias), the activation,
// POST_AFFINE's fma, RESIDUAL's add, one rounding on store (alpha = beta = 1 for a conv: both exact).
// The sum order is fixed: invocation lane sums k = lane + j·LANES in four interleaved partial sums, then a
// shared-memory tree over the lanes; no atomics, no subgroup operations.
#include "common.glsl"
#include "storage.glsl"
#include "activation.glsl"

layout(constant_id = 3) const uint ROWS = 4;              // rows per workgroup; LANES = workgroup size / ROWS
layout(constant_id = 4) const bool ROW_FAST = false;      // consecutive invocations take consecutive rows (A's
                                                          // row stride is 1), else consecutive k (k stride 1)
layout(constant_id = 5) const bool POST_AFFINE = false;   // scale and shift after the activation
layout(constant_id = 6) const bool RESIDUAL = false;      // add the residual tensor last

layout(std430, set = 0, binding = 0) readonly buffer BufA { STORE_T a[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufX { STORE_T x[]; };
layout(std430, set = 0, binding = 2) readonly buffer BufBias { STORE_T bias[]; };
layout(std430, set = 0, binding = 3) writeonly buffer BufOut { STORE_T y[]; };
layout(std430, set = 0, binding = 4) readonly buffer BufResidual { STORE_T residual[]; };

layout(push_constant) uniform Params {
    uint R, K;
    uint a_r, a_k;           // element strides of A along rows and k
    uint x_k;                // element stride of x along k
    uint batch_a, batch_x;   // element strides of A and x per batch (0 where shared)
    uint has_bias;
    uint bias_r;             // element stride of the bias along rows (0: one value broadcast)
    float alpha, beta;
    uint act;                // ACTIVATION_IDS
    float act_alpha, act_beta;
    float post_scale, post_shift;  // read only when POST_AFFINE
} p;

const uint THREADS = gl_WorkGroupSize.x;
const uint LANES = THREADS / ROWS;
shared float partial[THREADS];

void main() {
    uint t = gl_LocalInvocationID.x;
    uint row_in_group = ROW_FAST ? t % ROWS : t / LANES;
    uint lane = ROW_FAST ? t / ROWS : t % LANES;
    uint batch = gl_WorkGroupID.z;
    uint r = gl_WorkGroupID.x * ROWS + row_in_group;

    // four independent partial sums keep four loads in flight per invocation
    float s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    if (r < p.R) {
        uint row_base = batch * p.batch_a + r * p.a_r;
        uint x_base = batch * p.batch_x;
        uint k = lane;
        for (; k + 3 * LANES < p.K; k += 4 * LANES) {
            s0 += float(a[row_base + k * p.a_k]) * float(x[x_base + k * p.x_k]);
            s1 += float(a[row_base + (k + LANES) * p.a_k]) * float(x[x_base + (k + LANES) * p.x_k]);
            s2 += float(a[row_base + (k + 2 * LANES) * p.a_k]) * float(x[x_base + (k + 2 * LANES) * p.x_k]);
            s3 += float(a[row_base + (k + 3 * LANES) * p.a_k]) * float(x[x_base + (k + 3 * LANES) * p.x_k]);
        }
        for (; k < p.K; k += LANES) s0 += float(a[row_base + k * p.a_k]) * float(x[x_base + k * p.x_k]);
    }
    partial[t] = (s0 + s1) + (s2 + s3);

    // tree over the lanes of each row: lane i takes lane i + half's sum (same order on every device)
    uint lane_step = ROW_FAST ? ROWS : 1;
    [[unroll]] for (uint half_lanes = LANES / 2; half_lanes > 0; half_lanes /= 2) {
        barrier();
        if (lane < half_lanes) partial[t] += partial[t + half_lanes * lane_step];
    }
    if (lane != 0 || r >= p.R) return;

    float v = p.alpha * partial[t];
    if (p.has_bias != 0) v += p.beta * float(bias[r * p.bias_r]);
    v = activate(v, int(p.act), p.act_alpha, p.act_beta);
    if (POST_AFFINE) v = post_affine(v, p.post_scale, p.post_shift);
    uint at = batch * p.R + r;
    if (RESIDUAL) v += float(residual[at]);
    y[at] = STORE(v);
}
