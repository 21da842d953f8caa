// Activations fused into a producer. Kind ids match vk/kernels/activation.py ACTIVATION_IDS.
#define ACT_NONE 0
#define ACT_RELU 1
#define ACT_CLIP 2
#define ACT_HARDSIGMOID 3
#define ACT_HARDSWISH 4
#define ACT_SIGMOID 5
#define ACT_LEAKYRELU 6

float activate(float x, int kind, float alpha, float beta) {
    if (kind == ACT_RELU) return max(x, 0.0);
    if (kind == ACT_CLIP) return clamp(x, alpha, beta);
    if (kind == ACT_HARDSIGMOID) return clamp(alpha * x + beta, 0.0, 1.0);
    if (kind == ACT_HARDSWISH) return x * clamp(alpha * x + beta, 0.0, 1.0);
    if (kind == ACT_SIGMOID) return 1.0 / (1.0 + exp(-x));
    if (kind == ACT_LEAKYRELU) return x >= 0.0 ? x : alpha * x;
    return x;
}

// A scale and shift after the activation (PP-LCNetV3's learnable affine blocks, fused by the graph passes).
// One fma: a single rounding on every driver, where a * b + c would be contracted by some and not by others.
float post_affine(float x, float scale, float shift) { return fma(x, scale, shift); }
