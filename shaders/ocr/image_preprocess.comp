#version 450
// Detector input from packed RGB8 pixels: cv2.resize INTER_LINEAR (bit-exact on uint8), then
// (float32(v) * float32(1/255) - mean) * (1/std), written as planes B, G, R (what RapidOCR feeds the model).
//
// Everything that changes per request comes from the params buffer (vk/kernels/image.py, image_params):
// source size, row stride and byte offset, output size, and per axis the tie-break term of the coordinate
// arithmetic (include/linear_resize.glsl explains it).
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

#include "linear_resize.glsl"

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
