#version 450
// Threshold a float map (H × W, row-major), optionally dilate it by a 2×2 ones kernel anchored at (1, 1),
// and write the horizontal edges of the result as bits: bit x of row y (x = 0 .. W) is set where fg'[y][x]
// differs from fg'[y][x - 1], with fg' false outside the map. Bit x of row y is bit x % 32 of word
// y * (W / 32 + 1) + x / 32.
// One invocation per output word: it reads the 32 columns of its word plus the two before them, in its row
// and, when dilating, the row above.
//
// The threshold and the dilate flag come from the params buffer (the recording is replayed with new values).
// The comparison x > t is done on the bit patterns: GPUs may flush denormals to zero in float comparisons
// (the H200 does), and the result must equal NumPy's IEEE one for every input.
#include "common.glsl"

layout(std430, set = 0, binding = 0) readonly buffer X { uint x[]; };  // float32 bits
layout(std430, set = 0, binding = 1) readonly buffer Params { uint prm[]; };  // 0: threshold bits, 1: dilate
layout(std430, set = 0, binding = 2) writeonly buffer Edges { uint edges[]; };

layout(push_constant) uniform Push {
    uint height;
    uint width;
} p;

const uint NAN_KEY = 0u;  // a NaN input is above no threshold

// float32 bits → a uint that orders like the float: -0 and +0 meet at 2^31, NaN goes below -inf.
uint order_key(uint bits) {
    uint magnitude = bits & 0x7fffffffu;
    if (magnitude > 0x7f800000u) return NAN_KEY;
    return (bits >> 31) != 0u ? 0x80000000u - magnitude : 0x80000000u + magnitude;
}

bool above(uint i, uint t) {
    return order_key(x[i]) > t;
}

// Foreground bits of columns x0 .. x0 + n - 1 (n ≤ 32) of the row starting at `row`, column x0 at bit 0.
uint row_bits(uint row, uint x0, uint n, uint t) {
    uint bits = 0u;
    [[unroll]] for (uint i = 0u; i < 32u; ++i) {
        if (i < n && above(row + x0 + i, t)) bits |= 1u << i;
    }
    return bits;
}

// Foreground of columns x0 - 1 (bit 0) and x0 - 2 (bit 1); columns left of the map are background.
uint left_bits(uint row, uint x0, uint t) {
    uint bits = 0u;
    if (x0 >= 1u && above(row + x0 - 1u, t)) bits |= 1u;
    if (x0 >= 2u && above(row + x0 - 2u, t)) bits |= 2u;
    return bits;
}

void main() {
    uint words = p.width / 32u + 1u;
    uint idx = flat_index();
    if (idx >= p.height * words) return;
    uint y = idx / words;
    uint x0 = (idx - y * words) * 32u;  // ≤ width
    uint n = min(32u, p.width - x0);
    // A NaN threshold has the largest key, so nothing is above it.
    uint t = (prm[0] & 0x7fffffffu) > 0x7f800000u ? 0xffffffffu : order_key(prm[0]);
    bool dilate = prm[1] != 0u;

    uint row = y * p.width;
    uint cur = row_bits(row, x0, n, t);
    uint left = left_bits(row, x0, t);
    uint fg, fg_left;  // fg' of columns x0 .. x0 + 31 (bit 0 = x0), and of column x0 - 1
    if (dilate) {
        if (y > 0u) {  // column-wise OR with the row above, then OR each column with its left neighbour
            cur |= row_bits(row - p.width, x0, n, t);
            left |= left_bits(row - p.width, x0, t);
        }
        uint in_map = n == 32u ? 0xffffffffu : (1u << n) - 1u;
        fg = (cur | (cur << 1) | (left & 1u)) & in_map;
        fg_left = (left | (left >> 1)) & 1u;
    } else {
        fg = cur;
        fg_left = left & 1u;
    }
    // Bit i: fg'[x0 + i] != fg'[x0 + i - 1]. Bits past column W stay 0: fg' is 0 from column W on.
    edges[idx] = fg ^ ((fg << 1) | fg_left);
}
