#version 450
// ONNX Resize of NCHW (fp32 or fp16 storage, storage.glsl) over H and W: nearest (four rounding modes) or bilinear.
// With ADDEND (nearest only), an Add of the resized map and a tensor of its shape in the same pass (an FPN's
// upsample-and-add, passes.fuse_resize_add): the gathered value plus the addend in fp32, rounded once, as the
// Add computed it after the Resize stored the gathered value unchanged; so the pair's answer, bit for bit.
//
// The host resolves the coordinate transformation mode and the scale into an exact affine map per axis,
// x_original = (y * A + B) / D with integers A, B, D, passed as A = qa*D + ra and B = qb*D + rb
// (0 <= ra, rb < D). The shader evaluates it exactly in 64-bit integer arithmetic built from 32-bit words
// (no shaderInt64 needed), so ties (x.5 for the round modes, integers for floor/ceil) are decided exactly
// as in the ONNX reference even for scales like 1.7 where float32 arithmetic would round either way.
#include "common.glsl"
#include "storage.glsl"

layout(constant_id = 3) const int MODE = 0;     // 0 nearest, 1 linear
layout(constant_id = 4) const int NEAREST = 0;  // 0 round_prefer_floor, 1 round_prefer_ceil, 2 floor, 3 ceil
layout(constant_id = 5) const bool ADDEND = false;  // y = resize(x) + addend, nearest only

layout(std430, set = 0, binding = 0) readonly buffer X { STORE_T x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Y { STORE_T y[]; };
layout(std430, set = 0, binding = 2) readonly buffer A { STORE_T addend[]; };  // read only with ADDEND

struct Axis {
    int qa;     // A = qa*D + ra
    int qb;     // B = qb*D + rb
    uvec2 ra;   // 64-bit values: .x low word, .y high word
    uvec2 rb;
    uvec2 d;    // D, with D * out_len < 2^63 so no 64-bit value below overflows
};

layout(push_constant) uniform Params {
    Axis h;
    Axis w;
    uint planes;  // N * C
    uint in_h, in_w, out_h, out_w;
} p;

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

uvec2 mul64(uint a, uvec2 b) {
    uint hi, lo;
    umulExtended(a, b.x, hi, lo);
    return uvec2(lo, hi + a * b.y);
}

uvec2 shl64(uvec2 a, int s) {  // 0 <= s < 32
    return s == 0 ? a : uvec2(a.x << s, (a.y << s) | (a.x >> (32 - s)));
}

float to_float(uvec2 a) { return float(a.y) * 4294967296.0 + float(a.x); }

// floor(x_original) into `base` and the exact remainder (x_original - base) * D into `rem`.
void source(Axis a, uint pos, out int base, out uvec2 rem) {
    uvec2 r = add64(mul64(pos, a.ra), a.rb);  // pos*ra + rb < (pos + 1) * D, so the quotient is <= pos
    uint q = 0u;
    if (r.y == 0u && a.d.y == 0u) {
        q = r.x / a.d.x;
        r.x -= q * a.d.x;
    } else {
        for (int b = findMSB(pos); b >= 0; --b) {  // long division, one quotient bit per step
            uvec2 t = shl64(a.d, b);
            if (ge64(r, t)) {
                r = sub64(r, t);
                q |= 1u << b;
            }
        }
    }
    base = int(pos) * a.qa + a.qb + int(q);
    rem = r;
}

int nearest(Axis a, uint pos, uint len) {
    int base;
    uvec2 rem;
    source(a, pos, base, rem);
    if (rem != uvec2(0u)) {  // x_original is not an integer: pick a neighbour by NEAREST
        uvec2 twice = shl64(rem, 1);  // compare the fraction with 1/2 as 2*rem vs D
        if (NEAREST == 0) base += ge64(a.d, twice) ? 0 : 1;
        else if (NEAREST == 1) base += ge64(twice, a.d) ? 1 : 0;
        else if (NEAREST == 3) base += 1;
    }
    return clamp(base, 0, int(len) - 1);
}

// Neighbours lo, lo + 1 (clamped to the edge) and the weight of the upper one.
void linear(Axis a, uint pos, uint len, out int lo, out int hi, out float t) {
    int base;
    uvec2 rem;
    source(a, pos, base, rem);
    t = to_float(rem) / to_float(a.d);
    lo = clamp(base, 0, int(len) - 1);
    hi = clamp(base + 1, 0, int(len) - 1);
}

void main() {
    uint i = flat_index();
    if (i >= p.planes * p.out_h * p.out_w) return;
    uint ox = i % p.out_w;
    uint rest = i / p.out_w;
    uint oy = rest % p.out_h;
    uint plane = rest / p.out_h;
    uint src = plane * p.in_h * p.in_w;
    if (MODE == 0) {
        uint at = src + uint(nearest(p.h, oy, p.in_h)) * p.in_w + uint(nearest(p.w, ox, p.in_w));
        if (ADDEND) {
            y[i] = STORE(float(x[at]) + float(addend[i]));
        } else {
            y[i] = x[at];  // a gather: no rounding
        }
        return;
    }
    int y0, y1, x0, x1;
    float ty, tx;
    linear(p.h, oy, p.in_h, y0, y1, ty);
    linear(p.w, ox, p.in_w, x0, x1, tx);
    uint r0 = src + uint(y0) * p.in_w, r1 = src + uint(y1) * p.in_w;
    float top = mix(float(x[r0 + uint(x0)]), float(x[r0 + uint(x1)]), tx);
    float bottom = mix(float(x[r1 + uint(x0)]), float(x[r1 + uint(x1)]), tx);
    y[i] = STORE(mix(top, bottom, ty));
}
