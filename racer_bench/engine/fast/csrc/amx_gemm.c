/*
 * bfloat16 GEMM on AMX tiles (Sapphire Rapids and later Xeons), for the same weights and layout
 * as the AVX512-BF16 pairs kernel (small_gemm.c):
 *
 *     y[M, N] = x[M, K] @ W[N, K]^T      x bfloat16, y float32, K a multiple of 32
 *
 * A 16-column panel packed in pairs of k is, 16 pairs at a time, exactly an AMX B tile (16 rows
 * of 16 column pairs, 64 bytes each), so no second packing is needed. Per block of up to 16 rows
 * and group of up to 4 panels: C tiles 0-3 accumulate, tile 4 holds 16 pairs of k of the rows
 * (the A tile), tiles 5-7 the panels' B tiles; one TDPBF16PS per panel and 32 values of k.
 *
 * Row invariance: TDPBF16PS computes C[m][n] from row m of A and column n of B only, in an order
 * fixed by the architecture (pairs of k in order, each product accumulated with round to nearest
 * even), and every block walks k from 0 to K in chunks of 32 in order. So a row's result does
 * not depend on the number of rows or their split into blocks. Its rounding is the
 * instruction's, not the pairs kernel's: a model runs every step on one kernel.
 *
 * Not yet run on an AMX machine (the machines this was written on have none): the library
 * checks it in a child process before any use (racer_bench/engine/small_gemm.py, amx_probe):
 * values against a float64 product, rows alone against rows in blocks, bit for bit.
 */
#include <cpuid.h>
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define AMX_TARGET __attribute__((target("amx-tile,amx-bf16")))
#define AMX_ROWS 16   /* rows of x per block (an A tile's rows) */
#define AMX_PANELS 4  /* panels per group (C tiles 0..3) */
#define PANEL_COLS 16 /* output columns of a packed panel (NR in small_gemm.c) */
#define K_CHUNK 32    /* values of k per TDPBF16PS (16 pairs) */
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

/* CPUID leaf 7: EDX bit 22 AMX-BF16, bit 24 AMX-TILE. */
int small_gemm_has_amx(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    return (d >> 22 & 1) && (d >> 24 & 1);
}

/* Ask Linux for the tile state (once per process, before any thread touches a tile): 0 when
 * granted, else the syscall's -1. */
int small_gemm_amx_enable(void) {
    return (int)syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA);
}

typedef struct {
    uint8_t palette;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

/* Tiles 0-4 (C and A) take `rows` rows, the B tiles 5-7 16; every row is 64 bytes. */
AMX_TARGET static void configure(long rows) {
    tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 8; t++) {
        cfg.colsb[t] = 64;
        cfg.rows[t] = (uint8_t)(t < 5 ? rows : 16);
    }
    _tile_loadconfig(&cfg);
}

/* C tile `T` to y (ldy floats a row), only the `cols` valid columns of its 16. */
#define STORE_C(T, Y, LDY, COLS, ROWS)                                                    \
    do {                                                                                  \
        if ((COLS) >= PANEL_COLS) {                                                       \
            _tile_stored(T, (Y), (LDY) * (long)sizeof(float));                            \
        } else if ((COLS) > 0) {                                                          \
            float tmp[AMX_ROWS * PANEL_COLS];                                             \
            _tile_stored(T, tmp, PANEL_COLS * (long)sizeof(float));                       \
            for (long r = 0; r < (ROWS); r++)                                             \
                memcpy((Y) + r * (LDY), tmp + r * PANEL_COLS, sizeof(float) * (COLS));    \
        }                                                                                 \
    } while (0)

/* One block: `rows` rows of x (bfloat16, row stride k) against `np` (1..4) consecutive panels
 * starting at `panel`; writes y[0..rows) x [0..min(cols, np * 16)). */
AMX_TARGET static void block(const uint16_t *x, long k, const uint16_t *panel, float *y, long ldy,
                             long cols, long rows, int np) {
    const char *p = (const char *)panel;
    long panel_bytes = k * PANEL_COLS * 2, stride = k * 2;
    _tile_zero(0);
    if (np > 1) _tile_zero(1);
    if (np > 2) _tile_zero(2);
    if (np > 3) _tile_zero(3);
    for (long c = 0; c < k / K_CHUNK; c++) {
        long at = c * K_CHUNK * PANEL_COLS * 2; /* 16 pairs x 16 columns x 2 bytes */
        _tile_loadd(4, x + c * K_CHUNK, stride);
        _tile_loadd(5, p + at, 64);
        _tile_dpbf16ps(0, 4, 5);
        if (np > 1) {
            _tile_loadd(6, p + panel_bytes + at, 64);
            _tile_dpbf16ps(1, 4, 6);
        }
        if (np > 2) {
            _tile_loadd(7, p + 2 * panel_bytes + at, 64);
            _tile_dpbf16ps(2, 4, 7);
        }
        if (np > 3) {
            _tile_loadd(5, p + 3 * panel_bytes + at, 64);
            _tile_dpbf16ps(3, 4, 5);
        }
    }
    STORE_C(0, y, ldy, cols, rows);
    if (np > 1) STORE_C(1, y + PANEL_COLS, ldy, cols - PANEL_COLS, rows);
    if (np > 2) STORE_C(2, y + 2 * PANEL_COLS, ldy, cols - 2 * PANEL_COLS, rows);
    if (np > 3) STORE_C(3, y + 3 * PANEL_COLS, ldy, cols - 3 * PANEL_COLS, rows);
}

/* y[m, n] = sum_k x[m, k] * W[n, k] with W packed by small_gemm_pack_pairs; k % 32 == 0.
 * Threads split the panels in near-equal chunks (as the other kernels do); rows go in
 * ceil(m / 16) near-equal blocks, every block of a group of panels before the next group. */
AMX_TARGET void small_gemm_bf16_amx(const uint16_t *x, const uint16_t *packed, float *y, long m,
                                    long n, long k) {
    long panels = (n + PANEL_COLS - 1) / PANEL_COLS;
    long blocks = (m + AMX_ROWS - 1) / AMX_ROWS;
    long base = blocks ? m / blocks : 0, extra = blocks ? m % blocks : 0;
    long chunks = omp_get_max_threads();
    chunks = chunks < panels ? chunks : panels;
    if (!blocks) return;
#pragma omp parallel for schedule(static)
    for (long c = 0; c < chunks; c++) {
        long lo = panels * c / chunks, hi = panels * (c + 1) / chunks, configured = -1;
        for (long g = lo; g < hi; g += AMX_PANELS) {
            int np = (int)(hi - g < AMX_PANELS ? hi - g : AMX_PANELS);
            const uint16_t *panel = packed + g * k * PANEL_COLS;
            for (long b = 0; b < blocks; b++) {
                long start = b * base + (b < extra ? b : extra);
                long rows = base + (b < extra ? 1 : 0);
                if (rows != configured) {
                    configure(rows);
                    configured = rows;
                }
                block(x + start * k, k, panel, y + start * n + g * PANEL_COLS, n,
                      n - g * PANEL_COLS, rows, np);
            }
        }
        if (configured >= 0) _tile_release();
    }
}
