/*
 * Small-M GEMM for verification forwards on AVX2/FMA CPUs, float32, bfloat16 or float16 weights.
 *
 *     y[M, N] = x[M, K] @ W[N, K]^T        (M = tokens in the forward, 1..~128)
 *
 * x and y are float32; W is packed once into panels of 16 output columns, k-major: panel p
 * holds W[16p : 16p + 16, :] as packed[p][k][0..15] (zero-padded past N), in the weight's own
 * type, so a bfloat16 model streams half the bytes of a float32 one. The inner loop widens one
 * 16-wide weight row to float32 and reuses it across up to 6 rows of x held in ymm
 * accumulators (the classic 6x16 register block); with fewer rows it walks 2-4 panels at once
 * instead, so that 8-12 independent FMA chains hide the FMA latency even for one token.
 *
 * Every output element is one fused multiply-add chain over k = 0..K-1 in order, in float32,
 * whatever M, the row's position in its block, the panels walked together, or the thread count:
 * a row's result does not depend on how many rows share the forward (row invariance), so a
 * 1-token step and a tree step compute bit-identical projections for the same input row, at
 * every weight type.
 *
 * Threads: OpenMP over panel groups; the library links the libgomp that torch already loaded,
 * so it shares torch's thread pool and torch.set_num_threads(). PANEL_SCHEDULE (a -D flag,
 * default static) is the OpenMP schedule of that loop: static splits it in equal shares
 * (fastest alone), so a forward waits for its slowest thread, which is slow whenever another
 * process shares its core; dynamic hands work to whichever thread is free (less slowed beside
 * a busy core, a few percent slower alone). The result does not depend on it.
 */
#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#ifndef PANEL_SCHEDULE
#define PANEL_SCHEDULE static
#endif
#define PRAGMA_(text) _Pragma(#text)
#define PRAGMA(text) PRAGMA_(text)
#define FOR_EACH_GROUP PRAGMA(omp parallel for schedule(PANEL_SCHEDULE))

#define NR 16
#define MR_MAX 6

int small_gemm_abi_version(void) { return 3; }

/* Weight types (the `wtype` argument): element size and how 8 of them widen to float32. */
enum { W_F32 = 0, W_BF16 = 1, W_F16 = 2 };

static inline __m256 load8_f32(const float *p) { return _mm256_loadu_ps(p); }

static inline __m256 load8_bf16(const uint16_t *p) {
    __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

static inline __m256 load8_f16(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}

/* Packing copies elements of `size` bytes: the layout is the same for every type. */
void small_gemm_pack_typed(const void *w, void *packed, long n, long k, int wtype) {
    long size = wtype == W_F32 ? 4 : 2;
    long panels = (n + NR - 1) / NR;
FOR_EACH_GROUP
    for (long p = 0; p < panels; p++) {
        char *dst = (char *)packed + p * k * NR * size;
        for (long kk = 0; kk < k; kk++) {
            for (long j = 0; j < NR; j++) {
                long row = p * NR + j;
                char *out = dst + (kk * NR + j) * size;
                if (row < n) {
                    const char *src = (const char *)w + (row * k + kk) * size;
                    for (long b = 0; b < size; b++) out[b] = src[b];
                } else {
                    for (long b = 0; b < size; b++) out[b] = 0;
                }
            }
        }
    }
}

void small_gemm_pack(const float *w, float *packed, long n, long k) {
    small_gemm_pack_typed(w, packed, n, k, W_F32);
}

static inline __m256i tail_mask(long count) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)count),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

static inline void store_row(float *y, __m256 lo, __m256 hi, long cols) {
    if (cols >= NR) {
        _mm256_storeu_ps(y, lo);
        _mm256_storeu_ps(y + 8, hi);
    } else {
        _mm256_maskstore_ps(y, tail_mask(cols), lo);
        _mm256_maskstore_ps(y + 8, tail_mask(cols - 8), hi);
    }
}

/*
 * One MR x (NP * 16) block: rows x[0..MR), panels packed[0..NP) (NP consecutive panels),
 * all of k. `cols` = valid output columns from the block's first column (may be < NP * 16
 * only in the last block). Each accumulator is one FMA chain over k in order.
 */
#define DEFINE_BLOCK(NAME, TYPE, LOAD, MR, NP)                                               \
    static void NAME##_##MR##x##NP(const float *x, long k, const TYPE *panel, float *y,      \
                                   long ldy, long cols) {                                    \
        __m256 acc[MR][NP][2];                                                               \
        _Pragma("GCC unroll 8") for (int m = 0; m < MR; m++)                                 \
            _Pragma("GCC unroll 4") for (int q = 0; q < NP; q++) {                           \
            acc[m][q][0] = _mm256_setzero_ps();                                              \
            acc[m][q][1] = _mm256_setzero_ps();                                              \
        }                                                                                    \
        for (long kk = 0; kk < k; kk++) {                                                    \
            __m256 w[NP][2];                                                                 \
            _Pragma("GCC unroll 4") for (int q = 0; q < NP; q++) {                           \
                w[q][0] = LOAD(panel + (q * k + kk) * NR);                                   \
                w[q][1] = LOAD(panel + (q * k + kk) * NR + 8);                               \
            }                                                                                \
            _Pragma("GCC unroll 8") for (int m = 0; m < MR; m++) {                           \
                __m256 b = _mm256_broadcast_ss(x + m * k + kk);                              \
                _Pragma("GCC unroll 4") for (int q = 0; q < NP; q++) {                       \
                    acc[m][q][0] = _mm256_fmadd_ps(w[q][0], b, acc[m][q][0]);                \
                    acc[m][q][1] = _mm256_fmadd_ps(w[q][1], b, acc[m][q][1]);                \
                }                                                                            \
            }                                                                                \
        }                                                                                    \
        _Pragma("GCC unroll 8") for (int m = 0; m < MR; m++)                                 \
            _Pragma("GCC unroll 4") for (int q = 0; q < NP; q++) {                           \
            long left = cols - q * NR;                                                       \
            if (left > 0) store_row(y + m * ldy + q * NR, acc[m][q][0], acc[m][q][1], left); \
        }                                                                                    \
    }

