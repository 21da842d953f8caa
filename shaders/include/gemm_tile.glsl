// Shared-memory tiled, register-blocked fp32 GEMM core: C[M,N] = A[M,K] · B[K,N] for one (BM × BN) tile.
//
// A kernel includes this after declaring (the core calls the loaders and store_c only for in-bounds indices):
//   float load_a(uint batch, uint m, uint k);            // A[m][k]
//   uvec4 b_column(uint batch, uint n);                  // state of column n that load_b needs (an address,
//                                                        // a position): pure arithmetic, any n
//   float load_b(uint batch, uint k, uint n, uvec4 col); // B[k][n], col = b_column(batch, n)
//   void store_c(uint batch, uint m, uint n, float acc); // epilogue: scale, bias, activation, write
//   bool store_c4(uint batch, uint m, uint n, vec4 acc); // store_c of columns n..n+3 (all < N) as one vector
//                                                        // store, where out's element (m, n) is 4-aligned;
//                                                        // false (nothing written) where it is not
//   const bool A_K_FAST;  // consecutive k are adjacent in memory for A (else consecutive m are)
//   const bool B_N_FAST;  // consecutive n are adjacent in memory for B (else consecutive k are)
// (the two flags may be specialization constants) and then calls gemm_tile(batch, M, N, K) from main().
// A kernel whose B rows lie contiguous in memory may also `#define HAS_LOAD_B4` before the include and declare
//   const bool B_VEC4;                                   // fetch B four columns at a time (needs B_N_FAST;
//                                                        // taken where a thread's B slots make whole vec4s)
//   bool load_b4(uint batch, uint k, uint n, out vec4 v); // B[k][n..n+3] (all < N) as one 16-byte load, or
//                                                        // false (v unused) where the four are not 16-byte aligned
//
// Design (the classic SGEMM): a workgroup of (BM/TM)·(BN/TN) threads owns a BM × BN output tile; each thread
// accumulates a TM × TN block in registers as outer products of TM values of A and TN values of B per k.
// Tiles of BK along K pass through shared memory, A stored k-major (transposed) so that both operands are
// read as vec4 rows. Shared memory is double-buffered: while one buffer feeds the FMAs, the next tile is
// fetched from global memory into registers and then stashed into the other buffer, one barrier per tile.
// A thread's TM rows are TM/4 runs of 4 spaced BM/TM·4 apart (columns likewise), so the vec4 reads of a
// warp are contiguous and free of bank conflicts; rows of the shared tiles are padded by one vec4 so the
// transposing stores do not collide either.
//
// SLICES > 1 (a workgroup of SLICES · THREADS invocations) splits K between slices of THREADS invocations, each
// with shared tiles of its own, and sums the slices' accumulators through shared memory at the end: for problems
// whose output makes few tiles (small feature maps, deep K), where one workgroup walking all of K serially left
// the GPU waiting on each tile's load latency. The slices add in a fixed order, so the result is deterministic.
// Slices hold one mat4 of accumulators each (TM = TN = 4; the host checks).
//
// No local arrays: the accumulators are up to four named mat4s, the fragments and the prefetch named vec4s,
// so TM, TN ∈ {4, 8} and at most 8 fetched elements per operand per thread and tile, two vec4s (the host checks).
// A deeper BK takes fewer steps along K: where few workgroups share a multiprocessor, each step waits out a
// global load's latency, and a conv's K of 48..768 is only a few dozen BK = 8 steps.
// With arrays (vec4[16] or float[64] accumulators, and vec4[8] in one tile shape but not another) NVIDIA's
// compiler produced code that ran at 2 TFLOP/s instead of 34 at 2048³ on an H200; named variables leave it
// no choice. (Registers at 128×128, 8×8: 125, so two workgroups fit a multiprocessor.)

#ifndef HAS_LOAD_B4
const bool B_VEC4 = false;
bool load_b4(uint batch, uint k, uint n, out vec4 v) {
    v = vec4(0.0);
    return false;
}
#endif

layout(constant_id = 3) const uint BM = 128;
layout(constant_id = 4) const uint BN = 128;
layout(constant_id = 5) const uint BK = 8;
layout(constant_id = 6) const uint TM = 8;   // 4 or 8
layout(constant_id = 7) const uint TN = 8;   // 4 or 8

const uint THREADS_M = BM / TM;
const uint THREADS_N = BN / TN;
const uint THREADS = THREADS_M * THREADS_N;  // per slice: the workgroup size (constant id 0) is SLICES · THREADS
const uint SLICES = gl_WorkGroupSize.x / THREADS;
const uint A_SLOTS = BM * BK / THREADS;      // elements of A each thread fetches per tile, ≤ 8
const uint B_SLOTS = BK * BN / THREADS;      // ≤ 8
const uint A_ROW = BM / 4 + 1;               // vec4s per k-row of the shared A tile (one vec4 of padding)
const uint B_ROW = BN / 4 + 1;
const uint A_BUF = BK * A_ROW;
const uint B_BUF = BK * B_ROW;

