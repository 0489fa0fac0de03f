/*
 * AVX2 helpers shared by the row-invariant kernels: element types, 8-wide and scalar loads and
 * stores that widen to / round from float32, a fixed 8-lane fold and a vectorised exp.
 *
 * Every helper is elementwise (or, for fold8, a fixed order), so a value's result depends only
 * on the value, never on its lane or on the other elements of the call.
 */
#ifndef RACER_BENCH_SIMD_H
#define RACER_BENCH_SIMD_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

enum { T_F32 = 0, T_BF16 = 1, T_F16 = 2 };

static inline __m256 load8(const void *base, long index, int type) {
    if (type == T_BF16) {
        const uint16_t *p = (const uint16_t *)base + index;
        __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
        return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
    }
    if (type == T_F16)
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)base + index)));
    return _mm256_loadu_ps((const float *)base + index);
}

static inline float load1(const void *base, long index, int type) {
    if (type == T_BF16) {
        uint32_t bits = (uint32_t)((const uint16_t *)base)[index] << 16;
        float value;
        memcpy(&value, &bits, 4);
        return value;
    }
    if (type == T_F16) return _cvtsh_ss(((const uint16_t *)base)[index]);
    return ((const float *)base)[index];
}

/* float32 -> bfloat16 bits, round to nearest even (torch's rounding; NaN stays NaN). */
static inline uint16_t bf16_bits(float value) {
    uint32_t bits;
    memcpy(&bits, &value, 4);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x40);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

/* 8 float32 rounded to bfloat16 (round to nearest even), as float32 bit patterns with a zero
 * low half; for every non-NaN value the same bits as bf16_bits. */
static inline __m256i bf16_round8_bits(__m256 x) {
    __m256i bits = _mm256_castps_si256(x);
    __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
    bits = _mm256_add_epi32(bits, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff)));
    return _mm256_and_si256(bits, _mm256_set1_epi32((int)0xffff0000u));
}

/* value rounded to `type`, kept in float32 */
static inline float round1(float value, int type) {
    if (type == T_BF16) {
        uint32_t bits = (uint32_t)bf16_bits(value) << 16;
        memcpy(&value, &bits, 4);
        return value;
    }
    if (type == T_F16) return _cvtsh_ss(_cvtss_sh(value, _MM_FROUND_TO_NEAREST_INT));
    return value;
}

static inline __m256 round8(__m256 x, int type) {
    if (type == T_BF16) return _mm256_castsi256_ps(bf16_round8_bits(x));
    if (type == T_F16)
        return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
    return x;
}

static inline void store1(void *base, long index, float value, int type) {
    if (type == T_BF16)
        ((uint16_t *)base)[index] = bf16_bits(value);
    else if (type == T_F16)
        ((uint16_t *)base)[index] = _cvtss_sh(value, _MM_FROUND_TO_NEAREST_INT);
    else
        ((float *)base)[index] = value;
}

/* 8 values stored as `type` (rounded to nearest even). */
static inline void store8(void *base, long index, __m256 x, int type) {
    if (type == T_BF16) {
        __m256i bits = _mm256_srli_epi32(bf16_round8_bits(x), 16);
        __m128i packed = _mm_packus_epi32(_mm256_castsi256_si128(bits),
                                          _mm256_extracti128_si256(bits, 1));
        _mm_storeu_si128((__m128i *)((uint16_t *)base + index), packed);
    } else if (type == T_F16) {
        _mm_storeu_si128((__m128i *)((uint16_t *)base + index),
                         _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
    } else {
        _mm256_storeu_ps((float *)base + index, x);
    }
}

/* Fixed fold of 8 lanes: (0+4, 1+5, 2+6, 3+7), then pairs, then the last two. */
static inline float fold8(__m256 v) {
    __m128 half = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    __m128 pair = _mm_add_ps(half, _mm_movehl_ps(half, half));
    return _mm_cvtss_f32(_mm_add_ss(pair, _mm_shuffle_ps(pair, pair, 1)));
}

/* exp(x), x clamped to [-87, 88], Cephes-style: 2^n * p(r), |rel. error| < 2e-7. */
static inline __m256 exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
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

#endif
