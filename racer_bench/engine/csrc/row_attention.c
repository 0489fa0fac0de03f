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
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

int row_attention_abi_version(void) { return 1; }

enum { KV_F32 = 0, KV_BF16 = 1, KV_F16 = 2 };

static inline __m256 load8(const void *base, long index, int type) {
    if (type == KV_BF16) {
        const uint16_t *p = (const uint16_t *)base + index;
        __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
        return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
    }
    if (type == KV_F16)
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)base + index)));
    return _mm256_loadu_ps((const float *)base + index);
}

static inline float load1(const void *base, long index, int type) {
    if (type == KV_BF16) {
        uint32_t bits = (uint32_t)((const uint16_t *)base)[index] << 16;
        float value;
        __builtin_memcpy(&value, &bits, 4);
        return value;
    }
    if (type == KV_F16) return _cvtsh_ss(((const uint16_t *)base)[index]);
    return ((const float *)base)[index];
}

/* Fixed fold of 8 lanes: (0+4, 1+5, 2+6, 3+7), then pairs, then the last two. */
static inline float fold8(__m256 v) {
    __m128 half = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    __m128 pair = _mm_add_ps(half, _mm_movehl_ps(half, half));
    return _mm_cvtss_f32(_mm_add_ss(pair, _mm_shuffle_ps(pair, pair, 1)));
}

/* exp(x) for x <= 0 (softmax arguments), Cephes-style: 2^n * p(r), |rel. error| < 2e-7. */
static inline __m256 exp8(__m256 x) {
    x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    __m256 r2 = _mm256_mul_ps(r, r);
    p = _mm256_fmadd_ps(p, r2, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n),
                                                      _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

static float dot(const float *q, const void *k, long offset, long dim, int type) {
    __m256 acc = _mm256_setzero_ps();
    long d = 0;
    for (; d + 8 <= dim; d += 8)
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), load8(k, offset + d, type), acc);
    float total = fold8(acc);
    for (; d < dim; d++) total = fmaf(q[d], load1(k, offset + d, type), total);
    return total;
}

/* Scores of 4 keys at once: the same operations per key as dot(), interleaved so that four
 * FMA chains are in flight (the result of each key is that of dot()). */
static void dot4(const float *q, const void *k, const long *offsets, long dim, int type,
                 float *out) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
    long d = 0;
    for (; d + 8 <= dim; d += 8) {
        __m256 qd = _mm256_loadu_ps(q + d);
        for (int i = 0; i < 4; i++)
            acc[i] = _mm256_fmadd_ps(qd, load8(k, offsets[i] + d, type), acc[i]);
    }
    for (int i = 0; i < 4; i++) {
        float total = fold8(acc[i]);
        for (long e = d; e < dim; e++) total = fmaf(q[e], load1(k, offsets[i] + e, type), total);
        out[i] = total;
    }
}

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

/* out[0..dim) = sum_i weights[i] * V[keys[i]] / sum, 8 columns at a time, each column one
 * FMA chain over the keys in order; up to 8 blocks of 8 columns in flight. */
static void weighted_values(const float *weights, const void *v, const long *keys, long n,
                            long dim, long v_base, long v_row, int type, float sum, float *out) {
    long d = 0;
    for (; d + 8 <= dim; d += 64) {
        int blocks = (int)((dim - d) / 8 < 8 ? (dim - d) / 8 : 8);
        __m256 acc[8];
        for (int b = 0; b < 8; b++) acc[b] = _mm256_setzero_ps();
        for (long i = 0; i < n; i++) {
            __m256 w = _mm256_set1_ps(weights[i]);
            long row = v_base + keys[i] * v_row + d;
            for (int b = 0; b < blocks; b++)
                acc[b] = _mm256_fmadd_ps(w, load8(v, row + 8 * b, type), acc[b]);
        }
        __m256 total = _mm256_set1_ps(sum);
        for (int b = 0; b < blocks; b++)
            _mm256_storeu_ps(out + d + 8 * b, _mm256_div_ps(acc[b], total));
        if (blocks < 8) {
            d += 8 * blocks;
            break;
        }
    }
    for (; d < dim; d++) {
        float acc = 0.0f;
        for (long i = 0; i < n; i++)
            acc = fmaf(weights[i], load1(v, v_base + keys[i] * v_row + d, type), acc);
        out[d] = acc / sum;
    }
}

static void one_row(const float *q, const void *k, const void *v, float *out,
                    const long *keys, long n, long dim, long k_base, long k_row,
                    long v_base, long v_row, float scale, int type, float *scores) {
    long i = 0;
    for (; i + 4 <= n; i += 4) {
        long offsets[4];
        for (int j = 0; j < 4; j++) offsets[j] = k_base + keys[i + j] * k_row;
        dot4(q, k, offsets, dim, type, scores + i);
    }
    for (; i < n; i++) scores[i] = dot(q, k, k_base + keys[i] * k_row, dim, type);
    for (i = 0; i < n; i++) scores[i] *= scale;
    float sum = softmax_weights(scores, n);
    weighted_values(scores, v, keys, n, dim, v_base, v_row, type, sum, out);
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
    long groups = heads / kv_heads;
#pragma omp parallel
    {
        float *scores = malloc(sizeof(float) * (length + 8));
        long *keys = malloc(sizeof(long) * (length + 1));
#pragma omp for schedule(static)
        for (long task = 0; task < t * heads; task++) {
            long row = task / heads, head = task % heads, kvh = head / groups;
            long n = 0;
            for (long j = 0; j < length; j++)
                if (!visible || visible[row * length + j]) keys[n++] = j;
            one_row(q + task * dim, k, v, out + task * dim, keys, n, dim, kvh * k_head, k_row,
                    kvh * v_head, v_row, scale, type, scores);
        }
        free(scores);
        free(keys);
    }
}
