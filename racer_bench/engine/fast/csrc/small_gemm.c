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
#include <omp.h>
#include <stdint.h>

#ifndef PANEL_SCHEDULE
#define PANEL_SCHEDULE static
#endif
#define PRAGMA_(text) _Pragma(#text)
#define PRAGMA(text) PRAGMA_(text)
#define FOR_EACH_GROUP PRAGMA(omp parallel for schedule(PANEL_SCHEDULE))

#define NR 16
#define MR_MAX 8 /* the most rows any kernel's block takes (kernel.mr says its own) */

int small_gemm_abi_version(void) { return 4; }

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
 *
 * `ahead` (bytes, or 0): while it streams its panels the block prefetches (into L2) the weights
 * that lie `ahead` bytes further on, one cache line per panel and line of k. The driver passes
 * the size of the panel group being walked to the last block of rows, so the next group is on
 * its way from memory while that block computes from cache: without it a many-row product waits
 * for memory once per group, in its first block, and computes only between the waits.
 */
#define PREFETCH_AHEAD(BASE, AHEAD, OFFSET_BYTES)                                              \
    _mm_prefetch((const char *)(BASE) + (AHEAD) + (OFFSET_BYTES), _MM_HINT_T1)

/* The k loop of a widening block; PF (0 or 1, a literal) compiles the prefetch in or out, so a
 * block that does not prefetch runs the loop it ran before prefetching existed. */
#define WIDEN_K_LOOP(TYPE, LOAD, MR, NP, PF)                                                 \
    for (long kk = 0; kk < k; kk++) {                                                        \
        __m256 w[NP][2];                                                                     \
        _Pragma("GCC unroll 4") for (int q = 0; q < NP; q++) {                               \
            w[q][0] = LOAD(panel + (q * k + kk) * NR);                                       \
            w[q][1] = LOAD(panel + (q * k + kk) * NR + 8);                                   \
            if (PF && (kk * NR * sizeof(TYPE)) % 64 == 0) /* once per cache line */          \
                PREFETCH_AHEAD(panel, ahead, (q * k + kk) * NR * sizeof(TYPE));              \
        }                                                                                    \
        _Pragma("GCC unroll 8") for (int m = 0; m < MR; m++) {                               \
            __m256 b = _mm256_broadcast_ss(x + m * k + kk);                                  \
            _Pragma("GCC unroll 4") for (int q = 0; q < NP; q++) {                           \
                acc[m][q][0] = _mm256_fmadd_ps(w[q][0], b, acc[m][q][0]);                    \
                acc[m][q][1] = _mm256_fmadd_ps(w[q][1], b, acc[m][q][1]);                    \
            }                                                                                \
        }                                                                                    \
    }

#define DEFINE_BLOCK(NAME, TYPE, LOAD, MR, NP)                                               \
    static void NAME##_##MR##x##NP(const void *xv, long k, const void *pv, float *y,         \
                                   long ldy, long cols, long ahead) {                        \
        const float *x = xv;                                                                 \
        const TYPE *panel = pv;                                                              \
        __m256 acc[MR][NP][2];                                                               \
        _Pragma("GCC unroll 8") for (int m = 0; m < MR; m++)                                 \
            _Pragma("GCC unroll 4") for (int q = 0; q < NP; q++) {                           \
            acc[m][q][0] = _mm256_setzero_ps();                                              \
            acc[m][q][1] = _mm256_setzero_ps();                                              \
        }                                                                                    \
        if (ahead) {                                                                         \
            WIDEN_K_LOOP(TYPE, LOAD, MR, NP, 1)                                              \
        } else {                                                                             \
            WIDEN_K_LOOP(TYPE, LOAD, MR, NP, 0)                                              \
        }                                                                                    \
        _Pragma("GCC unroll 8") for (int m = 0; m < MR; m++)                                 \
            _Pragma("GCC unroll 4") for (int q = 0; q < NP; q++) {                           \
            long left = cols - q * NR;                                                       \
            if (left > 0) store_row(y + m * ldy + q * NR, acc[m][q][0], acc[m][q][1], left); \
        }                                                                                    \
    }

