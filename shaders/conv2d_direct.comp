#version 450
// ONNX Conv (NCHW, group 1) computed directly, for few output channels on large maps: a network's stem (3 → 24
// at 3×3 stride 2) and a detection head's 96 → 24 at 3×3. There the GEMM kernel's tile is mostly empty rows
// (M = Cout ≤ 64) and it walks K = Cin·KH·KW in shared-memory steps of 8, one barrier each.
//
// Here each invocation computes TW adjacent output columns of one output row for 8 output channels (two vec4s
// per column, named mat4 accumulators: lo[c] holds channels 0..3 of column c, hi[c] channels 4..7). The
// workgroup is LX × LY invocations of columns and rows, times CZ blocks of 8 channels in z: one workgroup
// covers every output channel (at most 64). The weights of CI_CHUNK input channels at a time pass through shared
// memory, laid out [tap][channel] so that an invocation reads its 8 weights of a tap as two vec4s (the same
// address across a subgroup: a broadcast); the input is read straight from memory, one kernel row at a time,
// the TW columns' window of it in registers, where neighbouring invocations share cache lines.
//   out[img, co, oh, ow] = act(bias[co] + Σ_{ci, ky, kx} W[co, ci, ky, kx] · x[img, ci, oh·SH − pt + ky·DH,
//                                                                          ow·SW − pl + kx·DW])
//                          (· post_scale + post_shift) (+ residual[img, co, oh, ow])
// Grid: x = column blocks of LX·TW, y = row blocks of LY, z = image.
#include "common.glsl"
#include "storage.glsl"
#include "activation.glsl"

layout(constant_id = 3) const uint KH = 3;
layout(constant_id = 4) const uint KW = 3;
layout(constant_id = 5) const uint SH = 1;
layout(constant_id = 6) const uint SW = 1;
layout(constant_id = 7) const uint DH = 1;
layout(constant_id = 8) const uint DW = 1;
layout(constant_id = 9) const uint TW = 4;         // output columns per invocation, 1..4
layout(constant_id = 10) const uint CI_CHUNK = 16;  // input channels whose weights share memory holds at once
layout(constant_id = 11) const bool POST_AFFINE = false;
layout(constant_id = 12) const bool RESIDUAL = false;

const uint LX = gl_WorkGroupSize.x, LY = gl_WorkGroupSize.y, CZ = gl_WorkGroupSize.z;
const uint TAPS = KH * KW;
const uint IN_W = (TW - 1) * SW + (KW - 1) * DW + 1;  // input columns under an invocation's TW outputs
const uint CHANNELS = CZ * 8;                          // output channels, rounded up to blocks of 8
const uint LANES = LX * LY * CZ;
const uint STAGED = CI_CHUNK * TAPS * CHANNELS;        // weights staged per chunk
const uint STAGED_PER_LANE = (STAGED + LANES - 1) / LANES;

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

shared vec4 weights[CI_CHUNK * TAPS * CHANNELS / 4];  // [ci·TAPS + tap][channel], zero past cout and cin

float apply_epilogue(float acc, uint co, uint at) {
    if (p.has_bias != 0) acc += float(bias[co]);
    float v = activate(acc, int(p.act), p.act_alpha, p.act_beta);
    if (POST_AFFINE) v = post_affine(v, p.post_scale, p.post_shift);
    if (RESIDUAL) v += float(residual[at]);
    return v;
}

void main() {
    uint image = gl_WorkGroupID.z;
    uint lane = gl_LocalInvocationIndex;
    uint block = gl_LocalInvocationID.z;  // this invocation's 8 channels: 8·block ...
    uint oh = gl_WorkGroupID.y * LY + gl_LocalInvocationID.y;
    uint ow0 = (gl_WorkGroupID.x * LX + gl_LocalInvocationID.x) * TW;
    // Invocations past the output's edge still load weights and meet every barrier; they compute nothing.
    bool live = oh < p.Hout && ow0 < p.Wout;
    // unsigned wrap-around sends columns and rows in the top/left padding past W and H, which the tests reject
    uint ih0 = oh * SH - p.pad_top, iw0 = ow0 * SW - p.pad_left;
    bool interior_cols = iw0 < p.W && iw0 + IN_W <= p.W;

    mat4 lo = mat4(0.0), hi = mat4(0.0);
    uint x_image = image * p.cin * p.H * p.W;
    for (uint ci0 = 0; ci0 < p.cin; ci0 += CI_CHUNK) {
        uint chunk = min(CI_CHUNK, p.cin - ci0);
        barrier();  // every invocation is done with the previous chunk's weights
        // The chunk's weights of one output channel are contiguous (ci0·TAPS .. (ci0 + chunk)·TAPS): consecutive
        // lanes read consecutive ones. A constant trip count, unrolled, so that every load is in flight at once.
        [[unroll]] for (uint i = 0; i < STAGED_PER_LANE; ++i) {
            uint e = lane + i * LANES;
            if (e < STAGED) {
                uint c = e / (CI_CHUNK * TAPS), t = e - c * (CI_CHUNK * TAPS);
                float v = c < p.cout && t < chunk * TAPS ? float(w[(c * p.cin + ci0) * TAPS + t]) : 0.0;
                weights[(t * CHANNELS + c) / 4][c % 4] = v;
            }
        }
        barrier();
        if (!live) continue;
        for (uint ci = 0; ci < chunk; ++ci) {
            uint plane = x_image + (ci0 + ci) * p.H * p.W;
            [[unroll]] for (uint ky = 0; ky < KH; ++ky) {
                uint ih = ih0 + ky * DH;
                if (ih >= p.H) continue;
                uint row_at = plane + ih * p.W;
                float row[IN_W];
                if (interior_cols) {
                    [[unroll]] for (uint j = 0; j < IN_W; ++j) row[j] = float(x[row_at + iw0 + j]);
                } else {
                    // the border: a clamped (in-bounds) load, zero in the padding
                    [[unroll]] for (uint j = 0; j < IN_W; ++j) {
                        uint iw = iw0 + j;
                        float v = float(x[row_at + min(iw, p.W - 1)]);
                        row[j] = iw < p.W ? v : 0.0;
                    }
                }
                [[unroll]] for (uint kx = 0; kx < KW; ++kx) {
                    uint at = ((ci * TAPS + ky * KW + kx) * CHANNELS + block * 8) / 4;
                    vec4 w_lo = weights[at], w_hi = weights[at + 1];
                    [[unroll]] for (uint c = 0; c < TW; ++c) {
                        float v = row[c * SW + kx * DW];
                        lo[c] = fma(vec4(v), w_lo, lo[c]);
                        hi[c] = fma(vec4(v), w_hi, hi[c]);
                    }
                }
            }
        }
    }
    if (!live) return;

    uint co0 = block * 8;
    [[unroll]] for (uint c = 0; c < TW; ++c) {
        uint ow = ow0 + c;
        if (ow >= p.Wout) break;
        [[unroll]] for (uint j = 0; j < 8; ++j) {
            uint co = co0 + j;
            if (co >= p.cout) break;
            uint at = ((image * p.cout + co) * p.Hout + oh) * p.Wout + ow;
            float acc = j < 4 ? lo[c][j] : hi[c][j - 4];
            y[at] = STORE(apply_epilogue(acc, co, at));
        }
    }
}
