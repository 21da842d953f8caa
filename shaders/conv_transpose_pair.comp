#version 450
// Two ONNX ConvTransposes in a row whose kernels equal their strides (no padding, dilation, output padding or
// groups), each with its bias and activation: DB's head, which upsamples its map twice (2×2 stride 2, then 2×2
// stride 2 down to one channel and a sigmoid). Such a ConvTranspose sends each input pixel to its own K×K block
// of outputs, so each pixel of the middle map depends on one input pixel, and each output on one middle pixel.
// An invocation owns one middle pixel: it computes the pixel's C1 channels in registers exactly as
// conv_transpose.comp computes them (the bias, then the input channels in order, the activation, rounded as
// the middle map would have been stored), then writes the K2H × K2W outputs of each of the C2 channels they
// scatter to, each summed over the C1 channels in order. The first's weights pass through shared memory once
// per workgroup, laid out [input channel][tap][channel] so that an invocation reads four channels' weights of
// its tap in one load (a load per multiply-add would bound the kernel). The middle map, the largest of the two, is never
// written or read back: one dispatch and two passes over it fewer, with the unfused answer bit for bit.
//   mid[n, c, y, x]  = act1(b1[c] + Σ_ci x[n, ci, y / K1H, x / K1W] · w1[ci, c, y % K1H, x % K1W])
//   out[n, o, Y, X]  = act2(b2[o] + Σ_c mid[n, c, Y / K2H, X / K2W] · w2[c, o, Y % K2H, X % K2W])
#include "common.glsl"
#include "storage.glsl"
#include "activation.glsl"

layout(constant_id = 3) const uint K1H = 2;
layout(constant_id = 4) const uint K1W = 2;
layout(constant_id = 5) const uint K2H = 2;
layout(constant_id = 6) const uint K2W = 2;
layout(constant_id = 7) const int C1 = 24;  // middle channels, held in registers (vk/kernels/conv_transpose.py)
layout(constant_id = 8) const int HAS_B1 = 0;
layout(constant_id = 9) const int ACT1 = 0;
layout(constant_id = 10) const float ALPHA1 = 0.0;
layout(constant_id = 11) const float BETA1 = 0.0;
layout(constant_id = 12) const int HAS_B2 = 0;
layout(constant_id = 13) const int ACT2 = 0;
layout(constant_id = 14) const float ALPHA2 = 0.0;
layout(constant_id = 15) const float BETA2 = 0.0;
layout(constant_id = 16) const uint CIN = 24;  // input channels (their weights are staged whole)

const uint TAPS1 = K1H * K1W, TAPS2 = K2H * K2W;
const int C1_4 = (C1 + 3) / 4;  // the middle channels in vec4s, zero past C1
const uint STAGED = CIN * TAPS1 * uint(C1_4);
const uint LANES = gl_WorkGroupSize.x;

layout(std430, set = 0, binding = 0) readonly buffer X { STORE_T x[]; };
layout(std430, set = 0, binding = 1) readonly buffer W1 { STORE_T w1[]; };  // (Cin, C1, K1H, K1W)
layout(std430, set = 0, binding = 2) readonly buffer B1 { STORE_T b1[]; };  // w1 again when HAS_B1 == 0
layout(std430, set = 0, binding = 3) readonly buffer W2 { STORE_T w2[]; };  // (C1, C2, K2H, K2W)
layout(std430, set = 0, binding = 4) readonly buffer B2 { STORE_T b2[]; };  // w2 again when HAS_B2 == 0
layout(std430, set = 0, binding = 5) writeonly buffer Y { STORE_T y[]; };

layout(push_constant) uniform Params {
    uint total;         // N · (H · K1H) · (W · K1W): one invocation per middle pixel
    uint out_channels;  // C2
    uint h, w;          // the input map
} p;

shared vec4 first[STAGED];  // w1 as [ci][tap][c / 4]

void main() {
    // every invocation stages, then meets the barrier; those past the end compute nothing
    for (uint e = gl_LocalInvocationIndex; e < STAGED; e += LANES) {
        uint c4 = e % uint(C1_4), rest = e / uint(C1_4);
        uint tap = rest % TAPS1, ci = rest / TAPS1;
        vec4 v = vec4(0.0);
        [[unroll]] for (uint k = 0; k < 4; ++k) {
            uint c = c4 * 4 + k;
            if (c < uint(C1)) v[k] = float(w1[(ci * uint(C1) + c) * TAPS1 + tap]);
        }
        first[e] = v;
    }
    barrier();
    uint i = flat_index();
    if (i >= p.total) return;
    uint mid_w = p.w * K1W, mid_h = p.h * K1H;
    uint mx = i % mid_w;
    uint rest = i / mid_w;
    uint my = rest % mid_h;
    uint n = rest / mid_h;

    uint plane = p.h * p.w;
    uint xi = n * CIN * plane + (my / K1H) * p.w + mx / K1W;
    uint wi = ((my % K1H) * K1W + mx % K1W) * uint(C1_4);  // this pixel's tap; the next channel's is further
    vec4 mid4[C1_4];
    [[unroll]] for (int j = 0; j < C1_4; ++j) {
        [[unroll]] for (int k = 0; k < 4; ++k) mid4[j][k] = HAS_B1 != 0 && 4 * j + k < C1 ? float(b1[4 * j + k]) : 0.0;
    }
    for (uint ci = 0; ci < CIN; ++ci) {
        float xv = float(x[xi]);
        [[unroll]] for (int j = 0; j < C1_4; ++j) mid4[j] += xv * first[wi + uint(j)];
        xi += plane;
        wi += TAPS1 * uint(C1_4);
    }
    float mid[C1];
    [[unroll]] for (int c = 0; c < C1; ++c) mid[c] = as_stored(activate(mid4[c / 4][c % 4], ACT1, ALPHA1, BETA1));

    uint out_w = mid_w * K2W, out_plane = mid_h * K2H * out_w;
    uint y_at = n * p.out_channels * out_plane + my * K2H * out_w + mx * K2W;
    uint w2_step = p.out_channels * TAPS2;  // the next middle channel, same (o, ty, tx)
    for (uint o = 0; o < p.out_channels; ++o) {
        [[unroll]] for (uint ty = 0; ty < K2H; ++ty) {
            [[unroll]] for (uint tx = 0; tx < K2W; ++tx) {
                float acc = HAS_B2 != 0 ? float(b2[o]) : 0.0;
                uint wj = o * TAPS2 + ty * K2W + tx;
                [[unroll]] for (int c = 0; c < C1; ++c) acc += mid[c] * float(w2[wj + uint(c) * w2_step]);
                y[y_at + ty * out_w + tx] = STORE(activate(acc, ACT2, ALPHA2, BETA2));
            }
        }
        y_at += out_plane;
    }
}
