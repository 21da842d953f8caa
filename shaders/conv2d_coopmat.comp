#version 450
// ONNX Conv (NCHW) as an implicit GEMM on cooperative matrices (VK_KHR_cooperative_matrix): the same problem,
// push constants and epilogue as conv2d.comp, so vk/kernels/conv.py runs either one per device:
//   out[img, g·Cog + m, n] = act(bias[g·Cog + m] + Σ_k W[g·Cog + m, k] · im2col[k, n]) (· post_scale + post_shift)
// with M = Cout/group, N = Hout·Wout, K = (Cin/group)·KH·KW, one GEMM per (image, group) = gl_WorkGroupID.z.
//
// A workgroup of SG_M × SG_N subgroups owns a BM × BN output tile (BM = SG_M·FM·TM, BN = SG_N·FN·TN); each
// subgroup an FM × FN grid of TM × TN accumulators (fp32). Per step of BK = KSTEPS·TK along K the workgroup
// fetches the BM × BK slice of the weights and the BK × BN slice of im2col (built on the fly, zero in the
// padding and past every edge of M, N and K), converts them to fp16 into shared memory, and each subgroup
// multiplies its rows of A by its columns of B with coopMatMulAdd. The accumulators leave through shared
// memory, one TM × TN matrix per subgroup at a time, so that each element gets the fp32 epilogue (bias,
// activation, post-affine) and one rounding on store (STORE), bounds-checked, exactly as in conv2d.comp.
//
// TM × TN × TK must be a shape the device lists (vk/devices.py coopmat_shapes; the host picks it, 16×16×16 on
// NVIDIA). The workgroup must hold exactly SG_M·SG_N subgroups (the host sizes it from the device's subgroup
// size); where a driver runs it with another subgroup size the kernel writes NaN rather than a wrong answer.
// Shared memory rows are padded by 8 halves: offsets and strides stay multiples of 16 bytes, as coopMatLoad
// asks, and consecutive rows start in other banks.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#include "common.glsl"
#include "storage.glsl"
#include "activation.glsl"

layout(constant_id = 3) const uint TM = 16;      // the cooperative-matrix shape: A is TM × TK, B TK × TN
layout(constant_id = 4) const uint TN = 16;
layout(constant_id = 5) const uint TK = 16;
layout(constant_id = 6) const uint SG_M = 1;     // subgroups along M and N
layout(constant_id = 7) const uint SG_N = 4;
layout(constant_id = 8) const bool POINTWISE = false;
layout(constant_id = 9) const uint KH = 3;
layout(constant_id = 10) const uint KW = 3;
layout(constant_id = 11) const bool POST_AFFINE = false;  // scale and shift after the activation
layout(constant_id = 12) const uint FM = 1;      // accumulators per subgroup along M and N
layout(constant_id = 13) const uint FN = 2;
layout(constant_id = 14) const uint KSTEPS = 2;  // TK-deep steps per shared-memory tile
layout(constant_id = 15) const bool RESIDUAL = false;  // add the residual tensor last (passes.fuse_residual)

const uint SUBGROUPS = SG_M * SG_N;
const uint THREADS = gl_WorkGroupSize.x;
const uint BM = SG_M * FM * TM;
const uint BN = SG_N * FN * TN;
const uint BK = KSTEPS * TK;
const uint A_STRIDE = BK + 8;  // halves per row of the shared A tile (BM rows, k fastest)
const uint B_STRIDE = BN + 8;  // halves per row of the shared B tile (BK rows, n fastest)
const uint C_SIZE = TM * TN;   // one accumulator's staging per subgroup
// With THREADS a multiple of BN a thread fetches the same im2col column in every slot and step: its column
// state (a division by the output width) is computed once.
const bool ONE_COLUMN = THREADS % BN == 0;

