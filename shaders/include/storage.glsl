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
