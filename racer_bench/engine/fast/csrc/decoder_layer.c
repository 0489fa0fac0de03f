/*
 * One Llama decoder layer for decode and tree-verification forwards of T <= ~128 tokens, in one
 * call: RMSNorm, fused q/k/v GEMM, rotary embedding, KV write, row attention, o_proj,
 * residual, RMSNorm, fused gate/up GEMM, SiLU * up, down_proj, residual.
 *
 * Why one call: a decode step of a small model is bound by dispatch, not arithmetic. Through
 * transformers' modules a 30-layer step makes ~800 tensor ops and ~200 kernel calls, which cost
 * as much as reading the weights; here the step makes one call per layer.
 *
 * Numerics follow transformers' Llama in the model's dtype: projections, attention output,
 * rotated q/k, SiLU, the gated product and every residual sum are rounded to the dtype where
 * transformers rounds them; norms, rotary products and attention run in float32. Every
 * operation is per row in a fixed order (the GEMMs and attention are row-invariant), so a
 * tree step gives each token bit for bit what a 1-token step gives it.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "simd.h"

/* Built with -DLAYER_PHASES (scripts/profile_layer_phases.py), each layer call adds the time
 * stamp counter's ticks of its phases to layer_phase_ticks[phase]; otherwise PHASE is nothing. */
#ifdef LAYER_PHASES
#include <x86intrin.h>
enum { PHASES = 10 }; /* the names: PHASES in racer_bench/run/layer_phases.py */
static unsigned long long layer_phase_ticks[PHASES];
unsigned long long *layer_phases(void) { return layer_phase_ticks; }
unsigned long long layer_phase_clock(void) { return __rdtsc(); }
#define PHASE_START unsigned long long phase_mark = __rdtsc()
#define PHASE(i)                                                                             \
    do {                                                                                     \
        unsigned long long now = __rdtsc();                                                  \
        layer_phase_ticks[i] += now - phase_mark;                                            \
        phase_mark = now;                                                                    \
    } while (0)
#else
#define PHASE_START
#define PHASE(i)
#endif

/* The GEMMs and attention of this library (small_gemm.c, row_attention.c). */
void small_gemm_typed(const float *x, const void *packed, float *y, long m, long n, long k,
                      int wtype);
void small_gemm_bf16_pairs(const uint16_t *x, const uint16_t *packed, float *y, long m, long n,
                           long k);
void small_gemm_bf16_amx(const uint16_t *x, const uint16_t *packed, float *y, long m, long n,
                         long k);
void row_attention(const float *q, const void *k, const void *v, float *out,
                   const uint8_t *visible, long t, long heads, long kv_heads, long length,
                   long dim, long k_head, long k_row, long v_head, long v_row, float scale,
                   int type);

int decoder_layer_abi_version(void) { return 1; }

typedef struct {
    const void *packed;
    long n, k;
    int pairs; /* 0: widening kernel (x in float32); x in bfloat16: 1 pairs kernel, 2 AMX tiles */
} gemm_weight;

typedef struct {
    int dtype;
    long hidden, heads, kv_heads, head_dim, inter;
    float eps, scale;
    const void *norm1, *norm2; /* [hidden] in dtype */
    gemm_weight qkv, o, gate_up, down;
    void *k_cache, *v_cache; /* [kv_heads, capacity, head_dim] in dtype */
    long cache_head, cache_row; /* element strides */
} layer_params;

/* ---- the steps ---- */

/* out[t] = weight * round(x[t] * rsqrt(mean(x[t]^2) + eps)) in dtype (LlamaRMSNorm); the sum of
 * squares in 8 lanes and a fixed fold, then the tail. */
static void rms_norm(const void *x, const void *weight, float *out, long t, long n, float eps,
                     int dtype) {
#pragma omp parallel for if (t > 1) schedule(static)
    for (long r = 0; r < t; r++) {
        __m256 acc = _mm256_setzero_ps();
        long i = 0;
        for (; i + 8 <= n; i += 8) {
            __m256 v = load8(x, r * n + i, dtype);
            acc = _mm256_fmadd_ps(v, v, acc);
        }
        float sum = fold8(acc);
        for (long j = i; j < n; j++) sum = fmaf(load1(x, r * n + j, dtype), load1(x, r * n + j, dtype), sum);
        __m256 inv = _mm256_set1_ps(1.0f / sqrtf(sum / (float)n + eps));
        for (i = 0; i + 8 <= n; i += 8) {
            __m256 normed = round8(_mm256_mul_ps(load8(x, r * n + i, dtype), inv), dtype);
            _mm256_storeu_ps(out + r * n + i,
                             round8(_mm256_mul_ps(load8(weight, i, dtype), normed), dtype));
        }
        for (; i < n; i++) {
            float normed = round1(load1(x, r * n + i, dtype) * _mm256_cvtss_f32(inv), dtype);
            out[r * n + i] = round1(load1(weight, i, dtype) * normed, dtype);
        }
    }
}

