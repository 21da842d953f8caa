#version 450
// Multi-head self-attention over a fused q/k/v tensor, QUERIES query rows per workgroup (gl_WorkGroupID = (block of
// rows, head, image)), where it took eleven dispatches (SVTR's Transpose, three Slices, Mul and Add on q, Transpose of k,
// MatMul, Softmax, MatMul, Transpose):
//   q' = (q · scale) + add                    each rounded to the storage type, as the Mul and Add stored it
//   s_j = q' · k_j                            j < T, gemm.comp's chain of fmas over d < D, rounded
//   p_j = exp(s_j − max s) / Σ exp(s − max s)  softmax.comp's order: each row has its S invocations (S =
//                                             gl_WorkGroupSize.x / QUERIES, softmax.comp's workgroup for the row:
//                                             a power of two), each sums its j ascending, then the same tree
//   out[n, t, head, :] = Σ_j p_j · v_j        gemm.comp's chain of fmas over j (SLICES > 1: its sliced tile's
//                                             chains over SLICE_K-long ranges, added in slice order)
// with qkv laid out (N, T, 3, HEADS, D) and out (N, T, HEADS, D). So the answer is the eleven nodes' own, bit for
// bit, where gemm.comp ran both products (T ≥ 2; the host checks), q', s and p rounded by storage.glsl's
// `as_stored`. The rows of a workgroup share its staged k and v: a short row's workgroup (rec's 40 positions
// make 64 invocations) staged the head's k and v for one query, forty times over per head.
#include "common.glsl"
#include "storage.glsl"

layout(constant_id = 3) const uint SLICES = 1;     // the second product's K (= T) split, as gemm_tile.glsl's
layout(constant_id = 4) const bool HAS_ADD = false;
// Shared memory sized to the shape (the host rounds up to powers of two): ROWS ≥ T positions of a row; KV ≥ T·D
// holds the image's head's k and v, staged once by the whole workgroup (many loads in flight) before the two
// products read them, where each invocation otherwise waited on one load after another (0: read them from qkv).
layout(constant_id = 5) const uint ROWS = 2048;
layout(constant_id = 6) const uint KV = 0;
layout(constant_id = 7) const uint QUERIES = 1;  // query rows per workgroup, S invocations each

const uint MAX_D = 64;

layout(std430, set = 0, binding = 0) restrict readonly buffer BufQKV { STORE_T qkv[]; };
layout(std430, set = 0, binding = 1) restrict writeonly buffer BufOut { STORE_T y[]; };

layout(push_constant) uniform Params {
    uint T, heads, D;
    uint slice_k;       // keys per slice of the second product (SLICES > 1)
    float scale, add;   // q's factor and addend, as stored (rounded to the storage type by the host)
} p;

const uint S = gl_WorkGroupSize.x / QUERIES;  // invocations per query row

shared float q[QUERIES * MAX_D];
shared float row[QUERIES * ROWS];  // s, then p: [query row][position]
shared float ks[KV == 0 ? 1 : KV];
shared float vs[KV == 0 ? 1 : KV];
shared float partial[256];      // [query row][lane]: the workgroup holds at most 256 invocations

#define NEG_INF uintBitsToFloat(0xff800000u)

// softmax.comp's workgroup_max and workgroup_sum over each row's S lanes: the same tree
float tree(float v, bool take_max) {
    uint t = gl_LocalInvocationID.x, lane = t % S;
    partial[t] = v;
    barrier();
    for (uint s = S / 2; s > 0; s >>= 1) {
        if (lane < s) partial[t] = take_max ? max(partial[t], partial[t + s]) : partial[t] + partial[t + s];
        barrier();
    }
    float result = partial[t - lane];
    barrier();
    return result;
}

void main() {
    uint t = gl_LocalInvocationID.x, step = gl_WorkGroupSize.x;  // step: the whole workgroup (staging)
    uint lane = t % S, r = t / S;  // this invocation's lane of its query row r
    uint query = gl_WorkGroupID.x * QUERIES + r, head = gl_WorkGroupID.y, image = gl_WorkGroupID.z;
    bool live = query < p.T;  // rows past the end compute nothing, and meet every barrier
    uint qr = r * MAX_D, rr = r * ROWS;  // the row's q and s/p in shared memory
    uint token = 3 * p.heads * p.D;                       // elements per (image, position) of qkv
    uint q_at = (image * p.T + query) * token + head * p.D;
    uint k_at = image * p.T * token + p.heads * p.D + head * p.D;
    uint v_at = k_at + p.heads * p.D;

    for (uint d = lane; live && d < p.D; d += S) {
        float v = as_stored(float(qkv[q_at + d]) * p.scale);
        q[qr + d] = HAS_ADD ? as_stored(v + p.add) : v;
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
    for (uint j = lane; live && j < p.T; j += S) {
        float acc = 0.0;
        for (uint d = 0; d < p.D; ++d) {
            acc = fma(q[qr + d], KV > 0 ? ks[j * p.D + d] : float(qkv[k_at + j * token + d]), acc);
        }
        row[rr + j] = as_stored(acc);
        m = max(m, row[rr + j]);
    }
    m = tree(m, true);
    float s = 0.0;
    for (uint j = lane; live && j < p.T; j += S) s += exp(row[rr + j] - m);
    float inv_sum = 1.0 / tree(s, false);
    for (uint j = lane; live && j < p.T; j += S) row[rr + j] = as_stored(exp(row[rr + j] - m) * inv_sum);
    barrier();

    for (uint d = lane; live && d < p.D; d += S) {
        float total = 0.0;
        for (uint slice = 0; slice < SLICES; ++slice) {
            uint first = SLICES == 1 ? 0 : slice * p.slice_k;
            uint end = SLICES == 1 ? p.T : min(p.T, first + p.slice_k);
            float acc = 0.0;
            for (uint j = first; j < end; ++j) {
                acc = fma(row[rr + j], KV > 0 ? vs[j * p.D + d] : float(qkv[v_at + j * token + d]), acc);
            }
            total = slice == 0 ? acc : total + acc;
        }
        y[((image * p.T + query) * p.heads + head) * p.D + d] = STORE(total);
    }
}
