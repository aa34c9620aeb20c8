/* Weight products.  Many tokens: OpenBLAS sgemm (F16/BF16 weights are
 * widened to F32 a block of rows at a time).  Few tokens (decode, EAGLE
 * steps): a fused convert-and-dot loop split over both cores, which reads
 * every weight byte once — decode speed is memory bandwidth. */
#include "kernels/cpu/cpu.h"
#include <cblas.h>
#include <stdlib.h>

#define FEW_TOKENS 4        /* up to this many rows use the fused loop */
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

static void matmul_few(float *out, const float *x, const Weight *w, int n) {
    const int64_t R = w->rows, C = w->cols, C8 = C & ~7LL;
    const size_t rb = C * dtype_size(w->dtype);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < R; r++) {
        const char *row = (const char *)w->data + r * rb;
        v8f acc[FEW_TOKENS];
        for (int t = 0; t < n; t++) acc[t] = (v8f){0};
        for (int64_t j = 0; j < C8; j += 8) {
            v8f wv = load8(row, w->dtype, j);
            for (int t = 0; t < n; t++) {
                v8f xv;
                memcpy(&xv, x + t * C + j, 32);
                acc[t] += wv * xv;
            }
        }
        for (int t = 0; t < n; t++) {
            float s = 0;
            for (int i = 0; i < 8; i++) s += acc[t][i];
            for (int64_t j = C8; j < C; j++) s += load1(row, w->dtype, j) * x[t * C + j];
            out[t * R + r] = s;
        }
    }
}

void cpu_matmul(float *out, const float *x, const Weight *w, int n) {
    const int64_t R = w->rows, C = w->cols;
    if (n <= FEW_TOKENS) { matmul_few(out, x, w, n); return; }
    if (w->dtype == DT_F32) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, R, C, 1.0f, x, C,
                    (const float *)w->data, C, 0.0f, out, R);
        return;
    }
    float *tmp = malloc(sizeof(float) * BLOCK_ROWS * C);
    for (int64_t r0 = 0; r0 < R; r0 += BLOCK_ROWS) {
        int64_t nr = R - r0 < BLOCK_ROWS ? R - r0 : BLOCK_ROWS;
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < nr; r++) cpu_weight_row(w, r0 + r, tmp + r * C);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, nr, C, 1.0f, x, C, tmp, C, 0.0f,
                    out + r0, R);
    }
    free(tmp);
}

void cpu_add_bias(float *x, const Weight *b, int n) {
    const int64_t d = b->cols;
    for (int t = 0; t < n; t++)
        for (int64_t j = 0; j < d; j++) x[t * d + j] += load1(b->data, b->dtype, j);
}
