/* Weight products.  Many tokens: OpenBLAS sgemm (F16/BF16 weights are
 * widened to F32 a block of rows at a time).  Few tokens (decode, EAGLE
 * steps, trees and batches of up to FEW_TOKENS tokens, FEW_TOKENS_UNCACHED
 * for a 16-bit matrix without an F32 copy): a fused convert-and-dot loop
 * split over both cores, which reads every weight byte once — decode speed
 * is memory bandwidth — and sums each token exactly as decode does. */
#include "kernels/cpu/cpu.h"
#include "kernels/base/quant.h"
#include "kernels/base/util.h"
#include <cblas.h>
#include <stdlib.h>

#define BLOCK_ROWS 256      /* rows widened per sgemm call */

/* Software prefetch distance of the fused loop, into L2.  SmolLM2's
 * matrices are small (0.4-1.7 MB, 576 columns), so the hardware prefetcher
 * restarts at every one of the ~210 products per token and never reaches
 * full speed; 16-32 KB ahead nearly doubles decode there (8 KB and 64 KB do
 * less), and on matrices of several MB it changes nothing. */
#define PREFETCH_AHEAD 32768

void cpu_weight_row(const Weight *w, int64_t r, float *out) {
    if (dtype_is_quant(w->dtype)) { cpu_quant_row(w, r, out); return; }
    const char *base = (const char *)w->data + r * w->cols * (int64_t)dtype_size(w->dtype);
    int64_t j = 0;
    for (; j + 8 <= w->cols; j += 8) {
        v8f v = load8(base, w->dtype, j);
        memcpy(out + j, &v, 32);
    }
    for (; j < w->cols; j++) out[j] = load1(base, w->dtype, j);
}

void cpu_embed(float *out, const Weight *table, const int *tokens, int n) {
    for (int t = 0; t < n; t++) {
        float *row = out + (int64_t)t * table->cols;
        if (tokens[t] < 0 || tokens[t] >= table->rows) memset(row, 0, sizeof(float) * table->cols);
        else cpu_weight_row(table, tokens[t], row);
    }
}

/* out[t][r + i] (stride R) = row i · x[t] for NR <= 2 adjacent rows (rb
 * bytes apart) and N <= 4 tokens, NR, N and the dtype compile-time so the
 * accumulators live in registers and the widening is branch-free.  Every
 * (row, token) sum runs the same two 8-lane FMA chains whatever NR and N:
 * two rows at once only share each token's loads of x.  (One 16-lane
 * AVX-512 chain would give the same sums but measured 20-25% slower at
 * 8-32 tokens on the Xeon.)  Token loops are unrolled by pragma: left
 * rolled, GCC keeps the accumulators in memory.  PREFETCH: ask for the
 * weight bytes PREFETCH_AHEAD further on (the later token groups find the
 * rows in L2 already and do not). */
static inline __attribute__((always_inline)) void rows_dot_tile(const char *row, size_t rb, const float *x, int64_t C,
                                                                float *out, int64_t R, const int NR, const int N,
                                                                const DType DT, const int PREFETCH) {
    const int64_t C16 = C & ~15LL;
    const int es = DT == DT_F32 ? 4 : 2;
    v8f a0[2][4], a1[2][4];
#pragma GCC unroll 2
    for (int i = 0; i < NR; i++)
#pragma GCC unroll 4
        for (int t = 0; t < N; t++) a0[i][t] = a1[i][t] = (v8f){0};
    for (int64_t j = 0; j < C16; j += 16) {
        v8f w0[2], w1[2];
#pragma GCC unroll 2
        for (int i = 0; i < NR; i++) {
            if (PREFETCH) __builtin_prefetch(row + i * rb + j * es + PREFETCH_AHEAD, 0, 2);
            w0[i] = load8(row + i * rb, DT, j);
            w1[i] = load8(row + i * rb, DT, j + 8);
        }
#pragma GCC unroll 4
        for (int t = 0; t < N; t++) {
            v8f x0, x1;
            memcpy(&x0, x + t * C + j, 32);
            memcpy(&x1, x + t * C + j + 8, 32);
#pragma GCC unroll 2
            for (int i = 0; i < NR; i++) {
                a0[i][t] += w0[i] * x0;
                a1[i][t] += w1[i] * x1;
            }
        }
    }
#pragma GCC unroll 2
    for (int i = 0; i < NR; i++)
#pragma GCC unroll 4
        for (int t = 0; t < N; t++) {
            v8f a = a0[i][t] + a1[i][t];
            float sum = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
            for (int64_t j = C16; j < C; j++) sum += load1(row + i * rb, DT, j) * x[t * C + j];
            out[t * R + i] = sum;
        }
}

/* Token group of a tile: 2 rows x 4 tokens needs 16 accumulators, which
 * fit AVX-512's 32 vector registers but spill from AVX2's 16. */
#ifdef __AVX512VL__
#define TILE_TOKENS 4
#else
#define TILE_TOKENS 2
#endif

/* Rows [r, r1) for N tokens: two at a time when pairs, else one. */
static inline __attribute__((always_inline)) void rows_span_pf(const char *base, size_t rb, const float *x, int64_t C,
                                                               float *out, int64_t R, int64_t r, int64_t r1, int pairs,
                                                               const int N, const DType DT, const int PREFETCH) {
    if (pairs)
        for (; r + 2 <= r1; r += 2) rows_dot_tile(base + r * rb, rb, x, C, out + r, R, 2, N, DT, PREFETCH);
    for (; r < r1; r++) rows_dot_tile(base + r * rb, rb, x, C, out + r, R, 1, N, DT, PREFETCH);
}
/* (prefetch a compile-time constant in the inner loop) */
static inline __attribute__((always_inline)) void rows_span(const char *base, size_t rb, const float *x, int64_t C,
                                                            float *out, int64_t R, int64_t r, int64_t r1, int pairs,
                                                            const int N, const DType DT, int prefetch) {
    if (prefetch) rows_span_pf(base, rb, x, C, out, R, r, r1, pairs, N, DT, 1);
    else rows_span_pf(base, rb, x, C, out, R, r, r1, pairs, N, DT, 0);
}

