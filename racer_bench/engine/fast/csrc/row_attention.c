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
 * Threads: one OpenMP region in three phases, each split in many near-equal items so that two
 * threads share even a 1-token step evenly: scores by (row, KV head, block of keys), softmax by
 * (row, head), values by (row, KV head, block of output columns). No result depends on the split:
 * each score, weight and output column is one chain whichever item computes it.
 */
#include <math.h>
#include <stdlib.h>

#include "simd.h"

int row_attention_abi_version(void) { return 1; }

#define G_MAX 4 /* query heads of one KV head taken together (more are split in chunks) */
#define KEY_BLOCK 64 /* keys per scores item */

/* Scores of GC query heads (q: [GC, dim]) against the KU keys keys[0..KU): each key row is
 * loaded once for all of them; per (head, key) one FMA chain over 8 lanes, the fixed fold, the
 * tail, then the scale, stored at scores[g * ld + u]. KU keys are taken at once so that KU * GC
 * independent chains hide the FMA latency (one key gives only GC); a score's chain is the same
 * whichever keys share its pass. GC and KU are compile-time constants so the accumulators stay
 * in registers. */
#define DEFINE_SCORE_KEYS(GC, KU)                                                             \
    static inline void score_keys_##GC##_##KU(const float *q, const void *k, const long *keys, \
                                              long ld, long dim, long k_base, long k_row,     \
                                              float scale, int type, float *scores) {         \
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
            scores[g * ld + u] = total * scale;                                               \
        }                                                                                     \
    }

/* Scores of GC heads against keys[0..n), KU at a time, then one at a time. */
#define DEFINE_SCORES(GC, KU)                                                                 \
    static void scores_##GC(const float *q, const void *k, const long *keys, long n, long ld, \
                            long dim, long k_base, long k_row, float scale, int type,         \
                            float *scores) {                                                  \
        long i = 0;                                                                           \
        for (; i + KU <= n; i += KU)                                                          \
            score_keys_##GC##_##KU(q, k, keys + i, ld, dim, k_base, k_row, scale, type,       \
                                   scores + i);                                               \
        for (; i < n; i++)                                                                    \
            score_keys_##GC##_1(q, k, keys + i, ld, dim, k_base, k_row, scale, type,          \
                                scores + i);                                                  \
    }

/* Softmax weights in place over scores[0..n): exp(s - max). The max is exact in any order; exp
 * is elementwise. Their sum is taken by the values pass (in key order). */
static void softmax_weights(float *scores, long n) {
    __m256 top8 = _mm256_set1_ps(-INFINITY);
    long i = 0;
    for (; i + 8 <= n; i += 8) top8 = _mm256_max_ps(top8, _mm256_loadu_ps(scores + i));
    float lanes[8], top = -INFINITY;
    _mm256_storeu_ps(lanes, top8);
    for (int l = 0; l < 8; l++) top = lanes[l] > top ? lanes[l] : top;
    for (; i < n; i++) top = scores[i] > top ? scores[i] : top;
    __m256 shift = _mm256_set1_ps(top);
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(scores + i, exp8(_mm256_sub_ps(_mm256_loadu_ps(scores + i), shift)));
    if (i < n) {
        float tail[8] = {0};
        for (long j = i; j < n; j++) tail[j - i] = scores[j] - top;
        _mm256_storeu_ps(tail, exp8(_mm256_loadu_ps(tail)));
        for (long j = i; j < n; j++) scores[j] = tail[j - i];
    }
}

/* out[g, d0 .. d0 + 8 * BL) = sum_i w[g][i] V[keys[i]] / sum_i w[g][i] for GC heads (w[g] at
 * w + g * ld): each value row is loaded once for all GC heads; each output column is one FMA
 * chain over the keys in order, and so is each head's weight sum (which rides along in the
 * same loop, its latency hidden by the FMAs). */
#define DEFINE_VALUES(GC, BL)                                                                 \
    static void values_##GC(const float *w, long ld, const void *v, const long *keys, long n, \
                            long d0, long v_base, long v_row, int type, float *out, long dim) { \
        __m256 acc[GC][BL];                                                                   \
        float sums[GC];                                                                       \
        _Pragma("GCC unroll 4") for (int g = 0; g < GC; g++) {                                \
            sums[g] = 0.0f;                                                                   \
            _Pragma("GCC unroll 4") for (int b = 0; b < BL; b++) acc[g][b] = _mm256_setzero_ps(); \
        }                                                                                     \
        for (long i = 0; i < n; i++) {                                                        \
            long row = v_base + keys[i] * v_row + d0;                                         \
            _Pragma("GCC unroll 4") for (int g = 0; g < GC; g++) sums[g] += w[g * ld + i];    \
            _Pragma("GCC unroll 4") for (int b = 0; b < BL; b++) {                            \
                __m256 vv = load8(v, row + 8 * b, type);                                      \
                _Pragma("GCC unroll 4") for (int g = 0; g < GC; g++)                          \
                    acc[g][b] = _mm256_fmadd_ps(_mm256_set1_ps(w[g * ld + i]), vv, acc[g][b]); \
            }                                                                                 \
        }                                                                                     \
        _Pragma("GCC unroll 4") for (int g = 0; g < GC; g++)                                  \
            _Pragma("GCC unroll 4") for (int b = 0; b < BL; b++)                              \
                _mm256_storeu_ps(out + g * dim + d0 + 8 * b,                                  \
                                 _mm256_div_ps(acc[g][b], _mm256_set1_ps(sums[g])));         \
    }

