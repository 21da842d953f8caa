#version 450
// ONNX Conv (NCHW) as an implicit GEMM on cooperative matrices (VK_KHR_cooperative_matrix): the same problem,
// push constants and epilogue as conv2d.comp, so vk/kernels/conv.py runs either one per device:
//   out[img, g·Cog + m, n] = act(bias[g·Cog + m] + Σ_k W[g·Cog + m, k] · im2col[k, n]) (· post_scale + post_shift)
// with M = Cout/group, N = Hout·Wout, K = (Cin/group)·KH·KW, one GEMM per (image, group) = gl_WorkGroupID.z.
//
// A workgroup of SG_M × SG_N subgroups owns a BM × BN output tile (BM = SG_M·FM·TM, BN = SG_N·FN·TN); each
// subgroup an FM × FN grid of TM × TN accumulators (fp32). The K dimension goes by steps of BK = KSTEPS·TK:
// the BM × BK slice of the weights and the BK × BN slice of im2col (built on the fly, zero in the padding and
// past every edge of M, N and K) are converted to fp16 into one of two shared buffers while the subgroups
// multiply the other's with coopMatMulAdd. The next step's global loads are issued into registers before this
// step's multiplications, so their latency hides behind the matrix units; one barrier per step.
// The accumulators leave through shared memory, one TM × TN matrix per subgroup at a time, so that each element
// gets the fp32 epilogue (bias, activation, post-affine, residual) and one rounding on store (STORE),
// bounds-checked, exactly as in conv2d.comp.
//
// im2col: where the workgroup's invocations are a multiple of BN (NVIDIA's tiles), an invocation fetches one
// column of B and every RP-th row of it, so it walks k by a fixed stride and keeps (channel, tap row, tap column)
// by additions: no division per element. Otherwise each element is located by division.
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
#include "split_half.glsl"

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
// fp32 inputs as hi + lo pairs of fp16, three products per step (split_half.glsl)
layout(constant_id = 16) const bool SPLIT = false;

const uint SUBGROUPS = SG_M * SG_N;
const uint THREADS = gl_WorkGroupSize.x;
const uint BM = SG_M * FM * TM;
const uint BN = SG_N * FN * TN;
const uint BK = KSTEPS * TK;
const uint A_STRIDE = BK + 8;  // halves per row of a shared A tile (BM rows, k fastest)
const uint B_STRIDE = BN + 8;  // halves per row of a shared B tile (BK rows, n fastest)
const uint A_SIZE = BM * A_STRIDE;
const uint B_SIZE = BK * B_STRIDE;
const uint PARTS = SPLIT ? 2 : 1;  // fp16 tiles per operand per buffer: hi (and lo)
const uint C_SIZE = TM * TN;   // one accumulator's staging per subgroup
const uint A_LOADS = (BM * BK + THREADS - 1) / THREADS;  // elements per invocation per step
const uint B_LOADS = (BK * BN + THREADS - 1) / THREADS;
// One im2col column per invocation, every RP-th row: the walk by additions (see above).
const uint RP = (THREADS + BN - 1) / BN;  // rows per pass (never 0: a constant divides by it)
const bool ONE_COLUMN = THREADS % BN == 0 && BK % RP == 0;

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

shared float16_t tile_a[2 * PARTS * A_SIZE];  // [buffer][part][row][k]
shared float16_t tile_b[2 * PARTS * B_SIZE];  // [buffer][part][k][column]
shared float stage_c[SUBGROUPS * C_SIZE];

uint base_x, base_w, base_y, first_channel, M, N, K;
uint tid;

// The next step's elements, fetched ahead into registers, and where each goes in the shared tiles.
float next_a[A_LOADS];
float next_b[B_LOADS];

// ONE_COLUMN's walk: this invocation's column (its receptive field's top row and left column, or its address if
// POINTWISE), the row it fetches next and that row's (channel, tap row, tap column).
uint col_n, col_top, col_left, walk_k, walk_c, walk_kh, walk_kw;

