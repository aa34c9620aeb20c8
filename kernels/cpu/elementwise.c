/* Row-wise and element-wise ops: RMSNorm, RoPE, residual add, SwiGLU. */
#include "kernels/cpu/cpu.h"
#include <math.h>

void cpu_rmsnorm(float *out, const float *x, const Weight *w, int n, float eps) {
    const int64_t d = w->cols;
#pragma omp parallel for schedule(static) if (n * d > PAR_MIN_WORK)
    for (int t = 0; t < n; t++) {
        const float *xr = x + t * d;
        float *o = out + t * d;
        double ss = 0;
        for (int64_t j = 0; j < d; j++) ss += (double)xr[j] * xr[j];
        float inv = 1.0f / sqrtf((float)(ss / d) + eps);
        for (int64_t j = 0; j < d; j++) o[j] = load1(w->data, w->dtype, j) * (xr[j] * inv);
    }
}

void cpu_rope(float *x, const int *pos, int n, int nheads, int head_dim, const float *inv_freq) {
    const int half = head_dim / 2;
#pragma omp parallel for schedule(static) if ((int64_t)n * nheads * head_dim > PAR_MIN_WORK)
    for (int t = 0; t < n; t++) {
        for (int i = 0; i < half; i++) {
            /* the angle in float32, as HF computes it, so long positions
             * round the same way */
            float ang = (float)pos[t] * inv_freq[i];
            float c = cosf(ang), s = sinf(ang);
            for (int h = 0; h < nheads; h++) {
                float *v = x + ((int64_t)t * nheads + h) * head_dim;
                float a = v[i], b = v[i + half];
                v[i] = a * c - b * s;
                v[i + half] = b * c + a * s;
            }
        }
    }
}

void cpu_add(float *x, const float *y, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] += y[i];
}

void cpu_swiglu(float *gate, const float *up, size_t n) {
#pragma omp parallel for schedule(static) if (n > PAR_MIN_WORK)
    for (size_t i = 0; i < n; i++) {
        float g = gate[i];
        gate[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

void cpu_copy_rows(float *dst, const int *dst_rows, const float *src, const int *src_rows, int n, int width) {
    for (int i = 0; i < n; i++)
        memcpy(dst + (int64_t)(dst_rows ? dst_rows[i] : i) * width, src + (int64_t)(src_rows ? src_rows[i] : i) * width,
               sizeof(float) * width);
}

void cpu_concat(float *out, const float *a, int da, const float *b, int db, int n) {
    for (int t = 0; t < n; t++) {
        memcpy(out + (int64_t)t * (da + db), a + (int64_t)t * da, sizeof(float) * da);
        memcpy(out + (int64_t)t * (da + db) + da, b + (int64_t)t * db, sizeof(float) * db);
    }
}
