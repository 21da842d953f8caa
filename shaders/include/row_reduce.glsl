// A workgroup's max and sum of one value per invocation, by a shared-memory tree (the workgroup size a power
// of two ≤ 256): softmax.comp's reductions, which argmax.comp's SOFTMAX mode repeats to give the very same
// probabilities, so both take them from here. Every invocation must call them (they hold barriers).
shared float row_partial[256];

float workgroup_max(float v) {
    uint t = gl_LocalInvocationID.x;
    row_partial[t] = v;
    barrier();
    for (uint s = gl_WorkGroupSize.x / 2; s > 0; s >>= 1) {
        if (t < s) row_partial[t] = max(row_partial[t], row_partial[t + s]);
        barrier();
    }
    float result = row_partial[0];
    barrier();  // row_partial[] is reused by the next reduction
    return result;
}

float workgroup_sum(float v) {
    uint t = gl_LocalInvocationID.x;
    row_partial[t] = v;
    barrier();
    for (uint s = gl_WorkGroupSize.x / 2; s > 0; s >>= 1) {
        if (t < s) row_partial[t] += row_partial[t + s];
        barrier();
    }
    float result = row_partial[0];
    barrier();
    return result;
}
