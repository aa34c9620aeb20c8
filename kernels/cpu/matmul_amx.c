/* --cpu-fast-gemm amx (BackendOptions.cpu_fast_gemm CPU_GEMM_AMX): BF16
 * weights times activations rounded to BF16 on the AMX tile multiply
 * (TDPBF16PS).
 *
 * The arithmetic, measured on the hardware (tests/test_kernels.c holds a
 * scalar model of it and requires the same bits): the columns go in
 * groups of 32, one instruction each; within a group the 16 products of
 * even columns are summed in order in one F32 chain, the 16 of odd
 * columns in another (each product is exact in F32), and the sum's
 * running total gains (even + odd); the columns past the last multiple of
 * 32 are then added one by one.  Not the AVX512-BF16 path's sums (16 lane
 * chains, then a tree): a separate arithmetic, recorded as such.
 *
 * The weights are the B operand, copied once into tiles (cpu_amx_tiles:
 * per block of 16 rows and group of 32 columns, 1 KB holding each column
 * pair of the 16 rows side by side); the activations are the A operand,
 * read where they lie (one tile row per token, at the row stride); a C
 * tile holds up to 16 tokens x 16 rows, stored straight into the output.
 * The instruction's time grows with A's rows (measured: 2.9 ns for 1 to 4,
 * 5.0 ns for 16), so one token pays a one-row multiply; with the weights as
 * A, every product paid sixteen rows' and one-token decode ran at 0.83x the
 * AVX512-BF16 path, now about 0.9x (tile loads stream about 10% slower
 * than AVX-512 loads; software prefetch does not help them).
 * The tile multiply is about eight times the AVX512-BF16 pair dot's
 * arithmetic per cycle, so verifying 16 tokens reads the weights once at
 * nearly the cost of one token, where the pair dot becomes bound by
 * arithmetic.  Every element of a tile is computed on its own, so a sum is
 * the same whatever the token count or which thread takes which rows:
 * decode and tree verification agree bit for bit. */
#include "kernels/cpu/cpu.h"
#include "kernels/base/util.h"
#include <stdio.h>
#include <stdlib.h>

#ifdef CPU_AMX
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#define AMX_TOKENS 16     /* tokens of an A or C tile (its rows) */
#define AMX_ROWS 16       /* weight rows of a B or C tile (its columns) */
#define AMX_BLOCK 64      /* rows whose weights stay in L2 while every token group passes */

/* Linux hands out the tile registers' state only on request (per process). */
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

int cpu_amx_ready(void) {
    static int state = -1;   /* first asked from backend_configure, before any thread */
    if (state < 0) state = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
    return state;
}

/* The tile configuration (palette 1) of the calling thread: tile i has
 * rows[i] rows of colsb[i] bytes (0 and 0: unused). */
typedef struct __attribute__((packed)) {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} TileConfig;

/* (LDTILECFG is issued through asm with the whole 64-byte block as its
 * operand: through GCC's builtin, once the configuring function was not
 * inlined, the stores to the rows and column widths were dropped as dead
 * and the instruction faulted on a half-written block.) */
void cpu_amx_configure(const int rows[8], const int colsb[8]) {
    TileConfig c __attribute__((aligned(64)));
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 8; i++) {
        c.rows[i] = (uint8_t)rows[i];
        c.colsb[i] = (uint16_t)colsb[i];
    }
    __asm__ volatile("ldtilecfg %0" : : "m"(c));
}

/* Tiles 0 and 1 the sums of two row blocks for `tokens` tokens, 4 the
 * activations, 6 and 7 the blocks' weights. */
static void amx_configure(int tokens) {
    const int rows[8] = {tokens, tokens, 0, 0, tokens, 0, 16, 16}, colsb[8] = {64, 64, 0, 0, 64, 0, 64, 64};
    cpu_amx_configure(rows, colsb);
}

/* Elements of the tile copy: ceil(rows / 16) blocks of cols / 32 tiles of
 * 512 elements (rows past the last are zero). */
static size_t tiles_size(int64_t rows, int64_t cols) {
    return (size_t)((rows + AMX_ROWS - 1) / AMX_ROWS) * (size_t)(cols / 32) * 512;
}

uint16_t *cpu_amx_tiles(const Weight *w) {
    const int64_t R = w->rows, C = w->cols, G = C / 32;
    if (w->dtype != DT_BF16 || G == 0) return NULL;
    const size_t bytes = tiles_size(R, C) * sizeof(uint16_t);   /* a multiple of 1 KB */
    uint16_t *t = aligned_alloc(64, bytes);   /* tiles on cache lines */
    if (!t) {
        fprintf(stderr, "out of memory allocating %zu bytes (the AMX tile copy of a %lld x %lld weight)\n", bytes,
                (long long)R, (long long)C);
        exit(1);
    }
    const uint16_t *src = w->data;
    for (int64_t b = 0; b * AMX_ROWS < R; b++)
        for (int64_t g = 0; g < G; g++) {
            uint16_t *tile = t + (b * G + g) * 512;
            for (int r = 0; r < AMX_ROWS; r++) {
                const int64_t row = b * AMX_ROWS + r;
                for (int p = 0; p < 16; p++) {
                    const uint16_t *s = src + row * C + g * 32 + 2 * p;
                    tile[p * 32 + 2 * r] = row < R ? s[0] : 0;
                    tile[p * 32 + 2 * r + 1] = row < R ? s[1] : 0;
                }
            }
        }
    return t;
}

