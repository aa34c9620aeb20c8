#include "train/ffn.h"
#include "kernels/base/util.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The batched gradient works on 8-wide vectors across the hidden units
 * (hidden padded to a multiple of 8 with zero weights, which get zero
 * gradient and are never written back).  Per chunk of samples:
 *   1. forward: logit of every sample;
 *   2. per sample dL/dlogit = (sigmoid(logit) - y) / n and the loss;
 *   3. per block of 8 hidden units, with that block's weights and gradient
 *      accumulators held in registers, recompute the pre-activation of every
 *      sample and accumulate the gradients. */

typedef float v8 __attribute__((vector_size(32)));
typedef int v8i __attribute__((vector_size(32)));

#if defined(__FMA__) && defined(__AVX__)
#include <immintrin.h>
static inline v8 vfma(v8 a, v8 b, v8 c) { return (v8)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c); }
#else
static inline v8 vfma(v8 a, v8 b, v8 c) { return a * b + c; }
#endif
static inline v8 vset1(float x) { return (v8){x, x, x, x, x, x, x, x}; }
static inline float vhsum(v8 a) {
    return ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]));
}

struct FfnWork {
    int nf, h, hp, nb, max_chunks, threads;
    v8 *pw;          /* packed: W0[nb] .. W{nf-1}[nb] B1[nb] V[nb] (fc1 columns, fc1.bias, fc2.weight) */
    float c;         /* fc2.bias */
    v8 *part;        /* per chunk: gW0 .. gW{nf-1} gB1 gV, (nf+2)*nb vectors */
    double *part_c;  /* per chunk: d/d fc2.bias */
    double *part_loss;
};

void ffn_init(float *theta, int nf, int h, Rng *rng) {
    double b1 = 1.0 / sqrt((double)nf), b2 = 1.0 / sqrt((double)h);
    for (int i = 0; i < nf * h; i++) theta[i] = (float)((2 * rng_uniform(rng) - 1) * b1);
    for (int i = 0; i < h; i++) theta[nf * h + i] = (float)((2 * rng_uniform(rng) - 1) * b1);
    for (int i = 0; i < h; i++) theta[(nf + 1) * h + i] = (float)((2 * rng_uniform(rng) - 1) * b2);
    theta[(nf + 2) * h] = (float)((2 * rng_uniform(rng) - 1) * b2);
}

static void *aligned(size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, 64, n ? n : 64) != 0) { fprintf(stderr, "out of memory\n"); exit(1); }
    memset(p, 0, n);
    return p;
}

FfnWork *ffn_work_new(int nf, int h, int max_batch) {
    FfnWork *w = xcalloc(1, sizeof *w);
    w->nf = nf;
    w->h = h;
    w->hp = (h + 7) / 8 * 8;
    w->nb = w->hp / 8;
    w->threads = 1;
    w->max_chunks = (max_batch + FFN_CHUNK - 1) / FFN_CHUNK;
    if (w->max_chunks < 1) w->max_chunks = 1;
    w->pw = aligned(sizeof(v8) * (nf + 2) * w->nb);
    w->part = aligned(sizeof(v8) * (nf + 2) * w->nb * w->max_chunks);
    w->part_c = xcalloc(w->max_chunks, sizeof(double));
    w->part_loss = xcalloc(w->max_chunks, sizeof(double));
    return w;
}

void ffn_work_set_threads(FfnWork *w, int threads) { w->threads = threads < 1 ? 1 : threads; }

void ffn_work_free(FfnWork *w) {
    if (!w) return;
    free(w->pw); free(w->part); free(w->part_c); free(w->part_loss);
    free(w);
}

static void pack(FfnWork *w, const float *theta) {
    int h = w->h, nb = w->nb, nf = w->nf;
    float *W = (float *)w->pw, *B1 = W + 8 * nb * nf, *V = B1 + 8 * nb;
    memset(w->pw, 0, sizeof(v8) * (nf + 2) * nb);
    for (int j = 0; j < h; j++) {
        for (int k = 0; k < nf; k++) W[k * 8 * nb + j] = theta[nf * j + k];
        B1[j] = theta[nf * h + j];
        V[j] = theta[(nf + 1) * h + j];
    }
    w->c = theta[(nf + 2) * h];
}

