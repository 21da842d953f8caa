#version 450
// Depthwise 2-D convolution (group == Cin == Cout), NCHW, + bias + fused activation (+ a scale and shift after it).
// Each invocation computes a TH x TW block of adjacent outputs of one channel plane. Kernel size, stride,
// dilation and the block are specialization constants, so every loop below unrolls and the block's input
// window lives in registers: each input element is loaded once per block and feeds every output it touches.
// Grid: x = output column blocks, y = output row blocks, z = n * C + c.
#include "common.glsl"
#include "storage.glsl"
#include "activation.glsl"

layout(constant_id = 3) const int KH = 3;
layout(constant_id = 4) const int KW = 3;
layout(constant_id = 5) const int SH = 1;
layout(constant_id = 6) const int SW = 1;
layout(constant_id = 7) const int DH = 1;
layout(constant_id = 8) const int DW = 1;
layout(constant_id = 9) const int TH = 1;        // output rows per invocation
layout(constant_id = 10) const int TW = 4;       // output columns per invocation
layout(constant_id = 11) const int HAS_BIAS = 0;
layout(constant_id = 12) const int ACT = 0;
layout(constant_id = 13) const float ALPHA = 0.0;
layout(constant_id = 14) const float BETA = 0.0;
layout(constant_id = 15) const bool POST_AFFINE = false;  // post_scale and post_shift after the activation

const int IN_H = (TH - 1) * SH + (KH - 1) * DH + 1;  // input rows under one block
const int IN_W = (TW - 1) * SW + (KW - 1) * DW + 1;  // input columns under one block

layout(std430, set = 0, binding = 0) readonly buffer X { STORE_T x[]; };
layout(std430, set = 0, binding = 1) readonly buffer Wt { STORE_T w[]; };
layout(std430, set = 0, binding = 2) readonly buffer B { STORE_T b[]; };  // weights again when HAS_BIAS == 0
layout(std430, set = 0, binding = 3) writeonly buffer Y { STORE_T y[]; };

layout(push_constant) uniform Params {
    uint planes;  // N * C
    uint channels;
    int h, w;     // input
    int oh, ow;   // output
    int pad_top, pad_left;
    float post_scale, post_shift;  // read only when POST_AFFINE
} p;

void main() {
    uint plane = gl_GlobalInvocationID.z;
    int oh0 = int(gl_GlobalInvocationID.y) * TH;
    int ow0 = int(gl_GlobalInvocationID.x) * TW;
    if (plane >= p.planes || oh0 >= p.oh || ow0 >= p.ow) return;
    uint c = plane % p.channels;

    float wk[KH * KW];
    [[unroll]] for (int k = 0; k < KH * KW; ++k) wk[k] = float(w[c * uint(KH * KW) + uint(k)]);
    float acc[TH * TW];
    float bias = HAS_BIAS != 0 ? float(b[c]) : 0.0;
    [[unroll]] for (int k = 0; k < TH * TW; ++k) acc[k] = bias;

    int ih0 = oh0 * SH - p.pad_top;
    int iw0 = ow0 * SW - p.pad_left;
    uint in_plane = plane * uint(p.h) * uint(p.w);
    // Away from the borders the whole window is in bounds: no per-element checks.
    bool interior_cols = iw0 >= 0 && iw0 + IN_W <= p.w;

    // One input row at a time: load the block's IN_W columns of it, then add it into every output row of the
    // block that it feeds (input row r meets output row t through kernel row kh when r == t*SH + kh*DH).
    // Whether a (r, t) pair meets is decided at specialization, so only the live products remain, and the
    // unrolled nest per row stays small enough for the driver to keep row, wk and acc in registers
    // (a whole-window variant, all rows live at once, ran 1.5-5x slower for 5x5 on NVIDIA).
    [[unroll]] for (int r = 0; r < IN_H; ++r) {
        int ih = ih0 + r;
        if (ih >= 0 && ih < p.h) {
            uint row_base = in_plane + uint(ih) * uint(p.w);
            float row[IN_W];
            if (interior_cols) {
                [[unroll]] for (int j = 0; j < IN_W; ++j) row[j] = float(x[row_base + uint(iw0 + j)]);
            } else {
                // Border: clamp the index (the load stays in bounds) and select zero for the padding.
                [[unroll]] for (int j = 0; j < IN_W; ++j) {
                    int iw = iw0 + j;
                    float v = float(x[row_base + uint(clamp(iw, 0, p.w - 1))]);
                    row[j] = iw >= 0 && iw < p.w ? v : 0.0;
                }
            }
            [[unroll]] for (int t = 0; t < TH; ++t) {
                int kh_span = r - t * SH;
                if (kh_span >= 0 && kh_span % DH == 0 && kh_span / DH < KH) {
                    int kh = kh_span / DH;
                    [[unroll]] for (int kw = 0; kw < KW; ++kw) {
                        [[unroll]] for (int u = 0; u < TW; ++u) {
                            acc[t * TW + u] += wk[kh * KW + kw] * row[u * SW + kw * DW];
                        }
                    }
                }
            }
        }
    }

    uint out_plane = plane * uint(p.oh) * uint(p.ow);
    [[unroll]] for (int t = 0; t < TH; ++t) {
        [[unroll]] for (int u = 0; u < TW; ++u) {
            int oh = oh0 + t, ow = ow0 + u;
            if (oh < p.oh && ow < p.ow) {
                float v = activate(acc[t * TW + u], ACT, ALPHA, BETA);
                if (POST_AFFINE) v = post_affine(v, p.post_scale, p.post_shift);
                y[out_plane + uint(oh) * uint(p.ow) + uint(ow)] = STORE(v);
            }
        }
    }
}