layout(std430, set = 0, binding = 0) readonly buffer BufX { STORE_T x[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufW { STORE_T w[]; };
layout(std430, set = 0, binding = 2) readonly buffer BufBias { STORE_T bias[]; };
layout(std430, set = 0, binding = 3) writeonly buffer BufOut { STORE_T y[]; };
layout(std430, set = 0, binding = 4) readonly buffer BufResidual { STORE_T residual[]; };

layout(push_constant) uniform Params {
    uint group;
    uint cin_g, cout_g;  // channels per group
    uint H, W;           // input spatial size
    uint Hout, Wout;
    uint stride_h, stride_w;
    uint dil_h, dil_w;
    uint pad_top, pad_left;
    uint has_bias;
    uint act;
    float act_alpha, act_beta;
    float post_scale, post_shift;  // read only when POST_AFFINE
} p;

shared float16_t tile_a[BM * A_STRIDE];
shared float16_t tile_b[BK * B_STRIDE];
shared float stage_c[SUBGROUPS * C_SIZE];

uint base_x, base_w, base_y, first_channel;

// (top row, left column) of output pixel n's receptive field in the unpadded input, or its address if POINTWISE
uvec2 b_column(uint n) {
    if (POINTWISE) return uvec2(base_x + n, 0);
    uint oh = n / p.Wout, ow = n - oh * p.Wout;
    return uvec2(oh * p.stride_h - p.pad_top, ow * p.stride_w - p.pad_left);
}

// im2col[k][n] for k < K, n < N; col = b_column(n)
float load_b(uint k, uvec2 col) {
    if (POINTWISE) return float(x[col.x + k * (p.H * p.W)]);
    uint ci = k / (KH * KW), tap = k % (KH * KW);
    // unsigned wrap-around makes rows/columns in the top/left padding fail the < test too
    uint ih = col.x + (tap / KW) * p.dil_h, iw = col.y + (tap % KW) * p.dil_w;
    if (ih >= p.H || iw >= p.W) return 0.0;
    return float(x[base_x + (ci * p.H + ih) * p.W + iw]);
}

void store_c(uint m, uint n, float acc) {
    if (p.has_bias != 0) acc += float(bias[first_channel + m]);
    float v = activate(acc, int(p.act), p.act_alpha, p.act_beta);
    if (POST_AFFINE) v = post_affine(v, p.post_scale, p.post_shift);
    uint at = base_y + m * (p.Hout * p.Wout) + n;
    if (RESIDUAL) v += float(residual[at]);
    y[at] = STORE(v);
}

void main() {
    uint tid = gl_LocalInvocationIndex;
    uint image = gl_WorkGroupID.z / p.group, g = gl_WorkGroupID.z % p.group;
    uint cin = p.cin_g * p.group, cout = p.cout_g * p.group;
    first_channel = g * p.cout_g;
    base_x = (image * cin + g * p.cin_g) * (p.H * p.W);
    base_w = first_channel * (p.cin_g * KH * KW);
    base_y = (image * cout + first_channel) * (p.Hout * p.Wout);
    uint M = p.cout_g, N = p.Hout * p.Wout, K = p.cin_g * KH * KW;
    uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;

    if (gl_NumSubgroups != SUBGROUPS) {
        // not the layout the tile needs (the driver chose another subgroup size): fail loudly (uniform return)
        for (uint e = tid; e < BM * BN; e += THREADS) {
            uint m = m0 + e / BN, n = n0 + e % BN;
            if (m < M && n < N) y[base_y + m * N + n] = STORE(uintBitsToFloat(0x7fc00000u));
        }
        return;
    }
    uint sg = gl_SubgroupID;
    uint wm = (sg / SG_N) * (FM * TM), wn = (sg % SG_N) * (FN * TN);  // the subgroup's corner in the tile

    coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> acc[FM * FN];
    [[unroll]] for (uint i = 0; i < FM * FN; ++i) {
        acc[i] = coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0.0);
    }
    uvec2 my_column = b_column(n0 + tid % BN);

    for (uint k0 = 0; k0 < K; k0 += BK) {
        // the BM × BK slice of the weights (row-major (Cout/group, K): k fastest, coalesced)
        for (uint e = tid; e < BM * BK; e += THREADS) {
            uint r = e / BK, c = e % BK;
            uint m = m0 + r, k = k0 + c;
            float v = (m < M && k < K) ? float(w[base_w + m * K + k]) : 0.0;
            tile_a[r * A_STRIDE + c] = float16_t(v);
        }
        // the BK × BN slice of im2col (n fastest: consecutive output pixels, coalesced)
        for (uint e = tid; e < BK * BN; e += THREADS) {
            uint r = e / BN, c = e % BN;
            uint k = k0 + r, n = n0 + c;
            float v = 0.0;
            if (k < K && n < N) v = load_b(k, ONE_COLUMN ? my_column : b_column(n));
            tile_b[r * B_STRIDE + c] = float16_t(v);
        }
        barrier();
        [[unroll]] for (uint kk = 0; kk < BK; kk += TK) {
            coopmat<float16_t, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> a[FM];
            [[unroll]] for (uint fm = 0; fm < FM; ++fm) {
                coopMatLoad(a[fm], tile_a, (wm + fm * TM) * A_STRIDE + kk, A_STRIDE,
                            gl_CooperativeMatrixLayoutRowMajor);
            }
            [[unroll]] for (uint fn = 0; fn < FN; ++fn) {
                coopmat<float16_t, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> b;
                coopMatLoad(b, tile_b, kk * B_STRIDE + wn + fn * TN, B_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
                [[unroll]] for (uint fm = 0; fm < FM; ++fm) {
                    acc[fm * FN + fn] = coopMatMulAdd(a[fm], b, acc[fm * FN + fn]);
                }
            }
        }
        barrier();  // every subgroup's reads of this step's tiles before the next step overwrites them
    }

    // Epilogue: each accumulator through the subgroup's staging matrix, then per element (row-major TM × TN).
    uint stage = sg * C_SIZE;
    [[unroll]] for (uint i = 0; i < FM * FN; ++i) {
        uint fm = i / FN, fn = i % FN;
        coopMatStore(acc[i], stage_c, stage, TN, gl_CooperativeMatrixLayoutRowMajor);
        subgroupMemoryBarrierShared();
        subgroupBarrier();
        for (uint e = gl_SubgroupInvocationID; e < C_SIZE; e += gl_SubgroupSize) {
            uint m = m0 + wm + fm * TM + e / TN, n = n0 + wn + fn * TN + e % TN;
            if (m < M && n < N) store_c(m, n, stage_c[stage + e]);
        }
        subgroupMemoryBarrierShared();
        subgroupBarrier();  // every lane's reads before the next accumulator overwrites the staging
    }
}
