/* KV cache and masked attention.  The cache keeps K and V per layer as
 * [slot][kv_dim] float rows.  Many queries (prefill, tree verification):
 * per head, S = Q Kᵀ and O = P V through sgemm; few queries: loops split
 * over heads. */
#include "kernels/cpu/cpu.h"
#include <cblas.h>
#include <math.h>
#include <stdlib.h>

struct KVCache {
    int layers, slots, kv_dim;
    float *k, *v;   /* [layers][slots][kv_dim] */
};

KVCache *cpu_kv_create(int layers, int slots, int kv_dim) {
    KVCache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->layers = layers; c->slots = slots; c->kv_dim = kv_dim;
    size_t n = (size_t)layers * slots * kv_dim;
    c->k = calloc(n, sizeof(float));
    c->v = calloc(n, sizeof(float));
    if (!c->k || !c->v) { free(c->k); free(c->v); free(c); return NULL; }
    return c;
}

void cpu_kv_free(KVCache *c) {
    if (!c) return;
    free(c->k); free(c->v); free(c);
}

int cpu_kv_slots(const KVCache *c) { return c->slots; }

static inline float *kv_row(const KVCache *c, float *base, int layer, int slot) {
    return base + ((size_t)layer * c->slots + slot) * c->kv_dim;
}

void cpu_kv_write(KVCache *c, int layer, int slot, const float *k, const float *v, int n) {
    memcpy(kv_row(c, c->k, layer, slot), k, sizeof(float) * n * c->kv_dim);
    memcpy(kv_row(c, c->v, layer, slot), v, sizeof(float) * n * c->kv_dim);
}

void cpu_kv_keep(KVCache *c, int dst, const int *keep, int m) {
    for (int l = 0; l < c->layers; l++)
        for (int i = 0; i < m; i++) {
            if (keep[i] == dst + i) continue;
            memmove(kv_row(c, c->k, l, dst + i), kv_row(c, c->k, l, keep[i]), sizeof(float) * c->kv_dim);
            memmove(kv_row(c, c->v, l, dst + i), kv_row(c, c->v, l, keep[i]), sizeof(float) * c->kv_dim);
        }
}

static inline int visible(const uint8_t *mask, int i, int j, int n, int nctx) {
    return mask ? mask[(size_t)i * nctx + j] != 0 : j <= nctx - n + i;
}

/* Masked softmax of one score row in place; masked entries become 0. */
static void softmax_row(float *s, const uint8_t *mask, int i, int n, int nctx) {
    float mx = -INFINITY;
    for (int j = 0; j < nctx; j++)
        if (visible(mask, i, j, n, nctx) && s[j] > mx) mx = s[j];
    double sum = 0;
    for (int j = 0; j < nctx; j++) {
        float e = visible(mask, i, j, n, nctx) ? expf(s[j] - mx) : 0.0f;
        s[j] = e;
        sum += e;
    }
    float inv = sum > 0 ? (float)(1.0 / sum) : 0.0f;
    for (int j = 0; j < nctx; j++) s[j] *= inv;
}

/* q·k over a head of hd floats, eight lanes at a time (hd % 8 == 0 in every
 * LLaMA shape; the tail loop covers the rest). */
static inline float dot_hd(const float *a, const float *b, int hd) {
    v8f acc = {0};
    int e = 0;
    for (; e + 8 <= hd; e += 8) {
        v8f x, y;
        memcpy(&x, a + e, 32);
        memcpy(&y, b + e, 32);
        acc += x * y;
    }
    float d = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; e < hd; e++) d += a[e] * b[e];
    return d;
}

/* o += w · v over hd floats */
static inline void axpy_hd(float *o, float w, const float *v, int hd) {
    int e = 0;
    for (; e + 8 <= hd; e += 8) {
        v8f x, y;
        memcpy(&x, o + e, 32);
        memcpy(&y, v + e, 32);
        x += w * y;
        memcpy(o + e, &x, 32);
    }
    for (; e < hd; e++) o[e] += w * v[e];
}

/* One query's attention for heads [h0, h0 + nh) that share one KV head:
 * per head, scores over the visible slots, softmax, the weighted sum of the
 * values.  Each K and V row is read once for all nh heads; every head's
 * arithmetic is the same whatever nh.  s: nh * nctx floats of scratch. */
static void attend(float *out, const float *q, const KVCache *c, int layer, int i, int n, int nctx,
                   const uint8_t *mask, int h0, int nh, int nheads, int nkv, int hd, float *s) {
    const float scale = 1.0f / sqrtf((float)hd);
    const int g = h0 / (nheads / nkv), qdim = nheads * hd;
    const float *qi = q + (size_t)i * qdim;
    for (int j = 0; j < nctx; j++) {
        const int vis = visible(mask, i, j, n, nctx);
        const float *k = kv_row(c, c->k, layer, j) + g * hd;
        for (int a = 0; a < nh; a++) s[(size_t)a * nctx + j] = vis ? dot_hd(qi + (h0 + a) * hd, k, hd) * scale : 0;
    }
    for (int a = 0; a < nh; a++) {
        softmax_row(s + (size_t)a * nctx, mask, i, n, nctx);
        memset(out + (size_t)i * qdim + (h0 + a) * hd, 0, sizeof(float) * hd);
    }
    for (int j = 0; j < nctx; j++) {
        const float *v = kv_row(c, c->v, layer, j) + g * hd;
        for (int a = 0; a < nh; a++) {
            const float w = s[(size_t)a * nctx + j];
            if (w != 0) axpy_hd(out + (size_t)i * qdim + (h0 + a) * hd, w, v, hd);
        }
    }
}

