/*
 * Small-M single-precision GEMM for verification forwards on AVX2/FMA CPUs.
 *
 *     y[M, N] = x[M, K] @ W[N, K]^T        (M = tokens in the forward, 1..~64)
 *
 * W is packed once into panels of 16 output columns, k-major: panel p holds
 * W[16p : 16p + 16, :] as packed[p][k][0..15] (zero-padded past N), so the inner loop streams
 * one contiguous panel and reuses each 16-float weight row across up to 6 rows of x held in
 * 12 ymm accumulators (the classic 6x16 register block). One pass over the weights serves
 * every row of x, which is what a speculative step needs: on a 2-core AVX2 machine the
 * weights' memory traffic, not the arithmetic, bounds forwards of up to ~8 tokens.
 *
 * Every output element is one fused multiply-add chain over k = 0..K-1 in order, whatever M,
 * the row's position in its block, or the thread count: a row's result does not depend on how
 * many rows share the forward (batch invariance), so a 1-token step and a tree step compute
 * bit-identical projections for the same input row.
 *
 * Threads: OpenMP over panels; the library links the libgomp that torch already loaded, so it
 * shares torch's thread pool and torch.set_num_threads(). PANEL_SCHEDULE (a -D flag, default
 * static) is the OpenMP schedule of the panel loop: static splits the panels in equal shares
 * (fastest alone), so a forward waits for its slowest thread, which is slow whenever another
 * process shares its core; dynamic hands panels to whichever thread is free (less slowed
 * beside a busy core, a few percent slower alone). The result does not depend on it.
 */
#include <immintrin.h>
#include <stddef.h>

#ifndef PANEL_SCHEDULE
#define PANEL_SCHEDULE static
#endif
#define PRAGMA_(text) _Pragma(#text)
#define PRAGMA(text) PRAGMA_(text)
#define FOR_EACH_PANEL PRAGMA(omp parallel for schedule(PANEL_SCHEDULE))

#define NR 16
#define MR_MAX 6

int small_gemm_abi_version(void) { return 2; }

void small_gemm_pack(const float *w, float *packed, long n, long k) {
    long panels = (n + NR - 1) / NR;
FOR_EACH_PANEL
    for (long p = 0; p < panels; p++) {
        float *dst = packed + p * k * NR;
        for (long kk = 0; kk < k; kk++) {
            for (long j = 0; j < NR; j++) {
                long row = p * NR + j;
                dst[kk * NR + j] = row < n ? w[row * k + kk] : 0.0f;
            }
        }
    }
}

static inline __m256i tail_mask(long count) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)count),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

static inline void store_row(float *y, __m256 lo, __m256 hi, long cols) {
    if (cols == NR) {
        _mm256_storeu_ps(y, lo);
        _mm256_storeu_ps(y + 8, hi);
    } else {
        _mm256_maskstore_ps(y, tail_mask(cols), lo);
        _mm256_maskstore_ps(y + 8, tail_mask(cols - 8), hi);
    }
}

/* One MR x 16 block: rows x[0..MR), one panel, all of k. */
#define DEFINE_BLOCK(MR)                                                                     \
    static void block_##MR(const float *x, long k, const float *panel, float *y, long ldy,  \
                           long cols) {                                                     \
        __m256 acc[MR][2];                                                                  \
        _Pragma("GCC unroll 8") for (int m = 0; m < MR; m++) {                              \
            acc[m][0] = _mm256_setzero_ps();                                                \
            acc[m][1] = _mm256_setzero_ps();                                                \
        }                                                                                   \
        for (long kk = 0; kk < k; kk++) {                                                   \
            __m256 w0 = _mm256_loadu_ps(panel + kk * NR);                                   \
            __m256 w1 = _mm256_loadu_ps(panel + kk * NR + 8);                               \
            _Pragma("GCC unroll 8") for (int m = 0; m < MR; m++) {                          \
                __m256 b = _mm256_broadcast_ss(x + m * k + kk);                             \
                acc[m][0] = _mm256_fmadd_ps(w0, b, acc[m][0]);                              \
                acc[m][1] = _mm256_fmadd_ps(w1, b, acc[m][1]);                              \
            }                                                                               \
        }                                                                                   \
        _Pragma("GCC unroll 8") for (int m = 0; m < MR; m++) {                              \
            store_row(y + m * ldy, acc[m][0], acc[m][1], cols);                             \
        }                                                                                   \
    }

DEFINE_BLOCK(1)
DEFINE_BLOCK(2)
DEFINE_BLOCK(3)
DEFINE_BLOCK(4)
DEFINE_BLOCK(5)
DEFINE_BLOCK(6)

typedef void (*block_fn)(const float *, long, const float *, float *, long, long);
static const block_fn BLOCKS[MR_MAX + 1] = {0, block_1, block_2, block_3, block_4, block_5, block_6};

/*
 * Rows are split into ceil(m / 6) blocks of near-equal size (16 = 6 + 5 + 5, 8 = 4 + 4): a
 * block of r rows keeps 2r independent accumulator chains, and fewer than 8 chains leave the
 * FMA units waiting on their 4-cycle latency.
 *
 * y[m, n] = sum_k x[m, k] * W[n, k]; x and y row-major and contiguous.
 */
void small_gemm(const float *x, const float *packed, float *y, long m, long n, long k) {
    long panels = (n + NR - 1) / NR;
    long blocks = (m + MR_MAX - 1) / MR_MAX;
    long base = blocks ? m / blocks : 0, extra = blocks ? m % blocks : 0;
FOR_EACH_PANEL
    for (long p = 0; p < panels; p++) {
        const float *panel = packed + p * k * NR;
        long cols = n - p * NR < NR ? n - p * NR : NR;
        for (long b = 0; b < blocks; b++) {
            long start = b * base + (b < extra ? b : extra);
            long rows = base + (b < extra ? 1 : 0);
            BLOCKS[rows](x + start * k, k, panel, y + start * n + p * NR, n, cols);
        }
    }
}
