#version 450
// The matrix units' ceiling as our kernels reach them (`vkocr bench kernels`): each subgroup multiplies
// cooperative matrices `iterations` times into four accumulators, with the fragments
//   SOURCE 0: loaded once into registers before the loop (the multiply-add alone);
//   SOURCE 1: loaded from a float16_t shared array every iteration (two A and two B fragments per four products,
//             as pointwise_staged.comp's SQUARE subgroup takes them);
//   SOURCE 2: the same from a uvec4 shared array (what pointwise_staged.comp declares);
// and the accumulators held as four named matrices (NAMED) or as an array indexed in an unrolled loop (what the
// kernels do). Each subgroup stores its sums at the end, so nothing is dead. FLOPs per workgroup:
// SG · iterations · 4 · 2·TM·TN·TK.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#include "common.glsl"

layout(constant_id = 3) const uint TM = 16;
layout(constant_id = 4) const uint TN = 16;
layout(constant_id = 5) const uint TK = 16;
layout(constant_id = 6) const uint SOURCE = 0;
layout(constant_id = 7) const bool NAMED = true;

const uint FRAGS = 8;  // A and B fragments in shared memory, cycled through by the iterations
const uint A_HALVES = TM * TK, B_HALVES = TK * TN;

layout(std430, set = 0, binding = 0) readonly buffer BufIn { float16_t src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer BufOut { float dst[]; };

layout(push_constant) uniform Params {
    uint iterations;
} p;

shared float16_t frags_h[FRAGS * (A_HALVES + B_HALVES)];
shared uvec4 frags_v[FRAGS * (A_HALVES + B_HALVES) / 8];

#define FRAG_A coopmat<float16_t, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA>
#define FRAG_B coopmat<float16_t, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB>
#define ACC coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>

void load_a(out FRAG_A a, uint f) {
    if (SOURCE == 2) coopMatLoad(a, frags_v, f * A_HALVES / 8, TK / 8, gl_CooperativeMatrixLayoutRowMajor);
    else coopMatLoad(a, frags_h, f * A_HALVES, TK, gl_CooperativeMatrixLayoutRowMajor);
}

void load_b(out FRAG_B b, uint f) {
    uint at = FRAGS * A_HALVES + f * B_HALVES;
    if (SOURCE == 2) coopMatLoad(b, frags_v, at / 8, TN / 8, gl_CooperativeMatrixLayoutRowMajor);
    else coopMatLoad(b, frags_h, at, TN, gl_CooperativeMatrixLayoutRowMajor);
}

void main() {
    uint total = FRAGS * (A_HALVES + B_HALVES);
    for (uint e = gl_LocalInvocationIndex; e < total; e += gl_WorkGroupSize.x) {
        float16_t v = src[e];
        frags_h[e] = v;
    }
    for (uint e = gl_LocalInvocationIndex; e < total / 8; e += gl_WorkGroupSize.x) {
        uint at = e * 8;
        frags_v[e] = uvec4(packFloat2x16(f16vec2(src[at], src[at + 1])), packFloat2x16(f16vec2(src[at + 2], src[at + 3])),
                           packFloat2x16(f16vec2(src[at + 4], src[at + 5])), packFloat2x16(f16vec2(src[at + 6], src[at + 7])));
    }
    barrier();

    FRAG_A a0, a1;
    FRAG_B b0, b1;
    load_a(a0, 0);
    load_a(a1, 1);
    load_b(b0, 0);
    load_b(b1, 1);
    ACC c0 = ACC(0.0), c1 = ACC(0.0), c2 = ACC(0.0), c3 = ACC(0.0);
    ACC acc[4];
    [[unroll]] for (uint i = 0; i < 4; ++i) acc[i] = ACC(0.0);

    for (uint it = 0; it < p.iterations; ++it) {
        if (SOURCE != 0) {
            uint f = (it * 2) % FRAGS;
            load_a(a0, f);
            load_a(a1, f + 1);
            load_b(b0, f);
            load_b(b1, f + 1);
        }
        if (NAMED) {
            c0 = coopMatMulAdd(a0, b0, c0);
            c1 = coopMatMulAdd(a0, b1, c1);
            c2 = coopMatMulAdd(a1, b0, c2);
            c3 = coopMatMulAdd(a1, b1, c3);
        } else {
            FRAG_A a[2];
            FRAG_B b[2];
            a[0] = a0;
            a[1] = a1;
            b[0] = b0;
            b[1] = b1;
            [[unroll]] for (uint fm = 0; fm < 2; ++fm) {
                [[unroll]] for (uint fn = 0; fn < 2; ++fn) acc[fm * 2 + fn] = coopMatMulAdd(a[fm], b[fn], acc[fm * 2 + fn]);
            }
        }
    }
    if (!NAMED) {
        c0 = acc[0];
        c1 = acc[1];
        c2 = acc[2];
        c3 = acc[3];
    }
    uint sg = gl_WorkGroupID.x * gl_NumSubgroups + gl_SubgroupID;
    uint at = sg * 4 * TM * TN;
    coopMatStore(c0, dst, at, TN, gl_CooperativeMatrixLayoutRowMajor);
    coopMatStore(c1, dst, at + TM * TN, TN, gl_CooperativeMatrixLayoutRowMajor);
    coopMatStore(c2, dst, at + 2 * TM * TN, TN, gl_CooperativeMatrixLayoutRowMajor);
    coopMatStore(c3, dst, at + 3 * TM * TN, TN, gl_CooperativeMatrixLayoutRowMajor);
}
