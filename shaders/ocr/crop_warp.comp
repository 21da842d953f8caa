#version 450
// Text-line crops for the cls / rec models, RapidOCR's get_rotate_crop_image + resize_norm_img in one pass:
// for batch slot b < n_valid, output pixel (oy, ox < resized_w) is cv2.resize INTER_LINEAR (bit-exact on
// uint8) of the crop, whose pixels are computed on the fly as cv2.warpPerspective INTER_CUBIC /
// BORDER_REPLICATE (OpenCV 5's float32 path) of quad b, turned by np.rot90 and / or 180° as the slot's flags
// say; then (float32(v / 255) - 0.5) / 0.5 into planes B, G, R. Columns from resized_w on, and slots from
// n_valid on, are 0. Per-request values (n_valid; per slot its source image's size / stride / offset, the crop →
// source matrix, crop size, flags, resized width, tie-break terms) come from the params buffer
// (agent/ocr/image_kernels.py); slots of one batch may read different images.
//
// Exactness: the source coordinates are computed in emulated double arithmetic, operation for operation as
// cv2 does (see "double arithmetic" below); cv2's float32 fused multiply-adds are emulated with error-free
// transformations (`precise` keeps the compiler from fusing or reassociating them; no loop here carries
// [[unroll]], because spirv-opt's unroller drops the NoContraction decorations `precise` puts on the copies,
// which changed one value in ~10^5 on lavapipe). The resize coordinates are exact (include/linear_resize.glsl).
#include "common.glsl"