/* y[t, n] = x[t, k] @ W^T in float32; x holds dtype-rounded values in float32 (`xs`), and is
 * narrowed to bfloat16 in `narrow` for the pairs and AMX kernels (same packing). */
static void gemm(const gemm_weight *w, const float *xs, uint16_t *narrow, float *y, long t,
                 int dtype) {
    if (w->pairs) {
        long i = 0, count = t * w->k;
        for (; i + 8 <= count; i += 8) store8(narrow, i, _mm256_loadu_ps(xs + i), T_BF16);
        for (; i < count; i++) narrow[i] = bf16_bits(xs[i]);
        if (w->pairs == 2)
            small_gemm_bf16_amx(narrow, w->packed, y, t, w->n, w->k);
        else
            small_gemm_bf16_pairs(narrow, w->packed, y, t, w->n, w->k);
    } else {
        small_gemm_typed(xs, w->packed, y, t, w->n, w->k, dtype);
    }
}

/* x = round(round(x * cos) + round(rotate_half(x) * sin)) over one head [dim] (values already
 * rounded to dtype), 8 columns at a time (dim is even; a half of 4 or more columns is split in
 * whole vectors when half % 8 == 0, else the scalar loop runs). */
static void rotate(float *x, const float *cos, const float *sin, long dim, int dtype) {
    long half = dim / 2;
    float rotated[512];
    for (long i = 0; i < half; i++) {
        rotated[i] = -x[i + half];
        rotated[i + half] = x[i];
    }
    long i = 0;
    for (; i + 8 <= dim; i += 8) {
        __m256 a = round8(_mm256_mul_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(cos + i)), dtype);
        __m256 b = round8(_mm256_mul_ps(_mm256_loadu_ps(rotated + i), _mm256_loadu_ps(sin + i)),
                          dtype);
        _mm256_storeu_ps(x + i, round8(_mm256_add_ps(a, b), dtype));
    }
    for (; i < dim; i++)
        x[i] = round1(round1(x[i] * cos[i], dtype) + round1(rotated[i] * sin[i], dtype), dtype);
}

/* silu(g) = g / (1 + exp(-g)), then the gated product: round(round(silu(round(g))) * round(u)). */
static void gated(const float *gate, const float *up, float *out, long n, int dtype) {
    long i = 0;
    const __m256 one = _mm256_set1_ps(1.0f);
    for (; i + 8 <= n; i += 8) {
        __m256 g = round8(_mm256_loadu_ps(gate + i), dtype);
        __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
        __m256 act = round8(_mm256_div_ps(g, _mm256_add_ps(one, e)), dtype);
        _mm256_storeu_ps(out + i, round8(_mm256_mul_ps(act, round8(_mm256_loadu_ps(up + i), dtype)),
                                         dtype));
    }
    for (; i < n; i++) {
        float tail[8] = {0}, g = round1(gate[i], dtype);
        tail[0] = -g;
        _mm256_storeu_ps(tail, exp8(_mm256_loadu_ps(tail)));
        float act = round1(g / (1.0f + tail[0]), dtype);
        out[i] = round1(act * round1(up[i], dtype), dtype);
    }
}

/* h = round(h + round(delta)) over t * n values. */
static void residual(void *h, const float *delta, long count, int dtype) {
    long i = 0;
    for (; i + 8 <= count; i += 8)
        store8(h, i, _mm256_add_ps(load8(h, i, dtype), round8(_mm256_loadu_ps(delta + i), dtype)),
               dtype);
    for (; i < count; i++) store1(h, i, load1(h, i, dtype) + round1(delta[i], dtype), dtype);
}

/*
 * h: [t, hidden] in dtype, updated in place. past: cached positions before this step (the
 * step's keys and values are written at rows past..past+t-1). cos, sin: [t, head_dim] float32,
 * already rounded to dtype. visible: uint8 [t, past + t] or NULL (every row sees every key).
 * scratch: float32, at least decoder_layer_scratch(...) floats.
 */
long decoder_layer_scratch(const layer_params *p, long t) {
    long qkv = (p->heads + 2 * p->kv_heads) * p->head_dim;
    long widest = qkv > 2 * p->inter ? qkv : 2 * p->inter;
    return t * (2 * p->hidden + widest + p->heads * p->head_dim * 2 + p->inter) + t * widest;
}

