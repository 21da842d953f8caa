#version 450
// Detector input from packed RGB8 pixels: cv2.resize INTER_LINEAR (bit-exact on uint8), then
// (float32(v) * float32(1/255) - mean) * (1/std), written as planes B, G, R (what RapidOCR feeds the model).
//
// Everything that changes per request comes from the params buffer (vk/kernels/image.py, image_params):
// source size, row stride and byte offset, output size, and per axis the tie-break term of the coordinate
// arithmetic. cv2 computes a source coordinate as float32((d + 0.5) * scale - 0.5) in double with
// scale = 1 / (dst / src); that equals the float32 nearest to the exact rational ((2d + 1) src - dst) / (2 dst)
// except when the rational m lies exactly halfway between two float32s, where the double's rounding error
// decides. The shader rounds the rational exactly (integer long division) and settles the halfway cases with
// delta = (scale / (src / dst) - 1) * 2^53, which the host computes exactly (resize_tie): the double product
// (d + 0.5) * scale = (m + 0.5)(1 + delta 2^-53) rounds away from m + 0.5 iff mu * |delta| > 1, where
// m + 0.5 = mu * 2^e with 1 <= mu < 2, and then lies on delta's side of the midpoint; else ties go to even.
// The vertical pass is OpenCV's SIMD formula, which is what cv2 produces for every pixel.
// No [[unroll]]: spirv-opt's unroller drops the NoContraction decorations of `precise` on the copies.
#include "common.glsl"

layout(std430, set = 0, binding = 0) readonly buffer Image { uint img[]; };     // packed bytes
layout(std430, set = 0, binding = 1) readonly buffer Params { uint prm[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Out { float y[]; };      // (1, 3, cap_h, cap_w)

layout(push_constant) uniform Push {
    uint cap_w, cap_h;     // the output tensor's W and H (fixed per recording)
    float mean0, mean1, mean2;         // per output plane (B, G, R)
    float inv_std0, inv_std1, inv_std2;
} pc;

uint image_byte(uint i) {
    uint w = min(i >> 2, uint(img.length()) - 1u);  // robust against params that exceed the buffer
    return (img[w] >> ((i & 3u) * 8u)) & 0xFFu;
}

// float32 nearest to n / d (d > 0, |n / d| < 2^24); a tie is decided by `delta` as described above.
float ratio_to_float(int n, uint d, float delta) {
    bool neg = n < 0;
    uint a = uint(abs(n));
    uint m = a / d;
    uint r = a - m * d;
    if (m == 0u && r == 0u) return 0.0;
    int k = 0;
    for (int i = 0; i < 64 && m < 0x800000u; ++i) {  // long division until m holds 24 significant bits
        r <<= 1;
        m <<= 1;
        if (r >= d) { r -= d; m |= 1u; }
        ++k;
    }
    bool up;
    uint twice = r << 1;
    if (twice != d) {
        up = twice > d;
    } else {
        bool moved = false;
        if (k <= 29) {  // value of the midpoint + 0.5, as t / 2^(k + 1)
            uint t = neg ? (1u << k) - (2u * m + 1u) : (2u * m + 1u) + (1u << k);
            float mu = float(t) / exp2(float(findMSB(t)));  // mantissa in [1, 2)
            moved = mu * abs(delta) > 1.0;
        }
        up = moved ? ((delta > 0.0) != neg) : (m & 1u) == 1u;
    }
    if (up) m += 1u;
    float v = ldexp(float(m), -k);
    return neg ? -v : v;
}

// cv2's INTER_LINEAR source indices (i0, i1) and 11-bit weights (w0, w1) for output index o.
// clamp_edges: the horizontal rule (a coordinate left of 0 or right of the last pixel takes it whole).
void linear_coeffs(uint o, uint src, uint dst, float delta, bool clamp_edges,
                   out uint i0, out uint i1, out int w0, out int w1) {
    int n = int(2u * o + 1u) * int(src) - int(dst);
    precise float f = ratio_to_float(n, 2u * dst, delta);
    float fl = floor(f);
    int s = int(fl);
    precise float frac = f - fl;
    if (clamp_edges) {
        if (s < 0) { s = 0; frac = 0.0; }
        if (s >= int(src) - 1) { s = int(src) - 1; frac = 0.0; }
    }
    precise float one_minus = 1.0 - frac;
    precise float a0 = one_minus * 2048.0;
    precise float a1 = frac * 2048.0;
    w0 = int(roundEven(a0));
    w1 = int(roundEven(a1));
    i0 = uint(clamp(s, 0, int(src) - 1));
    i1 = uint(clamp(s + 1, 0, int(src) - 1));
}

void main() {
    uint ox = gl_GlobalInvocationID.x, oy = gl_GlobalInvocationID.y;
    if (ox >= pc.cap_w || oy >= pc.cap_h) return;
    uint plane = pc.cap_w * pc.cap_h;
    uint o = oy * pc.cap_w + ox;
    uint src_w = prm[0], src_h = prm[1], stride = prm[2], offset = prm[3];
    uint out_w = min(prm[4], pc.cap_w), out_h = min(prm[5], pc.cap_h);
    if (ox >= out_w || oy >= out_h || src_w == 0u || src_h == 0u) {
        y[o] = 0.0;
        y[plane + o] = 0.0;
        y[2u * plane + o] = 0.0;
        return;
    }
    uint x0, x1, r0, r1;
    int a0, a1, b0, b1;
    linear_coeffs(ox, src_w, out_w, uintBitsToFloat(prm[6]), true, x0, x1, a0, a1);
    linear_coeffs(oy, src_h, out_h, uintBitsToFloat(prm[7]), false, r0, r1, b0, b1);
    uint top = offset + r0 * stride, bottom = offset + r1 * stride;
    float mean[3] = float[3](pc.mean0, pc.mean1, pc.mean2);
    float inv_std[3] = float[3](pc.inv_std0, pc.inv_std1, pc.inv_std2);
    for (uint c = 0u; c < 3u; ++c) {
        int h0 = int(image_byte(top + 3u * x0 + c)) * a0 + int(image_byte(top + 3u * x1 + c)) * a1;
        int h1 = int(image_byte(bottom + 3u * x0 + c)) * a0 + int(image_byte(bottom + 3u * x1 + c)) * a1;
        int v = clamp(((((h0 >> 4) * b0) >> 16) + (((h1 >> 4) * b1) >> 16) + 2) >> 2, 0, 255);
        uint k = 2u - c;  // RGB byte c -> plane B, G, R
        precise float t = float(v) * uintBitsToFloat(0x3b808081u);  // float32(1/255)
        precise float norm = (t - mean[k]) * inv_std[k];
        y[k * plane + o] = norm;
    }
}
