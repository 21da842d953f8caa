#version 450
// MaxPool / AveragePool (2-D, NCHW): one invocation per output element. The host resolves ceil_mode into
// the output size; windows that hang past the input (padding, or the extra window ceil_mode adds) only
// ever see real elements. Max: padded positions never win. Average: the divisor counts real elements, or
// with COUNT_INCLUDE_PAD every position inside the explicit pads (ceil_mode's overhang never counts).
#include "common.glsl"
#include "storage.glsl"

layout(constant_id = 3) const int MODE = 0;  // 0 max, 1 average
layout(constant_id = 4) const int COUNT_INCLUDE_PAD = 0;

layout(std430, set = 0, binding = 0) readonly buffer X { STORE_T x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Y { STORE_T y[]; };

layout(push_constant) uniform Params {
    uint total;  // N * C * OH * OW
    int h, w, oh, ow;
    int kh, kw, sh, sw;
    int pad_top, pad_left, pad_bottom, pad_right;
} p;

void main() {
    uint i = flat_index();
    if (i >= p.total) return;
    int ox = int(i % uint(p.ow));
    uint rest = i / uint(p.ow);
    int oy = int(rest % uint(p.oh));
    uint plane = rest / uint(p.oh);

    int y0 = oy * p.sh - p.pad_top, x0 = ox * p.sw - p.pad_left;  // window origin, may be negative
    int ya = max(y0, 0), yb = min(y0 + p.kh, p.h);                 // real rows under the window
    int xa = max(x0, 0), xb = min(x0 + p.kw, p.w);
    uint base = plane * uint(p.h) * uint(p.w);

    float result;
    if (MODE == 0) {
        result = uintBitsToFloat(0xff800000u);  // -inf: what an all-padding window gives
        for (int iy = ya; iy < yb; ++iy) {
            uint row = base + uint(iy) * uint(p.w);
            for (int ix = xa; ix < xb; ++ix) result = max(result, float(x[row + uint(ix)]));
        }
    } else {
        float sum = 0.0;
        for (int iy = ya; iy < yb; ++iy) {
            uint row = base + uint(iy) * uint(p.w);
            for (int ix = xa; ix < xb; ++ix) sum += float(x[row + uint(ix)]);
        }
        int count;
        if (COUNT_INCLUDE_PAD != 0) {
            int rows = min(y0 + p.kh, p.h + p.pad_bottom) - max(y0, -p.pad_top);
            int cols = min(x0 + p.kw, p.w + p.pad_right) - max(x0, -p.pad_left);
            count = rows * cols;
        } else {
            count = (yb - ya) * (xb - xa);
        }
        result = sum / float(count);
    }
    y[i] = STORE(result);
}
