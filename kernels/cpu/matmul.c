/* Weight products.  Up to SMALL_N tokens (decode, EAGLE steps, tree
 * verification): a register-tiled convert-and-dot loop over the 16-bit
 * weights as stored, split over both cores by rows.  More tokens (prefill):
 * OpenBLAS sgemm (F16/BF16 weights widened to F32 a block of rows at a
 * time, or the F32 copy the backend keeps). */
#include "kernels/cpu/cpu.h"
#include <cblas.h>
#include <omp.h>
#include <stdlib.h>

#define SMALL_N 8           /* up to this many tokens use the tiled loop (measured on
                               2 cores, 1536x576 BF16: 2x faster than the one-row loop
                               it replaced at 1-3 tokens; from 9 on, sgemm over the
                               F32 copy is faster: 75-85 GFLOP/s a core against ~50) */
#define TILE_M 2            /* rows per tile: 2 rows x 3 tokens x 2 halves = 12 accumulators,
                               which with the operands fit AVX2's 16 vector registers */
#define ROW_BLOCK 16        /* weight rows kept in L1 while every token group passes */
#define BLOCK_ROWS 256      /* rows widened per sgemm call */

void cpu_weight_row(const Weight *w, int64_t r, float *out) {
    const char *base = (const char *)w->data + r * w->cols * (int64_t)dtype_size(w->dtype);
    int64_t j = 0;
    for (; j + 8 <= w->cols; j += 8) {
        v8f v = load8(base, w->dtype, j);
        memcpy(out + j, &v, 32);
    }
    for (; j < w->cols; j++) out[j] = load1(base, w->dtype, j);
}

void cpu_embed(float *out, const Weight *table, const int *tokens, int n) {
    for (int t = 0; t < n; t++) cpu_weight_row(table, tokens[t], out + (int64_t)t * table->cols);
}

/* out[t*R + m] = row m · x[t] for M <= TILE_M consecutive rows and N <= 3 tokens,
 * M, N and the dtype compile-time so the 12 accumulators live in registers.
 * Every (row, token) sum is formed the same way whatever M and N: lanes
 * 0-7 and 8-15 of each 16-column block in two accumulators, one fixed
 * reduction, then the tail — so decode (one token) and tree verification
 * (many) agree bit for bit, and the thread count changes nothing.  Each
 * half-block loads N activations and M weight vectors for M*N FMAs (the
 * one-row loop it replaces loaded N + 1 for N). */
static inline __attribute__((always_inline)) void tile_dot(const char *row0, size_t rb, const float *x, int64_t C,
                                                           float *out, int64_t R, const int M, const int N,
                                                           const DType DT) {
    const int64_t C16 = C & ~15LL;
    v8f a0[TILE_M][3], a1[TILE_M][3];
#pragma GCC unroll 4
    for (int m = 0; m < M; m++)
#pragma GCC unroll 3
        for (int t = 0; t < N; t++) a0[m][t] = a1[m][t] = (v8f){0};
    for (int64_t j = 0; j < C16; j += 16) {
        v8f xv[3];
#pragma GCC unroll 3
        for (int t = 0; t < N; t++) memcpy(&xv[t], x + t * C + j, 32);
#pragma GCC unroll 4
        for (int m = 0; m < M; m++) {
            v8f w = load8(row0 + m * rb, DT, j);
#pragma GCC unroll 3
            for (int t = 0; t < N; t++) a0[m][t] += w * xv[t];
        }
#pragma GCC unroll 3
        for (int t = 0; t < N; t++) memcpy(&xv[t], x + t * C + j + 8, 32);
#pragma GCC unroll 4
        for (int m = 0; m < M; m++) {
            v8f w = load8(row0 + m * rb, DT, j + 8);
#pragma GCC unroll 3
            for (int t = 0; t < N; t++) a1[m][t] += w * xv[t];
        }
    }
#pragma GCC unroll 4
    for (int m = 0; m < M; m++)
#pragma GCC unroll 3
        for (int t = 0; t < N; t++) {
            v8f a = a0[m][t] + a1[m][t];
            float sum = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
            for (int64_t j = C16; j < C; j++) sum += load1(row0 + m * rb, DT, j) * x[t * C + j];
            out[t * R + m] = sum;
        }
}

/* Rows [r0, r1) of out[t][r] = W[r]·x[t] for all n tokens: blocks of
 * ROW_BLOCK rows stay in L1 while the tokens pass over them three at a time
 * (the activations stay in L1/L2). */