/* exp(x) for x <= 0 (Cephes expf polynomial, about 1 ulp). */
static inline v8 vexp_neg(v8 x) {
    x = (v8)((v8i)x & (x > vset1(-87.0f))) + (v8)((v8i)vset1(-87.0f) & ~(x > vset1(-87.0f)));
    v8 fx = x * vset1(1.44269504088896341f) + vset1(0.5f);
    v8i n = __builtin_convertvector(fx, v8i);
    v8 fn = __builtin_convertvector(n, v8);
    fn = fn - (v8)((v8i)vset1(1.0f) & (fn > fx));          /* floor */
    n = __builtin_convertvector(fn, v8i);
    x = x - fn * vset1(0.693359375f) - fn * vset1(-2.12194440e-4f);
    v8 p = vset1(1.9875691500e-4f);
    p = vfma(p, x, vset1(1.3981999507e-3f));
    p = vfma(p, x, vset1(8.3334519073e-3f));
    p = vfma(p, x, vset1(4.1665795894e-2f));
    p = vfma(p, x, vset1(1.6666665459e-1f));
    p = vfma(p, x, vset1(5.0000001201e-1f));
    p = vfma(p, x * x, x) + vset1(1.0f);
    return p * (v8)((n + 127) << 23);
}

/* ln(u) for u in [1, 2] (Cephes logf polynomial). */
static inline v8 vlog_1_2(v8 u) {
    v8i bits = (v8i)u;
    v8i e = ((bits >> 23) & 0xff) - 126;
    v8 m = (v8)((bits & 0x007fffff) | 0x3f000000);            /* [0.5, 1) */
    v8i small = m < vset1(0.707106781186547524f);
    e = e + small;                                            /* e - 1 where small (mask is -1) */
    m = m + (v8)((v8i)m & small) - vset1(1.0f);
    v8 z = m * m;
    v8 p = vset1(7.0376836292e-2f);
    p = vfma(p, m, vset1(-1.1514610310e-1f));
    p = vfma(p, m, vset1(1.1676998740e-1f));
    p = vfma(p, m, vset1(-1.2420140846e-1f));
    p = vfma(p, m, vset1(1.4249322787e-1f));
    p = vfma(p, m, vset1(-1.6668057665e-1f));
    p = vfma(p, m, vset1(2.0000714765e-1f));
    p = vfma(p, m, vset1(-2.4999993993e-1f));
    p = vfma(p, m, vset1(3.3333331174e-1f));
    v8 fe = __builtin_convertvector(e, v8);
    v8 r = p * m * z;
    r = r + fe * vset1(-2.12194440e-4f);
    r = r - z * vset1(0.5f);
    return m + r + fe * vset1(0.693359375f);
}

/* Pre-activation of a unit block: b1 + w0 x0 + w1 x1 + ..., as FMAs in
 * input order. */
#define PREACT(Z, WS, B, XS, NF) do { \
        Z = (B); \
        for (int k_ = 0; k_ < (NF); k_++) Z = vfma((WS)[k_], (XS)[k_], Z); \
    } while (0)