// (top row, left column) of output pixel n's receptive field in the unpadded input (wrapping below zero)
uvec2 receptive_corner(uint n) {
    uint oh = n / p.Wout, ow = n - oh * p.Wout;
    return uvec2(oh * p.stride_h - p.pad_top, ow * p.stride_w - p.pad_left);
}

// im2col[k][n] for in-range k and n, located by division (the general path)
float im2col(uint k, uint n) {
    if (POINTWISE) return float(x[base_x + k * (p.H * p.W) + n]);
    uvec2 corner = receptive_corner(n);
    uint ci = k / (KH * KW), tap = k % (KH * KW);
    // unsigned wrap-around makes rows/columns in the top/left padding fail the < test too
    uint ih = corner.x + (tap / KW) * p.dil_h, iw = corner.y + (tap % KW) * p.dil_w;
    if (ih >= p.H || iw >= p.W) return 0.0;
    return float(x[base_x + (ci * p.H + ih) * p.W + iw]);
}

// im2col at the walk's row for this invocation's column, then the walk steps RP rows on
float walk_next() {
    float v = 0.0;
    if (walk_k < K && col_n < N) {
        if (POINTWISE) {
            v = float(x[base_x + walk_k * (p.H * p.W) + col_n]);
        } else {
            uint ih = col_top + walk_kh * p.dil_h, iw = col_left + walk_kw * p.dil_w;
            if (ih < p.H && iw < p.W) v = float(x[base_x + (walk_c * p.H + ih) * p.W + iw]);
        }
    }
    walk_k += RP;
    if (!POINTWISE) {
        walk_kw += RP;
        while (walk_kw >= KW) { walk_kw -= KW; walk_kh += 1; }
        while (walk_kh >= KH) { walk_kh -= KH; walk_c += 1; }
    }
    return v;
}

void fetch(uint k0, uint m0, uint n0) {
    [[unroll]] for (uint i = 0; i < A_LOADS; ++i) {
        uint e = tid + i * THREADS;
        uint m = m0 + e / BK, k = k0 + e % BK;
        // the weights are row-major (Cout/group, K): k fastest, coalesced
        next_a[i] = (e < BM * BK && m < M && k < K) ? float(w[base_w + m * K + k]) : 0.0;
    }
    [[unroll]] for (uint i = 0; i < B_LOADS; ++i) {
        if (ONE_COLUMN) {
            next_b[i] = walk_next();
        } else {
            uint e = tid + i * THREADS;
            uint k = k0 + e / BN, n = n0 + e % BN;
            next_b[i] = (e < BK * BN && k < K && n < N) ? im2col(k, n) : 0.0;
        }
    }
}

