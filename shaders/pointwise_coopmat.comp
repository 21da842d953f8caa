#version 450
// ONNX Conv 1×1 (stride 1, no padding, NCHW) in fp16 storage on cooperative matrices, every fragment loaded
// straight from memory:
//   out[img, g·Cog + m, n] = act(bias[g·Cog + m] + Σ_k W[g·Cog + m, k] · x[img, g·Cig + k, n]) (· scale + shift)
//                            (+ residual)
// with M = Cout/group, N = H·W, K = Cin/group, one GEMM per (image, group) = gl_WorkGroupID.z. The weights are
// A (M × K, row-major), the input B (K × N, row-major: a 1×1 convolution of NCHW needs no im2col).
//
// conv2d_coopmat.comp stages both operands in shared memory, converting as it goes, behind a barrier per step;
// that takes 150-255 registers and one workgroup per multiprocessor on NVIDIA, which then waits on memory. Here
// no shared tile and no workgroup barrier: each subgroup owns an RM × RN block (FM × FN accumulators of TM × TN)
// and walks K by TK, the next step's fragments in flight while this step's multiply. The caches serve the
// fragments that neighbouring subgroups share; the latency hides behind the many subgroups the few registers
// leave room for.
//
// What the host guarantees (vk/kernels/pointwise_coopmat.py): K a multiple of TK and of 8 (the weights' rows
// start on 16-byte boundaries, as coopMatLoad asks; the arenas align every tensor to 16 bytes), M ≥ RM and
// N ≥ RN. Where N is not a multiple of 8 the input's rows do not start on such boundaries: each subgroup then
// copies its TK × RN block of the input through shared memory of its own (a uniform branch on N, so that the
// host need not split a shape class by N's remainder). A block that would cross or start past M's or N's end is moved back to end there: it
// overlaps its neighbour, and both write the same sums (the same products in the same order). A workgroup holds exactly
// SG_M·SG_N subgroups; where a driver runs it with another subgroup size the kernel writes NaN rather than a wrong
// answer. The epilogue is conv2d_coopmat.comp's: each accumulator through shared memory, then per element the
// fp32 bias, activation, post-affine and residual, one rounding on store.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#include "common.glsl"
#include "storage_fp16.glsl"
#include "activation.glsl"

layout(constant_id = 3) const uint TM = 16;  // the cooperative-matrix shape: A is TM × TK, B TK × TN
layout(constant_id = 4) const uint TN = 16;
layout(constant_id = 5) const uint TK = 16;
layout(constant_id = 6) const uint SG_M = 2;  // subgroups along M and N
layout(constant_id = 7) const uint SG_N = 2;
layout(constant_id = 8) const bool TWO_M = true;  // two accumulators along M per subgroup (FM = 2), else one
layout(constant_id = 9) const bool TWO_N = true;  // ... along N
layout(constant_id = 10) const bool POST_AFFINE = false;  // scale and shift after the activation
layout(constant_id = 11) const bool RESIDUAL = false;  // add the residual tensor last (passes.fuse_residual)

const uint SUBGROUPS = SG_M * SG_N;
const uint RM = (TWO_M ? 2 : 1) * TM;  // a subgroup's block
const uint RN = (TWO_N ? 2 : 1) * TN;
const uint C_SIZE = TM * TN;  // one accumulator's staging per subgroup
const uint B_STRIDE = RN + 8;  // halves per row of a subgroup's staged input block (rows on 16-byte boundaries)
const uint B_SIZE = TK * B_STRIDE;