static inline __attribute__((always_inline)) void rows_tiled(const Weight *w, const float *x, float *out,
                                                             int64_t r0, int64_t r1, int n, const DType DT) {
    const int64_t R = w->rows, C = w->cols;
    const size_t rb = C * dtype_size(DT);
    const char *base = (const char *)w->data;
    for (int64_t b0 = r0; b0 < r1; b0 += ROW_BLOCK) {
        const int64_t b1 = b0 + ROW_BLOCK < r1 ? b0 + ROW_BLOCK : r1;
        for (int t = 0; t < n; t += 3) {
            const float *xt = x + (int64_t)t * C;
            float *ot = out + (int64_t)t * R;
            int64_t r = b0;
            if (n - t >= 3) {
                for (; r + TILE_M <= b1; r += TILE_M) tile_dot(base + r * rb, rb, xt, C, ot + r, R, TILE_M, 3, DT);
                for (; r < b1; r++) tile_dot(base + r * rb, rb, xt, C, ot + r, R, 1, 3, DT);
            } else if (n - t == 2) {
                for (; r + TILE_M <= b1; r += TILE_M) tile_dot(base + r * rb, rb, xt, C, ot + r, R, TILE_M, 2, DT);
                for (; r < b1; r++) tile_dot(base + r * rb, rb, xt, C, ot + r, R, 1, 2, DT);
            } else {
                for (; r + TILE_M <= b1; r += TILE_M) tile_dot(base + r * rb, rb, xt, C, ot + r, R, TILE_M, 1, DT);
                for (; r < b1; r++) tile_dot(base + r * rb, rb, xt, C, ot + r, R, 1, 1, DT);
            }
        }
    }
}

static void matmul_small(float *out, const float *x, const Weight *w, int n) {
    const DType dt = w->dtype;
#pragma omp parallel if (w->rows * w->cols * n > PAR_MIN_WORK)
    {
        int nt = omp_get_num_threads(), id = omp_get_thread_num();
        int64_t per = (w->rows + nt - 1) / nt, r0 = id * per, r1 = r0 + per < w->rows ? r0 + per : w->rows;
        if (r0 < r1) {
            if (dt == DT_BF16) rows_tiled(w, x, out, r0, r1, n, DT_BF16);
            else if (dt == DT_F16) rows_tiled(w, x, out, r0, r1, n, DT_F16);
            else rows_tiled(w, x, out, r0, r1, n, DT_F32);
        }
    }
}

/* out[n][·] (ld ldo) = x[n][C] · W[0:nr]ᵀ through OpenBLAS in fixed chunks
 * of SGEMM_CHUNK weight rows shared out over the threads.  OpenBLAS itself
 * runs on one thread (cpu_threads_max): its own threading, and even how a
 * product is sliced, change the summation order for some shapes (measured:
 * M 9..33 with N 64 or 256), and results must not depend on the thread
 * count, which the decoder changes between cycles.  Fixed chunks make the
 * same calls whatever the thread count. */
#define SGEMM_CHUNK 128
static void sgemm_rows(float *out, int64_t ldo, const float *x, const float *wf, int n, int64_t nr, int64_t C) {
    cpu_threads_max();   /* first call: OpenBLAS to one thread */
    const int64_t chunks = (nr + SGEMM_CHUNK - 1) / SGEMM_CHUNK;
#pragma omp parallel for schedule(static) if (chunks > 1 && nr * C * n > PAR_MIN_WORK)
    for (int64_t k = 0; k < chunks; k++) {
        const int64_t a = k * SGEMM_CHUNK, b = a + SGEMM_CHUNK < nr ? a + SGEMM_CHUNK : nr;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, (int)(b - a), (int)C, 1.0f, x, (int)C,
                    wf + a * C, (int)C, 0.0f, out + a, (int)ldo);
    }
}

void cpu_matmul(float *out, const float *x, const Weight *w, int n) {
    const int64_t R = w->rows, C = w->cols;
    if (n <= SMALL_N) { matmul_small(out, x, w, n); return; }
    /* F32 weights, or the F32 copy the backend keeps of 16-bit ones */
    const float *wf = w->dtype == DT_F32 ? (const float *)w->data : (const float *)w->priv;
    if (wf) {
        sgemm_rows(out, R, x, wf, n, R, C);
        return;
    }
    float *tmp = malloc(sizeof(float) * BLOCK_ROWS * C);
    for (int64_t r0 = 0; r0 < R; r0 += BLOCK_ROWS) {
        int64_t nr = R - r0 < BLOCK_ROWS ? R - r0 : BLOCK_ROWS;
#pragma omp parallel for schedule(static) if (nr * C > PAR_MIN_WORK)
        for (int64_t r = 0; r < nr; r++) cpu_weight_row(w, r0 + r, tmp + r * C);
        sgemm_rows(out + r0, R, x, tmp, n, nr, C);
    }
    free(tmp);
}

void cpu_add_bias(float *x, const Weight *b, int n) {
    const int64_t d = b->cols;
    for (int t = 0; t < n; t++)
        for (int64_t j = 0; j < d; j++) x[t * d + j] += load1(b->data, b->dtype, j);
}
