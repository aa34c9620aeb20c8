/* --cpu-fast-gemm amx (BackendOptions.cpu_fast_gemm CPU_GEMM_AMX): BF16
 * weights times activations rounded to BF16 on the AMX tile multiply
 * (TDPBF16PS).  Each (row, token) sum is one F32 chain over the column
 * pairs in order, then the columns past the last multiple of 32 added one
 * by one: not the AVX512-BF16 path's sums (16 lane chains, then a tree),
 * so a separate arithmetic, recorded as such.
 *
 * The weights are the A tiles, read where they lie (16 rows of 32 columns
 * at the row stride); the activations are packed once per product as B
 * tiles (each 64-byte tile row holds one column pair of up to 16 tokens);
 * C tiles hold 16 rows x up to 16 tokens.  Every element of a tile is
 * computed on its own, so a sum is the same whatever the token count, the
 * tile's height or which thread takes which rows: decode and tree
 * verification agree bit for bit (tests/test_kernels.c checks it).  The
 * tile multiply is about eight times the AVX512-BF16 pair dot's arithmetic
 * per cycle, so verifying 16 tokens reads the weights once at nearly the
 * cost of one token, where the pair dot becomes bound by arithmetic. */
#include "kernels/cpu/cpu.h"
#include "kernels/base/util.h"
#include <stdlib.h>

#ifdef CPU_AMX
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#define AMX_TOKENS 16     /* tokens of a C tile (its columns) */
#define AMX_ROWS 16       /* weight rows of an A or C tile */
#define AMX_BLOCK 64      /* rows whose weights stay in L2 while every token group passes */
/* Software prefetch into L2, this many tile blocks ahead, a slice of the
 * block per step in address order.  The tile loads read 16 or 32 rows side
 * by side, streams too short for the hardware prefetcher on SmolLM2's
 * small matrices; prefetching each row ahead, as matmul.c does, made
 * decode slower here, the blocks ahead in order about 10% faster. */
#define AMX_PREFETCH_BLOCKS 2

/* Linux hands out the tile registers' state only on request (per process). */
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

int cpu_amx_ready(void) {
    static int state = -1;   /* first asked from backend_configure, before any thread */
    if (state < 0) state = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
    return state;
}

/* The tile configuration (palette 1): tiles 0 and 1 the sums of two row
 * blocks of `rows` rows, 2 and 3 their weights, 4 the activations of
 * `tokens` tokens. */
typedef struct __attribute__((packed)) {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} TileConfig;

/* (LDTILECFG is issued through asm with the whole 64-byte block as its
 * operand: through GCC's builtin, once amx_configure was not inlined, the
 * stores to the rows and column widths were dropped as dead and the
 * instruction faulted on a half-written block.) */
static void amx_configure(int rows, int tokens) {
    TileConfig c __attribute__((aligned(64)));
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int i = 0; i < 4; i++) {
        c.rows[i] = (uint8_t)rows;
        c.colsb[i] = (uint16_t)(i < 2 ? tokens * 4 : 64);
    }
    c.rows[4] = 16;
    c.colsb[4] = (uint16_t)(tokens * 4);
    __asm__ volatile("ldtilecfg %0" : : "m"(c));
}

size_t cpu_amx_pack_size(int n, int64_t cols) { return (size_t)n * (size_t)(cols & ~31LL); }

/* Token group g (tokens t0 .. t0 + k) starts at pk + t0 * C32 and holds,
 * for column pair p, the k tokens' pairs side by side: its tile row stride
 * is 4k bytes, and the 16 pairs of columns [32b, 32b + 32) start at
 * 32 b k elements. */
void cpu_amx_pack(uint16_t *pk, const uint16_t *xb, int n, int64_t cols) {
    const int64_t C32 = cols & ~31LL;
    for (int t0 = 0; t0 < n; t0 += AMX_TOKENS) {
        const int k = n - t0 < AMX_TOKENS ? n - t0 : AMX_TOKENS;
        uint16_t *g = pk + (int64_t)t0 * C32;
        for (int64_t j = 0; j < C32; j += 2)
            for (int t = 0; t < k; t++) memcpy(g + (j / 2 * k + t) * 2, xb + (int64_t)(t0 + t) * cols + j, 4);
    }
}

/* out[t0 + t][r + i] (stride R) from C tile `tile`'s m rows x k tokens, plus
 * the columns past C32. */