/* Decode and small trees: every query of the sequences listed in few[0..nf)
 * (indices into seqs), split over the threads whenever there is more than a
 * few microseconds of work (the other core would otherwise wait at the
 * next product's barrier).  With enough queries a work item is a query and
 * a KV head (its K/V rows read once for the heads that share it), else a
 * query and a head (more items to split).  Each (query, head) is summed
 * the same either way, whatever the split and whatever else is in the
 * call, so results depend neither on the thread count nor on the batch. */
static void attention_few(float *out, const float *q, const AttnSeq *seqs, const int *few, int nf, int layer,
                          int nheads, int nkv, int hd) {
    int total = 0, max_ctx = 1;
    int64_t work = 0;
    for (int f = 0; f < nf; f++) {
        const AttnSeq *a = &seqs[few[f]];
        total += a->n;
        work += (int64_t)a->n * nheads * a->nctx * hd;
        if (a->nctx > max_ctx) max_ctx = a->nctx;
    }
    int *seq_of = malloc(sizeof(int) * (total ? total : 1)), *query_of = malloc(sizeof(int) * (total ? total : 1));
    for (int f = 0, t = 0; f < nf; f++)
        for (int i = 0; i < seqs[few[f]].n; i++, t++) { seq_of[t] = few[f]; query_of[t] = i; }
    const size_t qdim = (size_t)nheads * hd;
    const int per = total * nkv >= 8 ? nheads / nkv : 1, items = nheads / per;
#pragma omp parallel if (work > PAR_MIN_WORK / 16)
    {
        float *s = malloc(sizeof(float) * per * max_ctx);
#pragma omp for collapse(2) schedule(static)
        for (int t = 0; t < total; t++)
            for (int h = 0; h < items; h++) {
                const AttnSeq *a = &seqs[seq_of[t]];
                attend(out + a->off * qdim, q + a->off * qdim, a->kv, layer, query_of[t], a->n, a->nctx, a->mask,
                       h * per, per, nheads, nkv, hd, s);
            }
        free(s);
    }
    free(seq_of); free(query_of);
}

/* Heads in parallel, each through single-threaded sgemm (see sgemm_rows in
 * matmul.c: results independent of the thread count). */
static void attention_many(float *out, const float *q, const KVCache *c, int layer, int n, int nctx,
                           const uint8_t *mask, int nheads, int nkv, int hd) {
    const float scale = 1.0f / sqrtf((float)hd);
    const int group = nheads / nkv, qdim = nheads * hd, kvd = c->kv_dim;
    cpu_threads_max();   /* first call: OpenBLAS to one thread */
#pragma omp parallel if ((int64_t)n * nctx * hd * nheads > PAR_MIN_WORK)
    {
        float *s = malloc(sizeof(float) * (size_t)n * nctx);
#pragma omp for schedule(static)
        for (int h = 0; h < nheads; h++) {
            const int g = h / group;
            const float *K = kv_row(c, c->k, layer, 0) + g * hd;
            const float *V = kv_row(c, c->v, layer, 0) + g * hd;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, nctx, hd, scale, q + h * hd, qdim,
                        K, kvd, 0.0f, s, nctx);
            for (int i = 0; i < n; i++) softmax_row(s + (size_t)i * nctx, mask, i, n, nctx);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, hd, nctx, 1.0f, s, nctx, V, kvd,
                        0.0f, out + h * hd, qdim);
        }
        free(s);
    }
}

/* A sequence of more than 8 queries (prefill, a large tree) through sgemm,
 * the others together. */
void cpu_attention(float *out, const float *q, const AttnSeq *seqs, int n_seq, int layer, int nheads, int nkv,
                   int head_dim) {
    const size_t qdim = (size_t)nheads * head_dim;
    int *few = malloc(sizeof(int) * (n_seq ? n_seq : 1)), nf = 0;
    for (int i = 0; i < n_seq; i++) {
        const AttnSeq *a = &seqs[i];
        if (a->n <= 0) continue;
        if (a->n <= 8) few[nf++] = i;
        else attention_many(out + a->off * qdim, q + a->off * qdim, a->kv, layer, a->n, a->nctx, a->mask, nheads, nkv,
                            head_dim);
    }
    if (nf) attention_few(out, q, seqs, few, nf, layer, nheads, nkv, head_dim);
    free(few);
}
