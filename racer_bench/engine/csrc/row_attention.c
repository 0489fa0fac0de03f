/*
 * Row-invariant attention for decode and tree-verification forwards on AVX2/FMA CPUs.
 *
 *     out[t, h, :] = softmax_j(scale * q[t, h, :] . K[h / G, j, :]) V[h / G, j, :]
 *
 * over the keys j that row t may see (`visible[t * length + j]`, or all of them when
 * `visible` is NULL). Keys and values are float32, bfloat16 or float16, widened to float32;
 * q and out are float32.
 *
 * Why: a tree step must give every node bit for bit what the 1-token AR step gives the same
 * prefix. Library attention kernels tile keys and queries by the shapes they are given, so a
 * row's reduction order depends on how many rows share the call and where masked keys sit. Here
 * every row is computed alone, and every reduction runs over the row's *visible* keys only, in
 * ascending key order: the node of a tree sees the prefix then its ancestors, exactly the keys,
 * in exactly the order, that AR sees when it decodes the same prefix. Masked keys are skipped,
 * not added as zeros, so where they sit changes nothing. The dot product over the head
 * dimension uses 8 fixed lanes and a fixed fold; the softmax sum and the value sum run in key
 * order; exp is one vectorised polynomial applied elementwise (the same value in every lane).
 *
 * Threads: OpenMP over (row, head) pairs; a pair's result does not depend on the split.
 */
#include <math.h>
#include <stdlib.h>

#include "simd.h"

int row_attention_abi_version(void) { return 1; }

/* Softmax weights in place over scores[0..n): exp(s - max), returns their sum in order. */
static float softmax_weights(float *scores, long n) {
    float top = -INFINITY;
    for (long i = 0; i < n; i++) top = scores[i] > top ? scores[i] : top;
    long i = 0;
    __m256 shift = _mm256_set1_ps(top);
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(scores + i, exp8(_mm256_sub_ps(_mm256_loadu_ps(scores + i), shift)));
    if (i < n) {
        float tail[8] = {0};
        for (long j = i; j < n; j++) tail[j - i] = scores[j] - top;
        _mm256_storeu_ps(tail, exp8(_mm256_loadu_ps(tail)));
        for (long j = i; j < n; j++) scores[j] = tail[j - i];
    }
    float sum = 0.0f;
    for (long j = 0; j < n; j++) sum += scores[j];
    return sum;
}

#define G_MAX 4 /* query heads of one KV head taken together (more are split in chunks) */

/* Scores of GC query heads (q: [GC, dim]) against the visible keys: each key row is loaded
 * once for all of them; per (head, key) one FMA chain over 8 lanes, the fixed fold, the tail,
 * then the scale. KU keys are taken at once so that KU * GC independent chains hide the FMA
 * latency (one key gives only GC); a score's chain is the same whichever keys share its pass.
 * GC and KU are compile-time constants so the accumulators stay in registers. */
#define DEFINE_SCORES(GC, KU)                                                                 \
    static void scores_##GC(const float *q, const void *k, const long *keys, long n,         \
                            long dim, long k_base, long k_row, float scale, int type,         \
                            float *scores) {                                                  \
        long i = 0;                                                                           \
        for (; i + KU <= n; i += KU)                                                          \
            score_keys_##GC##_##KU(q, k, keys + i, n, i, dim, k_base, k_row, scale, type,     \
                                   scores);                                                   \
        for (; i < n; i++)                                                                    \
            score_keys_##GC##_1(q, k, keys + i, n, i, dim, k_base, k_row, scale, type,        \
                                scores);                                                      \
    }

/* Scores of GC heads against the KU keys keys[0..KU) (score columns first..first+KU). */
#define DEFINE_SCORE_KEYS(GC, KU)                                                             \
    static inline void score_keys_##GC##_##KU(const float *q, const void *k, const long *keys, \
                                              long n, long first, long dim, long k_base,      \
                                              long k_row, float scale, int type,              \
                                              float *scores) {                                \
        long off[KU], d = 0;                                                                  \
        __m256 acc[KU][GC];                                                                   \
        _Pragma("GCC unroll 4") for (int u = 0; u < KU; u++) {                                \
            off[u] = k_base + keys[u] * k_row;                                                \
            _Pragma("GCC unroll 4") for (int g = 0; g < GC; g++) acc[u][g] = _mm256_setzero_ps(); \
        }                                                                                     \
        for (; d + 8 <= dim; d += 8) {                                                        \
            __m256 kd[KU];                                                                    \
            _Pragma("GCC unroll 4") for (int u = 0; u < KU; u++) kd[u] = load8(k, off[u] + d, type); \
            _Pragma("GCC unroll 4") for (int g = 0; g < GC; g++) {                            \
                __m256 qd = _mm256_loadu_ps(q + g * dim + d);                                 \
                _Pragma("GCC unroll 4") for (int u = 0; u < KU; u++)                          \
                    acc[u][g] = _mm256_fmadd_ps(qd, kd[u], acc[u][g]);                        \
            }                                                                                 \
        }                                                                                     \
        _Pragma("GCC unroll 4") for (int u = 0; u < KU; u++)                                  \
            _Pragma("GCC unroll 4") for (int g = 0; g < GC; g++) {                            \
            float total = fold8(acc[u][g]);                                                   \
            for (long e = d; e < dim; e++)                                                    \
                total = fmaf(q[g * dim + e], load1(k, off[u] + e, type), total);              \
            scores[g * n + first + u] = total * scale;                                        \
        }                                                                                     \
    }

/* out[g] = sum_i w[g][i] V[keys[i]] / sums[g]: each value row is loaded once for all GC heads;
 * each output column is one FMA chain over the keys in order. BL 8-column blocks per pass. */