static void amx_store(float *buf, const char *row, size_t rb, const uint16_t *xb, int64_t C, int64_t C32, float *out,
                      int64_t R, int m, int k, int t0) {
    for (int t = 0; t < k; t++) {
        const uint16_t *x = xb + (int64_t)(t0 + t) * C;
        for (int i = 0; i < m; i++) {
            float sum = buf[i * k + t];
            const uint16_t *w = (const uint16_t *)(row + i * rb);
            for (int64_t j = C32; j < C; j++) sum += bf16_to_f32(w[j]) * bf16_to_f32(x[j]);
            out[(int64_t)(t0 + t) * R + i] = sum;
        }
    }
}

/* NB (1 or 2) row blocks of m rows from `row` (m = 16 where NB is 2) for
 * the token group at g of k tokens: C tiles 0 and 1, their weights in A
 * tiles 2 and 3, the activations in tile 4.  (Two chains at once: more
 * were slower.) */
static inline __attribute__((always_inline)) void amx_tiles(const char *row, size_t rb, const uint16_t *g,
                                                            const uint16_t *xb, int64_t C, float *out, int64_t R,
                                                            int m, int k, int t0, int prefetch, const int NB) {
    const int64_t C32 = C & ~31LL;
    const size_t block = (size_t)NB * m * rb, slice = C32 ? block / (size_t)(C32 / 32) : 0;
    float buf[AMX_ROWS * AMX_TOKENS] __attribute__((aligned(64)));
    _tile_zero(0);
    if (NB > 1) _tile_zero(1);
    for (int64_t j = 0; j < C32; j += 32) {
        if (prefetch) {
            const char *p = row + AMX_PREFETCH_BLOCKS * block + (size_t)(j / 32) * slice;
            for (size_t o = 0; o < slice; o += 64) __builtin_prefetch(p + o, 0, 2);
        }
        _tile_loadd(4, g + j * k, k * 4);
        _tile_loadd(2, row + j * 2, rb);
        _tile_dpbf16ps(0, 2, 4);
        if (NB > 1) {
            _tile_loadd(3, row + AMX_ROWS * rb + j * 2, rb);
            _tile_dpbf16ps(1, 3, 4);
        }
    }
    /* (tile numbers are immediates: one store per block written out) */
    _tile_stored(0, buf, k * 4);
    amx_store(buf, row, rb, xb, C, C32, out, R, m, k, t0);
    if (NB > 1) {
        _tile_stored(1, buf, k * 4);
        amx_store(buf, row + AMX_ROWS * rb, rb, xb, C, C32, out + AMX_ROWS, R, m, k, t0);
    }
}

void cpu_amx_rows(const Weight *w, const uint16_t *pk, const uint16_t *xb, float *out, int64_t r0, int64_t r1,
                  int n) {
    const int64_t R = w->rows, C = w->cols, C32 = C & ~31LL;
    const size_t rb = (size_t)C * sizeof(uint16_t);
    const char *base = (const char *)w->data;
    int cfg_rows = 0, cfg_tokens = 0;
    for (int64_t b0 = r0; b0 < r1; b0 += AMX_BLOCK) {
        const int64_t b1 = b0 + AMX_BLOCK < r1 ? b0 + AMX_BLOCK : r1;
        for (int t0 = 0; t0 < n; t0 += AMX_TOKENS) {
            const int k = n - t0 < AMX_TOKENS ? n - t0 : AMX_TOKENS;
            for (int64_t r = b0; r < b1;) {
                const int m = b1 - r < AMX_ROWS ? (int)(b1 - r) : AMX_ROWS;
                const int nb = m < AMX_ROWS ? 1 : b1 - r >= 2 * AMX_ROWS ? 2 : 1;
                if (m != cfg_rows || k != cfg_tokens) {
                    amx_configure(m, k);
                    cfg_rows = m;
                    cfg_tokens = k;
                }
                const char *row = base + r * rb;
                const uint16_t *g = pk + (int64_t)t0 * C32;
                const int pf = t0 == 0;
                switch (nb) {
                case 1: amx_tiles(row, rb, g, xb, C, out + r, R, m, k, t0, pf, 1); break;
                default: amx_tiles(row, rb, g, xb, C, out + r, R, m, k, t0, pf, 2); break;
                }
                r += nb * m;
            }
        }
    }
    _tile_release();   /* the tile state back to its initial one: cheaper context switches */
}
#else
int cpu_amx_ready(void) { return 0; }   /* a build without AMX: the setting is refused */
#endif