layout(std430, set = 0, binding = 0) readonly buffer BufX { STORE_T x[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufW { STORE_T w[]; };
layout(std430, set = 0, binding = 2) readonly buffer BufBias { STORE_T bias[]; };
layout(std430, set = 0, binding = 3) writeonly buffer BufOut { STORE_T y[]; };
layout(std430, set = 0, binding = 4) readonly buffer BufResidual { STORE_T residual[]; };

layout(push_constant) uniform Params {  // conv2d.comp's, so the prepared node serves every kernel
    uint group;
    uint cin_g, cout_g;  // channels per group
    uint H, W;           // input spatial size (the output's: a 1×1 convolution of stride 1)
    uint Hout, Wout;
    uint stride_h, stride_w;
    uint dil_h, dil_w;
    uint pad_top, pad_left;
    uint has_bias;
    uint act;
    float act_alpha, act_beta;
    float post_scale, post_shift;  // read only when POST_AFFINE
} p;

shared float stage_c[SUBGROUPS * C_SIZE];
shared float16_t stage_b[SUBGROUPS * B_SIZE];  // only where N is not a multiple of 8

#define FRAG_A coopmat<float16_t, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA>
#define FRAG_B coopmat<float16_t, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB>
#define ACC coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>

uint base_y, first_channel, N;
bool aligned;  // N a multiple of 8: the input's fragments load straight from memory

// The input block of rows at x[at + r·N] (r < TK), columns RN wide, as two fragments TN wide.
void load_b(uint at, out FRAG_B b0, out FRAG_B b1) {
    if (aligned) {
        coopMatLoad(b0, x, at, N, gl_CooperativeMatrixLayoutRowMajor);
        if (TWO_N) coopMatLoad(b1, x, at + TN, N, gl_CooperativeMatrixLayoutRowMajor);
        return;
    }
    uint sb = gl_SubgroupID * B_SIZE;
    subgroupBarrier();  // every lane has loaded the last block's fragments before it is overwritten
    for (uint e = gl_SubgroupInvocationID; e < TK * RN; e += gl_SubgroupSize) {
        uint r = e / RN, c = e % RN;
        stage_b[sb + r * B_STRIDE + c] = x[at + r * N + c];
    }
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    coopMatLoad(b0, stage_b, sb, B_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
    if (TWO_N) coopMatLoad(b1, stage_b, sb + TN, B_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
}

void store_c(uint m, uint n, float acc) {
    if (p.has_bias != 0) acc += float(bias[first_channel + m]);
    float v = activate(acc, int(p.act), p.act_alpha, p.act_beta);
    if (POST_AFFINE) v = post_affine(v, p.post_scale, p.post_shift);
    uint at = base_y + m * N + n;
    if (RESIDUAL) v += float(residual[at]);
    y[at] = STORE(v);
}

// One accumulator, whose top left is output (m, n), through this subgroup's staging matrix to the output.
void drain(ACC acc, uint stage, uint m, uint n) {
    coopMatStore(acc, stage_c, stage, TN, gl_CooperativeMatrixLayoutRowMajor);
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    for (uint e = gl_SubgroupInvocationID; e < C_SIZE; e += gl_SubgroupSize) {
        store_c(m + e / TN, n + e % TN, stage_c[stage + e]);
    }
    subgroupMemoryBarrierShared();
    subgroupBarrier();  // every lane's reads before the next accumulator overwrites the staging
}

void main() {
    uint image = gl_WorkGroupID.z / p.group, g = gl_WorkGroupID.z % p.group;
    uint cin = p.cin_g * p.group, cout = p.cout_g * p.group;
    uint M = p.cout_g, K = p.cin_g;
    N = p.Hout * p.Wout;
    aligned = N % 8 == 0;
    first_channel = g * p.cout_g;
    uint base_x = (image * cin + g * p.cin_g) * N;
    uint base_w = first_channel * K;
    base_y = (image * cout + first_channel) * N;

    if (gl_NumSubgroups != SUBGROUPS) {
        // not the layout the tile needs (the driver chose another subgroup size): fail loudly
        uint bm = SG_M * RM, bn = SG_N * RN;
        for (uint e = gl_LocalInvocationIndex; e < bm * bn; e += gl_WorkGroupSize.x) {
            uint m = gl_WorkGroupID.y * bm + e / bn, n = gl_WorkGroupID.x * bn + e % bn;
            if (m < M && n < N) y[base_y + m * N + n] = STORE(uintBitsToFloat(0x7fc00000u));
        }
        return;
    }
    uint sg = gl_SubgroupID;
    uint m0 = gl_WorkGroupID.y * (SG_M * RM) + (sg / SG_N) * RM;
    uint n0 = gl_WorkGroupID.x * (SG_N * RN) + (sg % SG_N) * RN;
    // Every subgroup computes a whole block: one past an end repeats the last. (No early return: after one on
    // lavapipe, the other subgroups' later accumulators were lost.)
    m0 = min(m0, M - RM);
    n0 = min(n0, N - RN);

    ACC c00 = ACC(0.0), c01 = ACC(0.0), c10 = ACC(0.0), c11 = ACC(0.0);
    uint a_at = base_w + m0 * K, b_at = base_x + n0;
    FRAG_A a0, a1;
    FRAG_B b0, b1;
    coopMatLoad(a0, w, a_at, K, gl_CooperativeMatrixLayoutRowMajor);
    if (TWO_M) coopMatLoad(a1, w, a_at + TM * K, K, gl_CooperativeMatrixLayoutRowMajor);
    load_b(b_at, b0, b1);
    for (uint k = 0; k < K; k += TK) {
        FRAG_A ta0 = a0, ta1 = a1;
        FRAG_B tb0 = b0, tb1 = b1;
        if (k + TK < K) {  // the next step's fragments, in flight while these multiply
            uint ka = a_at + k + TK, kb = b_at + (k + TK) * N;
            coopMatLoad(a0, w, ka, K, gl_CooperativeMatrixLayoutRowMajor);
            if (TWO_M) coopMatLoad(a1, w, ka + TM * K, K, gl_CooperativeMatrixLayoutRowMajor);
            load_b(kb, b0, b1);
        }
        c00 = coopMatMulAdd(ta0, tb0, c00);
        if (TWO_N) c01 = coopMatMulAdd(ta0, tb1, c01);
        if (TWO_M) c10 = coopMatMulAdd(ta1, tb0, c10);
        if (TWO_M && TWO_N) c11 = coopMatMulAdd(ta1, tb1, c11);
    }

    uint stage = sg * C_SIZE;
    drain(c00, stage, m0, n0);
    if (TWO_N) drain(c01, stage, m0, n0 + TN);
    if (TWO_M) drain(c10, stage, m0 + TM, n0);
    if (TWO_M && TWO_N) drain(c11, stage, m0 + TM, n0 + TN);
}