typedef void (*block_fn)(const void *x, long k, const void *panel, float *y, long ldy,
                         long cols, long ahead);

#define NP_MAX 8

/* How far ahead block b of `blocks` prefetches: with several blocks of rows, the last one fetches
 * the next group (`next_group` bytes on) while it computes from cache; a lone block (up to one
 * block of rows, e.g. an AR step) streams its panels from memory and fetches `lone` bytes ahead
 * in each of them (16 cache lines for 2-byte weights, measured 4-6% faster on a 1-4 token
 * SmolLM2 forward at bfloat16; nothing for float32, where it measured 1-2% slower). */
static inline long ahead_of(long b, long blocks, long next_group, long lone) {
    if (blocks == 1) return lone;
    return b == blocks - 1 ? next_group : 0;
}

/* A kernel: blocks[MR][NP] walk MR rows over NP panels (NP up to np[MR], MR up to mr); the
 * sizes of an x element and a weight element. */
typedef struct {
    block_fn blocks[MR_MAX + 1][NP_MAX + 1];
    long np[MR_MAX + 1];
    long x_size, w_size, mr;
    long lone_ahead; /* bytes a lone block of rows prefetches ahead in each panel */
} kernel;

/*
 * Rows are split into ceil(m / mr) blocks of near-equal size (mr 6: 16 = 6 + 5 + 5; mr 8:
 * 16 = 8 + 8, 12 = 6 + 6): a block of r rows keeps r * NP independent accumulator chains per 16
 * columns. Panels are split into one near-equal chunk per thread, walked a group of NP panels at
 * a time (the last group of a chunk with fewer); every block of rows reads a group before the
 * next group is loaded, and the last block prefetches the next group (see ahead_of).
 */
static void drive(const kernel *kn, const void *x, const void *packed, float *y, long m, long n,
                  long k) {
    long panels = (n + NR - 1) / NR;
    long blocks = (m + kn->mr - 1) / kn->mr;
    long base = blocks ? m / blocks : 0, extra = blocks ? m % blocks : 0;
    long chunks = omp_get_max_threads();
    chunks = chunks < panels ? chunks : panels;
    const char *xb = x, *wb = packed;
FOR_EACH_GROUP
    for (long c = 0; c < chunks; c++) {
        long lo = panels * c / chunks, hi = panels * (c + 1) / chunks;
        long group = kn->np[base + (extra ? 1 : 0)];
        /* group-major: a group's panels stay in cache while every block of rows reads them */
        for (long g = lo; g < hi; g += group) {
            long g_end = hi - g < group ? hi : g + group;
            long next_group = g_end < hi ? (g_end - g) * k * NR * kn->w_size : 0;
            for (long b = 0; b < blocks; b++) {
                long start = b * base + (b < extra ? b : extra);
                long rows = base + (b < extra ? 1 : 0), np = kn->np[rows];
                const char *xs = xb + start * k * kn->x_size;
                for (long first = g; first < g_end; first += np) {
                    long count = g_end - first < np ? g_end - first : np;
                    const char *panel = wb + first * k * NR * kn->w_size;
                    kn->blocks[rows][count](xs, k, panel, y + start * n + first * NR, n,
                                            n - first * NR, ahead_of(b, blocks, next_group,
                                                     kn->lone_ahead));
                }
            }
        }
    }
}


