// The max and the sum of exp(x - max) over an invocation's share of a row (elements t, t + step, ... of the row
// at `base`, element k at base + k · inner): softmax.comp's first two passes, which argmax.comp's SOFTMAX mode
// repeats to give the very same probabilities, so both take them from here. Eight strided elements are loaded
// together, then taken one by one in index order: the same max and sum as one element at a time, bit for bit,
// without waiting on each load in turn. Include after the kernel's `x` buffer and its push constants `p`
// (row_len, inner).

// Element k + j·step of the row, and elements k .. k + 7·step into a and b (named vectors: an array spills on
// NVIDIA)
#define ROW_AT(k, j) (base + ((k) + (j) * step) * p.inner)
#define ROW_LOAD8(a, b, k) \
    a = vec4(float(x[ROW_AT(k, 0)]), float(x[ROW_AT(k, 1)]), float(x[ROW_AT(k, 2)]), float(x[ROW_AT(k, 3)])); \
    b = vec4(float(x[ROW_AT(k, 4)]), float(x[ROW_AT(k, 5)]), float(x[ROW_AT(k, 6)]), float(x[ROW_AT(k, 7)]))

float row_max(uint base, uint t, uint step) {
    float m = uintBitsToFloat(0xff800000u);  // -inf
    uint k = t;
    for (; k + 7 * step < p.row_len; k += 8 * step) {
        vec4 a, b;
        ROW_LOAD8(a, b, k);
        m = max(max(max(max(m, a.x), a.y), a.z), a.w);
        m = max(max(max(max(m, b.x), b.y), b.z), b.w);
    }
    for (; k < p.row_len; k += step) m = max(m, float(x[base + k * p.inner]));
    return m;
}

float row_exp_sum(uint base, uint t, uint step, float m) {
    float s = 0.0;
    uint k = t;
    for (; k + 7 * step < p.row_len; k += 8 * step) {
        vec4 a, b;
        ROW_LOAD8(a, b, k);
        s += exp(a.x - m); s += exp(a.y - m); s += exp(a.z - m); s += exp(a.w - m);
        s += exp(b.x - m); s += exp(b.y - m); s += exp(b.z - m); s += exp(b.w - m);
    }
    for (; k < p.row_len; k += step) s += exp(float(x[base + k * p.inner]) - m);
    return s;
}
