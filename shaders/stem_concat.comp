#version 450
// A CNN stem's pooled branch and its two 2×2 convolutions in one dispatch (map_fusion.fuse_stem_concat):
//   m   = act1(conv(x, w1) + b1)       2×2, stride 1, one row and column of zeros past the bottom and right
//                                      (ONNX auto_pad SAME_UPPER): C0 -> C1 channels
//   c   = act2(conv(m, w2) + b2)       likewise: C1 -> C2
//   out = concat(maxpool(x), c)        on channels (C0 + C2), the pool 2×2 at stride 1 padded as the convolutions
// PP-HGNetV2's stem between its first and last convolutions. Where Conv, Conv and a pooled Concat wrote m, c and
// out, read x twice and m and c once each, this reads x and writes out; m and c never reach memory.
//
// A workgroup of (TW + 1) × (TH + 1) invocations owns TH output rows × TW columns of one image. Each invocation
// first works out m at one position of the tile and of the row and column beyond it (what the second convolution
// reads) into shared memory, its C1 channels in named vec4 accumulators; then each of the TW × TH invocations of
// the tile works out its pixel's C2 channels from there and its C0 pooled ones from x. The loops over channels
// unroll (the counts are specialisation constants), so each invocation's loads of x fly together. Both
// convolutions add in conv2d_direct.comp's order (input channel, kernel row, kernel column; rows past the map
// skipped, columns past it read as zero) and end in its epilogue (bias, then activation), m is held as it would
// have been stored (storage.glsl's as_stored), and the pool takes concat.comp's maxima in its order: the answer
// is the direct kernel's and the pooled Concat's, bit for bit. The weights pass through shared memory one after
// the other, laid out [input channel · 4 + tap][output channel], so that an invocation reads four output
// channels' weights of a tap as one vec4 (the same address across the workgroup: a broadcast).
// Grid: x = column blocks of TW, y = row blocks of TH, z = image. The host checks C1 ≤ 16 and C2 ≤ 32 (the
// named accumulators) and the shared memory (vk/kernels/stem_concat.py).
#include "common.glsl"
#include "storage.glsl"
#include "activation.glsl"

layout(constant_id = 3) const uint C0 = 24;  // input channels: pooled, and the first convolution's
layout(constant_id = 4) const uint C1 = 12;  // the middle map's, ≤ 16
layout(constant_id = 5) const uint C2 = 24;  // the second convolution's, ≤ 32
layout(constant_id = 6) const uint W_VECS = 288;  // vec4s of staged weights: the larger of the two layouts
layout(constant_id = 7) const bool HAS_B1 = false;
layout(constant_id = 8) const int ACT1 = 0;
layout(constant_id = 9) const float ALPHA1 = 0.0;
layout(constant_id = 10) const float BETA1 = 0.0;
layout(constant_id = 11) const bool HAS_B2 = false;
layout(constant_id = 12) const int ACT2 = 0;
layout(constant_id = 13) const float ALPHA2 = 0.0;
layout(constant_id = 14) const float BETA2 = 0.0;

const uint MW = gl_WorkGroupSize.x, MH = gl_WorkGroupSize.y;  // the middle map's tile: an invocation each
const uint TW = MW - 1, TH = MH - 1;  // the output's tile: one column and one row fewer
const uint THREADS = MW * MH;
const uint C1V = (C1 + 3) / 4, C2V = (C2 + 3) / 4;  // vec4s of output channels per tap
const uint TAPS = 4;  // 2 × 2

