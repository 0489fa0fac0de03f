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
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

enum { T_F32 = 0, T_BF16 = 1, T_F16 = 2 };

/* The GEMMs and attention of this library (small_gemm.c, row_attention.c). */
void small_gemm_typed(const float *x, const void *packed, float *y, long m, long n, long k,
                      int wtype);
void small_gemm_bf16_pairs(const uint16_t *x, const uint16_t *packed, float *y, long m, long n,
                           long k);
void row_attention(const float *q, const void *k, const void *v, float *out,
                   const uint8_t *visible, long t, long heads, long kv_heads, long length,
                   long dim, long k_head, long k_row, long v_head, long v_row, float scale,
                   int type);

int decoder_layer_abi_version(void) { return 1; }

typedef struct {
    const void *packed;
    long n, k;
    int pairs; /* 1: bfloat16 pairs kernel (x in bfloat16), 0: widening kernel (x in float32) */
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

/* ---- dtype rounding: float32 -> dtype -> float32, round to nearest even as torch does ---- */

static inline uint16_t to_bf16(float value) {
    uint32_t bits;
    memcpy(&bits, &value, 4);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x40); /* NaN */
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

static inline float from_bf16(uint16_t half) {
    uint32_t bits = (uint32_t)half << 16;
    float value;
    memcpy(&value, &bits, 4);
    return value;
}

static inline float load_as_f32(const void *base, long i, int dtype) {
    if (dtype == T_BF16) return from_bf16(((const uint16_t *)base)[i]);
    if (dtype == T_F16) return _cvtsh_ss(((const uint16_t *)base)[i]);
    return ((const float *)base)[i];
}

static inline void store_from_f32(void *base, long i, float value, int dtype) {
    if (dtype == T_BF16)
        ((uint16_t *)base)[i] = to_bf16(value);
    else if (dtype == T_F16)
        ((uint16_t *)base)[i] = _cvtss_sh(value, _MM_FROUND_TO_NEAREST_INT);
    else
        ((float *)base)[i] = value;
}

/* value rounded to dtype, kept in float32 */
static inline float round_to(float value, int dtype) {
    if (dtype == T_BF16) return from_bf16(to_bf16(value));
    if (dtype == T_F16) return _cvtsh_ss(_cvtss_sh(value, _MM_FROUND_TO_NEAREST_INT));
    return value;
}

/* ---- the steps ---- */

/* out[t] = weight * round(x[t] * rsqrt(mean(x[t]^2) + eps)) in dtype (LlamaRMSNorm). */
static void rms_norm(const void *x, const void *weight, float *out, long t, long n, float eps,
                     int dtype) {
#pragma omp parallel for if (t > 1) schedule(static)
    for (long r = 0; r < t; r++) {
        float sum = 0.0f;
        for (long i = 0; i < n; i++) {
            float v = load_as_f32(x, r * n + i, dtype);
            sum += v * v;
        }
        float inv = 1.0f / sqrtf(sum / (float)n + eps);
        for (long i = 0; i < n; i++) {
            float normed = round_to(load_as_f32(x, r * n + i, dtype) * inv, dtype);
            out[r * n + i] = round_to(load_as_f32(weight, i, dtype) * normed, dtype);
        }
    }
}

/* y[t, n] = x[t, k] @ W^T in float32; x holds dtype-rounded values in float32 (`xs`), and is
 * narrowed to bfloat16 in `narrow` for the pairs kernel. */
static void gemm(const gemm_weight *w, const float *xs, uint16_t *narrow, float *y, long t,
                 int dtype) {
    if (w->pairs) {
        for (long i = 0; i < t * w->k; i++) narrow[i] = to_bf16(xs[i]);
        small_gemm_bf16_pairs(narrow, w->packed, y, t, w->n, w->k);
    } else {
        small_gemm_typed(xs, w->packed, y, t, w->n, w->k, dtype);
    }
}

/* x * cos + rotate_half(x) * sin over one head [dim] (values already rounded to dtype). */
static void rotate(float *x, const float *cos, const float *sin, long dim, int dtype) {
    long half = dim / 2;
    float rotated[512];
    for (long i = 0; i < half; i++) {
        rotated[i] = -x[i + half];
        rotated[i + half] = x[i];
    }
    for (long i = 0; i < dim; i++)
        x[i] = round_to(round_to(x[i] * cos[i], dtype) + round_to(rotated[i] * sin[i], dtype),
                        dtype);
}

static inline float silu(float x) { return x / (1.0f + expf(-x)); }

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

    rms_norm(h, p->norm1, normed, t, p->hidden, p->eps, dt);
    gemm(&p->qkv, normed, narrow, wide, t, dt);
#pragma omp parallel for if (t > 1) schedule(static)
    for (long r = 0; r < t; r++) {
        float *row = wide + r * qkv_width;
        for (long i = 0; i < qkv_width; i++) row[i] = round_to(row[i], dt);
        for (long head = 0; head < p->heads; head++) {
            rotate(row + head * hd, cos + r * hd, sin + r * hd, hd, dt);
            memcpy(q + r * q_width + head * hd, row + head * hd, sizeof(float) * hd);
        }
        for (long head = 0; head < p->kv_heads; head++) {
            float *key = row + q_width + head * hd, *value = key + kv_width;
            rotate(key, cos + r * hd, sin + r * hd, hd, dt);
            long at = head * p->cache_head + (past + r) * p->cache_row;
            for (long i = 0; i < hd; i++) {
                store_from_f32(p->k_cache, at + i, key[i], dt);
                store_from_f32(p->v_cache, at + i, value[i], dt);
            }
        }
    }
    row_attention(q, p->k_cache, p->v_cache, attn, visible, t, p->heads, p->kv_heads, past + t,
                  hd, p->cache_head, p->cache_row, p->cache_head, p->cache_row, p->scale, dt);
    for (long i = 0; i < t * q_width; i++) attn[i] = round_to(attn[i], dt);
    gemm(&p->o, attn, narrow, proj, t, dt);
    for (long i = 0; i < t * p->hidden; i++)
        store_from_f32(h, i, load_as_f32(h, i, dt) + round_to(proj[i], dt), dt);

    rms_norm(h, p->norm2, normed, t, p->hidden, p->eps, dt);
    gemm(&p->gate_up, normed, narrow, wide, t, dt);
#pragma omp parallel for if (t > 1) schedule(static)
    for (long r = 0; r < t; r++) {
        const float *gate = wide + r * 2 * p->inter, *up = gate + p->inter;
        for (long i = 0; i < p->inter; i++) {
            float g = round_to(silu(round_to(gate[i], dt)), dt);
            act[r * p->inter + i] = round_to(g * round_to(up[i], dt), dt);
        }
    }
    gemm(&p->down, act, narrow, proj, t, dt);
    for (long i = 0; i < t * p->hidden; i++)
        store_from_f32(h, i, load_as_f32(h, i, dt) + round_to(proj[i], dt), dt);
}

/* The model's final norm: out[t, n] (dtype) = RMSNorm(h) with `weight`. */
void final_norm(const void *h, const void *weight, void *out, long t, long n, float eps,
                int dtype, float *scratch) {
    rms_norm(h, weight, scratch, t, n, eps, dtype);
    for (long i = 0; i < t * n; i++) store_from_f32(out, i, scratch[i], dtype);
}