shared vec4 tile_a[SLICES * 2 * A_BUF];
shared vec4 tile_b[SLICES * 2 * B_BUF];
shared vec4 slice_sums[(SLICES - 1) * THREADS * 4 + 1];  // slices 1.. hand their accumulators to slice 0

// Position inside the tile of a thread's slot-th fetched element, chosen so a warp's fetches are coalesced.
uvec2 a_slot_mk(uint slot, uint tid) {
    uint e = slot * THREADS + tid;
    return A_K_FAST ? uvec2(e / BK, e % BK) : uvec2(e % BM, e / BM);
}

uvec2 b_slot_kn(uint slot, uint tid) {
    uint e = slot * THREADS + tid;
    return B_N_FAST ? uvec2(e / BN, e % BN) : uvec2(e % BK, e / BK);
}

// With B_VEC4: (k, first column) in the tile of a thread's slot-th four columns; a warp's loads are contiguous.
uvec2 b_vec4_kn(uint slot, uint tid) {
    uint e = slot * THREADS + tid;
    return uvec2(e / (BN / 4), (e % (BN / 4)) * 4);
}

// acc[r] += a[r] · b: the outer product of 4 rows of A and 4 columns of B.
mat4 outer_fma(vec4 a, vec4 b, mat4 acc) {
    acc[0] = fma(vec4(a.x), b, acc[0]);
    acc[1] = fma(vec4(a.y), b, acc[1]);
    acc[2] = fma(vec4(a.z), b, acc[2]);
    acc[3] = fma(vec4(a.w), b, acc[3]);
    return acc;
}

// A thread's 4 × 4 block: each row's 4 columns as one vector store where the kernel's store_c4 takes them (a
// warp then writes whole 32-byte sectors, where 4 scalar stores at a 16-byte stride write each sector in parts),
// else one by one.
void store_block(uint batch, uint M, uint N, uint m, uint n, mat4 acc) {
    [[unroll]] for (uint r = 0; r < 4; ++r) {
        if (m + r >= M) break;
        if (n + 3 < N && store_c4(batch, m + r, n, acc[r])) continue;
        [[unroll]] for (uint c = 0; c < 4; ++c) {
            if (n + c < N) store_c(batch, m + r, n + c, acc[r][c]);
        }
    }
}