void decoder_layer(const layer_params *p, void *h, long t, long past, const float *cos,
                   const float *sin, const uint8_t *visible, float *scratch) {
    int dt = p->dtype;
    long hd = p->head_dim, q_width = p->heads * hd, kv_width = p->kv_heads * hd;
    long qkv_width = q_width + 2 * kv_width;
    long widest = qkv_width > 2 * p->inter ? qkv_width : 2 * p->inter;
    float *normed = scratch;                      /* [t, hidden] */
    float *wide = normed + t * p->hidden;         /* [t, widest]: qkv, then gate/up */
    float *q = wide + t * widest;                 /* [t, heads, hd] */
    float *attn = q + t * q_width;                /* [t, heads, hd] */
    float *proj = attn + t * q_width;             /* [t, hidden] */
    float *act = proj + t * p->hidden;            /* [t, inter] */
    uint16_t *narrow = (uint16_t *)(act + t * p->inter); /* [t, widest] bfloat16 */

    PHASE_START;
    rms_norm(h, p->norm1, normed, t, p->hidden, p->eps, dt);
    PHASE(0);
    gemm(&p->qkv, normed, narrow, wide, t, dt);
    PHASE(1);
#pragma omp parallel for if (t > 1) schedule(static)
    for (long r = 0; r < t; r++) {
        float *row = wide + r * qkv_width;
        long i = 0;
        for (; i + 8 <= qkv_width; i += 8)
            _mm256_storeu_ps(row + i, round8(_mm256_loadu_ps(row + i), dt));
        for (; i < qkv_width; i++) row[i] = round1(row[i], dt);
        for (long head = 0; head < p->heads; head++) {
            rotate(row + head * hd, cos + r * hd, sin + r * hd, hd, dt);
            memcpy(q + r * q_width + head * hd, row + head * hd, sizeof(float) * hd);
        }
        for (long head = 0; head < p->kv_heads; head++) {
            float *key = row + q_width + head * hd, *value = key + kv_width;
            rotate(key, cos + r * hd, sin + r * hd, hd, dt);
            long at = head * p->cache_head + (past + r) * p->cache_row, d = 0;
            for (; d + 8 <= hd; d += 8) {
                store8(p->k_cache, at + d, _mm256_loadu_ps(key + d), dt);
                store8(p->v_cache, at + d, _mm256_loadu_ps(value + d), dt);
            }
            for (; d < hd; d++) {
                store1(p->k_cache, at + d, key[d], dt);
                store1(p->v_cache, at + d, value[d], dt);
            }
        }
    }
    PHASE(2);
    row_attention(q, p->k_cache, p->v_cache, attn, visible, t, p->heads, p->kv_heads, past + t,
                  hd, p->cache_head, p->cache_row, p->cache_head, p->cache_row, p->scale, dt);
    PHASE(3);
    long i = 0;
    for (; i + 8 <= t * q_width; i += 8)
        _mm256_storeu_ps(attn + i, round8(_mm256_loadu_ps(attn + i), dt));
    for (; i < t * q_width; i++) attn[i] = round1(attn[i], dt);
    gemm(&p->o, attn, narrow, proj, t, dt);
    PHASE(4);
    residual(h, proj, t * p->hidden, dt);

    rms_norm(h, p->norm2, normed, t, p->hidden, p->eps, dt);
    PHASE(5);
    gemm(&p->gate_up, normed, narrow, wide, t, dt);
    PHASE(6);
#pragma omp parallel for if (t > 1) schedule(static)
    for (long r = 0; r < t; r++) {
        const float *gate = wide + r * 2 * p->inter;
        gated(gate, gate + p->inter, act + r * p->inter, p->inter, dt);
    }
    PHASE(7);
    gemm(&p->down, act, narrow, proj, t, dt);
    PHASE(8);
    residual(h, proj, t * p->hidden, dt);
    PHASE(9);
}

/* The model's final norm: out[t, n] (dtype) = RMSNorm(h) with `weight`. */
void final_norm(const void *h, const void *weight, void *out, long t, long n, float eps,
                int dtype, float *scratch) {
    rms_norm(h, weight, scratch, t, n, eps, dtype);
    for (long i = 0; i < t * n; i++) store1(out, i, scratch[i], dtype);
}

/* Every layer, then the final norm, in one call: out[t, hidden] (dtype) from the embedded
 * h[t, hidden] (overwritten). A call per layer from Python cost about 5 us each (ctypes, the
 * cache pointers), 2 % of a 30-layer AR step; the arithmetic is decoder_layer's, bit for bit. */
void decoder_stack(const layer_params *layers, long n_layers, void *h, long t, long past,
                   const float *cos, const float *sin, const uint8_t *visible,
                   const void *norm_weight, float eps, void *out, float *scratch) {
    for (long l = 0; l < n_layers; l++)
        decoder_layer(layers + l, h, t, past, cos, sin, visible, scratch);
    final_norm(h, norm_weight, out, t, layers[0].hidden, eps, layers[0].dtype, scratch);
}