/* Rows per block of the token-group loop: a block of weights stays in L2
 * while every group of TILE_TOKENS tokens passes over it, and each group's
 * x stays in L1 (one pass per row pair over all n tokens' x read it from
 * L2 again for every pair). */
#define ROW_BLOCK 64

/* The loop every few-token product runs: blocks of ROW_BLOCK rows of
 * [r0, r1) and, inside each, groups of at most G of the n tokens; the body
 * sees the block [b0, b1), the group's first token t and its size k, and
 * dispatches k to a tile specialised at compile time. */
#define FOR_BLOCKS_AND_GROUPS(r0, r1, n, G, body)                                                           \
    for (int64_t b0 = (r0); b0 < (r1); b0 += ROW_BLOCK) {                                                   \
        const int64_t b1 = b0 + ROW_BLOCK < (r1) ? b0 + ROW_BLOCK : (r1);                                   \
        for (int t = 0; t < (n); t += (G)) {                                                                 \
            const int k = (n) - t < (G) ? (n) - t : (G);                                                     \
            body                                                                                             \
        }                                                                                                    \
    }

/* Rows [r0, r1) of out[t][r] = W[r]·x[t], two rows at a time from 2 tokens
 * on; every (token, row) sum is the same whatever n (tree verification and
 * decode agree bit for bit). */
static inline __attribute__((always_inline)) void rows_dot(const Weight *w, const float *x, float *out,
                                                           int64_t r0, int64_t r1, int n, const DType DT) {
    const int64_t R = w->rows, C = w->cols;
    const size_t rb = C * dtype_size(DT);
    const char *base = (const char *)w->data;
    /* (k's cases are written out: TILE_TOKENS is 2 without AVX-512, and a
     * preprocessor test cannot sit inside the macro's argument) */
    FOR_BLOCKS_AND_GROUPS(r0, r1, n, TILE_TOKENS, {
        const float *xt = x + t * C;
        float *ot = out + t * R;
        switch (k) {
        case 1: rows_span(base, rb, xt, C, ot, R, b0, b1, n >= 2, 1, DT, t == 0); break;
        case 2: rows_span(base, rb, xt, C, ot, R, b0, b1, n >= 2, 2, DT, t == 0); break;
        case 3: rows_span(base, rb, xt, C, ot, R, b0, b1, n >= 2, TILE_TOKENS > 2 ? 3 : 1, DT, t == 0); break;
        case 4: rows_span(base, rb, xt, C, ot, R, b0, b1, n >= 2, TILE_TOKENS > 2 ? 4 : 1, DT, t == 0); break;
        }
    })
}

#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512VL__)
/* AVX2 products of HALF_MIN_TOKENS or more tokens.  rows_dot_tile's 2 x 2
 * tile (all AVX2's 16 registers allow with both chains in registers)
 * widens every weight vector once per 2 tokens, a 9-token product passing
 * over each row block 5 times.  Here a tile of 2 rows x up to HALF_TOKENS
 * tokens sweeps its rows twice, once per chain of rows_dot_tile: first a0
 * (columns j..j+7 of each 16-column step), then a1 (j+8..j+15), each chain
 * the same multiply-adds in the same order, and the sum ends as
 * rows_dot_tile's does (dot_finish): the same sums bit for bit.  One chain
 * at a time needs 12 accumulators for 2 x 6, which fit beside the two
 * rows' weights and one token's x: each weight vector is widened once per
 * 6 tokens, each load of x serves both rows, and the second sweep finds
 * the two rows in L1 or L2.  Such tiles take the tokens after a block's
 * first STREAM_TOKENS, which rows_dot_tile takes one row at a time while
 * the block arrives from memory (rows_dot_avx2).
 * From 3 tokens: below, rows_dot_tile's 2 x 2 tile also widens each
 * weight once (one 2-token group).  (The bound comes from that count; it
 * has not been timed against 2.) */
#define HALF_ROWS 2
#define HALF_TOKENS 6
#define HALF_MIN_TOKENS 3

/* acc[i][t] = the chain over columns h..h+7 of the 16-column steps in
 * [j0, j1) of row i · x[t] (h 0: rows_dot_tile's a0, h 8: its a1) for
 * NR <= 2 rows and N <= HALF_TOKENS tokens, continued from acc's values
 * when CARRY (else from 0): a chain cut into column ranges, each continued
 * from the last, makes the same multiply-adds in the same order.  x comes
 * packed (pack_group): the N tokens' eight columns of a chain's step
 * side by side, so one pointer and fixed offsets reach them all. */
