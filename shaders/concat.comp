#version 450
// ONNX Concat of up to four tensors along one axis, in one dispatch (vk/kernels/layout.py runs more four at a
// time): so the parts of an output run together, behind no barrier between them, where one copy per input
// would write the same tensor one after another. The output is outer × total × inner elements (total: its
// length along the axis, inner: the axes after it); this dispatch writes the slab of `count` positions along
// the axis from `first` on, an invocation one element, read from the input whose share of the slab holds it.
// Elements move as they are, never converted, as in copy_strided.comp: 32-bit words in concat.spv (float32 and
// int32), 16-bit elements in concat.fp16.spv (float16).
// With POOL_KH > 0, input 0 is a MaxPool's input instead (stride 1, padded to keep its size: a network stem's
// Concat(MaxPool(a), b)): its part of the slab is the max over each element's POOL_KH × POOL_KW window, taken as
// pool.comp takes it, so the pooled map is never stored. Floats only.
// With UPi > 1, input i is a Resize's input instead (nearest, by the integer factor UPi on both axes, source index
// floor(y / UPi): an FPN's maps upsampled to one size and concatenated, as DB's neck does): its part of the slab
// gathers each element from the smaller map, so the upsampled maps are never stored. A gather: bit for bit.
#include "common.glsl"
#include "storage.glsl"

#ifdef FP16
#define ELEMENT_T STORE_T  // float16_t, loaded and stored as it is: a bit-exact 2-byte move
#define AS_FLOAT(v) float(v)
#define AS_ELEMENT(v) STORE(v)
#else
#define ELEMENT_T uint     // words, not floats: int32 bit patterns that read as NaN pass unchanged
#define AS_FLOAT(v) uintBitsToFloat(v)
#define AS_ELEMENT(v) floatBitsToUint(v)
#endif

layout(constant_id = 3) const int POOL_KH = 0;  // > 0: input 0 is max-pooled (see above)
layout(constant_id = 4) const int POOL_KW = 0;
layout(constant_id = 5) const uint UP0 = 1;  // > 1: input i is upsampled by this factor (see above)
layout(constant_id = 6) const uint UP1 = 1;
layout(constant_id = 7) const uint UP2 = 1;
layout(constant_id = 8) const uint UP3 = 1;
// A grid of planes: workgroup (x, c, o) moves elements x·size.. of the slab's plane c of outer index o, striding
// by the grid's width, with no division to find them (an NCHW channel concat: on an H100 the flat index's three
// divisions per element bounded det's 368 × 512 stem concat). Otherwise one invocation per element of the slab.
layout(constant_id = 9) const bool PLANES = false;

layout(std430, set = 0, binding = 0) readonly buffer In0 { ELEMENT_T x0[]; };
layout(std430, set = 0, binding = 1) readonly buffer In1 { ELEMENT_T x1[]; };
layout(std430, set = 0, binding = 2) readonly buffer In2 { ELEMENT_T x2[]; };
layout(std430, set = 0, binding = 3) readonly buffer In3 { ELEMENT_T x3[]; };
layout(std430, set = 0, binding = 4) writeonly buffer Out { ELEMENT_T y[]; };

layout(push_constant) uniform Params {
    uint n;      // elements of this slab: outer × count × inner
    uint inner;
    uint total;  // the output's length along the axis
    uint first;  // where the slab starts along it
    uint count;  // its length along it: len0 + len1 + len2 + len3
    uint len0, len1, len2;  // each input's length along the axis (input 3 holds the rest)
    int map_h, map_w;       // with POOL_KH > 0 or an UPi > 1: the output's map size (inner = map_h · map_w)
    int pool_top, pool_left;
} p;

// Writes to y[to] the max over the window of element e (a row-major position in the map) of plane `plane` of
// input 0, in pool.comp's order from -inf: padded positions never win. (Stored straight away: a float16_t local
// would need the Float16 arithmetic capability.)
void store_pooled(uint to, uint plane, uint e) {
    int oy = int(e) / p.map_w, ox = int(e) % p.map_w;
    int top = oy - p.pool_top, left = ox - p.pool_left;  // the window's origin, may be negative
    int ya = max(top, 0), yb = min(top + POOL_KH, p.map_h);
    int xa = max(left, 0), xb = min(left + POOL_KW, p.map_w);
    uint base = plane * uint(p.map_h) * uint(p.map_w);
    float result = uintBitsToFloat(0xff800000u);
    for (int iy = ya; iy < yb; ++iy) {
        uint row = base + uint(iy) * uint(p.map_w);
        for (int ix = xa; ix < xb; ++ix) result = max(result, AS_FLOAT(x0[row + uint(ix)]));
    }
    y[to] = AS_ELEMENT(result);
}

// Where element e (a row-major position in the output's map) of a plane of an input upsampled by `up` lies in
// that input: the plane's start (`plane` planes of the smaller map in) plus the gathered position.
uint upsampled(uint plane, uint e, uint up) {
    if (up == 1u) return plane * p.inner + e;
    uint w = uint(p.map_w);
    uint sw = w / up;
    return plane * (p.inner / (up * up)) + (e / w) / up * sw + (e % w) / up;
}

// Element e of plane c of outer index o of this slab
void move(uint o, uint c, uint e) {
    uint to = (o * p.total + p.first + c) * p.inner + e;
    // each branch moves its element straight from buffer to buffer: a float16_t local would need the Float16
    // arithmetic capability, which 16-bit storage alone does not give
    if (c < p.len0) {
        if (POOL_KH > 0) {
            store_pooled(to, o * p.len0 + c, e);
        } else {
            y[to] = x0[upsampled(o * p.len0 + c, e, UP0)];
        }
    } else if (c < p.len0 + p.len1) {
        y[to] = x1[upsampled(o * p.len1 + c - p.len0, e, UP1)];
    } else if (c < p.len0 + p.len1 + p.len2) {
        y[to] = x2[upsampled(o * p.len2 + c - p.len0 - p.len1, e, UP2)];
    } else {
        uint len3 = p.count - p.len0 - p.len1 - p.len2;
        y[to] = x3[upsampled(o * len3 + c - p.len0 - p.len1 - p.len2, e, UP3)];
    }
}

void main() {
    if (PLANES) {
        uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
        for (uint e = gl_GlobalInvocationID.x; e < p.inner; e += stride) move(gl_WorkGroupID.z, gl_WorkGroupID.y, e);
        return;
    }
    uint i = flat_index();
    if (i >= p.n) return;
    uint rest = i / p.inner;
    move(rest / p.count, rest % p.count, i % p.inner);
}