/* Output columns from `d` on that no whole block covers, for GC heads of one row, over all its
 * keys: 8 at a time then one at a time, the same chains as the blocks. */
static void values_tail(const float *w, long ld, long gc, const void *v, const long *keys,
                        long n, long d, long v_base, long v_row, int type, float *out,
                        long dim) {
    for (long g = 0; g < gc; g++) {
        float sum = 0.0f;
        for (long i = 0; i < n; i++) sum += w[g * ld + i];
        for (long c = d; c + 8 <= dim; c += 8) {
            __m256 acc = _mm256_setzero_ps();
            for (long i = 0; i < n; i++)
                acc = _mm256_fmadd_ps(_mm256_set1_ps(w[g * ld + i]),
                                      load8(v, v_base + keys[i] * v_row + c, type), acc);
            _mm256_storeu_ps(out + g * dim + c, _mm256_div_ps(acc, _mm256_set1_ps(sum)));
        }
        for (long c = d + (dim - d) / 8 * 8; c < dim; c++) {
            float acc = 0.0f;
            for (long i = 0; i < n; i++)
                acc = fmaf(w[g * ld + i], load1(v, v_base + keys[i] * v_row + c, type), acc);
            out[g * dim + c] = acc / sum;
        }
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
                          long, float, int, float *);
typedef void (*values_fn)(const float *, long, const void *, const long *, long, long, long,
                          long, int, float *, long);
static const scores_fn SCORES[G_MAX + 1] = {0, scores_1, scores_2, scores_3, scores_4};
static const values_fn VALUES[G_MAX + 1] = {0, values_1, values_2, values_3, values_4};
static const long VALUE_COLUMNS[G_MAX + 1] = {0, 32, 32, 32, 16}; /* 8 * BL of each */

/* The keys `row` sees, in order, into keys[0..*count). */
static void visible_keys(const uint8_t *visible, long row, long length, long *keys, long *count) {
    long n = 0;
    for (long j = 0; j < length; j++)
        if (!visible || visible[row * length + j]) keys[n++] = j;
    *count = n;
}

/* A task of row_attention: (row, KV head, chunk of up to G_MAX of its query heads). */
typedef struct {
    long row, kvh, head, gc; /* head: the chunk's first query head; gc: its query heads */
} task_of;

static inline task_of decode_task(long task, long kv_heads, long chunks, long groups) {
    long first = task % chunks * G_MAX;
    task_of at = {task / (kv_heads * chunks), task / chunks % kv_heads, 0,
                  groups - first < G_MAX ? groups - first : G_MAX};
    at.head = at.kvh * groups + first;
    return at;
}

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
    long tasks = t * kv_heads * chunks; /* (row, KV head, chunk of its query heads) */
    long key_blocks = (length + KEY_BLOCK - 1) / KEY_BLOCK;
    long gc_first = groups < G_MAX ? groups : G_MAX; /* chunk width; the last may be narrower */
    long col_blocks = (dim + VALUE_COLUMNS[gc_first] - 1) / VALUE_COLUMNS[gc_first];
    float *scores = malloc(sizeof(float) * t * heads * length); /* [t, heads, length] */
    long *keys = malloc(sizeof(long) * t * length);              /* [t, length]: visible keys */
    long *counts = malloc(sizeof(long) * t);
    if (t == 1) visible_keys(visible, 0, length, keys, counts); /* an AR step: no barrier */
#pragma omp parallel
    {
        if (t > 1) {
#pragma omp for schedule(static)
            for (long row = 0; row < t; row++)
                visible_keys(visible, row, length, keys + row * length, counts + row);
        }
#pragma omp for schedule(static)
        for (long item = 0; item < tasks * key_blocks; item++) {
            task_of at = decode_task(item / key_blocks, kv_heads, chunks, groups);
            long row = at.row, head = at.head, lo = item % key_blocks * KEY_BLOCK, n = counts[row];
            long hi = lo + KEY_BLOCK < n ? lo + KEY_BLOCK : n;
            if (lo < hi)
                SCORES[at.gc](q + (row * heads + head) * dim, k, keys + row * length + lo, hi - lo,
                              length, dim, at.kvh * k_head, k_row, scale, type,
                              scores + (row * heads + head) * length + lo);
        }
#pragma omp for schedule(static)
        for (long pair = 0; pair < t * heads; pair++)
            softmax_weights(scores + pair * length, counts[pair / heads]);
#pragma omp for schedule(static)
        for (long item = 0; item < tasks * col_blocks; item++) {
            task_of at = decode_task(item / col_blocks, kv_heads, chunks, groups);
            long row = at.row, head = at.head, kvh = at.kvh, gc = at.gc;
            long width = VALUE_COLUMNS[gc], d0 = item % col_blocks * width;
            const float *w = scores + (row * heads + head) * length;
            const long *mine = keys + row * length;
            float *o = out + (row * heads + head) * dim;
            if (d0 + width <= dim)
                VALUES[gc](w, length, v, mine, counts[row], d0, kvh * v_head, v_row, type, o, dim);
            else if (d0 < dim)
                values_tail(w, length, gc, v, mine, counts[row], d0, kvh * v_head, v_row, type,
                            o, dim);
        }
    }
    free(scores);
    free(keys);
    free(counts);
}
