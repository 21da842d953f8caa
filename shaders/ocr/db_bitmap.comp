#version 450
// DB's bitmap on the GPU: bitmap = prob > thresh, then (when asked) dilated by RapidOCR's 2×2 all-ones kernel as
// cv2.dilate applies it (anchor (1, 1): an output pixel is set when one of itself, its left, upper and
// upper-left neighbours is set; neighbours outside the map do not count). One invocation writes one uint32:
// four adjacent bytes (0 or 1) of a row, so the host reads an H×W uint8 image (W a multiple of 4).
// Per request, from the params buffer: word 0 thresh (float32 bits), word 1 dilate (0 or 1).
#include "common.glsl"

layout(std430, set = 0, binding = 0) readonly buffer Prob { float prob[]; };
layout(std430, set = 0, binding = 1) readonly buffer Params { uint params[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Bitmap { uint bitmap[]; };

layout(push_constant) uniform Push { uint h, w; } p;

void main() {
    uint word = flat_index();
    uint words_per_row = p.w / 4u;
    if (word >= p.h * words_per_row) return;
    uint y = word / words_per_row;
    uint x0 = (word - y * words_per_row) * 4u;
    float thresh = uintBitsToFloat(params[0]);
    bool dilate = params[1] != 0u;
    // columns x0 - 1 .. x0 + 3 of rows y and y - 1: column x0 - 1 and row y - 1 only feed the dilation
    // (indices clamped into the map and the result masked: no load depends on short-circuiting)
    bool has_up = dilate && y > 0u;
    uint row = y * p.w, row_up = (y > 0u ? y - 1u : 0u) * p.w;
    bool cur[5];
    bool up[5];
    [[unroll]] for (int j = 0; j < 5; ++j) {
        int x = int(x0) + j - 1;
        bool inside = x >= 0;
        uint xi = uint(max(x, 0));
        bool here = prob[row + xi] > thresh;
        bool above = prob[row_up + xi] > thresh;
        cur[j] = inside && here;
        up[j] = inside && has_up && above;
    }
    uint packed = 0u;
    [[unroll]] for (int k = 0; k < 4; ++k) {
        bool on = cur[k + 1] || (dilate && (cur[k] || up[k] || up[k + 1]));
        packed |= (on ? 1u : 0u) << (8u * uint(k));
    }
    bitmap[word] = packed;
}