static inline __attribute__((always_inline)) void
chunk_grad_nb(const FfnWork *w, const float *const *x, const float *y, int n, float inv_n, v8 *out, double *gc,
              double *loss, const int nb, const int nf) {
    const v8 *W = w->pw, *B1 = W + nf * nb, *V = B1 + nb;
    const float *b1s = (const float *)B1, *vs = (const float *)V;
    const int h = 8 * nb;   /* padded units have zero weights: they add exactly 0 */
    const v8 zero = vset1(0.0f);
    /* phase 1+2 with 8 samples per vector (the chunk's inputs, zero-padded) */
    float px[FFN_MAX_FEAT][FFN_CHUNK] __attribute__((aligned(32))), py[FFN_CHUNK] __attribute__((aligned(32))),
          g[FFN_CHUNK] __attribute__((aligned(32)));
    int n8 = (n + 7) / 8 * 8;
    for (int k = 0; k < nf; k++) {
        memcpy(px[k], x[k], sizeof(float) * n);
        for (int s = n; s < n8; s++) px[k][s] = 0;
    }
    memcpy(py, y, sizeof(float) * n);
    for (int s = n; s < n8; s++) py[s] = 0;
    v8 Lv = zero, Gv = zero;
    const v8 c = vset1(w->c), one = vset1(1.0f), ninv = vset1(inv_n);
    for (int s = 0; s < n8; s += 8) {
        v8 X[FFN_MAX_FEAT];
        for (int k = 0; k < nf; k++) X[k] = *(const v8 *)(px[k] + s);
        v8 acc0 = zero, acc1 = zero;   /* two chains: even / odd units */
        for (int j = 0; j < h; j += 2) {
            v8 ws[FFN_MAX_FEAT], z;
            for (int k = 0; k < nf; k++) ws[k] = vset1(((const float *)(W + k * nb))[j]);
            PREACT(z, ws, vset1(b1s[j]), X, nf);
            v8 a = (v8)((v8i)z & (z > zero));
            acc0 = vfma(vset1(vs[j]), a, acc0);
            for (int k = 0; k < nf; k++) ws[k] = vset1(((const float *)(W + k * nb))[j + 1]);
            PREACT(z, ws, vset1(b1s[j + 1]), X, nf);
            a = (v8)((v8i)z & (z > zero));
            acc1 = vfma(vset1(vs[j + 1]), a, acc1);
        }
        v8 z = (acc0 + acc1) + c, Y = *(const v8 *)(py + s);
        v8 az = (v8)((v8i)z & ~(v8i)vset1(-0.0f));   /* |z| */
        v8 e = vexp_neg(-az);
        v8i pos = z >= zero;
        v8 num = (v8)((pos & (v8i)one) | (~pos & (v8i)e));
        v8 sig = num / (one + e);
        v8 gs = (sig - Y) * ninv;
        v8 l = (v8)((v8i)z & pos) - z * Y + vlog_1_2(one + e);
        if (s + 8 > n) {   /* padding lanes contribute nothing */
            v8i live = {0, 1, 2, 3, 4, 5, 6, 7};
            live = live < (n - s);
            gs = (v8)((v8i)gs & live);
            l = (v8)((v8i)l & live);
        }
        *(v8 *)(g + s) = gs;
        Lv = Lv + l;
        Gv = Gv + gs;
    }
    double L = 0, G = 0;
    for (int k = 0; k < 8; k++) { L += Lv[k]; G += Gv[k]; }
    *loss = L;
    *gc = G;
    /* phase 3; two accumulator sets (even / odd samples) hide the FMA latency */
#define STEP(S, A) do { \
        v8 Xs[FFN_MAX_FEAT], Gs = vset1(g[S]), z; \
        for (int k = 0; k < nf; k++) Xs[k] = vset1(x[k][S]); \
        PREACT(z, wv, b1, Xs, nf); \
        v8i m = z > zero; \
        v8 a = (v8)((v8i)z & m); \
        gv##A = vfma(Gs, a, gv##A); \
        v8 da = (v8)((v8i)(Gs * vv) & m); \
        for (int k = 0; k < nf; k++) gw##A[k] = vfma(da, Xs[k], gw##A[k]); \
        gb##A = gb##A + da; \
    } while (0)
    for (int b = 0; b < nb; b++) {
        v8 wv[FFN_MAX_FEAT], b1 = B1[b], vv = V[b];
        v8 gwa[FFN_MAX_FEAT], gba = zero, gva = zero;
        v8 gwb[FFN_MAX_FEAT], gbb = zero, gvb = zero;
        for (int k = 0; k < nf; k++) { wv[k] = W[k * nb + b]; gwa[k] = zero; gwb[k] = zero; }
        int s = 0;
        for (; s + 1 < n; s += 2) { STEP(s, a); STEP(s + 1, b); }
        if (s < n) STEP(s, a);
        for (int k = 0; k < nf; k++) out[k * nb + b] = gwa[k] + gwb[k];
        out[nf * nb + b] = gba + gbb; out[(nf + 1) * nb + b] = gva + gvb;
    }
#undef STEP
}
#undef PREACT

/* Instances with the block count and the paper's three inputs known at
 * compile time (hidden sizes up to 64, which covers the paper's 2..48), so
 * the loops unroll; other input counts take the general instance. */
#define CHUNK_NB(N) \
    static void chunk_grad_##N(const FfnWork *w, const float *const *x, const float *y, int n, float inv_n, \
                               v8 *out, double *gc, double *loss) { \
        chunk_grad_nb(w, x, y, n, inv_n, out, gc, loss, N, 3); \
    }
CHUNK_NB(1) CHUNK_NB(2) CHUNK_NB(3) CHUNK_NB(4) CHUNK_NB(5) CHUNK_NB(6) CHUNK_NB(7) CHUNK_NB(8)
static void chunk_grad_any(const FfnWork *w, const float *const *x, const float *y, int n, float inv_n, v8 *out,
                           double *gc, double *loss) {
    chunk_grad_nb(w, x, y, n, inv_n, out, gc, loss, w->nb, w->nf);
}
typedef void (*ChunkFn)(const FfnWork *, const float *const *, const float *, int, float, v8 *, double *, double *);
static ChunkFn chunk_fn(int nb, int nf) {
    static const ChunkFn fns[9] = {0, chunk_grad_1, chunk_grad_2, chunk_grad_3, chunk_grad_4,
                                   chunk_grad_5, chunk_grad_6, chunk_grad_7, chunk_grad_8};
    return nf == 3 && nb >= 1 && nb <= 8 ? fns[nb] : chunk_grad_any;
}