void gemm_tile(uint batch, uint M, uint N, uint K) {
    uint slice = gl_LocalInvocationIndex / THREADS;
    uint tid = gl_LocalInvocationIndex - slice * THREADS;
    uint tx = tid % THREADS_N, ty = tid / THREADS_N;
    uint m0 = gl_WorkGroupID.y * BM, n0 = gl_WorkGroupID.x * BN;

    // acc_RC: rows 4R..4R+3 of the thread's rows, columns 4C..4C+3 of its columns (R, C < TM/4, TN/4).
    mat4 acc_00 = mat4(0.0), acc_01 = mat4(0.0), acc_10 = mat4(0.0), acc_11 = mat4(0.0);
    // slots 0..3 in the first vec4, 4..7 in the second (s is a constant once the loops are unrolled)
    vec4 next_a = vec4(0.0), next_a_hi = vec4(0.0), next_b = vec4(0.0), next_b_hi = vec4(0.0);
    // With n-fast fetches and THREADS a multiple of BN a thread fetches the same column in every slot and
    // tile: its column state (for a conv, a division by the output width) is computed once, here.
    const bool ONE_COLUMN = B_N_FAST && THREADS % BN == 0;
    uvec4 my_column = b_column(batch, n0 + tid % BN);

    // Every slice walks as many tiles (a barrier is for the whole workgroup); past its end of K they are zero.
    uint tiles = ((K + BK - 1) / BK + SLICES - 1) / SLICES;
    uint k_first = slice * tiles * BK, k_end = min(K, k_first + tiles * BK);
    uint a_own = slice * 2 * A_BUF, b_own = slice * 2 * B_BUF;
    for (uint t = 0; t <= tiles; ++t) {
        // Fetch tile t from global memory (out-of-range elements are zero).
        if (t < tiles) {
            uint k0 = k_first + t * BK;
            [[unroll]] for (uint s = 0; s < A_SLOTS; ++s) {
                uvec2 mk = a_slot_mk(s, tid);
                uint m = m0 + mk.x, k = k0 + mk.y;
                float v = (m < M && k < k_end) ? load_a(batch, m, k) : 0.0;
                if (s < 4) next_a[s] = v; else next_a_hi[s - 4] = v;
            }
            if (B_VEC4 && B_SLOTS % 4 == 0) {  // (whole vec4s of slots per thread)
                // four adjacent columns of one k per slot: one 16-byte load and, below, one 16-byte shared store
                // where four scalar ones would go; the same values in the same places of the tile
                [[unroll]] for (uint s = 0; s < B_SLOTS / 4; ++s) {
                    uvec2 kn = b_vec4_kn(s, tid);
                    uint k = k0 + kn.x, n = n0 + kn.y;
                    vec4 v = vec4(0.0);
                    if (k < k_end && !(n + 3 < N && load_b4(batch, k, n, v))) {
                        v = vec4(0.0);
                        [[unroll]] for (uint j = 0; j < 4; ++j) {
                            if (n + j < N) v[j] = load_b(batch, k, n + j, b_column(batch, n + j));
                        }
                    }
                    if (s == 0) next_b = v; else next_b_hi = v;
                }
            } else {
                [[unroll]] for (uint s = 0; s < B_SLOTS; ++s) {
                    uvec2 kn = b_slot_kn(s, tid);
                    uint k = k0 + kn.x, n = n0 + kn.y;
                    float v = (k < k_end && n < N) ? load_b(batch, k, n, ONE_COLUMN ? my_column : b_column(batch, n)) : 0.0;
                    if (s < 4) next_b[s] = v; else next_b_hi[s - 4] = v;
                }
            }
        }
        // Multiply tile t-1, which the previous iteration stashed and fenced, while tile t's loads fly.
        if (t > 0) {
            uint a_at = a_own + ((t - 1) & 1u) * A_BUF + ty, b_at = b_own + ((t - 1) & 1u) * B_BUF + tx;
            [[unroll]] for (uint kk = 0; kk < BK; ++kk) {
                vec4 a0 = tile_a[a_at + kk * A_ROW];
                vec4 b0 = tile_b[b_at + kk * B_ROW];
                acc_00 = outer_fma(a0, b0, acc_00);
                if (TN == 8) acc_01 = outer_fma(a0, tile_b[b_at + kk * B_ROW + THREADS_N], acc_01);
                if (TM == 8) {
                    vec4 a1 = tile_a[a_at + kk * A_ROW + THREADS_M];
                    acc_10 = outer_fma(a1, b0, acc_10);
                    if (TN == 8) acc_11 = outer_fma(a1, tile_b[b_at + kk * B_ROW + THREADS_N], acc_11);
                }
            }
        }
        // Stash tile t into the buffer tile t-1 did not use; the barrier of iteration t-1 ordered this
        // after every thread's reads of tile t-2 from the same buffer.
        if (t < tiles) {
            uint a_buf = a_own + (t & 1u) * A_BUF, b_buf = b_own + (t & 1u) * B_BUF;
            [[unroll]] for (uint s = 0; s < A_SLOTS; ++s) {
                uvec2 mk = a_slot_mk(s, tid);
                tile_a[a_buf + mk.y * A_ROW + mk.x / 4][mk.x % 4] = s < 4 ? next_a[s] : next_a_hi[s - 4];
            }
            if (B_VEC4 && B_SLOTS % 4 == 0) {
                [[unroll]] for (uint s = 0; s < B_SLOTS / 4; ++s) {
                    uvec2 kn = b_vec4_kn(s, tid);
                    tile_b[b_buf + kn.x * B_ROW + kn.y / 4] = s == 0 ? next_b : next_b_hi;
                }
            } else {
                [[unroll]] for (uint s = 0; s < B_SLOTS; ++s) {
                    uvec2 kn = b_slot_kn(s, tid);
                    tile_b[b_buf + kn.x * B_ROW + kn.y / 4][kn.y % 4] = s < 4 ? next_b[s] : next_b_hi[s - 4];
                }
            }
        }
        barrier();
    }

    if (SLICES > 1) {
        if (slice > 0) {
            uint at = ((slice - 1) * THREADS + tid) * 4;
            [[unroll]] for (uint r = 0; r < 4; ++r) slice_sums[at + r] = acc_00[r];
        }
        barrier();
        if (slice > 0) return;
        for (uint s = 1; s < SLICES; ++s) {
            uint at = ((s - 1) * THREADS + tid) * 4;
            [[unroll]] for (uint r = 0; r < 4; ++r) acc_00[r] += slice_sums[at + r];
        }
    }
    uint m = m0 + ty * 4, n = n0 + tx * 4;
    store_block(batch, M, N, m, n, acc_00);
    if (TN == 8) store_block(batch, M, N, m, n + THREADS_N * 4, acc_01);
    if (TM == 8) {
        store_block(batch, M, N, m + THREADS_M * 4, n, acc_10);
        if (TN == 8) store_block(batch, M, N, m + THREADS_M * 4, n + THREADS_N * 4, acc_11);
    }
}
