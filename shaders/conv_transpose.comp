#version 450
// ONNX ConvTranspose (2-D, NCHW, groups) + bias + fused activation, as a gather: each invocation owns one
// output pixel of OCB adjacent output channels and sums the inputs that scatter onto it. Input (iy, ix)
// lands on output (iy*SH + kh*DH - pad_top, ix*SW + kw*DW - pad_left), so for an output row and kernel row
// the input row is (oy + pad_top - kh*DH) / SH when that divides exactly and is in range.
// Without dilation only kernel rows kh ≡ (oy + pad_top) mod SH can divide, so each invocation visits just
// those ceil(KH / SH) taps: for the usual k = s upsampling that is one tap per axis, the same count for
// every invocation, with no divergence between the stride phases of neighbouring pixels.
// Each input value loaded feeds OCB accumulators (the weights are the same for the whole warp).
#include "common.glsl"
#include "storage.glsl"
#include "activation.glsl"

layout(constant_id = 3) const int KH = 2;
layout(constant_id = 4) const int KW = 2;
layout(constant_id = 5) const int SH = 2;
layout(constant_id = 6) const int SW = 2;
layout(constant_id = 7) const int DH = 1;
layout(constant_id = 8) const int DW = 1;
layout(constant_id = 9) const int OCB = 4;  // output channels per invocation
layout(constant_id = 10) const int HAS_BIAS = 0;
layout(constant_id = 11) const int ACT = 0;
layout(constant_id = 12) const float ALPHA = 0.0;
layout(constant_id = 13) const float BETA = 0.0;

const int TAPS_H = DH == 1 ? (KH + SH - 1) / SH : KH;  // kernel rows an output row can receive
const int TAPS_W = DW == 1 ? (KW + SW - 1) / SW : KW;

layout(std430, set = 0, binding = 0) readonly buffer X { STORE_T x[]; };
layout(std430, set = 0, binding = 1) readonly buffer Wt { STORE_T w[]; };  // (Cin, Cout/group, KH, KW)
layout(std430, set = 0, binding = 2) readonly buffer B { STORE_T b[]; };   // weights again when HAS_BIAS == 0
layout(std430, set = 0, binding = 3) writeonly buffer Y { STORE_T y[]; };

layout(push_constant) uniform Params {
    uint total;                // N * channel_blocks * OH * OW invocations
    uint in_channels, out_channels;
    int h, w, oh, ow;
    uint group_in, group_out;  // channels per group: Cin / group, Cout / group
    uint blocks_per_group;     // ceil(group_out / OCB)
    int pad_top, pad_left;
} p;

// Kernel index of tap j along one axis: the j-th candidate of the right phase without dilation, else j.
int tap(int j, int shifted, int stride, int dilation) {
    return dilation == 1 ? shifted % stride + j * stride : j;
}

void main() {
    uint i = flat_index();
    if (i >= p.total) return;
    int ox = int(i % uint(p.ow));
    uint rest = i / uint(p.ow);
    int oy = int(rest % uint(p.oh));
    rest /= uint(p.oh);
    uint groups = p.in_channels / p.group_in;
    uint block = rest % (groups * p.blocks_per_group);
    uint n = rest / (groups * p.blocks_per_group);
    uint g = block / p.blocks_per_group;
    uint o0 = (block % p.blocks_per_group) * uint(OCB);  // first output channel within the group

    uint plane = uint(p.h) * uint(p.w);
    uint x_base = (n * p.in_channels + g * p.group_in) * plane;  // first input channel of the group
    uint w_step = p.group_out * uint(KH * KW);                   // next input channel, same (o, kh, kw)
    uint w_base = g * p.group_in * w_step;
    float acc[OCB];
    uint w_off[OCB];  // channels past the group's end read the last channel's weights and are not stored
    [[unroll]] for (int k = 0; k < OCB; ++k) {
        uint o = min(o0 + uint(k), p.group_out - 1);
        w_off[k] = w_base + o * uint(KH * KW);
        acc[k] = HAS_BIAS != 0 ? float(b[g * p.group_out + o]) : 0.0;
    }

    int sy = oy + p.pad_top, sx = ox + p.pad_left;  // ≥ 0
    [[unroll]] for (int jh = 0; jh < TAPS_H; ++jh) {
        int kh = tap(jh, sy, SH, DH);
        int ty = sy - kh * DH;
        if (kh >= KH || ty < 0 || ty % SH != 0 || ty / SH >= p.h) continue;
        [[unroll]] for (int jw = 0; jw < TAPS_W; ++jw) {
            int kw = tap(jw, sx, SW, DW);
            int tx = sx - kw * DW;
            if (kw >= KW || tx < 0 || tx % SW != 0 || tx / SW >= p.w) continue;
            uint xi = x_base + uint(ty / SH) * uint(p.w) + uint(tx / SW);
            uint wi = uint(kh * KW + kw);
            for (uint c = 0; c < p.group_in; ++c) {
                float xv = float(x[xi]);
                [[unroll]] for (int k = 0; k < OCB; ++k) acc[k] += xv * float(w[w_off[k] + wi]);
                xi += plane;
                wi += w_step;
            }
        }
    }

    uint out_plane = uint(p.oh) * uint(p.ow);
    uint y_base = (n * p.out_channels + g * p.group_out + o0) * out_plane + uint(oy) * uint(p.ow) + uint(ox);
    [[unroll]] for (int k = 0; k < OCB; ++k) {
        if (o0 + uint(k) < p.group_out) y[y_base + uint(k) * out_plane] = STORE(activate(acc[k], ACT, ALPHA, BETA));
    }
}
