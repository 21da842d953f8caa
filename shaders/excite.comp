#version 450
// The excitation of a squeeze-and-excitation block in one dispatch, where it took three (two 1×1 convolutions on
// the squeezed 1×1 map, on gemv.comp, then the Mul or GatedAdd on binary.comp):
//   h[n, j] = act1(Σ_k W1[j, k] · s[n, k] + b1[j])          j < C1 (the hidden width), k < C
//   g[n, c] = act2(Σ_j W2[c, j] · h[n, j] + b2[c])          c < C
//   y[n, c, p] = x[n, c, p] · g[n, c]        (GATED_ADD false: Mul)
//              = x + x · g                   (GATED_ADD true: the residual of passes.fuse_gate's GatedAdd)
// A workgroup owns CHANNELS channels × PIXELS pixels of one image (gl_WorkGroupID = (pixel block, channel block,
// image)). It works out h whole and g for its channels, then scales its block: the two small products are
// repeated by every workgroup of the image, which costs less than the two dispatches and barriers they replace
// while C · C1 stays small (the host fuses only such blocks: vk/kernels/excite.py).
//
// Both products sum as gemv.comp does for the same K (LANES1, LANES2: its lanes per row, which the host takes
// from vk/kernels/gemv.py), with the same partial sums, the same tree and the same epilogue, and round h and g
// to the storage type as the replaced nodes stored them (storage.glsl's `as_stored`): the answer is theirs.
// Unlike gemv.comp, a workgroup holds the partial sums of many rows at once (PARTIALS / LANES rows per pass), so
// the loads of all rows fly together instead of one block of rows after another.
// With UP > 1, the output is an FPN's upsample-and-add instead (map_fusion.fuse_excite_upsample_add): a nearest
// Resize of a smaller map u by the integer factor UP on both axes (source floor(y / UP)), plus this excitation:
//   out[n, c, y, x] = u[n, c, y / UP, x / UP] + y_excite[n, c, y, x]
// in fp32, the excitation rounded to the storage type first, as the Excite stored it and the Resize read it.
#include "common.glsl"
#include "storage.glsl"
#include "activation.glsl"

layout(constant_id = 3) const uint LANES1 = 16;
layout(constant_id = 4) const uint LANES2 = 16;
layout(constant_id = 5) const uint CHANNELS = 4;   // channels per workgroup, ≤ MAX_CHANNELS
layout(constant_id = 6) const bool GATED_ADD = false;
layout(constant_id = 7) const uint PER_INVOCATION = 4;  // pixels of each channel per invocation, THREADS apart
layout(constant_id = 8) const uint UP = 1;  // > 1: add u upsampled by this factor (see above), as concat.comp's UPi

const uint THREADS = 256;                     // the workgroup size (constant id 0)
const uint PIXELS = THREADS * PER_INVOCATION; // per workgroup
// Loads in flight per invocation while scaling: BATCH channels' PER_INVOCATION pixels, all issued before their
// stores. One channel at a time (4 loads, or 1 on small maps) left each workgroup waiting out a load's latency
// per channel, and the image's workgroups are few (tens to a few hundred: vk/kernels/excite.py).
const uint LOADS = 16;
const uint BATCH = LOADS / PER_INVOCATION;    // channels per batch (PER_INVOCATION divides LOADS: the host's 1 or 4)
const uint PARTIALS = 4096;                   // partial sums in shared memory: rows per pass = PARTIALS / LANES
const uint MAX_HIDDEN = 1024;                 // C1 ≤ this (the host checks)
const uint MAX_CHANNELS = 64;

