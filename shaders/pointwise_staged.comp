#version 450
// ONNX Conv 1×1 (stride 1, no padding, NCHW) on cooperative matrices, both operands staged in shared memory
// sixteen bytes per load:
//   out[img, g·Cog + m, n] = act(bias[g·Cog + m] + Σ_k W[g·Cog + m, k] · x[img, g·Cig + k, n]) (· scale + shift)
//                            (+ residual)
// with M = Cout/group, N = H·W, K = Cin/group, one GEMM per (image, group) = gl_WorkGroupID.z; the weights are
// A (M × K, row-major), the input B (K × N, row-major). ONNX Gemm and MatMul with 2-D weights run here too
// (vk/kernels/matmul.py): one image of one group, H = 1, W = N, the activations bound as A, the weights as B, and
// with BIAS_COLUMNS the bias indexed by the output's column.
//
// conv2d_coopmat.comp stages the same tiles one element per load and store, converting each through fp32 (it
// serves im2col too): at a BK × BN tile of 32 × 128 that is 16 loads and 16 shared stores per invocation per step
// for B alone, which its matrix multiplies wait behind. Here every load moves 16 bytes: in fp16 storage 8 halves,
// stored to the tile as they lie (2 per invocation for that tile); in fp32 storage 4 floats, split into hi + lo
// halves in tiles of their own, three products per step (split_half.glsl, as conv2d_coopmat.comp's SPLIT).
// A workgroup of SG_M × SG_N subgroups owns a BM × BN output tile (BM = SG_M·FM·TM, BN = SG_N·FN·TN), each
// subgroup FM × FN accumulators of TM × TN (fp32); K goes by steps of BK = KSTEPS·TK through two shared buffers,
// the next step's loads in registers while this step's tiles multiply, one barrier per step. Each accumulator
// leaves through shared memory; per element the fp32 bias, activation, post-affine and residual, one rounding on
// store, bounds-checked; where N is a multiple of LOAD, each lane finishes LOAD outputs of a row and stores them
// at once (the residual read so too).
//
// What the host guarantees (vk/kernels/pointwise_staged.py): K a multiple of 8, so that a row of the weights
// starts on a 16-byte boundary and the LOAD consecutive k of a load are all in range or all out. Where N is a
// multiple of LOAD too, the input's rows are so as well; where it is not (a uniform branch on N, so that the host
// need not split a shape class by N's remainder), each load's elements of the input are gathered one by one.
// Past M's, N's and K's ends the tiles hold zeros. Shared rows are padded by 16 bytes: offsets and strides stay
// multiples of 16 bytes, as coopMatLoad asks, and consecutive rows start in other banks. A workgroup holds exactly
// SG_M·SG_N subgroups; where a driver runs it with another subgroup size the kernel writes NaN rather than a wrong
// answer.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#include "common.glsl"
#include "storage.glsl"
#include "activation.glsl"
#include "split_half.glsl"

layout(constant_id = 3) const uint TM = 16;  // the cooperative-matrix shape: A is TM × TK, B TK × TN
layout(constant_id = 4) const uint TN = 16;
layout(constant_id = 5) const uint TK = 16;
layout(constant_id = 6) const uint SG_M = 2;  // subgroups along M and N
layout(constant_id = 7) const uint SG_N = 4;
layout(constant_id = 8) const uint FM = 2;  // accumulators per subgroup along M and N
layout(constant_id = 9) const uint FN = 2;
layout(constant_id = 10) const uint KSTEPS = 2;  // TK-deep steps per shared tile
layout(constant_id = 11) const bool POST_AFFINE = false;  // scale and shift after the activation
layout(constant_id = 12) const bool RESIDUAL = false;  // add the residual tensor last (passes.fuse_residual)
layout(constant_id = 13) const bool BIAS_COLUMNS = false;  // one bias per output column n, not per row m (a GEMM's)

#ifdef FP16
const uint LOAD = 8;  // elements per 16-byte load
#define TILE_T uvec4  // what one load stores to a tile: LOAD halves
const uint PAD = 1;  // TILE_T per 16 bytes: the padding of a tile's rows
const uint PARTS = 1;
#else
const uint LOAD = 4;
#define TILE_T uvec2
const uint PAD = 2;
const uint PARTS = 2;  // hi and lo tiles
#endif
const uint SUBGROUPS = SG_M * SG_N;
const uint THREADS = gl_WorkGroupSize.x;
const uint BM = SG_M * FM * TM;
const uint BN = SG_N * FN * TN;
const uint BK = KSTEPS * TK;
const uint A_ROW = BK / LOAD + PAD;  // TILE_T per row of a shared A tile (BM rows, k fastest), padded by 16 bytes
const uint B_ROW = BN / LOAD + PAD;  // ... of a shared B tile (BK rows, n fastest)
const uint A_SIZE = BM * A_ROW;
const uint B_SIZE = BK * B_ROW;
const uint A_VECS = BM * BK / LOAD;  // loads per tile
const uint B_VECS = BK * BN / LOAD;
const uint A_LOADS = (A_VECS + THREADS - 1) / THREADS;  // per invocation per step
const uint B_LOADS = (B_VECS + THREADS - 1) / THREADS;
const uint C_SIZE = TM * TN;  // one accumulator's staging per subgroup

