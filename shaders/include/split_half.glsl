// fp32 inputs for fp16 cooperative matrices as a pair of fp16 (conv2d_coopmat.comp's and pointwise_staged.comp's
// SPLIT): hi = fp16(v) and lo = fp16((v - hi)·LO_SCALE), three products per step (hi·hi into the accumulators,
// lo·hi + hi·lo into accumulators of their own, scaled back at the end). About 21 bits of each input instead of
// 11, so the sums stay close to an fp32 kernel's. The scale keeps lo out of fp16's subnormals, which drivers may
// flush to zero (NVIDIA does: unscaled, the lo half was lost there). Needs float16_t.
const float LO_SCALE = 2048.0;  // 2^11: (v - hi)·LO_SCALE stays below 2·|v|, so no overflow either

// hi is v with its mantissa cut to fp16's 10 bits by a mask, so it is exact in fp16 and v - hi exact in fp32.
// Integer arithmetic, because a compiler may fold a float round trip such as float(float16_t(v)) back into v: with
// hi rounded through packHalf2x16 (`precise`), NVIDIA's results still had fp16's error (2.5e-4 against NumPy;
// lavapipe's, 5e-6).
void split_half(float v, out float16_t hi, out float16_t lo) {
    float cut = uintBitsToFloat(floatBitsToUint(v) & 0xFFFFE000u);
    hi = float16_t(cut);
    lo = float16_t((v - cut) * LO_SCALE);
}

// The same for the four floats of a 16-byte load, each half pair packed as it lies in memory
void split_half4(uvec4 bits, out uvec2 hi, out uvec2 lo) {
    vec4 cut = uintBitsToFloat(bits & 0xFFFFE000u);
    vec4 rest = (uintBitsToFloat(bits) - cut) * LO_SCALE;
    hi = uvec2(packFloat2x16(f16vec2(cut.xy)), packFloat2x16(f16vec2(cut.zw)));
    lo = uvec2(packFloat2x16(f16vec2(rest.xy)), packFloat2x16(f16vec2(rest.zw)));
}