layout(std430, set = 0, binding = 0) restrict readonly buffer BufX { STORE_T x[]; };
layout(std430, set = 0, binding = 1) restrict readonly buffer BufS { STORE_T s[]; };
layout(std430, set = 0, binding = 2) restrict readonly buffer BufW1 { STORE_T w1[]; };
layout(std430, set = 0, binding = 3) restrict readonly buffer BufB1 { STORE_T b1[]; };
layout(std430, set = 0, binding = 4) restrict readonly buffer BufW2 { STORE_T w2[]; };
layout(std430, set = 0, binding = 5) restrict readonly buffer BufB2 { STORE_T b2[]; };
layout(std430, set = 0, binding = 6) restrict writeonly buffer BufOut { STORE_T y[]; };
layout(std430, set = 0, binding = 7) restrict readonly buffer BufU { STORE_T u[]; };  // read only with UP > 1

layout(push_constant) uniform Params {
    uint C, C1;        // channels of x and s; hidden width
    uint P;            // pixels per channel (H · W)
    uint has_b1, act1;
    float act1_alpha, act1_beta;
    uint has_b2, act2;
    float act2_alpha, act2_beta;
    uint W;            // the map's width (read only with UP > 1: P = H · W)
} p;

shared float partial[PARTIALS];
shared float hidden[MAX_HIDDEN];
shared float gate[MAX_CHANNELS];

// gemv.comp's lane sum: lane `lane` of a row adds k = lane + j·lanes in four interleaved partial sums. The
// second product reads h from shared memory, the first s from the buffer: FROM_HIDDEN picks.
float lane_sum(uint row_base, uint x_base, uint K, uint lane, uint lanes, bool from_hidden) {
    float s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    uint k = lane;
    if (from_hidden) {
        for (; k + 3 * lanes < K; k += 4 * lanes) {
            s0 += float(w2[row_base + k]) * hidden[k];
            s1 += float(w2[row_base + k + lanes]) * hidden[k + lanes];
            s2 += float(w2[row_base + k + 2 * lanes]) * hidden[k + 2 * lanes];
            s3 += float(w2[row_base + k + 3 * lanes]) * hidden[k + 3 * lanes];
        }
        for (; k < K; k += lanes) s0 += float(w2[row_base + k]) * hidden[k];
    } else {
        for (; k + 3 * lanes < K; k += 4 * lanes) {
            s0 += float(w1[row_base + k]) * float(s[x_base + k]);
            s1 += float(w1[row_base + k + lanes]) * float(s[x_base + k + lanes]);
            s2 += float(w1[row_base + k + 2 * lanes]) * float(s[x_base + k + 2 * lanes]);
            s3 += float(w1[row_base + k + 3 * lanes]) * float(s[x_base + k + 3 * lanes]);
        }
        for (; k < K; k += lanes) s0 += float(w1[row_base + k]) * float(s[x_base + k]);
    }
    return (s0 + s1) + (s2 + s3);
}

// Rows first_row .. first_row + rows - 1 of one product into `partial` (row r's lanes at (r - first_row)·lanes),
// then gemv.comp's tree over each row's lanes. On return partial[(r - first_row)·lanes] holds row r's sum.
void row_sums(uint first_row, uint rows, uint K, uint lanes, uint x_base, bool from_hidden) {
    uint t = gl_LocalInvocationIndex;
    for (uint e = t; e < rows * lanes; e += THREADS) {
        uint r = e / lanes, lane = e % lanes;
        uint row = first_row + r;
        partial[e] = lane_sum(row * K, x_base, K, lane, lanes, from_hidden);
    }
    for (uint half_lanes = lanes / 2; half_lanes > 0; half_lanes /= 2) {
        barrier();
        for (uint e = t; e < rows * (lanes / 2); e += THREADS) {
            uint r = e / (lanes / 2), lane = e % (lanes / 2);
            if (lane < half_lanes) partial[r * lanes + lane] += partial[r * lanes + lane + half_lanes];
        }
    }
    barrier();
}