void put(uint slot) {
    [[unroll]] for (uint i = 0; i < A_LOADS; ++i) {
        uint e = tid + i * THREADS;
        if (e < BM * BK) {
            uint at = slot * PARTS * A_SIZE + (e / BK) * A_STRIDE + e % BK;
            if (SPLIT) {
                float16_t hi, lo;
                split_half(next_a[i], hi, lo);
                tile_a[at] = hi;
                tile_a[at + A_SIZE] = lo;
            } else {
                tile_a[at] = float16_t(next_a[i]);
            }
        }
    }
    [[unroll]] for (uint i = 0; i < B_LOADS; ++i) {
        // ONE_COLUMN: element i is row tid / BN + i·RP of column tid % BN, the same place as e / BN, e % BN
        uint e = tid + i * THREADS;
        if (e < BK * BN) {
            uint at = slot * PARTS * B_SIZE + (e / BN) * B_STRIDE + e % BN;
            if (SPLIT) {
                float16_t hi, lo;
                split_half(next_b[i], hi, lo);
                tile_b[at] = hi;
                tile_b[at + B_SIZE] = lo;
            } else {
                tile_b[at] = float16_t(next_b[i]);
            }
        }
    }
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
    tid = gl_LocalInvocationIndex;
    uint image = gl_WorkGroupID.z / p.group, g = gl_WorkGroupID.z % p.group;
    uint cin = p.cin_g * p.group, cout = p.cout_g * p.group;
    first_channel = g * p.cout_g;
    base_x = (image * cin + g * p.cin_g) * (p.H * p.W);
    base_w = first_channel * (p.cin_g * KH * KW);
    base_y = (image * cout + first_channel) * (p.Hout * p.Wout);
    M = p.cout_g;
    N = p.Hout * p.Wout;
    K = p.cin_g * KH * KW;
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

    // ONE_COLUMN's walk starts at row tid / BN of column tid % BN (worked out either way: cheap, and uniform)
    col_n = n0 + tid % BN;
    uvec2 corner = receptive_corner(col_n);
    col_top = corner.x;
    col_left = corner.y;
    walk_k = tid / BN;
    walk_c = walk_k / (KH * KW);
    walk_kh = (walk_k % (KH * KW)) / KW;
    walk_kw = walk_k % KW;

    coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> acc[FM * FN];
    coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> acc_lo[FM * FN];  // SPLIT's lo products
    [[unroll]] for (uint i = 0; i < FM * FN; ++i) {
        acc[i] = coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0.0);
        if (SPLIT) acc_lo[i] = coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0.0);
    }

    uint steps = (K + BK - 1) / BK;
    fetch(0, m0, n0);
    put(0);
    barrier();
    for (uint s = 0; s < steps; ++s) {
        uint slot = s & 1;
        bool more = s + 1 < steps;
        if (more) fetch((s + 1) * BK, m0, n0);  // in flight while the matrices multiply
        uint a_at = slot * PARTS * A_SIZE, b_at = slot * PARTS * B_SIZE;
        [[unroll]] for (uint kk = 0; kk < BK; kk += TK) {
            coopmat<float16_t, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> a[FM];
            coopmat<float16_t, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> a_lo[FM];
            [[unroll]] for (uint fm = 0; fm < FM; ++fm) {
                uint at = a_at + (wm + fm * TM) * A_STRIDE + kk;
                coopMatLoad(a[fm], tile_a, at, A_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
                if (SPLIT) coopMatLoad(a_lo[fm], tile_a, at + A_SIZE, A_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
            }
            [[unroll]] for (uint fn = 0; fn < FN; ++fn) {
                uint at = b_at + kk * B_STRIDE + wn + fn * TN;
                coopmat<float16_t, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> b;
                coopMatLoad(b, tile_b, at, B_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
                if (SPLIT) {
                    coopmat<float16_t, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> b_lo;
                    coopMatLoad(b_lo, tile_b, at + B_SIZE, B_STRIDE, gl_CooperativeMatrixLayoutRowMajor);
                    [[unroll]] for (uint fm = 0; fm < FM; ++fm) {
                        acc_lo[fm * FN + fn] = coopMatMulAdd(a_lo[fm], b, acc_lo[fm * FN + fn]);
                        acc_lo[fm * FN + fn] = coopMatMulAdd(a[fm], b_lo, acc_lo[fm * FN + fn]);
                    }
                }
                [[unroll]] for (uint fm = 0; fm < FM; ++fm) {
                    acc[fm * FN + fn] = coopMatMulAdd(a[fm], b, acc[fm * FN + fn]);
                }
            }
        }
        // The other buffer was last read in the previous step, which every subgroup finished before the
        // barrier that ended it: it can be filled now; the barrier below publishes it for the next step.
        if (more) put(slot ^ 1);
        barrier();
    }

    // Epilogue: each accumulator through the subgroup's staging matrix, then per element (row-major TM × TN).
    uint stage = sg * C_SIZE;
    [[unroll]] for (uint i = 0; i < FM * FN; ++i) {
        uint fm = i / FN, fn = i % FN;
        if (SPLIT) acc[i] = acc[i] + acc_lo[i] * (1.0 / LO_SCALE);
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
