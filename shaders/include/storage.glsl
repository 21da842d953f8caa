// The storage type of a kernel's tensors, chosen when compiling: one source, one SPIR-V per precision
// (shaders/build.py compiles every kernel that includes this file twice: `<name>.spv` with fp32 storage and
// `<name>.fp16.spv` with -DFP16). Arithmetic stays fp32 in both: load with `float(x[i])` / `vec4(x4[i])`, store
// with `STORE(v)` / `STORE4(v)`, so sums, reductions and epilogues accumulate in fp32 and round once on store.
// Only 16-bit *storage* is used (capability StorageBuffer16BitAccess), never fp16 arithmetic.
#ifdef FP16
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#define STORE_T float16_t
#define STORE4_T f16vec4
#else
#define STORE_T float
#define STORE4_T vec4
#endif
#define STORE(v) STORE_T(v)
#define STORE4(v) STORE4_T(v)

// v rounded as STORE(v) rounds it (to nearest, ties to even), kept in fp32: for a fused kernel that holds in
// registers or shared memory what the nodes it replaces stored, so that it computes their answer bit for bit.
// Spelt out in bits, since a compiler may drop a conversion to fp16 and straight back (NVIDIA's did: fused fp16
// answers were an ulp off the unfused ones').
float as_stored(float v) {
#ifdef FP16
    if (isnan(v)) return v;
    if (abs(v) < 6.103515625e-05) return roundEven(v * 16777216.0) / 16777216.0;  // fp16 subnormals: steps of 2^-24
    uint u = floatBitsToUint(v);
    float r = uintBitsToFloat((u + 0x0FFFu + ((u >> 13) & 1u)) & 0xFFFFE000u);    // 10 mantissa bits, ties to even
    return abs(r) > 65504.0 ? sign(v) * uintBitsToFloat(0x7F800000u) : r;          // past fp16's largest: infinity
#else
    return v;
#endif
}