/* Columns past the last multiple of 32 added to rows [r, r + m) of tokens
 * [t0, t0 + k) of out, one by one in order. */
static void amx_tail(const Weight *w, const uint16_t *xb, float *out, int64_t r, int m, int t0, int k) {
    const int64_t R = w->rows, C = w->cols;
    for (int t = t0; t < t0 + k; t++)
        for (int i = 0; i < m; i++) {
            const uint16_t *wr = (const uint16_t *)w->data + (r + i) * C, *x = xb + (int64_t)t * C;
            float sum = out[(int64_t)t * R + r + i];
            for (int64_t j = C / 32 * 32; j < C; j++) sum += bf16_to_f32(wr[j]) * bf16_to_f32(x[j]);
            out[(int64_t)t * R + r + i] = sum;
        }
}

/* NB (1 or 2) blocks of tiles from `tiles` (G tiles a block) times tokens
 * [t0, t0 + k), the sums stored at dst (rows apart by ld floats). */
static inline __attribute__((always_inline)) void amx_blocks(const uint16_t *tiles, int64_t G, const uint16_t *xb,
                                                             int64_t C, int t0, float *dst, int64_t ld, const int NB) {
    _tile_zero(0);
    if (NB > 1) _tile_zero(1);
    const uint16_t *x = xb + (int64_t)t0 * C;
    for (int64_t g = 0; g < G; g++) {
        _tile_loadd(4, x + g * 32, C * 2);
        _tile_loadd(6, tiles + g * 512, 64);
        _tile_dpbf16ps(0, 4, 6);
        if (NB > 1) {
            _tile_loadd(7, tiles + (G + g) * 512, 64);
            _tile_dpbf16ps(1, 4, 7);
        }
    }
    /* (tile numbers are immediates: one store per block written out) */
    _tile_stored(0, dst, ld * 4);
    if (NB > 1) _tile_stored(1, dst + AMX_ROWS, ld * 4);
}

void cpu_amx_rows(const Weight *w, const uint16_t *tiles, const uint16_t *xb, float *out, int64_t r0, int64_t r1,
                  int n) {
    const int64_t R = w->rows, C = w->cols, G = C / 32;
    float buf[AMX_TOKENS * AMX_ROWS] __attribute__((aligned(64)));
    int cfg_tokens = 0;
    for (int64_t c0 = r0 / AMX_ROWS * AMX_ROWS; c0 < r1; c0 += AMX_BLOCK) {
        const int64_t c1 = c0 + AMX_BLOCK < r1 ? c0 + AMX_BLOCK : r1;
        for (int t0 = 0; t0 < n; t0 += AMX_TOKENS) {
            const int k = n - t0 < AMX_TOKENS ? n - t0 : AMX_TOKENS;
            if (G && k != cfg_tokens) {
                amx_configure(k);
                cfg_tokens = k;
            }
            for (int64_t b = c0; b < c1;) {
                /* a block inside [r0, r1) is stored in place; one cut by
                 * the range goes through buf and gives its rows in it */
                const int64_t lo = b > r0 ? b : r0, hi = b + AMX_ROWS < c1 ? b + AMX_ROWS : c1;
                const int whole = lo == b && hi == b + AMX_ROWS;
                const uint16_t *tb = tiles + b / AMX_ROWS * G * 512;
                if (!G) {
                    for (int t = t0; t < t0 + k; t++)
                        for (int64_t r = lo; r < hi; r++) out[(int64_t)t * R + r] = 0;
                } else if (whole && b + 2 * AMX_ROWS <= c1) {   /* this block and the next */
                    amx_blocks(tb, G, xb, C, t0, out + (int64_t)t0 * R + b, R, 2);
                    amx_tail(w, xb, out, b, 2 * AMX_ROWS, t0, k);
                    b += 2 * AMX_ROWS;
                    continue;
                } else if (whole) {
                    amx_blocks(tb, G, xb, C, t0, out + (int64_t)t0 * R + b, R, 1);
                } else {
                    amx_blocks(tb, G, xb, C, t0, buf, AMX_ROWS, 1);
                    for (int t = 0; t < k; t++)
                        memcpy(out + (int64_t)(t0 + t) * R + lo, buf + t * AMX_ROWS + (lo - b), sizeof(float) * (hi - lo));
                }
                amx_tail(w, xb, out, lo, (int)(hi - lo), t0, k);
                b += AMX_ROWS;
            }
        }
    }
    if (G) _tile_release();   /* the tile state back to its initial one: cheaper context switches */
}
#else
int cpu_amx_ready(void) { return 0; }   /* a build without AMX: the setting is refused */
uint16_t *cpu_amx_tiles(const Weight *w) { (void)w; return NULL; }
#endif
