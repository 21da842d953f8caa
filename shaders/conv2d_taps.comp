#version 450
// ONNX Conv (NCHW, group 1) with a k×k kernel and few output channels (a network's stems, a detection head's
// 96 → 24 at 3×3) on cooperative matrices (VK_KHR_cooperative_matrix), one tap at a time:
//   out[img, m, oh, ow] = act(bias[m] + Σ_{ky, kx} Σ_ci In[ci, oh·SH − pt + ky·DH, ow·SW − pl + kx·DW] · W[m, ci, ky, kx])
//                         (· post_scale + post_shift) (+ residual[img, m, oh, ow])
// The GEMM is pixels × output channels. For one tap (ky, kx), TM adjacent output pixels of a row by TK input
// channels is a matrix A with a fixed stride in a shared tile of the input laid out [row][column][channel]
// (channel fastest): it loads straight from the tile, with no im2col index per element, and every input value
// staged serves all KH·KW taps. B (TK × TN) is the tap's weights for TK input channels by TN output channels.
//
// A workgroup of SG subgroups covers SG output rows × FP·TM output columns and every output channel (FN·TN ≥
// Cout): subgroup s owns row oh0 + s and FP × FN accumulators. Input channels go by chunks of TK: the chunk's
// input window (zero outside the image and past Cin) and weights (zero past Cout and Cin) are converted to fp16
// into shared memory, then each subgroup multiplies KH·KW·FP·FN matrices. The accumulators leave through a
// staging matrix per subgroup, column-major so that a subgroup's lanes store adjacent output columns, with
// conv2d.comp's fp32 epilogue and one rounding on store.
//
// fp32 storage (SPLIT): every input as hi = fp16(v) and lo = fp16((v − hi)·LO_SCALE), three products per pair
// (conv2d_coopmat.comp's scheme: ~21 bits of each input instead of 11, lo kept out of fp16's subnormals).
// TM × TN × TK must be a shape the device lists, TK a multiple of 8 (the input window is staged in 16-byte
// vectors of TK / 8 per pixel); the workgroup must hold exactly SG subgroups (the host sizes
// it from the device's subgroup size; another size at run time writes NaN rather than a wrong answer).
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
layout(constant_id = 6) const uint SG = 4;   // subgroups per workgroup: output rows
layout(constant_id = 7) const uint FP = 2;   // blocks of TM output columns per subgroup
layout(constant_id = 8) const uint FN = 2;   // blocks of TN output channels (FN·TN ≥ Cout)
layout(constant_id = 9) const uint KH = 3;
layout(constant_id = 10) const uint KW = 3;
layout(constant_id = 11) const uint SH = 1;
layout(constant_id = 12) const uint SW = 1;
layout(constant_id = 13) const uint DH = 1;
layout(constant_id = 14) const uint DW = 1;
layout(constant_id = 15) const bool POST_AFFINE = false;
layout(constant_id = 16) const bool RESIDUAL = false;
layout(constant_id = 17) const bool SPLIT = false;

const uint THREADS = gl_WorkGroupSize.x;
const uint TAPS = KH * KW;
const uint COLS = FP * TM;                                // output columns per workgroup
const uint ROWS_IN = (SG - 1) * SH + (KH - 1) * DH + 1;   // input rows and columns under them
const uint COLS_IN = (COLS - 1) * SW + (KW - 1) * DW + 1;
const uint CH = FN * TN;                                  // output channels, padded
const uint PARTS = SPLIT ? 2 : 1;
const uint IN_SIZE = ROWS_IN * COLS_IN * TK;              // halves of one part of the input window
const uint W_SIZE = TAPS * TK * CH;                       // halves of one part of the chunk's weights
const uint C_SIZE = TM * TN;

