// cv2.resize INTER_LINEAR coordinates and weights, exact: shared by image_preprocess.comp and image_resize.comp.
//
// cv2 computes a source coordinate as float32((d + 0.5) * scale - 0.5) in double with
// scale = 1 / (dst / src); that equals the float32 nearest to the exact rational ((2d + 1) src - dst) / (2 dst)
// except when the rational m lies exactly halfway between two float32s, where the double's rounding error
// decides. The shader rounds the rational exactly (integer long division) and settles the halfway cases with
// delta = (scale / (src / dst) - 1) * 2^53, which the host computes exactly (resize_tie): the double product
// (d + 0.5) * scale = (m + 0.5)(1 + delta 2^-53) rounds away from m + 0.5 iff mu * |delta| > 1, where
// m + 0.5 = mu * 2^e with 1 <= mu < 2, and then lies on delta's side of the midpoint; else ties go to even.
// No [[unroll]]: spirv-opt's unroller drops the NoContraction decorations of `precise` on the copies.

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