#define DEFINE_TYPE(N, T, L)                                                                 \
    DEFINE_BLOCK(N, T, L, 1, 1) DEFINE_BLOCK(N, T, L, 1, 2) DEFINE_BLOCK(N, T, L, 1, 3)      \
    DEFINE_BLOCK(N, T, L, 1, 4) DEFINE_BLOCK(N, T, L, 2, 1) DEFINE_BLOCK(N, T, L, 2, 2)      \
    DEFINE_BLOCK(N, T, L, 2, 3) DEFINE_BLOCK(N, T, L, 3, 1) DEFINE_BLOCK(N, T, L, 3, 2)      \
    DEFINE_BLOCK(N, T, L, 4, 1) DEFINE_BLOCK(N, T, L, 5, 1) DEFINE_BLOCK(N, T, L, 6, 1)      \
    static const kernel N##_KERNEL = {                                                       \
        {{0},                                                                                \
         {0, N##_1x1, N##_1x2, N##_1x3, N##_1x4},                                            \
         {0, N##_2x1, N##_2x2, N##_2x3},                                                     \
         {0, N##_3x1, N##_3x2},                                                              \
         {0, N##_4x1},                                                                       \
         {0, N##_5x1},                                                                       \
         {0, N##_6x1}},                                                                      \
        {1, 4, 3, 2, 1, 1, 1},                                                               \
        4,                                                                                   \
        sizeof(T),                                                                           \
        6,                                                                                   \
        sizeof(T) == 2 ? 1024 : 0};

DEFINE_TYPE(f32, float, load8_f32)
DEFINE_TYPE(bf16, uint16_t, load8_bf16)
DEFINE_TYPE(f16, uint16_t, load8_f16)

/* y[m, n] = sum_k x[m, k] * W[n, k]; x and y float32, row-major and contiguous. */
void small_gemm_typed(const float *x, const void *packed, float *y, long m, long n, long k,
                      int wtype) {
    const kernel *kn = wtype == W_BF16 ? &bf16_KERNEL : wtype == W_F16 ? &f16_KERNEL : &f32_KERNEL;
    drive(kn, x, packed, y, m, n, k);
}

void small_gemm(const float *x, const float *packed, float *y, long m, long n, long k) {
    drive(&f32_KERNEL, x, packed, y, m, n, k);
}

/*
 * bfloat16 x bfloat16 with AVX512-BF16 (VDPBF16PS), where the CPU has it: 32 multiply-adds per
 * instruction against 16 for the widening FMA path above, which is what a 16-token tree step
 * needs (it is compute-bound). Weights are packed in pairs of k: panel p, pair kp holds
 * [W[16p][2kp], W[16p][2kp+1], W[16p+1][2kp], ...] (32 bfloat16, one zmm); x stays bfloat16 and
 * each row broadcasts one pair (32 bits) per step. K must be even.
 *
 * Every output element is one chain of VDPBF16PS over the pairs of k in order, whatever M or
 * the panels walked together: the row invariance of the FMA path, with another (documented,
 * fixed) rounding: each instruction adds two products to the float32 accumulator. A block takes
 * up to 8 rows (24 zmm accumulators over 3 panels, 3 weight registers, 1 broadcast): 16 rows are
 * two blocks that each reuse a weight vector 8 times.
 */
#define AVX512BF16 __attribute__((target("avx512f,avx512bf16,avx512vl,avx512bw")))

int small_gemm_has_avx512bf16(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512f");
}

void small_gemm_pack_pairs(const uint16_t *w, uint16_t *packed, long n, long k) {
    long panels = (n + NR - 1) / NR, pairs = k / 2;
FOR_EACH_GROUP
    for (long p = 0; p < panels; p++) {
        uint16_t *dst = packed + p * k * NR;
        for (long kp = 0; kp < pairs; kp++)
            for (long j = 0; j < NR; j++)
                for (long h = 0; h < 2; h++) {
                    long row = p * NR + j;
                    dst[(kp * NR + j) * 2 + h] = row < n ? w[row * k + 2 * kp + h] : 0;
                }
    }
}

/* The pair loop of a dot-product block; PF (a literal) as in WIDEN_K_LOOP. */
#define DP_K_LOOP(MR, NP, PF)                                                                 \
    for (long kp = 0; kp < pairs; kp++) {                                                     \
        __m512bh w[NP];                                                                       \
        _Pragma("GCC unroll 8") for (int q = 0; q < NP; q++) {                                \
            w[q] = (__m512bh)_mm512_loadu_si512(panel + q * k * NR + kp * 2 * NR);            \
            if (PF) PREFETCH_AHEAD(panel, ahead, (q * k * NR + kp * 2 * NR) * 2);             \
        }                                                                                     \
        _Pragma("GCC unroll 8") for (int m = 0; m < MR; m++) {                                \
            int bits;                                                                         \
            __builtin_memcpy(&bits, x + m * k + 2 * kp, 4);                                   \
            __m512bh b = (__m512bh)_mm512_set1_epi32(bits);                                   \
            _Pragma("GCC unroll 8") for (int q = 0; q < NP; q++)                              \
                acc[m][q] = _mm512_dpbf16_ps(acc[m][q], w[q], b);                             \
        }                                                                                     \
    }

#define DEFINE_DP_BLOCK(MR, NP)                                                               \
    AVX512BF16 static void dp_##MR##x##NP(const void *xv, long k, const void *pv, float *y,  \
                                          long ldy, long cols, long ahead) {                  \
        const uint16_t *x = xv, *panel = pv;                                                  \
        __m512 acc[MR][NP];                                                                   \
        _Pragma("GCC unroll 8") for (int m = 0; m < MR; m++)                                  \
            _Pragma("GCC unroll 8") for (int q = 0; q < NP; q++) acc[m][q] = _mm512_setzero_ps(); \
        long pairs = k / 2;                                                                   \
        if (ahead) {                                                                          \
            DP_K_LOOP(MR, NP, 1)                                                              \
        } else {                                                                              \
            DP_K_LOOP(MR, NP, 0)                                                              \
        }                                                                                     \
        _Pragma("GCC unroll 8") for (int m = 0; m < MR; m++)                                  \
            _Pragma("GCC unroll 8") for (int q = 0; q < NP; q++) {                            \
            long left = cols - q * NR;                                                        \
            if (left >= NR)                                                                   \
                _mm512_storeu_ps(y + m * ldy + q * NR, acc[m][q]);                            \
            else if (left > 0)                                                                \
                _mm512_mask_storeu_ps(y + m * ldy + q * NR, (__mmask16)((1u << left) - 1),   \
                                      acc[m][q]);                                             \
        }                                                                                     \
    }

#define DP_ROW2(MR) DEFINE_DP_BLOCK(MR, 1) DEFINE_DP_BLOCK(MR, 2)
#define DP_ROW3(MR) DP_ROW2(MR) DEFINE_DP_BLOCK(MR, 3)
#define DP_ROW4(MR) DP_ROW3(MR) DEFINE_DP_BLOCK(MR, 4)
#define DP_ROW6(MR) DP_ROW4(MR) DEFINE_DP_BLOCK(MR, 5) DEFINE_DP_BLOCK(MR, 6)
DP_ROW6(1) DEFINE_DP_BLOCK(1, 7) DEFINE_DP_BLOCK(1, 8)
DP_ROW6(2)
DP_ROW4(3)
DP_ROW4(4)
DP_ROW3(5)
DP_ROW3(6)
DP_ROW3(7)
DP_ROW3(8)

static const kernel PAIRS = {
    {{0},
     {0, dp_1x1, dp_1x2, dp_1x3, dp_1x4, dp_1x5, dp_1x6, dp_1x7, dp_1x8},
     {0, dp_2x1, dp_2x2, dp_2x3, dp_2x4, dp_2x5, dp_2x6},
     {0, dp_3x1, dp_3x2, dp_3x3, dp_3x4},
     {0, dp_4x1, dp_4x2, dp_4x3, dp_4x4},
     {0, dp_5x1, dp_5x2, dp_5x3},
     {0, dp_6x1, dp_6x2, dp_6x3},
     {0, dp_7x1, dp_7x2, dp_7x3},
     {0, dp_8x1, dp_8x2, dp_8x3}},
    {1, 8, 6, 4, 4, 3, 3, 3, 3},
    2,
    2,
    8,
    1024};

/* y[m, n] = sum_k x[m, k] * W[n, k]; x bfloat16 [m, k], y float32 [m, n], k even. */
void small_gemm_bf16_pairs(const uint16_t *x, const uint16_t *packed, float *y, long m, long n,
                           long k) {
    drive(&PAIRS, x, packed, y, m, n, k);
}