layout(std430, set = 0, binding = 0) readonly buffer BufX { STORE_T x[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufW { STORE_T w[]; };
layout(std430, set = 0, binding = 2) readonly buffer BufBias { STORE_T bias[]; };
layout(std430, set = 0, binding = 3) writeonly buffer BufOut { STORE_T y[]; };
layout(std430, set = 0, binding = 4) readonly buffer BufResidual { STORE_T residual[]; };

layout(push_constant) uniform Params {
    uint cin, cout;
    uint H, W;        // input spatial size
    uint Hout, Wout;
    uint pad_top, pad_left;
    uint has_bias;
    uint act;
    float act_alpha, act_beta;
    float post_scale, post_shift;  // read only when POST_AFFINE
} p;

shared uvec4 tile_in[PARTS * IN_SIZE / 8];  // [part][row][column][channel], eight halves per vector
shared float16_t tile_w[PARTS * W_SIZE];    // [part][tap][input channel][output channel]
shared float stage_c[SG * C_SIZE];          // one accumulator per subgroup, column-major

void put_weight(uint at, float v) {
    if (SPLIT) {
        float16_t hi, lo;
        split_half(v, hi, lo);
        tile_w[at] = hi;
        tile_w[at + W_SIZE] = lo;
    } else {
        tile_w[at] = float16_t(v);
    }
}

// Input channel ci at element `at` of the input, zero outside the image (`inside`) and past Cin
float input_at(bool inside, uint ci, uint at) {
    return inside && ci < p.cin ? float(x[at]) : 0.0;
}

// Two values as the halves they are staged as: hi (fp16(v), or split_half's hi) and, with SPLIT, lo
void pack_pair(float a, float b, out uint hi, out uint lo) {
    if (SPLIT) {
        float16_t a_hi, a_lo, b_hi, b_lo;
        split_half(a, a_hi, a_lo);
        split_half(b, b_hi, b_lo);
        hi = packFloat2x16(f16vec2(a_hi, b_hi));
        lo = packFloat2x16(f16vec2(a_lo, b_lo));
    } else {
        hi = packFloat2x16(f16vec2(float16_t(a), float16_t(b)));
        lo = 0u;
    }
}

// The chunk of input channels c0 .. c0 + TK: its input window (top-left input pixel row0, col0, which may lie in
// the padding) and its weights, into shared memory. An invocation stages whole pixels: the TK channels' loads of a
// pixel are all in flight at once (adjacent invocations read adjacent columns of each channel plane), and it
// stores them as TK / 8 sixteen-byte vectors, so a subgroup's stores do not collide in shared memory's banks as
// one half per channel at a TK-half stride did. The weights go output channel fastest across invocations, for
// the same reason: each invocation reads the KH·KW taps of one (output, input) channel pair, adjacent in memory.
void stage_chunk(uint c0, uint image, int row0, int col0) {
    uint tid = gl_LocalInvocationIndex;
    uint plane = p.H * p.W;
    for (uint px = tid; px < ROWS_IN * COLS_IN; px += THREADS) {
        uint row = px / COLS_IN, col = px - row * COLS_IN;
        uint ih = uint(row0 + int(row)), iw = uint(col0 + int(col));  // below zero wraps, and fails the tests
        bool inside = ih < p.H && iw < p.W;
        uint at = ((image * p.cin + c0) * p.H + ih) * p.W + iw;  // read only where inside
        [[unroll]] for (uint q = 0; q < TK / 8; ++q) {
            uvec4 hi, lo;
            [[unroll]] for (uint r = 0; r < 4; ++r) {
                uint c = q * 8 + r * 2;
                pack_pair(input_at(inside, c0 + c, at + c * plane), input_at(inside, c0 + c + 1, at + (c + 1) * plane),
                          hi[r], lo[r]);
            }
            tile_in[px * (TK / 8) + q] = hi;
            if (SPLIT) tile_in[IN_SIZE / 8 + px * (TK / 8) + q] = lo;
        }
    }
    for (uint e = tid; e < TK * CH; e += THREADS) {
        uint m = e % CH, c = e / CH;
        uint ci = c0 + c;
        bool live = ci < p.cin && m < p.cout;
        uint from = (m * p.cin + ci) * TAPS;  // W is [m][ci][ky][kx]
        [[unroll]] for (uint tap = 0; tap < TAPS; ++tap) {
            put_weight((tap * TK + c) * CH + m, live ? float(w[from + tap]) : 0.0);
        }
    }
}

void store_c(uint m, uint at, float acc) {
    if (p.has_bias != 0) acc += float(bias[m]);
    float v = activate(acc, int(p.act), p.act_alpha, p.act_beta);
    if (POST_AFFINE) v = post_affine(v, p.post_scale, p.post_shift);
    if (RESIDUAL) v += float(residual[at]);
    y[at] = STORE(v);
}

void main() {
    uint image = gl_WorkGroupID.z;
    uint oh0 = gl_WorkGroupID.y * SG, ow0 = gl_WorkGroupID.x * COLS;
    uint plane = p.Hout * p.Wout;
    if (gl_NumSubgroups != SG) {
        // not the layout the tile needs (the driver chose another subgroup size): fail loudly (uniform return)
        for (uint e = gl_LocalInvocationIndex; e < SG * COLS * CH; e += THREADS) {
            uint m = e / (SG * COLS), oh = oh0 + (e / COLS) % SG, ow = ow0 + e % COLS;
            if (m < p.cout && oh < p.Hout && ow < p.Wout) {
                y[(image * p.cout + m) * plane + oh * p.Wout + ow] = STORE(uintBitsToFloat(0x7fc00000u));
            }
        }
        return;
    }
    uint sg = gl_SubgroupID;
    int row0 = int(oh0 * SH) - int(p.pad_top), col0 = int(ow0 * SW) - int(p.pad_left);

    coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> acc[FP * FN];
    coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator> acc_lo[FP * FN];  // SPLIT's lo products
    [[unroll]] for (uint i = 0; i < FP * FN; ++i) {
        acc[i] = coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0.0);
        if (SPLIT) acc_lo[i] = coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>(0.0);
    }

    for (uint c0 = 0; c0 < p.cin; c0 += TK) {
        barrier();  // every subgroup has read the previous chunk
        stage_chunk(c0, image, row0, col0);
        barrier();
        for (uint tap = 0; tap < TAPS; ++tap) {  // not unrolled: lavapipe's compile time grew ninefold with it
            uint ky = tap / KW, kx = tap % KW;
            coopmat<float16_t, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> b[FN];
            coopmat<float16_t, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB> b_lo[FN];
            [[unroll]] for (uint fn = 0; fn < FN; ++fn) {
                uint at = tap * TK * CH + fn * TN;
                coopMatLoad(b[fn], tile_w, at, CH, gl_CooperativeMatrixLayoutRowMajor);
                if (SPLIT) coopMatLoad(b_lo[fn], tile_w, at + W_SIZE, CH, gl_CooperativeMatrixLayoutRowMajor);
            }
            [[unroll]] for (uint fp = 0; fp < FP; ++fp) {
                // row r of A: output column ow0 + fp·TM + r, whose input column is (fp·TM + r)·SW + kx·DW
                uint at = ((sg * SH + ky * DH) * COLS_IN + fp * TM * SW + kx * DW) * TK;
                coopmat<float16_t, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> a;
                coopMatLoad(a, tile_in, at / 8, SW * TK / 8, gl_CooperativeMatrixLayoutRowMajor);
                if (SPLIT) {
                    coopmat<float16_t, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA> a_lo;
                    coopMatLoad(a_lo, tile_in, (at + IN_SIZE) / 8, SW * TK / 8, gl_CooperativeMatrixLayoutRowMajor);
                    [[unroll]] for (uint fn = 0; fn < FN; ++fn) {
                        acc_lo[fp * FN + fn] = coopMatMulAdd(a_lo, b[fn], acc_lo[fp * FN + fn]);
                        acc_lo[fp * FN + fn] = coopMatMulAdd(a, b_lo[fn], acc_lo[fp * FN + fn]);
                    }
                }
                [[unroll]] for (uint fn = 0; fn < FN; ++fn) {
                    acc[fp * FN + fn] = coopMatMulAdd(a, b[fn], acc[fp * FN + fn]);
                }
            }
        }
    }

    // Epilogue: each accumulator through the subgroup's staging matrix; element (pixel r, channel c) at c·TM + r.
    uint oh = oh0 + sg;
    uint stage = sg * C_SIZE;
    [[unroll]] for (uint i = 0; i < FP * FN; ++i) {
        uint fp = i / FN, fn = i % FN;
        if (SPLIT) acc[i] = acc[i] + acc_lo[i] * (1.0 / LO_SCALE);
        coopMatStore(acc[i], stage_c, stage, TM, gl_CooperativeMatrixLayoutColumnMajor);
        subgroupMemoryBarrierShared();
        subgroupBarrier();
        for (uint e = gl_SubgroupInvocationID; e < C_SIZE; e += gl_SubgroupSize) {
            uint m = fn * TN + e / TM, ow = ow0 + fp * TM + e % TM;
            if (m < p.cout && oh < p.Hout && ow < p.Wout) {
                store_c(m, (image * p.cout + m) * plane + oh * p.Wout + ow, stage_c[stage + e]);
            }
        }
        subgroupMemoryBarrierShared();
        subgroupBarrier();  // every lane's reads before the next accumulator overwrites the staging
    }
}