// every tensor twice: as 16-byte vectors for the tiles, as its elements for the rest
layout(std430, set = 0, binding = 0) readonly buffer BufX4 { uvec4 x4[]; };
layout(std430, set = 0, binding = 0) readonly buffer BufX { STORE_T x[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufW4 { uvec4 w4[]; };
layout(std430, set = 0, binding = 2) readonly buffer BufBias { STORE_T bias[]; };
layout(std430, set = 0, binding = 3) writeonly buffer BufOut4 { uvec4 y4[]; };
layout(std430, set = 0, binding = 3) writeonly buffer BufOut { STORE_T y[]; };
layout(std430, set = 0, binding = 4) readonly buffer BufResidual4 { uvec4 residual4[]; };
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

shared TILE_T tile_a[2 * PARTS * A_SIZE];  // [buffer][part][row][k / LOAD]
shared TILE_T tile_b[2 * PARTS * B_SIZE];  // [buffer][part][k][column / LOAD]
shared float stage_c[SUBGROUPS * C_SIZE];

uint base_x, base_w, base_y, first_channel, M, N, K, tid;
bool aligned;  // N a multiple of LOAD: the input's rows start on 16-byte boundaries

uvec4 next_a[A_LOADS];  // the next step's vectors, fetched ahead into registers
uvec4 next_b[B_LOADS];

// A load's elements of the input's row k from column n on, where the row does not start on a 16-byte boundary.
uvec4 gather_b(uint k, uint n) {
    uint at = base_x + k * N + n;
    STORE_T e[LOAD];
    [[unroll]] for (uint j = 0; j < LOAD; ++j) e[j] = n + j < N ? x[at + j] : STORE_T(0.0);
#ifdef FP16
    return uvec4(packFloat2x16(f16vec2(e[0], e[1])), packFloat2x16(f16vec2(e[2], e[3])),
                 packFloat2x16(f16vec2(e[4], e[5])), packFloat2x16(f16vec2(e[6], e[7])));
#else
    return floatBitsToUint(vec4(e[0], e[1], e[2], e[3]));
#endif
}

void fetch(uint k0, uint m0, uint n0) {
    [[unroll]] for (uint i = 0; i < A_LOADS; ++i) {
        uint e = tid + i * THREADS;
        uint m = m0 + e / (BK / LOAD), k = k0 + (e % (BK / LOAD)) * LOAD;
        next_a[i] = e < A_VECS && m < M && k < K ? w4[(base_w + m * K + k) / LOAD] : uvec4(0);
    }
    [[unroll]] for (uint i = 0; i < B_LOADS; ++i) {
        uint e = tid + i * THREADS;
        uint k = k0 + e / (BN / LOAD), n = n0 + (e % (BN / LOAD)) * LOAD;
        bool inside = e < B_VECS && k < K && n < N;
        if (aligned) {
            next_b[i] = inside ? x4[(base_x + k * N + n) / LOAD] : uvec4(0);
        } else {
            next_b[i] = inside ? gather_b(k, n) : uvec4(0);
        }
    }
}

// A load's elements into tile element `at` (and, in fp32 storage, their lo halves into the lo tile's)
void place_a(uint at, uvec4 loaded) {
#ifdef FP16
    tile_a[at] = loaded;
#else
    split_half4(loaded, tile_a[at], tile_a[at + A_SIZE]);
#endif
}

void place_b(uint at, uvec4 loaded) {
#ifdef FP16
    tile_b[at] = loaded;
#else
    split_half4(loaded, tile_b[at], tile_b[at + B_SIZE]);
#endif
}

void put(uint slot) {
    [[unroll]] for (uint i = 0; i < A_LOADS; ++i) {
        uint e = tid + i * THREADS;
        if (e < A_VECS) place_a(slot * PARTS * A_SIZE + (e / (BK / LOAD)) * A_ROW + e % (BK / LOAD), next_a[i]);
    }
    [[unroll]] for (uint i = 0; i < B_LOADS; ++i) {
        uint e = tid + i * THREADS;
        if (e < B_VECS) place_b(slot * PARTS * B_SIZE + (e / (BN / LOAD)) * B_ROW + e % (BN / LOAD), next_b[i]);
    }
}

// The epilogue of one sum of row m, before the residual: the fp32 bias, activation and post-affine.
float finish(float acc, float b) {
    float v = activate(p.has_bias != 0 ? acc + b : acc, int(p.act), p.act_alpha, p.act_beta);
    return POST_AFFINE ? post_affine(v, p.post_scale, p.post_shift) : v;
}

float bias_of(uint m, uint n) {
    return p.has_bias != 0 ? float(bias[BIAS_COLUMNS ? n : first_channel + m]) : 0.0;
}

// Output (m, n) from its sum, one half per store (N not a multiple of 8)
void store_one(uint m, uint n, float acc) {
    uint at = base_y + m * N + n;
    float v = finish(acc, bias_of(m, n));
    if (RESIDUAL) v += float(residual[at]);
    y[at] = STORE(v);
}

// Outputs (m, n .. n + LOAD - 1) from the sums at stage_c[from ..], one 16-byte store (N a multiple of LOAD: the
// LOAD outputs are in range together, and their address is a multiple of LOAD elements)
void store_load(uint m, uint n, uint from) {
    uint at = (base_y + m * N + n) / LOAD;
    uvec4 r = RESIDUAL ? residual4[at] : uvec4(0);
    uvec4 packed;
#ifdef FP16
    [[unroll]] for (uint j = 0; j < 4; ++j) {
        vec2 v = vec2(finish(stage_c[from + 2 * j], bias_of(m, n + 2 * j)),
                      finish(stage_c[from + 2 * j + 1], bias_of(m, n + 2 * j + 1)));
        if (RESIDUAL) v += vec2(unpackFloat2x16(r[j]));
        packed[j] = packFloat2x16(f16vec2(v));
    }
#else
    vec4 v = vec4(finish(stage_c[from], bias_of(m, n)), finish(stage_c[from + 1], bias_of(m, n + 1)),
                  finish(stage_c[from + 2], bias_of(m, n + 2)), finish(stage_c[from + 3], bias_of(m, n + 3)));
    if (RESIDUAL) v += uintBitsToFloat(r);
    packed = floatBitsToUint(v);
#endif
    y4[at] = packed;
}

#define FRAG_A coopmat<float16_t, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA>
#define FRAG_B coopmat<float16_t, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB>
#define ACC coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>

void main() {
    tid = gl_LocalInvocationIndex;
    uint image = gl_WorkGroupID.z / p.group, g = gl_WorkGroupID.z % p.group;
    uint cin = p.cin_g * p.group, cout = p.cout_g * p.group;
    M = p.cout_g;
    K = p.cin_g;
    N = p.Hout * p.Wout;
    aligned = N % LOAD == 0;
    first_channel = g * p.cout_g;
    base_x = (image * cin + g * p.cin_g) * N;
    base_w = first_channel * K;
    base_y = (image * cout + first_channel) * N;
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

    ACC acc[FM * FN];
    ACC acc_lo[FM * FN];  // fp32 storage: the lo products
    [[unroll]] for (uint i = 0; i < FM * FN; ++i) {
        acc[i] = ACC(0.0);
        if (PARTS == 2) acc_lo[i] = ACC(0.0);
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
            FRAG_A a[FM], a_lo[FM];
            [[unroll]] for (uint fm = 0; fm < FM; ++fm) {
                uint at = a_at + (wm + fm * TM) * A_ROW + kk / LOAD;
                coopMatLoad(a[fm], tile_a, at, A_ROW, gl_CooperativeMatrixLayoutRowMajor);
                if (PARTS == 2) coopMatLoad(a_lo[fm], tile_a, at + A_SIZE, A_ROW, gl_CooperativeMatrixLayoutRowMajor);
            }
            [[unroll]] for (uint fn = 0; fn < FN; ++fn) {
                uint at = b_at + kk * B_ROW + (wn + fn * TN) / LOAD;
                FRAG_B b;
                coopMatLoad(b, tile_b, at, B_ROW, gl_CooperativeMatrixLayoutRowMajor);
                if (PARTS == 2) {
                    FRAG_B b_lo;
                    coopMatLoad(b_lo, tile_b, at + B_SIZE, B_ROW, gl_CooperativeMatrixLayoutRowMajor);
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
        // The other buffer was last read in the previous step, which every subgroup finished before the barrier
        // that ended it: it can be filled now; the barrier below publishes it for the next step.
        if (more) put(slot ^ 1);
        barrier();
    }

    // Epilogue: each accumulator through the subgroup's staging matrix (row-major TM × TN), then 8 outputs of a
    // row per lane and store where N allows, else one.
    uint stage = sg * C_SIZE;
    [[unroll]] for (uint i = 0; i < FM * FN; ++i) {
        uint top = m0 + wm + (i / FN) * TM, left = n0 + wn + (i % FN) * TN;
        if (PARTS == 2) acc[i] = acc[i] + acc_lo[i] * (1.0 / LO_SCALE);
        coopMatStore(acc[i], stage_c, stage, TN, gl_CooperativeMatrixLayoutRowMajor);
        subgroupMemoryBarrierShared();
        subgroupBarrier();
        if (aligned) {
            for (uint e = gl_SubgroupInvocationID; e < C_SIZE / LOAD; e += gl_SubgroupSize) {
                uint row = e / (TN / LOAD), column = (e % (TN / LOAD)) * LOAD;
                if (top + row < M && left + column < N) store_load(top + row, left + column, stage + row * TN + column);
            }
        } else {
            for (uint e = gl_SubgroupInvocationID; e < C_SIZE; e += gl_SubgroupSize) {
                uint m = top + e / TN, n = left + e % TN;
                if (m < M && n < N) store_one(m, n, stage_c[stage + e]);
            }
        }
        subgroupMemoryBarrierShared();
        subgroupBarrier();  // every lane's reads before the next accumulator overwrites the staging
    }
}