layout(std430, set = 0, binding = 0) readonly buffer BufX { STORE_T x[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufW1 { STORE_T w1[]; };
layout(std430, set = 0, binding = 2) readonly buffer BufB1 { STORE_T b1[]; };  // w1 again without a bias
layout(std430, set = 0, binding = 3) readonly buffer BufW2 { STORE_T w2[]; };
layout(std430, set = 0, binding = 4) readonly buffer BufB2 { STORE_T b2[]; };  // w2 again without a bias
layout(std430, set = 0, binding = 5) writeonly buffer BufOut { STORE_T y[]; };

layout(push_constant) uniform Params {
    uint H, W;  // the map's size, the same in and out
} p;

shared vec4 weights[W_VECS];          // [ci · TAPS + tap][co / 4], zero past the output channels
shared float middle[C1 * MH * MW];    // [channel][row][column], zero past the map

// Weights (co, ci, ky, kx) of `cout` × `cin` 2×2 kernels into the shared layout, output channels rounded up to vec4s.
void stage_w1() {
    for (uint e = gl_LocalInvocationIndex; e < C0 * TAPS * C1V * 4; e += THREADS) {
        uint row = e / (C1V * 4), co = e % (C1V * 4);
        weights[row * C1V + co / 4][co % 4] = co < C1 ? float(w1[co * C0 * TAPS + row]) : 0.0;
    }
}

void stage_w2() {
    for (uint e = gl_LocalInvocationIndex; e < C1 * TAPS * C2V * 4; e += THREADS) {
        uint row = e / (C2V * 4), co = e % (C2V * 4);
        weights[row * C2V + co / 4][co % 4] = co < C2 ? float(w2[co * C1 * TAPS + row]) : 0.0;
    }
}

void main() {
    uint image = gl_WorkGroupID.z;
    uint lx = gl_LocalInvocationID.x, ly = gl_LocalInvocationID.y;
    uint y0 = gl_WorkGroupID.y * TH, x0 = gl_WorkGroupID.x * TW;
    uint H = p.H, W = p.W, plane = H * W;
    uint x_image = image * C0 * plane;

    stage_w1();
    barrier();
    {
        uint my = y0 + ly, mx = x0 + lx;
        bool inside = my < H && mx < W;
        mat4 acc = mat4(0.0);  // channels 4j .. 4j + 3 in acc[j]
        if (inside) {
            bool below = my + 1 < H, right = mx + 1 < W;
            uint at_x = x_image + my * W + mx;
            [[unroll]] for (uint ci = 0; ci < C0; ++ci) {
                uint at = at_x + ci * plane;
                // the window's four values, those past the right edge zero (read in bounds, then dropped)
                float v00 = float(x[at]), v01 = float(x[right ? at + 1 : at]);
                float v10 = below ? float(x[at + W]) : 0.0, v11 = below ? float(x[right ? at + W + 1 : at + W]) : 0.0;
                v01 = right ? v01 : 0.0;
                v11 = right ? v11 : 0.0;
                uint w_at = ci * TAPS * C1V;
                [[unroll]] for (uint j = 0; j < C1V; ++j) acc[j] = fma(vec4(v00), weights[w_at + j], acc[j]);
                [[unroll]] for (uint j = 0; j < C1V; ++j) acc[j] = fma(vec4(v01), weights[w_at + C1V + j], acc[j]);
                if (below) {  // the direct kernel skips a kernel row past the map
                    [[unroll]] for (uint j = 0; j < C1V; ++j) acc[j] = fma(vec4(v10), weights[w_at + 2 * C1V + j], acc[j]);
                    [[unroll]] for (uint j = 0; j < C1V; ++j) acc[j] = fma(vec4(v11), weights[w_at + 3 * C1V + j], acc[j]);
                }
            }
        }
        [[unroll]] for (uint co = 0; co < C1; ++co) {
            float a = acc[co / 4][co % 4];
            if (HAS_B1) a += float(b1[co]);
            middle[(co * MH + ly) * MW + lx] = inside ? as_stored(activate(a, ACT1, ALPHA1, BETA1)) : 0.0;
        }
    }
    barrier();  // the middle map is whole, and every invocation is done with the first weights
    stage_w2();
    barrier();

    uint oy = y0 + ly, ox = x0 + lx;
    if (lx >= TW || ly >= TH || oy >= H || ox >= W) return;
    bool below = oy + 1 < H;
    mat4 lo = mat4(0.0), hi = mat4(0.0);  // channels 0..15 and 16..31
    [[unroll]] for (uint ci = 0; ci < C1; ++ci) {
        [[unroll]] for (uint ky = 0; ky < 2; ++ky) {
            if (ky == 1 && !below) continue;
            [[unroll]] for (uint kx = 0; kx < 2; ++kx) {
                float v = middle[(ci * MH + ly + ky) * MW + lx + kx];  // zero past the map's last column
                uint at = (ci * TAPS + ky * 2 + kx) * C2V;
                [[unroll]] for (uint j = 0; j < C2V; ++j) {
                    if (j < 4) {
                        lo[j] = fma(vec4(v), weights[at + j], lo[j]);
                    } else {
                        hi[j - 4] = fma(vec4(v), weights[at + j], hi[j - 4]);
                    }
                }
            }
        }
    }
    uint pixel = oy * W + ox;
    uint y_image = image * (C0 + C2) * plane;
    [[unroll]] for (uint co = 0; co < C2; ++co) {
        float a;
        if (co < 16) {
            a = lo[co / 4][co % 4];
        } else {
            a = hi[(co - 16) / 4][co % 4];
        }
        if (HAS_B2) a += float(b2[co]);
        y[y_image + (C0 + co) * plane + pixel] = STORE(activate(a, ACT2, ALPHA2, BETA2));
    }
    // the pooled channels: concat.comp's window (pads 0 above and left, 1 below and right) from -inf, in its
    // order (row by row), the positions past the map left out
    bool right = ox + 1 < W;
    [[unroll]] for (uint c = 0; c < C0; ++c) {
        uint at = x_image + c * plane + pixel;
        float result = max(uintBitsToFloat(0xff800000u), float(x[at]));
        if (right) result = max(result, float(x[at + 1]));
        if (below) {
            result = max(result, float(x[at + W]));
            if (right) result = max(result, float(x[at + W + 1]));
        }
        y[y_image + c * plane + pixel] = STORE(result);
    }
}