static inline __attribute__((always_inline)) void half_chains(const char *row, size_t rb, const float *xp,
                                                              const int64_t h, int64_t j0, int64_t j1,
                                                              v8f acc[HALF_ROWS][HALF_TOKENS], const int NR,
                                                              const int N, const DType DT, const int CARRY) {
    v8f a[HALF_ROWS][HALF_TOKENS];
#pragma GCC unroll 4
    for (int i = 0; i < NR; i++)
#pragma GCC unroll 6
        for (int t = 0; t < N; t++) a[i][t] = CARRY ? acc[i][t] : (v8f){0};
    const float *p = xp + j0 * N + h * N;
    for (int64_t j = j0 + h; j < j1; j += 16, p += 16 * N) {
        v8f w[HALF_ROWS];
#pragma GCC unroll 4
        for (int i = 0; i < NR; i++) w[i] = load8(row + i * rb, DT, j);
#pragma GCC unroll 6
        for (int t = 0; t < N; t++) {
            v8f xv;
            xv = (v8f)_mm256_loadu_ps(p + 8 * t);
            __asm__("" : "+x"(xv));   /* one load of x per token, not one per row */
#pragma GCC unroll 4
            for (int i = 0; i < NR; i++) a[i][t] += w[i] * xv;
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < NR; i++)
#pragma GCC unroll 6
        for (int t = 0; t < N; t++) acc[i][t] = a[i][t];
}

/* xp[j/16][h/8][t][8] = x[t][j + h ..] for the 16-column steps of N tokens'
 * x (stride C): what half_chains reads. */
static void pack_group(float *xp, const float *x, int64_t C, int N) {
    const int64_t C16 = C & ~15LL;
    for (int64_t j = 0; j < C16; j += 16)
        for (int h = 0; h < 16; h += 8)
            for (int t = 0; t < N; t++) memcpy(xp + j * N + h * N + t * 8, x + t * C + j + h, 32);
}

/* rows_dot_tile's end of a (row, token) sum from its chains a0 and a1:
 * a0 + a1, the fixed tree over the lanes, the columns past the last
 * 16-column step in order. */
static inline __attribute__((always_inline)) float dot_finish(v8f a0, v8f a1, const char *row, const float *x,
                                                              int64_t C, const DType DT) {
    const v8f a = a0 + a1;
    float sum = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
    for (int64_t j = C & ~15LL; j < C; j++) sum += load1(row, DT, j) * x[j];
    return sum;
}

/* A group's rows by column ranges: for each range of x, every row pair of
 * the block runs its chains over the range, carrying them in acc from one
 * range to the next (the same sums as one sweep over whole rows), then
 * each (row, token) sum ends as rows_dot_tile's.  The chains live in acc,
 * not in registers between a row's two sweeps: a pair's 2 x 2 x N chains
 * (24 for 6 tokens) do not fit AVX2's 16 registers, and kept as locals
 * over a row pair's two whole sweeps GCC spills inside the second sweep
 * (SmolLM2's 1536 x 576 at 16 tokens: 0.32-0.33 ms that way against
 * 0.22 this way; 8960 x 1536 level).  A group's x of more
 * than X_L1_BYTES does not stay in L1 while a row pair sweeps it (6 tokens
 * of 1536 columns: 36 KB), and each sweep would read it from L2 again: one
 * 32-byte load of x per two multiply-adds, what L2 delivers at best; so
 * such a group takes ranges of K_COLS columns (12 KB of x for 6 tokens),
 * a smaller one its whole rows as one range. */
#define X_L1_BYTES 16384
#define K_COLS 512

static inline __attribute__((always_inline)) void rows_span_ranges(const char *base, size_t rb, const float *x,
                                                                   const float *xp, int64_t C, float *out, int64_t R,
                                                                   int64_t r, int64_t r1, const int N, const DType DT) {
    v8f acc[ROW_BLOCK / HALF_ROWS][2][HALF_ROWS][HALF_TOKENS];
    const int64_t C16 = C & ~15LL;
    const int64_t width = (int64_t)N * C * (int64_t)sizeof(float) > X_L1_BYTES ? K_COLS : C16 ? C16 : 16;
    for (int64_t j0 = 0; j0 == 0 || j0 < C16; j0 += width) {   /* one range at least: it starts the chains */
        const int64_t j1 = j0 + width < C16 ? j0 + width : C16;
        for (int64_t q = r; q < r1; q += HALF_ROWS) {
            v8f(*a)[HALF_ROWS][HALF_TOKENS] = acc[(q - r) / HALF_ROWS];
            const char *row = base + q * rb;
            const int pair = q + HALF_ROWS <= r1;
            for (int h = 0; h < 2; h++) {   /* NR and CARRY compile-time in each call */
                if (pair && j0) half_chains(row, rb, xp, 8 * h, j0, j1, a[h], HALF_ROWS, N, DT, 1);
                else if (pair) half_chains(row, rb, xp, 8 * h, j0, j1, a[h], HALF_ROWS, N, DT, 0);
                else if (j0) half_chains(row, rb, xp, 8 * h, j0, j1, a[h], 1, N, DT, 1);
                else half_chains(row, rb, xp, 8 * h, j0, j1, a[h], 1, N, DT, 0);
            }
        }
    }
    for (int64_t q = r; q < r1; q++) {
        v8f(*a)[HALF_ROWS][HALF_TOKENS] = acc[(q - r) / HALF_ROWS];
        const int i = (int)((q - r) % HALF_ROWS);
        for (int t = 0; t < N; t++) out[t * R + q] = dot_finish(a[0][i][t], a[1][i][t], base + q * rb, x + t * C, C, DT);
    }
}

/* The tokens of a block's first group, which streams the block from memory:
 * rows_dot_tile one row at a time, both chains in registers (8 for 4
 * tokens), one sweep of each row in order with the fetch ahead, x (24 KB
 * for 4 tokens of 1536 columns) in L1.  The tiles of the later groups
 * sweep each row pair twice and reload x per pair: as a first group of 4
 * or 6 tokens (by ranges, fetching the next block ahead) they did not
 * overlap the weights' arrival on a Zen 3, where this cut a 1.5B BF16
 * model's 4-node tree forward from about 2x one token's to 1.35x (8
 * nodes 2.7x -> 2.3x; docs/runtime.md). */
#define STREAM_TOKENS 4

/* The size of group g of the rest tokens after a block's first group: at
 * most HALF_TOKENS, the groups as equal as they can be (+-1). */
static inline int half_group(int rest, int g) {
    const int groups = (rest + HALF_TOKENS - 1) / HALF_TOKENS;
    return rest / groups + (g < rest % groups);
}

/* xp: half_packed(x, C, n) */
static inline __attribute__((always_inline)) void rows_dot_avx2(const Weight *w, const float *x, const float *xp,
                                                               float *out, int64_t r0, int64_t r1, int n,
                                                               const DType DT) {
    const int64_t R = w->rows, C = w->cols;
    const size_t rb = C * dtype_size(DT);
    const char *base = (const char *)w->data;
    /* blocks of at most ROW_BLOCK rows and of at most the bytes 64 rows of
     * 1536 BF16 columns take, so that a block stays in L2 for every token
     * group also on wide matrices (8960 columns: 10 rows, not 64, whose
     * 1.1 MB each group read from memory again) */
    int64_t br = (int64_t)(ROW_BLOCK * 1536 * 2) / (int64_t)rb;
    br = br >= ROW_BLOCK ? ROW_BLOCK : br < HALF_ROWS ? HALF_ROWS : br & ~(int64_t)(HALF_ROWS - 1);
    const int first = n < STREAM_TOKENS ? n : STREAM_TOKENS, rest = n - first;   /* first: 3 or 4 */
    const int64_t C16 = C & ~15LL;
    for (int64_t b0 = r0; b0 < r1; b0 += br) {
        const int64_t b1 = b0 + br < r1 ? b0 + br : r1;
        if (first == 3) rows_span_pf(base, rb, x, C, out, R, b0, b1, 0, 3, DT, 1);
        else rows_span_pf(base, rb, x, C, out, R, b0, b1, 0, STREAM_TOKENS, DT, 1);
        for (int g = 0, t = first; t < n; g++) {
            const int k = half_group(rest, g);
            const float *xt = x + t * C, *xg = xp + (t - first) * C16;
            float *ot = out + t * R;
            switch (k) {
            case 1: rows_span_ranges(base, rb, xt, xg, C, ot, R, b0, b1, 1, DT); break;
            case 2: rows_span_ranges(base, rb, xt, xg, C, ot, R, b0, b1, 2, DT); break;
            case 3: rows_span_ranges(base, rb, xt, xg, C, ot, R, b0, b1, 3, DT); break;
            case 4: rows_span_ranges(base, rb, xt, xg, C, ot, R, b0, b1, 4, DT); break;
            case 5: rows_span_ranges(base, rb, xt, xg, C, ot, R, b0, b1, 5, DT); break;
            case 6: rows_span_ranges(base, rb, xt, xg, C, ot, R, b0, b1, 6, DT); break;
            }
            t += k;
        }
    }
}

/* x of n tokens (C columns) with the tokens after the first STREAM_TOKENS
 * packed group by group for rows_dot_avx2 (pack_group), in a buffer kept
 * between calls (products run one at a time, their parallel regions
 * inside, as bf16_activations' buffer); NULL below HALF_MIN_TOKENS.  With
 * a pointer per token instead, GCC reloaded five of the six from the stack
 * in every step and stored one load of x there: 16-token BF16 products on
 * one thread 4-5% slower (Zen 4, AVX2 build, 1536 x 1536 0.87 against
 * 0.83 ms).  Packed once per product, for both threads. */
static const float *half_packed(const float *x, int64_t C, int n) {
    static float *buf;
    static size_t cap;
    if (n < HALF_MIN_TOKENS) return NULL;
    const int first = n < STREAM_TOKENS ? n : STREAM_TOKENS, rest = n - first;
    const int64_t C16 = C & ~15LL;
    const size_t need = (size_t)(rest ? rest : 1) * (size_t)(C16 ? C16 : 1);
    if (need > cap) {
        buf = xrealloc(buf, sizeof(float) * need);   /* (exits naming the allocation on failure) */
        cap = need;
    }
    for (int g = 0, t = first; t < n; g++) {
        const int k = half_group(rest, g);
        pack_group(buf + (t - first) * C16, x + t * C, C, k);
        t += k;
    }
    return buf;
}
#else
static const float *half_packed(const float *x, int64_t C, int n) { (void)x; (void)C; (void)n; return NULL; }
#endif

#ifdef __AVX512VL__
/* Products of WIDE_MIN_TOKENS or more tokens are bound by arithmetic, not
 * by reading the weights: a tile of up to 4 rows x WIDE_TOKENS tokens keeps
 * each (row, token) sum in one 16-lane register, whose low and high halves
 * are rows_dot_tile's two 8-lane chains (the same multiply-adds in the same
 * order, then a0 + a1 and the same tree): the same sums, with a quarter of
 * the weight loads and widenings per multiply-add. */
#define WIDE_TOKENS 6
#define WIDE_MIN_TOKENS 8
typedef float v16f __attribute__((vector_size(64)));

static inline __attribute__((always_inline)) v16f load16(const void *base, DType dt, int64_t i) {
    v16f r;
    if (dt == DT_F32) {
        memcpy(&r, (const float *)base + i, 64);
    } else if (dt == DT_BF16) {   /* one widening load (GCC splits the generic conversion in four) */
        __m512i u = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)((const uint16_t *)base + i)));
        r = (v16f)_mm512_slli_epi32(u, 16);
    } else {
        r = (v16f)_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)base + i)));
    }
    return r;
}

