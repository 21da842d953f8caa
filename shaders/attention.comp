#version 450
// Multi-head self-attention over a fused q/k/v tensor, one workgroup per query row (gl_WorkGroupID = (t, head,
// image)), where it took eleven dispatches (SVTR's Transpose, three Slices, Mul and Add on q, Transpose of k,
// MatMul, Softmax, MatMul, Transpose):
//   q' = (q · scale) + add                    each rounded to the storage type, as the Mul and Add stored it
//   s_j = q' · k_j                            j < T, gemm.comp's chain of fmas over d < D, rounded
//   p_j = exp(s_j − max s) / Σ exp(s − max s)  softmax.comp's order: the workgroup is its row's (power of two),
//                                             each invocation sums its j ascending, then the same tree
//   out[n, t, head, :] = Σ_j p_j · v_j        gemm.comp's chain of fmas over j (SLICES > 1: its sliced tile's
//                                             chains over SLICE_K-long ranges, added in slice order)
// with qkv laid out (N, T, 3, HEADS, D) and out (N, T, HEADS, D). So the answer is the eleven nodes' own, bit for
// bit, where gemm.comp ran both products (T ≥ 2; the host checks), q', s and p rounded by storage.glsl's
// `as_stored`.
#include "common.glsl"
#include "storage.glsl"

layout(constant_id = 3) const uint SLICES = 1;     // the second product's K (= T) split, as gemm_tile.glsl's
layout(constant_id = 4) const bool HAS_ADD = false;
// Shared memory sized to the shape (the host rounds up to powers of two): ROWS ≥ T positions of a row; KV ≥ T·D
// holds the image's head's k and v, staged once by the whole workgroup (many loads in flight) before the two
// products read them, where each invocation otherwise waited on one load after another (0: read them from qkv).
layout(constant_id = 5) const uint ROWS = 2048;
layout(constant_id = 6) const uint KV = 0;

const uint MAX_D = 64;

layout(std430, set = 0, binding = 0) restrict readonly buffer BufQKV { STORE_T qkv[]; };
layout(std430, set = 0, binding = 1) restrict writeonly buffer BufOut { STORE_T y[]; };

layout(push_constant) uniform Params {
    uint T, heads, D;
    uint slice_k;       // keys per slice of the second product (SLICES > 1)
    float scale, add;   // q's factor and addend, as stored (rounded to the storage type by the host)
} p;

shared float q[MAX_D];
shared float row[ROWS];         // s, then p
shared float ks[KV == 0 ? 1 : KV];
shared float vs[KV == 0 ? 1 : KV];
shared float partial[256];      // the workgroup size is a power of two ≤ 256

#define NEG_INF uintBitsToFloat(0xff800000u)

// softmax.comp's workgroup_max and workgroup_sum: the same tree
float tree(float v, bool take_max) {
    uint t = gl_LocalInvocationID.x;
    partial[t] = v;
    barrier();
    for (uint s = gl_WorkGroupSize.x / 2; s > 0; s >>= 1) {
        if (t < s) partial[t] = take_max ? max(partial[t], partial[t + s]) : partial[t] + partial[t + s];
        barrier();
    }
    float result = partial[0];
    barrier();
    return result;
}

void main() {
    uint t = gl_LocalInvocationID.x, step = gl_WorkGroupSize.x;
    uint query = gl_WorkGroupID.x, head = gl_WorkGroupID.y, image = gl_WorkGroupID.z;
    uint token = 3 * p.heads * p.D;                       // elements per (image, position) of qkv
    uint q_at = (image * p.T + query) * token + head * p.D;
    uint k_at = image * p.T * token + p.heads * p.D + head * p.D;
    uint v_at = k_at + p.heads * p.D;

    for (uint d = t; d < p.D; d += step) {
        float v = as_stored(float(qkv[q_at + d]) * p.scale);
        q[d] = HAS_ADD ? as_stored(v + p.add) : v;
    }
    if (KV > 0) {  // element i = j·D + d of k and of v; four of each loaded together
        uint n = p.T * p.D;
        uint i = t;
        for (; i + 3 * step < n; i += 4 * step) {
            uvec4 e = uvec4(i, i + step, i + 2 * step, i + 3 * step);
            uvec4 j = e / p.D;
            uvec4 at = j * token + (e - j * p.D);
            vec4 kk = vec4(float(qkv[k_at + at.x]), float(qkv[k_at + at.y]), float(qkv[k_at + at.z]),
                           float(qkv[k_at + at.w]));
            vec4 vv = vec4(float(qkv[v_at + at.x]), float(qkv[v_at + at.y]), float(qkv[v_at + at.z]),
                           float(qkv[v_at + at.w]));
            ks[e.x] = kk.x; ks[e.y] = kk.y; ks[e.z] = kk.z; ks[e.w] = kk.w;
            vs[e.x] = vv.x; vs[e.y] = vv.y; vs[e.z] = vv.z; vs[e.w] = vv.w;
        }
        for (; i < n; i += step) {
            uint j = i / p.D, at = j * token + (i - j * p.D);
            ks[i] = float(qkv[k_at + at]);
            vs[i] = float(qkv[v_at + at]);
        }
    }
    barrier();

    // s and its max: invocation t takes j = t, t + step, ... (softmax.comp's split of the row)
    float m = NEG_INF;
    for (uint j = t; j < p.T; j += step) {
        float acc = 0.0;
        for (uint d = 0; d < p.D; ++d) {
            acc = fma(q[d], KV > 0 ? ks[j * p.D + d] : float(qkv[k_at + j * token + d]), acc);
        }
        row[j] = as_stored(acc);
        m = max(m, row[j]);
    }
    m = tree(m, true);
    float s = 0.0;
    for (uint j = t; j < p.T; j += step) s += exp(row[j] - m);
    float inv_sum = 1.0 / tree(s, false);
    for (uint j = t; j < p.T; j += step) row[j] = as_stored(exp(row[j] - m) * inv_sum);
    barrier();

    for (uint d = t; d < p.D; d += step) {
        float total = 0.0;
        for (uint slice = 0; slice < SLICES; ++slice) {
            uint first = SLICES == 1 ? 0 : slice * p.slice_k;
            uint end = SLICES == 1 ? p.T : min(p.T, first + p.slice_k);
            float acc = 0.0;
            for (uint j = first; j < end; ++j) {
                acc = fma(row[j], KV > 0 ? vs[j * p.D + d] : float(qkv[v_at + j * token + d]), acc);
            }
            total = slice == 0 ? acc : total + acc;
        }
        y[((image * p.T + query) * p.heads + head) * p.D + d] = STORE(total);
    }
}
