// Activations fused into a producer. Kind ids match vk/kernels/launch.py ACTIVATION_IDS.
#define ACT_NONE 0
#define ACT_RELU 1
#define ACT_CLIP 2
#define ACT_HARDSIGMOID 3
#define ACT_HARDSWISH 4
#define ACT_SIGMOID 5
#define ACT_LEAKYRELU 6
#define ACT_GELU 7
#define ACT_SILU 8

// erf(x) in float32 without exp: a rational fit x·P(x²)/Q(x²) on [-4, 4] (Eigen's, about one ulp in exact
// arithmetic; under 5e-7 absolute in float32), ±1 beyond, where erf is within float32's step of it. GLSL has
// no erf, and Paddle exports GELU with one.
float erf_approx(float x) {
    float z = clamp(x, -4.0, 4.0);
    float z2 = z * z;
    float num = fma(z2, -2.72614225801306e-10, 2.77068142495902e-08);
    num = fma(z2, num, -2.10102402082508e-06);
    num = fma(z2, num, -5.69250639462346e-05);
    num = fma(z2, num, -7.34990630326855e-04);
    num = fma(z2, num, -2.95459980854025e-03);
    num = fma(z2, num, -1.60960333262415e-02);
    float den = fma(z2, -1.45660718464996e-05, -2.13374055278905e-04);
    den = fma(z2, den, -1.68282697438203e-03);
    den = fma(z2, den, -7.37332916720468e-03);
    den = fma(z2, den, -1.42647390514189e-02);
    return z * num / den;
}

float activate(float x, int kind, float alpha, float beta) {
    if (kind == ACT_RELU) return max(x, 0.0);
    if (kind == ACT_CLIP) return clamp(x, alpha, beta);
    if (kind == ACT_HARDSIGMOID) return clamp(alpha * x + beta, 0.0, 1.0);
    if (kind == ACT_HARDSWISH) return x * clamp(alpha * x + beta, 0.0, 1.0);
    if (kind == ACT_SIGMOID) return 1.0 / (1.0 + exp(-x));
    if (kind == ACT_LEAKYRELU) return x >= 0.0 ? x : alpha * x;
    // x · 0.5 · (1 + erf(x / √2)) in the order Paddle2ONNX's nodes compute it (× 0.5 is exact either way)
    if (kind == ACT_GELU) return x * (1.0 + erf_approx(x / 1.41421354)) * 0.5;
    // x · sigmoid(x) (SiLU, swish): as a Sigmoid node stores its value and a Mul multiplies x by it
    if (kind == ACT_SILU) return x * (1.0 / (1.0 + exp(-x)));
    return x;
}

// A scale and shift after the activation (PP-LCNetV3's learnable affine blocks, fused by the graph passes).
// One fma: a single rounding on every driver, where a * b + c would be contracted by some and not by others.
float post_affine(float x, float scale, float shift) { return fma(x, scale, shift); }