static inline __attribute__((always_inline)) void rows_dot_wide(const char *row, size_t rb, const float *x, int64_t C,
                                                                float *out, int64_t R, const int NR, const int N,
                                                                const DType DT) {
    const int64_t C16 = C & ~15LL;
    v16f a[4][WIDE_TOKENS];
#pragma GCC unroll 4
    for (int i = 0; i < NR; i++)
#pragma GCC unroll 6
        for (int t = 0; t < N; t++) a[i][t] = (v16f){0};
    for (int64_t j = 0; j < C16; j += 16) {
        v16f w[4];
#pragma GCC unroll 4
        for (int i = 0; i < NR; i++) w[i] = load16(row + i * rb, DT, j);
#pragma GCC unroll 6
        for (int t = 0; t < N; t++) {
            v16f xv;
            memcpy(&xv, x + t * C + j, 64);
            __asm__("" : "+v"(xv));   /* one load of x per token, not one per row */
#pragma GCC unroll 4
            for (int i = 0; i < NR; i++) a[i][t] += w[i] * xv;
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < NR; i++)
#pragma GCC unroll 6
        for (int t = 0; t < N; t++) {
            v8f lo, hi;
            memcpy(&lo, &a[i][t], 32);
            memcpy(&hi, (const char *)&a[i][t] + 32, 32);
            v8f s = lo + hi;
            float sum = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
            for (int64_t j = C16; j < C; j++) sum += load1(row + i * rb, DT, j) * x[t * C + j];
            out[t * R + i] = sum;
        }
}

static inline __attribute__((always_inline)) void rows_span_wide(const char *base, size_t rb, const float *x, int64_t C,
                                                                 float *out, int64_t R, int64_t r, int64_t r1,
                                                                 const int N, const DType DT) {
    for (; r + 4 <= r1; r += 4) rows_dot_wide(base + r * rb, rb, x, C, out + r, R, 4, N, DT);
    for (; r < r1; r++) rows_dot_wide(base + r * rb, rb, x, C, out + r, R, 1, N, DT);
}

static inline __attribute__((always_inline)) void rows_dot_many(const Weight *w, const float *x, float *out,
                                                                int64_t r0, int64_t r1, int n, const DType DT) {
    const int64_t R = w->rows, C = w->cols;
    const size_t rb = C * dtype_size(DT);
    const char *base = (const char *)w->data;
    FOR_BLOCKS_AND_GROUPS(r0, r1, n, WIDE_TOKENS, {
        const float *xt = x + t * C;
        float *ot = out + t * R;
        switch (k) {
        case 1: rows_span_wide(base, rb, xt, C, ot, R, b0, b1, 1, DT); break;
        case 2: rows_span_wide(base, rb, xt, C, ot, R, b0, b1, 2, DT); break;
        case 3: rows_span_wide(base, rb, xt, C, ot, R, b0, b1, 3, DT); break;
        case 4: rows_span_wide(base, rb, xt, C, ot, R, b0, b1, 4, DT); break;
        case 5: rows_span_wide(base, rb, xt, C, ot, R, b0, b1, 5, DT); break;
        case 6: rows_span_wide(base, rb, xt, C, ot, R, b0, b1, 6, DT); break;
        }
    })
}
#endif

#ifdef __AVX512BF16__
/* --cpu-fast-gemm on (BackendOptions.cpu_fast_gemm CPU_GEMM_BF16; amx: the
 * same products on the tile multiply, matmul_amx.c): BF16 weights times
 * activations rounded to BF16, with the AVX512-BF16 pair dot product (F32
 * sums of two BF16 products per lane), as llama.cpp's BF16 path computes.
 * Every product of such a weight takes this path, whatever its token
 * count, so each (row, token) sum is one chain over the columns, then a
 * fixed 16-lane reduction: results depend neither on the batch nor on the
 * tile, also beyond FEW_TOKENS. */
#define DOT_TOKENS 6

static int fast_bf16(const Weight *w) { return w->dtype == DT_BF16 && backend_settings()->cpu_fast_gemm; }

/* *buf grown to at least count elements (*cap: its size), kept between
 * calls: products run one at a time (batch.c's fibers share one thread),
 * their parallel regions inside. */
static uint16_t *scratch(uint16_t **buf, size_t *cap, size_t count) {
    if (count > *cap) {
        *buf = xrealloc(*buf, sizeof(uint16_t) * count);   /* (exits naming the allocation on failure) */
        *cap = count;
    }
    return *buf;
}

/* x[count] rounded to BF16 as f32_to_bf16 does (nearest even, NaN kept). */
static const uint16_t *bf16_activations(const float *x, int64_t count) {
    static uint16_t *buf;
    static size_t cap;
    uint16_t *b = scratch(&buf, &cap, (size_t)count);
    f32_to_bf16_row(b, x, (size_t)count);
    return b;
}

/* Whether x rounded to BF16 (xb) goes to the tile multiply: the setting is
 * amx; then each weight's tile copy is made here if it has none (a weight
 * made under another setting), before any parallel region reads it. */
static int amx_products(const uint16_t *xb, const Weight *const *ws, int count) {
#ifdef CPU_AMX
    if (!xb || backend_settings()->cpu_fast_gemm != CPU_GEMM_AMX) return 0;
    for (int i = 0; i < count; i++) cpu_weight_make_tiles(ws[i]);
    return 1;
#else
    (void)xb; (void)ws; (void)count;
    return 0;
#endif
}

/* out[t][r + i] (stride R) = row i · xb[t] for NR <= 4 rows and N <=
 * DOT_TOKENS tokens (rows_dot_wide's tile, BF16 pairs). */
static inline __attribute__((always_inline)) void rows_dot_bf16(const char *row, size_t rb, const uint16_t *xb,
                                                                int64_t C, float *out, int64_t R, const int NR,
                                                                const int N, const int PREFETCH) {
    const int64_t C32 = C & ~31LL;
    __m512 a[4][DOT_TOKENS];
#pragma GCC unroll 4
    for (int i = 0; i < NR; i++)
#pragma GCC unroll 6
        for (int t = 0; t < N; t++) a[i][t] = _mm512_setzero_ps();
    for (int64_t j = 0; j < C32; j += 32) {
        __m512bh w[4];
#pragma GCC unroll 4
        for (int i = 0; i < NR; i++) {
            if (PREFETCH) __builtin_prefetch(row + i * rb + j * 2 + PREFETCH_AHEAD, 0, 2);
            w[i] = (__m512bh)_mm512_loadu_si512(row + i * rb + j * 2);
        }
#pragma GCC unroll 6
        for (int t = 0; t < N; t++) {
            __m512i xi = _mm512_loadu_si512(xb + t * C + j);
            __asm__("" : "+v"(xi));   /* one load of x per token, not one per row */
            const __m512bh xv = (__m512bh)xi;
#pragma GCC unroll 4
            for (int i = 0; i < NR; i++) a[i][t] = _mm512_dpbf16_ps(a[i][t], w[i], xv);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < NR; i++)
#pragma GCC unroll 6
        for (int t = 0; t < N; t++) {
            float sum = _mm512_reduce_add_ps(a[i][t]);
            const uint16_t *wr = (const uint16_t *)(row + i * rb);
            for (int64_t j = C32; j < C; j++) sum += bf16_to_f32(wr[j]) * bf16_to_f32(xb[t * C + j]);
            out[t * R + i] = sum;
        }
}

/* Rows [r, r1) in tiles of 4 rows, 2 for one token: decode has no loads of
 * x to share, and two weight streams instead of four read faster from one
 * core (measured on a Zen 4, alternating: the 1.5B BF16's decode 1.07-1.13x
 * on one thread, 1.05x on two; SmolLM2's 1.07x / 1.13x).  The sums do not
 * depend on the tile. */
static inline __attribute__((always_inline)) void rows_span_bf16(const char *base, size_t rb, const uint16_t *xb,
                                                                 int64_t C, float *out, int64_t R, int64_t r, int64_t r1,
                                                                 const int N, const int PREFETCH) {
    if (N == 1)
        for (; r + 2 <= r1; r += 2) rows_dot_bf16(base + r * rb, rb, xb, C, out + r, R, 2, 1, PREFETCH);
    for (; r + 4 <= r1; r += 4) rows_dot_bf16(base + r * rb, rb, xb, C, out + r, R, 4, N, PREFETCH);
    for (; r < r1; r++) rows_dot_bf16(base + r * rb, rb, xb, C, out + r, R, 1, N, PREFETCH);
}

static void rows_bf16(const Weight *w, const uint16_t *xb, float *out, int64_t r0, int64_t r1, int n) {
    const int64_t R = w->rows, C = w->cols;
    const size_t rb = C * sizeof(uint16_t);
    const char *base = (const char *)w->data;
    FOR_BLOCKS_AND_GROUPS(r0, r1, n, DOT_TOKENS, {
        const uint16_t *xt = xb + t * C;
        float *ot = out + t * R;
        switch (k + (t == 0 ? 0 : 8)) {   /* prefetch on the first group */
        case 1: rows_span_bf16(base, rb, xt, C, ot, R, b0, b1, 1, 1); break;
        case 2: rows_span_bf16(base, rb, xt, C, ot, R, b0, b1, 2, 1); break;
        case 3: rows_span_bf16(base, rb, xt, C, ot, R, b0, b1, 3, 1); break;
        case 4: rows_span_bf16(base, rb, xt, C, ot, R, b0, b1, 4, 1); break;
        case 5: rows_span_bf16(base, rb, xt, C, ot, R, b0, b1, 5, 1); break;
        case 6: rows_span_bf16(base, rb, xt, C, ot, R, b0, b1, 6, 1); break;
        case 9: rows_span_bf16(base, rb, xt, C, ot, R, b0, b1, 1, 0); break;
        case 10: rows_span_bf16(base, rb, xt, C, ot, R, b0, b1, 2, 0); break;
        case 11: rows_span_bf16(base, rb, xt, C, ot, R, b0, b1, 3, 0); break;
        case 12: rows_span_bf16(base, rb, xt, C, ot, R, b0, b1, 4, 0); break;
        case 13: rows_span_bf16(base, rb, xt, C, ot, R, b0, b1, 5, 0); break;
        case 14: rows_span_bf16(base, rb, xt, C, ot, R, b0, b1, 6, 0); break;
        }
    })
}
#else
static int fast_bf16(const Weight *w) { (void)w; return 0; }
static const uint16_t *bf16_activations(const float *x, int64_t count) { (void)x; (void)count; return NULL; }
static int amx_products(const uint16_t *xb, const Weight *const *ws, int count) { (void)xb; (void)ws; (void)count; return 0; }
#endif

/* rows_dot, or rows_dot_many where the tokens are many enough, or (xb: x
 * rounded to BF16, and w BF16) rows_bf16, or (amx) cpu_amx_rows */
static void rows_any(const Weight *w, const float *x, const float *xp, const uint16_t *xb, int amx, float *out,
                     int64_t r0, int64_t r1, int n) {
    (void)xp;   /* (read by the AVX2 build's tiles alone) */
#ifdef CPU_AMX
    if (amx && w->dtype == DT_BF16) { cpu_amx_rows(w, cpu_weight_tiles(w), xb, out, r0, r1, n); return; }
#else
    (void)amx;
#endif
#ifdef __AVX512BF16__
    if (xb && w->dtype == DT_BF16) { rows_bf16(w, xb, out, r0, r1, n); return; }
#else
    (void)xb;
#endif
#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512VL__)
    if (n >= HALF_MIN_TOKENS) {
        if (w->dtype == DT_BF16) rows_dot_avx2(w, x, xp, out, r0, r1, n, DT_BF16);
        else if (w->dtype == DT_F16) rows_dot_avx2(w, x, xp, out, r0, r1, n, DT_F16);
        else rows_dot_avx2(w, x, xp, out, r0, r1, n, DT_F32);
        return;
    }
#endif
#ifdef __AVX512VL__
    if (n >= WIDE_MIN_TOKENS) {
        if (w->dtype == DT_BF16) rows_dot_many(w, x, out, r0, r1, n, DT_BF16);
        else if (w->dtype == DT_F16) rows_dot_many(w, x, out, r0, r1, n, DT_F16);
        else rows_dot_many(w, x, out, r0, r1, n, DT_F32);
        return;
    }
#endif
    if (w->dtype == DT_BF16) rows_dot(w, x, out, r0, r1, n, DT_BF16);
    else if (w->dtype == DT_F16) rows_dot(w, x, out, r0, r1, n, DT_F16);
    else rows_dot(w, x, out, r0, r1, n, DT_F32);
}

/* The rows of one or more weights (of equal cols), in order, as one range
 * split in contiguous parts: each part streams its rows. */
typedef struct {
    float *const *outs;
    const float *x, *xp;   /* xp: half_packed's copy of x (AVX2 products of several tokens) */
    const uint16_t *xb;
    int amx;
    const Weight *const *ws;
    int count, n;
    int64_t total;   /* rows of all the weights */
} RowsJob;

static void rows_part(void *v, int part, int parts) {
    const RowsJob *j = v;
    int64_t g0, g1, base = 0;
    if (j->amx) {   /* parts of whole tile blocks, where the weights' rows allow */
        part_range((j->total + 15) / 16, part, parts, &g0, &g1);
        g0 = g0 * 16 < j->total ? g0 * 16 : j->total;
        g1 = g1 * 16 < j->total ? g1 * 16 : j->total;
    } else {
        part_range(j->total, part, parts, &g0, &g1);
    }
    for (int i = 0; i < j->count; base += j->ws[i]->rows, i++) {
        const int64_t lo = g0 > base ? g0 : base, hi = g1 < base + j->ws[i]->rows ? g1 : base + j->ws[i]->rows;
        if (lo < hi) rows_any(j->ws[i], j->x, j->xp, j->xb, j->amx, j->outs[i], lo - base, hi - base, j->n);
    }
}

static void matmul_few(float *out, const float *x, const Weight *w, int n) {
    const uint16_t *xb = fast_bf16(w) ? bf16_activations(x, (int64_t)n * w->cols) : NULL;
    const float *xp = xb ? NULL : half_packed(x, w->cols, n);
    RowsJob j = {&out, x, xp, xb, amx_products(xb, &w, 1), &w, 1, n, w->rows};
    cpu_parallel(rows_part, &j, w->rows * w->cols * n > PAR_MIN_WORK);
}

/* Few tokens share one parallel region: the rows of all the weights, in
 * order, split in contiguous parts (one per thread, so each streams its
 * part as matmul_few does), instead of one region per weight: on SmolLM2's
 * q/k/v and gate/up this saves a region's start-up per weight, about 10% of
 * decode.  (Handing out small chunks of one weight on demand instead was
 * slower: the streams break up.)  Each sum is the one matmul_few computes. */
void cpu_matmul_many(float *const *outs, const float *x, const Weight *const *ws, int count, int n) {
    int quant = 0;
    for (int i = 0; i < count; i++) quant += dtype_is_quant(ws[i]->dtype);
    if (quant == count && count) { cpu_quant_matmul_many(outs, x, ws, count, n); return; }
    if (quant) {   /* block types beside others: each its own product, the same sums */
        for (int i = 0; i < count; i++) cpu_matmul(outs[i], x, ws[i], n);
        return;
    }
    int fast = 1;
    for (int i = 0; i < count; i++) fast &= fast_bf16(ws[i]);
    if (n > FEW_TOKENS && !fast) {
        for (int i = 0; i < count; i++) cpu_matmul(outs[i], x, ws[i], n);
        return;
    }
    /* the weights of one call share cols, so x is rounded once for all */
    const uint16_t *xb = fast ? bf16_activations(x, (int64_t)n * ws[0]->cols) : NULL;
    int64_t total = 0, work = 0;
    for (int i = 0; i < count; i++) { total += ws[i]->rows; work += ws[i]->rows * ws[i]->cols * n; }
    const float *xp = xb ? NULL : half_packed(x, ws[0]->cols, n);
    RowsJob j = {outs, x, xp, xb, amx_products(xb, ws, count), ws, count, n, total};
    cpu_parallel(rows_part, &j, work > PAR_MIN_WORK);
}

/* out[n][·] (ld ldo) = x[n][C] · W[0:nr]ᵀ through OpenBLAS in fixed chunks
 * of weight rows shared out over the threads.  OpenBLAS itself runs on one
 * thread (cpu_threads_max): its own threading, and even how a product is
 * sliced, change the summation order for some shapes (measured: M 9..33
 * with N 64 or 256), and results must not depend on the thread count, which
 * the decoder changes between cycles.  The chunks depend on nr alone, so the
 * calls are the same whatever the thread count: an even number of equal
 * chunks (both cores busy) of at most about SGEMM_CHUNK rows, a multiple of
 * 16.  Each call packs x anew, so chunks should be large, but both cores
 * must get one: on SmolLM2's 576-row matrices two 288-row halves beat both
 * 128-row chunks (x packed more often) and whole 576-row chunks (one core
 * idle) at prefill. */
#define SGEMM_CHUNK 288
static int64_t sgemm_chunk_rows(int64_t nr) {
    const int64_t pairs = (nr + 2 * SGEMM_CHUNK - 1) / (2 * SGEMM_CHUNK);
    const int64_t rows = (nr + 2 * pairs - 1) / (2 * pairs);
    return (rows + 15) & ~15LL;
}

typedef struct {
    float *out;
    int64_t ldo, nr, C, step, chunks;
    const float *x, *wf;
    int n;
} SgemmJob;

static void sgemm_part(void *v, int part, int parts) {
    const SgemmJob *j = v;
    int64_t k0, k1;
    part_range(j->chunks, part, parts, &k0, &k1);
    for (int64_t k = k0; k < k1; k++) {
        const int64_t a = k * j->step, b = a + j->step < j->nr ? a + j->step : j->nr;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, j->n, (int)(b - a), (int)j->C, 1.0f, j->x, (int)j->C,
                    j->wf + a * j->C, (int)j->C, 0.0f, j->out + a, (int)j->ldo);
    }
}

static void sgemm_rows(float *out, int64_t ldo, const float *x, const float *wf, int n, int64_t nr, int64_t C) {
    cpu_threads_max();   /* first call: OpenBLAS to one thread */
    const int64_t step = sgemm_chunk_rows(nr);
    SgemmJob j = {out, ldo, nr, C, step, (nr + step - 1) / step, x, wf, n};
    cpu_parallel(sgemm_part, &j, j.chunks > 1 && nr * C * n > PAR_MIN_WORK);
}

/* Rows [r0, r0 + n) of w as F32 into out[n][cols]. */
typedef struct { const Weight *w; int64_t r0, n; float *out; } WidenJob;

static void widen_part(void *v, int part, int parts) {
    const WidenJob *j = v;
    int64_t lo, hi;
    part_range(j->n, part, parts, &lo, &hi);
    for (int64_t r = lo; r < hi; r++) cpu_weight_row(j->w, j->r0 + r, j->out + r * j->w->cols);
}

void cpu_weight_rows(const Weight *w, int64_t r0, int64_t n, float *out) {
    WidenJob j = {w, r0, n, out};
    cpu_parallel(widen_part, &j, n * w->cols > PAR_MIN_WORK);
}

/* Products over many tokens (prefill, tree verification) run through sgemm,
 * which needs F32 weights; widening a 16-bit matrix on every call costs as
 * much as the product for small trees.  So the backend keeps an F32 copy of
 * 16-bit matrices while the copies fit BackendOptions.cpu_f32_cache_mb,
 * each made by the matrix's first product of more than FEW_TOKENS tokens
 * (cpu_weight_f32_make), not at load: a matrix only ever read by rows (an
 * embedding) or in few-token products (decode, small trees; an LM head
 * under few logits) takes none of the budget, which goes to the matrices
 * that many-token products use, in the order they first use them, and
 * loading a BF16 1.5B no longer writes 4 GB of copies first.  Decode keeps
 * reading the 16-bit weights (half the bytes). */
static size_t f32_cache_budget(void) { return (size_t)backend_settings()->cpu_f32_cache_mb << 20; }
static size_t f32_cache_used;

const float *cpu_weight_f32_make(const Weight *w) {
    CpuWeightCopies *c = w->priv;
    if (!c || c->f32 || c->f32_refused) return c ? c->f32 : NULL;
    const size_t bytes = (size_t)w->rows * w->cols * sizeof(float);
    if (w->rows > 1 && f32_cache_used + bytes <= f32_cache_budget() && (c->f32 = malloc(bytes))) {
        cpu_weight_rows(w, 0, w->rows, c->f32);
        f32_cache_used += bytes;
    } else {
        c->f32_refused = 1;   /* for good: the matrix's products keep one path */
    }
    return c->f32;
}

void cpu_weight_f32_release(const Weight *w) {
    CpuWeightCopies *c = w->priv;
    if (!c || !c->f32) return;
    f32_cache_used -= (size_t)w->rows * w->cols * sizeof(float);
    free(c->f32);
    c->f32 = NULL;
}

void cpu_matmul(float *out, const float *x, const Weight *w, int n) {
    if (dtype_is_quant(w->dtype)) { cpu_quant_matmul_many(&out, x, &w, 1, n); return; }
    const int64_t R = w->rows, C = w->cols;
    if (n <= FEW_TOKENS || fast_bf16(w)) { matmul_few(out, x, w, n); return; }
    /* F32 weights, or the F32 copy the backend keeps of 16-bit ones */
    const float *wf = w->dtype == DT_F32 ? (const float *)w->data : cpu_weight_f32_make(w);
    if (!wf && n <= FEW_TOKENS_UNCACHED) { matmul_few(out, x, w, n); return; }
    if (wf) {
        sgemm_rows(out, R, x, wf, n, R, C);
        return;
    }
    float *tmp = malloc(sizeof(float) * BLOCK_ROWS * C);
    for (int64_t r0 = 0; r0 < R; r0 += BLOCK_ROWS) {
        int64_t nr = R - r0 < BLOCK_ROWS ? R - r0 : BLOCK_ROWS;
        cpu_weight_rows(w, r0, nr, tmp);
        sgemm_rows(out + r0, R, x, tmp, n, nr, C);
    }
    free(tmp);
}

void cpu_add_bias(float *x, const Weight *b, int n) {
    const int64_t d = b->cols;
    for (int t = 0; t < n; t++)
        for (int64_t j = 0; j < d; j++) x[t * d + j] += load1(b->data, b->dtype, j);
}