void main() {
    uint t = gl_LocalInvocationIndex;
    uint image = gl_WorkGroupID.z;
    uint c0 = gl_WorkGroupID.y * CHANNELS;
    uint channels = min(CHANNELS, p.C - c0);

    // h: every hidden row, PARTIALS / LANES1 rows per pass
    uint per_pass = PARTIALS / LANES1;
    for (uint j0 = 0; j0 < p.C1; j0 += per_pass) {
        uint rows = min(per_pass, p.C1 - j0);
        row_sums(j0, rows, p.C, LANES1, image * p.C, false);
        for (uint r = t; r < rows; r += THREADS) {
            float v = partial[r * LANES1];
            if (p.has_b1 != 0) v += float(b1[j0 + r]);
            hidden[j0 + r] = as_stored(activate(v, int(p.act1), p.act1_alpha, p.act1_beta));
        }
        barrier();  // hidden complete after the last pass; partial free for the next
    }

    // g: this workgroup's channels
    row_sums(c0, channels, p.C1, LANES2, 0, true);
    if (t < channels) {
        float v = partial[t * LANES2];
        if (p.has_b2 != 0) v += float(b2[c0 + t]);
        gate[t] = as_stored(activate(v, int(p.act2), p.act2_alpha, p.act2_beta));
    }
    barrier();

    // y: PER_INVOCATION pixels of each channel per invocation, all loads of a batch of channels issued before its
    // stores; rounded once, as binary.comp rounds the Mul or GatedAdd
    uint first_pixel = gl_WorkGroupID.x * PIXELS + t;
    // With UP > 1: where each of this invocation's pixels gathers from in a plane of u, worked out once for all
    // channels, and u's elements loaded with x's, before the stores. (The first fused kernel divided by the width
    // for every pixel of every channel and loaded u at the store: on an H100 its three nodes took 101 µs at det's
    // 736×1024 in fp32, as the Excites and Resizes apart did.)
    uint gathered[PER_INVOCATION];
    [[unroll]] for (uint i = 0; i < PER_INVOCATION; ++i) {
        uint pixel = first_pixel + i * THREADS, row = UP > 1 ? pixel / p.W : 0u;
        gathered[i] = UP > 1 ? (row / UP) * (p.W / UP) + (pixel - row * p.W) / UP : 0u;
    }
    for (uint c = 0; c < channels; c += BATCH) {
        float v[LOADS], added[LOADS];  // [channel of the batch][pixel]
        [[unroll]] for (uint j = 0; j < BATCH; ++j) {
            bool live = c + j < channels;
            uint plane = (image * p.C + c0 + c + j) * p.P;
            uint gathered_plane = (image * p.C + c0 + c + j) * (p.P / (UP * UP));
            [[unroll]] for (uint i = 0; i < PER_INVOCATION; ++i) {
                uint pixel = first_pixel + i * THREADS;
                bool inside = live && pixel < p.P;
                v[j * PER_INVOCATION + i] = inside ? float(x[plane + pixel]) : 0.0;
                added[j * PER_INVOCATION + i] = UP > 1 && inside ? float(u[gathered_plane + gathered[i]]) : 0.0;
            }
        }
        [[unroll]] for (uint j = 0; j < BATCH; ++j) {
            if (c + j >= channels) break;
            uint plane = (image * p.C + c0 + c + j) * p.P;
            float g = gate[c + j];
            [[unroll]] for (uint i = 0; i < PER_INVOCATION; ++i) {
                uint pixel = first_pixel + i * THREADS;
                if (pixel >= p.P) break;
                float xv = v[j * PER_INVOCATION + i];
                precise float result;  // precise: never contracted with the add below into one rounding
                if (GATED_ADD) {
                    precise float gated = xv * g;  // rounded before the add, as the Mul and Add it replaces
                    result = xv + gated;
                } else {
                    result = xv * g;
                }
                if (UP > 1) {
                    y[plane + pixel] = STORE(added[j * PER_INVOCATION + i] + as_stored(result));
                } else {
                    y[plane + pixel] = STORE(result);
                }
            }
        }
    }
}