/* Panels walked together per row count: 2 * MR * NP accumulators, at most 12 of 16 ymm. */
#define NP_FOR(MR) ((MR) == 1 ? 4 : (MR) == 2 ? 3 : (MR) == 3 ? 2 : 1)

#define DEFINE_TYPE(NAME, TYPE, LOAD)                                                        \
    DEFINE_BLOCK(NAME, TYPE, LOAD, 1, 4)                                                     \
    DEFINE_BLOCK(NAME, TYPE, LOAD, 2, 3)                                                     \
    DEFINE_BLOCK(NAME, TYPE, LOAD, 3, 2)                                                     \
    DEFINE_BLOCK(NAME, TYPE, LOAD, 4, 1)                                                     \
    DEFINE_BLOCK(NAME, TYPE, LOAD, 5, 1)                                                     \
    DEFINE_BLOCK(NAME, TYPE, LOAD, 6, 1)                                                     \
    DEFINE_BLOCK(NAME, TYPE, LOAD, 1, 1)                                                     \
    DEFINE_BLOCK(NAME, TYPE, LOAD, 2, 1)                                                     \
    DEFINE_BLOCK(NAME, TYPE, LOAD, 3, 1)                                                     \
    typedef void (*NAME##_fn)(const float *, long, const TYPE *, float *, long, long);       \
    static const NAME##_fn NAME##_WIDE[MR_MAX + 1] = {0,           NAME##_1x4, NAME##_2x3,  \
                                                      NAME##_3x2, NAME##_4x1, NAME##_5x1,  \
                                                      NAME##_6x1};                          \
    static const NAME##_fn NAME##_ONE[MR_MAX + 1] = {0,           NAME##_1x1, NAME##_2x1,   \
                                                     NAME##_3x1, NAME##_4x1, NAME##_5x1,   \
                                                     NAME##_6x1};                           \
    static void NAME##_gemm(const float *x, const TYPE *packed, float *y, long m, long n,    \
                            long k) {                                                        \
        long panels = (n + NR - 1) / NR;                                                     \
        long blocks = (m + MR_MAX - 1) / MR_MAX;                                             \
        long base = blocks ? m / blocks : 0, extra = blocks ? m % blocks : 0;                \
        long np = NP_FOR(blocks ? base + (extra ? 1 : 0) : 1);                               \
        long groups = (panels + np - 1) / np;                                                \
        FOR_EACH_GROUP for (long g = 0; g < groups; g++) {                                   \
            long first = g * np, count = panels - first < np ? panels - first : np;          \
            const TYPE *panel = packed + first * k * NR;                                     \
            long cols = n - first * NR;                                                      \
            for (long b = 0; b < blocks; b++) {                                              \
                long start = b * base + (b < extra ? b : extra);                             \
                long rows = base + (b < extra ? 1 : 0);                                      \
                float *out = y + start * n + first * NR;                                     \
                if (count == NP_FOR(rows)) {                                                 \
                    NAME##_WIDE[rows](x + start * k, k, panel, out, n, cols);                \
                } else {                                                                     \
                    for (long q = 0; q < count; q++)                                         \
                        NAME##_ONE[rows](x + start * k, k, panel + q * k * NR, out + q * NR, \
                                         n, cols - q * NR);                                  \
                }                                                                            \
            }                                                                                \
        }                                                                                    \
    }

DEFINE_TYPE(f32, float, load8_f32)
DEFINE_TYPE(bf16, uint16_t, load8_bf16)
DEFINE_TYPE(f16, uint16_t, load8_f16)

/*
 * Rows are split into ceil(m / 6) blocks of near-equal size (16 = 6 + 5 + 5, 8 = 4 + 4): a
 * block of r rows keeps 2r independent accumulator chains (2r * NP with NP panels at once).
 *
 * y[m, n] = sum_k x[m, k] * W[n, k]; x and y float32, row-major and contiguous.
 */
void small_gemm_typed(const float *x, const void *packed, float *y, long m, long n, long k,
                      int wtype) {
    if (wtype == W_BF16)
        bf16_gemm(x, (const uint16_t *)packed, y, m, n, k);
    else if (wtype == W_F16)
        f16_gemm(x, (const uint16_t *)packed, y, m, n, k);
    else
        f32_gemm(x, (const float *)packed, y, m, n, k);
}

void small_gemm(const float *x, const float *packed, float *y, long m, long n, long k) {
    f32_gemm(x, packed, y, m, n, k);
}
