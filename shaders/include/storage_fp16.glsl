// For a kernel that exists for fp16 storage only (vk/shaders.py `precisions`: one SPIR-V, `<name>.fp16.spv`): one
// that hands its tensors straight to cooperative-matrix loads, which take the matrices' own element type. The
// build defines FP16 for it as for every fp16 variant.
#ifndef FP16
#error "a kernel for fp16 storage only: compile it with -DFP16"
#endif
#include "storage.glsl"