#define DEFINE_VALUES(GC, BL)                                                                 \
    static void values_##GC(const float *w, const float *sums, const void *v,                \
                            const long *keys, long n, long dim, long v_base, long v_row,      \
                            int type, float *out) {                                           \
        long d = 0;                                                                           \
        for (; d + 8 * BL <= dim; d += 8 * BL) {                                              \
            __m256 acc[GC][BL];                                                               \
            _Pragma("GCC unroll 4") for (int g = 0; g < GC; g++)                              \
                _Pragma("GCC unroll 4") for (int b = 0; b < BL; b++)                          \
                    acc[g][b] = _mm256_setzero_ps();                                          \
            for (long i = 0; i < n; i++) {                                                    \
                long row = v_base + keys[i] * v_row + d;                                      \
                _Pragma("GCC unroll 4") for (int b = 0; b < BL; b++) {                        \
                    __m256 vv = load8(v, row + 8 * b, type);                                  \
                    _Pragma("GCC unroll 4") for (int g = 0; g < GC; g++)                      \
                        acc[g][b] = _mm256_fmadd_ps(_mm256_set1_ps(w[g * n + i]), vv,         \
                                                    acc[g][b]);                               \
                }                                                                             \
            }                                                                                 \
            _Pragma("GCC unroll 4") for (int g = 0; g < GC; g++)                              \
                _Pragma("GCC unroll 4") for (int b = 0; b < BL; b++)                          \
                    _mm256_storeu_ps(out + g * dim + d + 8 * b,                               \
                                     _mm256_div_ps(acc[g][b], _mm256_set1_ps(sums[g])));     \
        }                                                                                     \
        values_tail(w, sums, GC, v, keys, n, dim, d, v_base, v_row, type, out);               \
    }

/* Columns from `d` on, 8 at a time then one at a time: the same chains as the blocks. */
static void values_tail(const float *w, const float *sums, long gc, const void *v,
                        const long *keys, long n, long dim, long d, long v_base, long v_row,
                        int type, float *out) {
    for (; d + 8 <= dim; d += 8)
        for (long g = 0; g < gc; g++) {
            __m256 acc = _mm256_setzero_ps();
            for (long i = 0; i < n; i++)
                acc = _mm256_fmadd_ps(_mm256_set1_ps(w[g * n + i]),
                                      load8(v, v_base + keys[i] * v_row + d, type), acc);
            _mm256_storeu_ps(out + g * dim + d, _mm256_div_ps(acc, _mm256_set1_ps(sums[g])));
        }
    for (; d < dim; d++)
        for (long g = 0; g < gc; g++) {
            float acc = 0.0f;
            for (long i = 0; i < n; i++)
                acc = fmaf(w[g * n + i], load1(v, v_base + keys[i] * v_row + d, type), acc);
            out[g * dim + d] = acc / sums[g];
        }
}

DEFINE_SCORE_KEYS(1, 1)
DEFINE_SCORE_KEYS(1, 4)
DEFINE_SCORE_KEYS(2, 1)
DEFINE_SCORE_KEYS(2, 4)
DEFINE_SCORE_KEYS(3, 1)
DEFINE_SCORE_KEYS(3, 2)
DEFINE_SCORE_KEYS(4, 1)
DEFINE_SCORE_KEYS(4, 2)
DEFINE_SCORES(1, 4)
DEFINE_SCORES(2, 4)
DEFINE_SCORES(3, 2)
DEFINE_SCORES(4, 2)
DEFINE_VALUES(1, 4)
DEFINE_VALUES(2, 4)
DEFINE_VALUES(3, 4)
DEFINE_VALUES(4, 2)

typedef void (*scores_fn)(const float *, const void *, const long *, long, long, long, long,
                          float, int, float *);
typedef void (*values_fn)(const float *, const float *, const void *, const long *, long, long,
                          long, long, int, float *);
static const scores_fn SCORES[G_MAX + 1] = {0, scores_1, scores_2, scores_3, scores_4};
static const values_fn VALUES[G_MAX + 1] = {0, values_1, values_2, values_3, values_4};

/*
 * q: float32 [t, heads, dim] contiguous; out: float32 [t, heads, dim].
 * k, v: [kv_heads, length, dim] with element strides (k_head, k_row) and (v_head, v_row),
 * the last dimension contiguous; `type` their element type. visible: uint8 [t, length] or NULL.
 */
void row_attention(const float *q, const void *k, const void *v, float *out,
                   const uint8_t *visible, long t, long heads, long kv_heads, long length,
                   long dim, long k_head, long k_row, long v_head, long v_row, float scale,
                   int type) {
    long groups = heads / kv_heads, chunks = (groups + G_MAX - 1) / G_MAX;
#pragma omp parallel
    {
        float *scores = malloc(sizeof(float) * G_MAX * (length + 8));
        long *keys = malloc(sizeof(long) * (length + 1));
#pragma omp for schedule(static)
        for (long task = 0; task < t * kv_heads * chunks; task++) {
            long row = task / (kv_heads * chunks), kvh = task / chunks % kv_heads;
            long first = task % chunks * G_MAX, gc = groups - first < G_MAX ? groups - first : G_MAX;
            long n = 0, at = (row * heads + kvh * groups + first) * dim;
            float sums[G_MAX];
            for (long j = 0; j < length; j++)
                if (!visible || visible[row * length + j]) keys[n++] = j;
            SCORES[gc](q + at, k, keys, n, dim, kvh * k_head, k_row, scale, type, scores);
            for (long g = 0; g < gc; g++) sums[g] = softmax_weights(scores + g * n, n);
            VALUES[gc](scores, sums, v, keys, n, dim, kvh * v_head, v_row, type, out + at);
        }
        free(scores);
        free(keys);
    }
}