layout(std430, set = 0, binding = 0) readonly buffer Image { uint img[]; };     // packed bytes
layout(std430, set = 0, binding = 1) readonly buffer Params { uint prm[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Out { float y[]; };      // (batch, 3, cap_h, cap_w)

layout(push_constant) uniform Push {
    uint batch, cap_h, cap_w;  // the output tensor's shape (fixed per recording)
} pc;

const uint HEADER = 8u;  // 0, 0, 0, 0, n_valid, 0, 0, 0
const uint SLOT = 20u;   // m[9], crop_w, crop_h, flags, resized_w, tie_x, tie_y, src_w, src_h, stride, offset, 0
const uint ROT90 = 1u, ROT180 = 2u;

uint image_byte(uint i) {
    uint w = min(i >> 2, uint(img.length()) - 1u);  // robust against params that exceed the buffer
    return (img[w] >> ((i & 3u) * 8u)) & 0xFFu;
}

#include "linear_resize.glsl"  // exact resize coordinates, shared with image_preprocess and image_resize

// ---- error-free float32 transformations -------------------------------------------------------------------------

vec2 two_sum(float a, float b) {  // a + b == s + e exactly
    precise float s = a + b;
    precise float bb = s - a;
    precise float e = (a - (s - bb)) + (b - bb);
    return vec2(s, e);
}

vec2 split(float a) {  // Dekker: a == hi + lo, each with 12 significant bits
    precise float c = 4097.0 * a;
    precise float hi = c - (c - a);
    precise float lo = a - hi;
    return vec2(hi, lo);
}

vec2 two_prod(float a, float b) {  // a * b == p + e exactly
    precise float p = a * b;
    vec2 as = split(a), bs = split(b);
    precise float e = ((as.x * bs.x - p) + as.x * bs.y + as.y * bs.x) + as.y * bs.y;
    return vec2(p, e);
}

float fma_exact(float a, float b, float c) {  // a * b + c rounded once (barring a double-rounding tie)
    vec2 p = two_prod(a, b);
    vec2 s = two_sum(p.x, c);
    precise float lo = s.y + p.y;
    precise float r = s.x + lo;
    return r;
}

// ---- double arithmetic on 32-bit integers (no shaderFloat64 needed) ---------------------------------------------
// cv2 computes a source coordinate as float32((mX + m0 x) * (1 / (mZ + m6 x))) with every operation rounded to
// double. For homographies that are affine up to the LU solve's round-off (parallelograms, which integer box
// corners often are), mX + m0 x is exactly a float32 halfway value in about 1 coordinate in 40 and those
// double roundings decide; so they are reproduced exactly. A double is ±m · 2^e with m a 53-bit integer
// (2^52 <= m < 2^53, or 0) held as uvec2(low word, high word).

struct Dbl {
    uvec2 m;
    int e;
    bool neg;
};

uvec2 add64(uvec2 a, uvec2 b) {
    uint carry;
    uint lo = uaddCarry(a.x, b.x, carry);
    return uvec2(lo, a.y + b.y + carry);
}

uvec2 sub64(uvec2 a, uvec2 b) {
    uint borrow;
    uint lo = usubBorrow(a.x, b.x, borrow);
    return uvec2(lo, a.y - b.y - borrow);
}

bool ge64(uvec2 a, uvec2 b) { return a.y > b.y || (a.y == b.y && a.x >= b.x); }

int msb64(uvec2 a) { return a.y != 0u ? 32 + findMSB(a.y) : findMSB(a.x); }  // -1 for 0

uvec2 shl64(uvec2 a, int s) {  // 0 <= s < 64
    if (s == 0) return a;
    if (s >= 32) return uvec2(0u, a.x << (s - 32));
    return uvec2(a.x << s, (a.y << s) | (a.x >> (32 - s)));
}

uvec2 shr64(uvec2 a, int s) {  // 0 <= s < 64
    if (s == 0) return a;
    if (s >= 32) return uvec2(a.y >> (s - 32), 0u);
    return uvec2((a.x >> s) | (a.y << (32 - s)), a.y >> s);
}

bool low_bits64(uvec2 a, int s) {  // any of the s lowest bits set (0 <= s <= 64)
    if (s <= 0) return false;
    if (s >= 64) return a != uvec2(0u);
    if (s >= 32) return a.x != 0u || (s > 32 && (a.y & ((1u << (s - 32)) - 1u)) != 0u);
    return (a.x & ((1u << s) - 1u)) != 0u;
}

// Round v · 2^e (v != 0, plus a sticky bit below v) to nearest even with 53 bits.
Dbl round53(uvec2 v, int e, bool sticky, bool neg) {
    int top = msb64(v);
    if (top <= 52) return Dbl(shl64(v, 52 - top), e - (52 - top), neg);  // exact (sticky is then false)
    int s = top - 52;
    uvec2 q = shr64(v, s);
    bool guard = ((s >= 33 ? v.y >> (s - 33) : v.x >> (s - 1)) & 1u) != 0u;
    bool rest = sticky || low_bits64(v, s - 1);
    if (guard && (rest || (q.x & 1u) != 0u)) {
        q = add64(q, uvec2(1u, 0u));
        if (q.y == 0x200000u) { q = uvec2(0u, 0x100000u); s += 1; }
    }
    return Dbl(q, e + s, neg);
}

void float_parts(float f, out uint mant, out int e, out bool neg) {  // f == ±mant · 2^e
    uint bits = floatBitsToUint(f);
    uint ex = (bits >> 23) & 0xFFu;
    mant = ex == 0u ? bits & 0x7FFFFFu : (bits & 0x7FFFFFu) | 0x800000u;
    e = ex == 0u ? -149 : int(ex) - 150;
    neg = (bits >> 31) != 0u;
}

// double(a + b · x) for float32 a, b and an integer x in [0, 2^24): the exact sum, rounded once.
Dbl affine_double(float a, float b, uint x) {
    uint ma, mb;
    int ea, eb;
    bool na, nb;
    float_parts(a, ma, ea, na);
    float_parts(b, mb, eb, nb);
    uvec2 va = uvec2(ma, 0u), vb;
    umulExtended(mb, x, vb.y, vb.x);
    if (vb == uvec2(0u)) {
        if (va == uvec2(0u)) return Dbl(uvec2(0u), 0, false);
        return round53(va, ea, false, na);
    }
    if (va == uvec2(0u)) return round53(vb, eb, false, nb);
    int sa = 62 - msb64(va), sb = 62 - msb64(vb);  // left-align both at bit 62 (bit 63 takes a carry)
    va = shl64(va, sa);
    ea -= sa;
    vb = shl64(vb, sb);
    eb -= sb;
    if (ea < eb || (ea == eb && !ge64(va, vb))) {  // big first
        uvec2 tv = va; va = vb; vb = tv;
        int te = ea; ea = eb; eb = te;
        bool tn = na; na = nb; nb = tn;
    }
    int d = ea - eb;
    bool sticky = false;
    if (d >= 64) {
        sticky = true;  // vb != 0
        vb = uvec2(0u);
    } else if (d > 0) {
        sticky = low_bits64(vb, d);
        vb = shr64(vb, d);
    }
    uvec2 v;
    if (na == nb) {
        v = add64(va, vb);
    } else {
        v = sub64(va, vb);
        if (sticky) v = sub64(v, uvec2(1u, 0u));  // the true value lies between v - 1 and v
        if (v == uvec2(0u)) return Dbl(uvec2(0u), 0, false);
    }
    return round53(v, ea, sticky, na);
}

// double(1 / d), d != 0.
Dbl recip_double(Dbl d) {
    if (d.m == uvec2(0u, 0x100000u)) return Dbl(d.m, -104 - d.e, d.neg);  // a power of two
    uvec2 r = uvec2(0u, 0x100000u);  // 2^52 < m: long division of 2^105 by m, one quotient bit a step
    uvec2 q = uvec2(0u);
    for (int i = 0; i < 53; ++i) {
        r = shl64(r, 1);
        q = shl64(q, 1);
        if (ge64(r, d.m)) {
            r = sub64(r, d.m);
            q.x |= 1u;
        }
    }
    uvec2 twice = shl64(r, 1);  // r < m < 2^53
    if (ge64(twice, d.m) && (twice != d.m || (q.x & 1u) != 0u)) {
        q = add64(q, uvec2(1u, 0u));
        if (q.y == 0x200000u) return Dbl(uvec2(0u, 0x100000u), -105 - d.e + 1, d.neg);
    }
    return Dbl(q, -105 - d.e, d.neg);
}

// double(a · b).
Dbl mul_double(Dbl a, Dbl b) {
    if (a.m == uvec2(0u) || b.m == uvec2(0u)) return Dbl(uvec2(0u), 0, a.neg != b.neg);
    uint h00, l00, h01, l01, h10, l10, h11, l11;
    umulExtended(a.m.x, b.m.x, h00, l00);
    umulExtended(a.m.x, b.m.y, h01, l01);
    umulExtended(a.m.y, b.m.x, h10, l10);
    umulExtended(a.m.y, b.m.y, h11, l11);
    uint c1, c2, c3, c4;
    uint w1 = uaddCarry(h00, l01, c1);
    w1 = uaddCarry(w1, l10, c2);
    uint w2 = uaddCarry(h01, h10, c3);
    w2 = uaddCarry(w2, l11, c4);
    uint c5;
    w2 = uaddCarry(w2, c1 + c2, c5);
    uint w3 = h11 + c3 + c4 + c5;  // the product < 2^106: bit 104 or 105 is the top one
    int s = findMSB(w3) + 96 - 52;   // 52 or 53
    int k = s - 32;                  // 20 or 21: q = bits [s, s + 53) = words (w1, w2, w3) >> s
    uvec2 q = uvec2((w1 >> k) | (w2 << (32 - k)), (w2 >> k) | (w3 << (32 - k)));
    bool guard = ((w1 >> (k - 1)) & 1u) != 0u;
    bool rest = l00 != 0u || (w1 & ((1u << (k - 1)) - 1u)) != 0u;
    int e = a.e + b.e + s;
    if (guard && (rest || (q.x & 1u) != 0u)) {
        q = add64(q, uvec2(1u, 0u));
        if (q.y == 0x200000u) { q = uvec2(0u, 0x100000u); e += 1; }
    }
    return Dbl(q, e, a.neg != b.neg);
}

float to_float(Dbl d) {  // float32(double), nearest even
    if (d.m == uvec2(0u)) return 0.0;
    uint m = (d.m.y << 3) | (d.m.x >> 29);
    bool guard = ((d.m.x >> 28) & 1u) != 0u;
    if (guard && ((d.m.x & 0x0FFFFFFFu) != 0u || (m & 1u) != 0u)) m += 1u;
    float v = ldexp(float(m), d.e + 29);
    return d.neg ? -v : v;
}

// ---- cv2.warpPerspective INTER_CUBIC, BORDER_REPLICATE -------------------------------------------------------

vec4 cubic_weights(float t) {  // A = -0.75, OpenCV 5's float32 operation order
    precise float t2 = t * t;
    precise float u = 1.0 - t;
    precise float w0 = -0.75 * (t * (u * u));
    precise float w3 = -0.75 * (t2 * u);
    float w1 = fma_exact(t2, fma_exact(1.25, t, -2.25), 1.0);
    precise float w2 = ((1.0 - w0) - w1) - w3;
    return vec4(w0, w1, w2, w3);
}

uint src_w, src_h, src_stride, src_offset;

float tap(uint row, int col, uint c) {
    return float(image_byte(row + uint(clamp(col, 0, int(src_w) - 1)) * 3u + c));
}

// Pixel (cx, cy) of the warped crop of the slot whose params start at `base`, RGB.
uvec3 warp_pixel(uint base, uint cx, uint cy) {
    float m[9];
    for (uint i = 0u; i < 9u; ++i) m[i] = uintBitsToFloat(prm[base + i]);
    float x = float(cx), row_y = float(cy);
    precise float mx = row_y * m[1] + m[2];
    precise float my = row_y * m[4] + m[5];
    precise float mz = row_y * m[7] + m[8];
    Dbl z = affine_double(mz, m[6], cx);
    float xs, ys;
    if (z.m == uvec2(0u)) {  // 1 / 0 = inf: the coordinates are ±inf (or NaN), clamped below
        xs = affine_double(mx, m[0], cx).m == uvec2(0u) ? uintBitsToFloat(0x7fc00000u)
                                                       : (mx + m[0] * x) * uintBitsToFloat(0x7f800000u);
        ys = affine_double(my, m[3], cx).m == uvec2(0u) ? uintBitsToFloat(0x7fc00000u)
                                                       : (my + m[3] * x) * uintBitsToFloat(0x7f800000u);
    } else {
        Dbl inv_z = recip_double(z);
        xs = to_float(mul_double(affine_double(mx, m[0], cx), inv_z));
        ys = to_float(mul_double(affine_double(my, m[3], cx), inv_z));
    }
    float big_w = float(max(src_w, 16u)), big_h = float(max(src_h, 16u));
    if (isnan(xs)) xs = -big_w;
    if (isnan(ys)) ys = -big_h;
    float vx = clamp(xs, -big_w, 2.0 * big_w), vy = clamp(ys, -big_h, 2.0 * big_h);
    float fx = floor(vx), fy = floor(vy);
    precise float ax = vx - fx;
    precise float ay = vy - fy;
    vec4 wx = cubic_weights(ax), wy = cubic_weights(ay);
    int ix = int(fx), iy = int(fy);
    uvec3 result;
    for (uint c = 0u; c < 3u; ++c) {
        float rows[4];
        for (int i = 0; i < 4; ++i) {
            uint row = src_offset + uint(clamp(iy - 1 + i, 0, int(src_h) - 1)) * src_stride;
            precise float s = tap(row, ix - 1, c) * wx.x;
            s = fma_exact(tap(row, ix, c), wx.y, s);
            s = fma_exact(tap(row, ix + 1, c), wx.z, s);
            s = fma_exact(tap(row, ix + 2, c), wx.w, s);
            rows[i] = s;
        }
        precise float acc = rows[0] * wy.x;
        acc = fma_exact(rows[1], wy.y, acc);
        acc = fma_exact(rows[2], wy.z, acc);
        acc = fma_exact(rows[3], wy.w, acc);
        result[c] = uint(clamp(roundEven(acc), 0.0, 255.0));
    }
    return result;
}

// Pixel (rx, ry) of the crop after its rotations (rw × rh), in warped-crop coordinates.
uvec3 crop_pixel(uint base, uint rx, uint ry, uint rw, uint rh, uint crop_w, uint flags) {
    if ((flags & ROT180) != 0u) {
        rx = rw - 1u - rx;
        ry = rh - 1u - ry;
    }
    if ((flags & ROT90) != 0u) return warp_pixel(base, crop_w - 1u - ry, rx);  // np.rot90: R[i][j] = C[j][w-1-i]
    return warp_pixel(base, rx, ry);
}

void main() {
    uint ox = gl_GlobalInvocationID.x, oy = gl_GlobalInvocationID.y, b = gl_GlobalInvocationID.z;
    if (ox >= pc.cap_w || oy >= pc.cap_h || b >= pc.batch) return;
    uint plane = pc.cap_h * pc.cap_w;
    uint o = 3u * b * plane + oy * pc.cap_w + ox;
    uint base = HEADER + SLOT * b;
    src_w = prm[base + 15u];  // each slot names its own image: crops of several requests share a batch
    src_h = prm[base + 16u];
    src_stride = prm[base + 17u];
    src_offset = prm[base + 18u];
    uint crop_w = prm[base + 9u], crop_h = prm[base + 10u], flags = prm[base + 11u];
    uint resized_w = min(prm[base + 12u], pc.cap_w);
    if (b >= min(prm[4], pc.batch) || ox >= resized_w || crop_w == 0u || crop_h == 0u || src_w == 0u
        || src_h == 0u) {
        y[o] = 0.0;
        y[o + plane] = 0.0;
        y[o + 2u * plane] = 0.0;
        return;
    }
    bool turned = (flags & ROT90) != 0u;
    uint rw = turned ? crop_h : crop_w, rh = turned ? crop_w : crop_h;
    uint x0, x1, r0, r1;
    int a0, a1, b0, b1;
    linear_coeffs(ox, rw, resized_w, uintBitsToFloat(prm[base + 13u]), true, x0, x1, a0, a1);
    linear_coeffs(oy, rh, pc.cap_h, uintBitsToFloat(prm[base + 14u]), false, r0, r1, b0, b1);
    // a zero weight contributes nothing (exactly): skip warping that pixel
    uvec3 p00 = crop_pixel(base, x0, r0, rw, rh, crop_w, flags);
    uvec3 p01 = a1 != 0 ? crop_pixel(base, x1, r0, rw, rh, crop_w, flags) : uvec3(0u);
    uvec3 p10 = uvec3(0u), p11 = uvec3(0u);
    if (b1 != 0) {
        p10 = crop_pixel(base, x0, r1, rw, rh, crop_w, flags);
        p11 = a1 != 0 ? crop_pixel(base, x1, r1, rw, rh, crop_w, flags) : uvec3(0u);
    }
    for (uint c = 0u; c < 3u; ++c) {
        int h0 = int(p00[c]) * a0 + int(p01[c]) * a1;
        int h1 = int(p10[c]) * a0 + int(p11[c]) * a1;
        int v = clamp(((((h0 >> 4) * b0) >> 16) + (((h1 >> 4) * b1) >> 16) + 2) >> 2, 0, 255);
        precise float t = ratio_to_float(v, 255u, 0.0);  // float32(v / 255), correctly rounded
        precise float norm = (t - 0.5) * 2.0;
        y[o + (2u - c) * plane] = norm;
    }
}