double ffn_loss_grad(FfnWork *w, const float *theta, const float *const *x, const float *y, int n, float *grad) {
    int h = w->h, nb = w->nb, hp = w->hp, nf = w->nf;
    int nch = (n + FFN_CHUNK - 1) / FFN_CHUNK;
    if (nch > w->max_chunks) { fprintf(stderr, "ffn_loss_grad: batch larger than the work area\n"); abort(); }
    pack(w, theta);
    float inv_n = 1.0f / (float)n;
    ChunkFn chunk_grad = chunk_fn(nb, nf);
    int nt = w->threads < nch ? w->threads : nch;
#pragma omp parallel for schedule(static) num_threads(nt) if (nt > 1)
    for (int c = 0; c < nch; c++) {
        int s0 = c * FFN_CHUNK, m = n - s0 < FFN_CHUNK ? n - s0 : FFN_CHUNK;
        const float *xc[FFN_MAX_FEAT];
        for (int k = 0; k < nf; k++) xc[k] = x[k] + s0;
        chunk_grad(w, xc, y + s0, m, inv_n, w->part + (size_t)c * (nf + 2) * nb, &w->part_c[c], &w->part_loss[c]);
    }
    /* sum the chunks in a fixed order, in double */
    double loss = 0, gc = 0;
    for (int c = 0; c < nch; c++) { loss += w->part_loss[c]; gc += w->part_c[c]; }
    const float *P = (const float *)w->part;
    size_t stride = (size_t)(nf + 2) * hp;
    for (int j = 0; j < h; j++) {
        double s[FFN_MAX_FEAT + 2] = {0};
        for (int c = 0; c < nch; c++)
            for (int k = 0; k < nf + 2; k++) s[k] += P[c * stride + (size_t)k * hp + j];
        for (int k = 0; k < nf; k++) grad[nf * j + k] = (float)s[k];
        grad[nf * h + j] = (float)s[nf];
        grad[(nf + 1) * h + j] = (float)s[nf + 1];
    }
    grad[(nf + 2) * h] = (float)gc;
    return loss / n;
}

double ffn_loss_grad_ref(const double *theta, int nf, int h, const double *x, const double *y, int n,
                         double *grad) {
    const double *W1 = theta, *B1 = theta + nf * h, *W2 = theta + (nf + 1) * h, c = theta[(nf + 2) * h];
    memset(grad, 0, sizeof(double) * ffn_nparams(nf, h));
    double *a = xmalloc(sizeof(double) * h), loss = 0;
    for (int i = 0; i < n; i++) {
        const double *xi = x + (size_t)nf * i;
        double z2 = c;
        for (int j = 0; j < h; j++) {
            double z = B1[j];
            for (int k = 0; k < nf; k++) z += W1[nf * j + k] * xi[k];
            a[j] = z > 0 ? z : 0;
            z2 += W2[j] * a[j];
        }
        loss += (z2 > 0 ? z2 : 0) - z2 * y[i] + log1p(exp(-fabs(z2)));
        double sig = 1 / (1 + exp(-z2)), g = (sig - y[i]) / n;
        grad[(nf + 2) * h] += g;
        for (int j = 0; j < h; j++) {
            grad[(nf + 1) * h + j] += g * a[j];
            if (a[j] > 0) {
                double d = g * W2[j];
                grad[nf * h + j] += d;
                for (int k = 0; k < nf; k++) grad[nf * j + k] += d * xi[k];
            }
        }
    }
    free(a);
    return loss / n;
}

void adam_init(Adam *a, int n, double lr, double beta1, double beta2, double eps) {
    a->n = n; a->t = 0;
    a->lr = lr; a->beta1 = beta1; a->beta2 = beta2; a->eps = eps;
    a->m = xcalloc(n, sizeof(float));
    a->v = xcalloc(n, sizeof(float));
}

void adam_step(Adam *a, float *p, const float *g) {
    a->t++;
    double bc1 = 1 - pow(a->beta1, (double)a->t);
    double bc2 = 1 - pow(a->beta2, (double)a->t);
    float step = (float)(-(a->lr / bc1));
    float bc2s = (float)sqrt(bc2);
    float w1 = (float)(1 - a->beta1), b2 = (float)a->beta2, w2 = (float)(1 - a->beta2), eps = (float)a->eps;
    for (int i = 0; i < a->n; i++) {
        float m = a->m[i];
        m = m + w1 * (g[i] - m);               /* lerp_(g, 1 - beta1) */
        float v = a->v[i] * b2;                 /* mul_(beta2) */
        v = v + w2 * g[i] * g[i];               /* addcmul_(g, g, 1 - beta2) */
        a->m[i] = m; a->v[i] = v;
        float denom = sqrtf(v) / bc2s + eps;
        p[i] = p[i] + step * m / denom;         /* addcdiv_(m, denom, -step_size) */
    }
}

void adam_free(Adam *a) { free(a->m); free(a->v); a->m = a->v = NULL; }
