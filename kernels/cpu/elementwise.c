/* Row-wise and element-wise ops: RMSNorm, RoPE, residual add, scale, SwiGLU, GeGLU. */
#include "kernels/cpu/cpu.h"
#include <math.h>

/* Element-wise work is cheap per element but not free (SwiGLU's exp, the
 * norm's two passes): from this many elements both cores take a share, as
 * at batch 16 or more (one token's rows stay on one core). */
#define PAR_MIN_ELEMENTS (1 << 13)

typedef struct { float *out; const float *x; const Weight *w; int n; float eps; } NormJob;

static void rmsnorm_part(void *v, int part, int parts) {
    const NormJob *j = v;
    const int64_t d = j->w->cols;
    int64_t lo, hi;
    part_range(j->n, part, parts, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        const float *xr = j->x + t * d;
        float *o = j->out + t * d;
        double ss = 0;
        for (int64_t e = 0; e < d; e++) ss += (double)xr[e] * xr[e];
        float inv = 1.0f / sqrtf((float)(ss / d) + j->eps);
        for (int64_t e = 0; e < d; e++) o[e] = load1(j->w->data, j->w->dtype, e) * (xr[e] * inv);
    }
}

void cpu_rmsnorm(float *out, const float *x, const Weight *w, int n, float eps) {
    NormJob j = {out, x, w, n, eps};
    cpu_parallel(rmsnorm_part, &j, n * w->cols > PAR_MIN_ELEMENTS);
}

typedef struct { float *x; const int *pos; int n, nheads, head_dim; const float *inv_freq; } RopeJob;

static void rope_part(void *v, int part, int parts) {
    const RopeJob *j = v;
    const int half = j->head_dim / 2;
    int64_t lo, hi;
    part_range(j->n, part, parts, &lo, &hi);
    for (int64_t t = lo; t < hi; t++) {
        for (int i = 0; i < half; i++) {
            /* the angle in float32, as HF computes it, so long positions
             * round the same way */
            float ang = (float)j->pos[t] * j->inv_freq[i];
            float c = cosf(ang), s = sinf(ang);
            for (int h = 0; h < j->nheads; h++) {
                float *v = j->x + (t * j->nheads + h) * j->head_dim;
                float a = v[i], b = v[i + half];
                v[i] = a * c - b * s;
                v[i + half] = b * c + a * s;
            }
        }
    }
}

void cpu_rope(float *x, const int *pos, int n, int nheads, int head_dim, const float *inv_freq) {
    RopeJob j = {x, pos, n, nheads, head_dim, inv_freq};
    cpu_parallel(rope_part, &j, (int64_t)n * nheads * head_dim > PAR_MIN_WORK);
}

void cpu_add(float *x, const float *y, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] += y[i];
}

/* one op for the GPU's sake: on the CPU the two passes cost what one does */
void cpu_add_rmsnorm(float *out, float *x, const float *y, const Weight *w, int n, float eps) {
    cpu_add(x, y, (size_t)n * w->cols);
    cpu_rmsnorm(out, x, w, n, eps);
}

/* gate = act(gate) * up, act SiLU or GELU's tanh form, both as
 * g / (1 + exp(a)): SiLU's a is -g; GELU's is -2z, z = sqrt(2/pi) (g +
 * 0.044715 g^3), since 0.5 (1 + tanh z) = 1 / (1 + exp(-2z)).  Sixteen
 * lanes at a time through libmvec's expf where there is AVX-512, eight
 * where there is AVX2 (the tail under a lane mask, so every element is
 * computed the same wherever it sits: batch invariance). */
typedef struct { float *gate; const float *up; int64_t m; int gelu; } GluJob;

#define GELU_K 0.7978845608028654f   /* sqrt(2/pi) */
#define GELU_C 0.044715f

/* A contiguous share of the blocks of 256 elements. */
static void glu_part(void *v, int part, int parts) {
    const GluJob *job = v;
    float *gate = job->gate;
    const float *up = job->up;
    const int64_t m = job->m;
    const int gelu = job->gelu;
    int64_t b0, b1;
    part_range((m + 255) / 256, part, parts, &b0, &b1);
    for (int64_t i = b0 * 256; i < b1 * 256 && i < m; i += 256) {
        const int64_t end = i + 256 < m ? i + 256 : m;
#ifdef __AVX512F__
        const __m512 one = _mm512_set1_ps(1.0f), k2 = _mm512_set1_ps(-2.0f * GELU_K), c = _mm512_set1_ps(GELU_C);
        for (int64_t j = i; j < end; j += 16) {
            const __mmask16 k = tail_mask16(end - j);
            const __m512 g = _mm512_maskz_loadu_ps(k, gate + j);
            const __m512 a = gelu ? _mm512_mul_ps(k2, _mm512_fmadd_ps(_mm512_mul_ps(c, g), _mm512_mul_ps(g, g), g))
                                  : _mm512_sub_ps(_mm512_setzero_ps(), g);
            const __m512 e = exp16(a);
            const __m512 y = _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), _mm512_maskz_loadu_ps(k, up + j));
            _mm512_mask_storeu_ps(gate + j, k, y);
        }
#elif defined(__AVX2__) && defined(__FMA__)
        const __m256 one = _mm256_set1_ps(1.0f), k2 = _mm256_set1_ps(-2.0f * GELU_K), c = _mm256_set1_ps(GELU_C);
        for (int64_t j = i; j < end; j += 8) {
            const __m256i k = tail_mask8(end - j);
            const __m256 g = _mm256_maskload_ps(gate + j, k);
            const __m256 a = gelu ? _mm256_mul_ps(k2, _mm256_fmadd_ps(_mm256_mul_ps(c, g), _mm256_mul_ps(g, g), g))
                                  : _mm256_sub_ps(_mm256_setzero_ps(), g);
            const __m256 e = exp8(a);
            const __m256 y = _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_maskload_ps(up + j, k));
            _mm256_maskstore_ps(gate + j, k, y);
        }
#else
        for (int64_t j = i; j < end; j++) {
            const float g = gate[j], a = gelu ? -2.0f * GELU_K * fmaf(GELU_C * g, g * g, g) : -g;
            gate[j] = g / (1.0f + expf(a)) * up[j];
        }
#endif
    }
}

void cpu_swiglu(float *gate, const float *up, size_t n) {
    GluJob j = {gate, up, (int64_t)n, 0};
    cpu_parallel(glu_part, &j, (int64_t)n > PAR_MIN_ELEMENTS);
}

void cpu_geglu(float *gate, const float *up, size_t n) {
    GluJob j = {gate, up, (int64_t)n, 1};
    cpu_parallel(glu_part, &j, (int64_t)n > PAR_MIN_ELEMENTS);
}

void cpu_scale(float *x, float s, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] *= s;
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
