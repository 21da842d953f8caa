#version 450
// ONNX Conv (NCHW) as an implicit GEMM, one GEMM per (image, group) = gl_WorkGroupID.z:
//   out[img, g·Cog + m, n] = act(bias[g·Cog + m] + Σ_k W[g·Cog + m, k] · im2col[k, n]) (· post_scale + post_shift)
//                            (+ residual[img, g·Cog + m, n]: the Add that passes.fuse_residual folded in)
// with M = Cout/group, N = Hout·Wout, K = (Cin/group)·KH·KW. load_b builds the im2col element on the fly
// (zero in the padding); POINTWISE (1×1, stride 1, no padding) reads the input as a plain K × N matrix.
// The kernel size is a specialization constant so that splitting k into (channel, row, column) is a
// multiply-shift rather than two integer divisions per fetched element.
#include "common.glsl"
#include "storage.glsl"
#include "activation.glsl"

layout(constant_id = 8) const bool POINTWISE = false;
layout(constant_id = 9) const uint KH = 3;
layout(constant_id = 10) const uint KW = 3;
layout(constant_id = 11) const bool POST_AFFINE = false;  // scale and shift after the activation
layout(constant_id = 12) const bool RESIDUAL = false;     // add the residual tensor last
layout(constant_id = 13) const bool VECTOR_STORES = false;  // store_c4 writes 4 columns at once (the host's rule)
layout(constant_id = 14) const bool VECTOR_LOADS = false;  // POINTWISE only: gemm_tile.glsl's B_VEC4 (the host's rule)
#define HAS_LOAD_B4
const bool B_VEC4 = POINTWISE && VECTOR_LOADS;
const bool A_K_FAST = true;   // weights are row-major (Cout, Cin/group·KH·KW)
const bool B_N_FAST = true;   // consecutive n are consecutive output columns

layout(std430, set = 0, binding = 0) readonly buffer BufX { STORE_T x[]; };
layout(std430, set = 0, binding = 1) readonly buffer BufW { STORE_T w[]; };
layout(std430, set = 0, binding = 2) readonly buffer BufBias { STORE_T bias[]; };
layout(std430, set = 0, binding = 3) writeonly buffer BufOut { STORE_T y[]; };
layout(std430, set = 0, binding = 4) readonly buffer BufResidual { STORE_T residual[]; };
// Three bindings again as vectors, for load_b4 and store_c4 (views start 16-byte aligned: vk/device.py's alignment)
layout(std430, set = 0, binding = 0) readonly buffer BufX4 { STORE4_T x4[]; };
layout(std430, set = 0, binding = 3) writeonly buffer BufOut4 { STORE4_T y4[]; };
layout(std430, set = 0, binding = 4) readonly buffer BufResidual4 { STORE4_T residual4[]; };

layout(push_constant) uniform Params {
    uint group;
    uint cin_g, cout_g;  // channels per group
    uint H, W;           // input spatial size
    uint Hout, Wout;
    uint stride_h, stride_w;
    uint dil_h, dil_w;
    uint pad_top, pad_left;
    uint has_bias;
    uint act;
    float act_alpha, act_beta;
    float post_scale, post_shift;  // read only when POST_AFFINE
} p;

uint base_x, base_w, base_y, first_channel;

float load_a(uint batch, uint m, uint k) { return float(w[base_w + m * (p.cin_g * KH * KW) + k]); }

// (top row, left column) of output pixel n's receptive field in the unpadded input, or its address if POINTWISE
uvec4 b_column(uint batch, uint n) {
    if (POINTWISE) return uvec4(base_x + n, 0, 0, 0);
    uint oh = n / p.Wout, ow = n - oh * p.Wout;
    return uvec4(oh * p.stride_h - p.pad_top, ow * p.stride_w - p.pad_left, 0, 0);
}

float load_b(uint batch, uint k, uint n, uvec4 col) {
    if (POINTWISE) return float(x[col.x + k * (p.H * p.W)]);
    uint ci = k / (KH * KW), tap = k % (KH * KW);
    // unsigned wrap-around makes rows/columns in the top/left padding fail the < test too
    uint ih = col.x + (tap / KW) * p.dil_h, iw = col.y + (tap % KW) * p.dil_w;
    if (ih >= p.H || iw >= p.W) return 0.0;
    return float(x[base_x + (ci * p.H + ih) * p.W + iw]);
}

bool load_b4(uint batch, uint k, uint n, out vec4 v) {
    uint at = base_x + n + k * (p.H * p.W);
    v = vec4(0.0);
    if ((at & 3u) != 0u) return false;
    v = vec4(x4[at >> 2]);
    return true;
}

// bias, activation and affine of output channel m (the residual comes after)
float epilogue(uint m, float acc) {
    if (p.has_bias != 0) acc += float(bias[first_channel + m]);
    float v = activate(acc, int(p.act), p.act_alpha, p.act_beta);
    if (POST_AFFINE) v = post_affine(v, p.post_scale, p.post_shift);
    return v;
}

void store_c(uint batch, uint m, uint n, float acc) {
    float v = epilogue(m, acc);
    uint at = base_y + m * (p.Hout * p.Wout) + n;
    if (RESIDUAL) v += float(residual[at]);
    y[at] = STORE(v);
}

bool store_c4(uint batch, uint m, uint n, vec4 acc) {
    uint at = base_y + m * (p.Hout * p.Wout) + n;
    if (!VECTOR_STORES || (at & 3u) != 0u) return false;
    vec4 v = vec4(epilogue(m, acc.x), epilogue(m, acc.y), epilogue(m, acc.z), epilogue(m, acc.w));
    if (RESIDUAL) v += vec4(residual4[at >> 2]);
    y4[at >> 2] = STORE4(v);
    return true;
}

#include "gemm_tile.glsl"

void main() {
    uint image = gl_WorkGroupID.z / p.group, g = gl_WorkGroupID.z % p.group;
    uint cin = p.cin_g * p.group, cout = p.cout_g * p.group;
    first_channel = g * p.cout_g;
    base_x = (image * cin + g * p.cin_g) * (p.H * p.W);
    base_w = first_channel * (p.cin_g * KH * KW);
    base_y = (image * cout + first_channel) * (p.Hout * p.Wout);
    gemm_tile(gl_WorkGroupID.z, p.cout_g, p.Hout * p.Wout, p.cin_g * KH * KW);
}
