/* KV cache and masked attention.  The cache keeps K and V per layer as
 * [slot][kv_dim] rows of F32, or of BF16 (BackendOptions.kv_dtype: rounded
 * as written, widened as read).  A prompt's many queries: per head,
 * S = Q Kᵀ and O = P V through sgemm; trees and few queries: loops split
 * over queries and heads. */
#include "kernels/cpu/cpu.h"
#include <cblas.h>
#include <math.h>
#include <stdlib.h>

struct KVCache {
    int layers, slots, kv_dim;
    DType dt;       /* DT_F32 or DT_BF16 */
    void *k, *v;    /* [layers][slots][kv_dim] of dt */
    int *pos;       /* [slots]: each slot's position (kernels.h) */
};

KVCache *cpu_kv_create(int layers, int slots, int kv_dim) {
    KVCache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->layers = layers; c->slots = slots; c->kv_dim = kv_dim;
    c->dt = backend_settings()->kv_dtype;
    size_t n = (size_t)layers * slots * kv_dim;
    c->k = calloc(n, dtype_size(c->dt));
    c->v = calloc(n, dtype_size(c->dt));
    c->pos = malloc(sizeof(int) * (size_t)slots);
    if (!c->k || !c->v || !c->pos) { free(c->k); free(c->v); free(c->pos); free(c); return NULL; }
    for (int s = 0; s < slots; s++) c->pos[s] = s;
    return c;
}

void cpu_kv_free(KVCache *c) {
    if (!c) return;
    free(c->k); free(c->v); free(c->pos); free(c);
}

int cpu_kv_slots(const KVCache *c) { return c->slots; }

/* Element index of a layer's slot in c->k or c->v. */
static inline size_t kv_at(const KVCache *c, int layer, int slot) {
    return ((size_t)layer * c->slots + slot) * c->kv_dim;
}
static inline char *kv_row(const KVCache *c, void *base, int layer, int slot) {
    return (char *)base + kv_at(c, layer, slot) * dtype_size(c->dt);
}

static void kv_store(const KVCache *c, void *base, int layer, int slot, const float *x, int n) {
    const size_t m = (size_t)n * c->kv_dim;
    if (c->dt == DT_F32) { memcpy(kv_row(c, base, layer, slot), x, sizeof(float) * m); return; }
    f32_to_bf16_row((uint16_t *)kv_row(c, base, layer, slot), x, m);
}

void cpu_kv_write(KVCache *c, int layer, int slot, const float *k, const float *v, int n) {
    kv_store(c, c->k, layer, slot, k, n);
    kv_store(c, c->v, layer, slot, v, n);
    for (int i = 0; i < n; i++) c->pos[slot + i] = slot + i;
}

void cpu_rope_kv(float *q, float *k, const float *v, const int *pos, int n, int heads, int kv_heads, int head_dim,
                 const float *inv_freq, KVCache *c, int layer, const int *slot) {
    cpu_rope(q, pos, n, heads, head_dim, inv_freq);
    cpu_rope(k, pos, n, kv_heads, head_dim, inv_freq);
    kv_store(c, c->k, layer, *slot, k, n);
    kv_store(c, c->v, layer, *slot, v, n);
    for (int i = 0; i < n; i++) c->pos[*slot + i] = pos[i];
}

void cpu_kv_keep(KVCache *c, int dst, const int *keep, int m) {
    const size_t row = dtype_size(c->dt) * c->kv_dim;
    for (int i = 0; i < m; i++)
        if (dst + keep[i] < c->slots) c->pos[dst + i] = c->pos[dst + keep[i]];
    for (int l = 0; l < c->layers; l++)
        for (int i = 0; i < m; i++) {
            if (keep[i] == i || dst + keep[i] >= c->slots) continue;
            memmove(kv_row(c, c->k, l, dst + i), kv_row(c, c->k, l, dst + keep[i]), row);
            memmove(kv_row(c, c->v, l, dst + i), kv_row(c, c->v, l, dst + keep[i]), row);
        }
}

/* a's context length (AttnSeq) */
static inline int seq_ctx(const AttnSeq *a) { return *a->past + a->n; }

/* whether slot j lies within query i's sliding window (AttnSeq.window) */
static inline int in_window(const AttnSeq *a, int i, int j) {
    return !a->window || a->qpos[i] - a->kv->pos[j] < a->window;
}

/* whether query i of a's sees slot j (AttnSeq) */
static inline int visible(const AttnSeq *a, int i, int j) {
    if (!in_window(a, i, j)) return 0;
    if (!a->mask) return j <= *a->past + i;
    const int w0 = seq_ctx(a) - a->mask_w;
    return j < w0 || a->mask[(size_t)i * a->mask_w + (j - w0)] != 0;
}

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
/* The slots query i of a's sees, in order, into at; returns their count
 * (attend16's and attend8's list). */
static int visible_slots(const AttnSeq *a, int i, int *at) {
    const int nctx = seq_ctx(a);
    int m = 0;
    if (a->mask) {   /* the slots before the window, then the window's marked ones */
        const int w0 = nctx - a->mask_w;
        const uint8_t *row = a->mask + (size_t)i * a->mask_w;
        for (int j = 0; j < w0; j++)
            if (in_window(a, i, j)) at[m++] = j;
        for (int j = 0; j < a->mask_w; j++)
            if (row[j] && in_window(a, i, w0 + j)) at[m++] = w0 + j;
    } else {   /* causal: slots [0, nctx - n + i] */
        for (int j = 0; j <= nctx - a->n + i; j++)
            if (in_window(a, i, j)) at[m++] = j;
    }
    return m;
}
#endif

/* Masked softmax of query i's score row in place; masked entries become 0. */
static void softmax_row(float *s, const AttnSeq *a, int i) {
    const int nctx = seq_ctx(a);
    float mx = -INFINITY;
    for (int j = 0; j < nctx; j++)
        if (visible(a, i, j) && s[j] > mx) mx = s[j];
    double sum = 0;
    for (int j = 0; j < nctx; j++) {
        float e = visible(a, i, j) ? expf(s[j] - mx) : 0.0f;
        s[j] = e;
        sum += e;
    }
    float inv = sum > 0 ? (float)(1.0 / sum) : 0.0f;
    for (int j = 0; j < nctx; j++) s[j] *= inv;
}

/* q·k over a head of hd floats, k the cache's elements from index i of
 * base, eight lanes at a time (hd % 8 == 0 in every LLaMA shape; the tail
 * loop covers the rest).  An F32 cache holding BF16-rounded values gives
 * the same sums as a BF16 cache. */
static inline float dot_hd(const float *a, const void *base, DType dt, size_t i, int hd) {
    v8f acc = {0};
    int e = 0;
    for (; e + 8 <= hd; e += 8) {
        v8f x;
        memcpy(&x, a + e, 32);
        acc += x * load8(base, dt, (int64_t)(i + e));
    }
    float d = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; e < hd; e++) d += a[e] * load1(base, dt, (int64_t)(i + e));
    return d;
}

/* o += w · v over hd floats, v as in dot_hd */
static inline void axpy_hd(float *o, float w, const void *base, DType dt, size_t i, int hd) {
    int e = 0;
    for (; e + 8 <= hd; e += 8) {
        v8f x;
        memcpy(&x, o + e, 32);
        x += w * load8(base, dt, (int64_t)(i + e));
        memcpy(o + e, &x, 32);
    }
    for (; e < hd; e++) o[e] += w * load1(base, dt, (int64_t)(i + e));
}

/* One query's attention for heads [h0, h0 + nh) that share one KV head:
 * per head, scores over the visible slots, softmax, the weighted sum of the
 * values.  Each K and V row is read once for all nh heads; every head's
 * arithmetic is the same whatever nh.  s: nh * nctx floats of scratch. */
static inline __attribute__((always_inline)) void attend_dt(float *out, const float *q, const AttnSeq *sq, int layer,
                                                              int i, int h0, int nh, int nheads, int nkv, int hd,
                                                              float *s, const DType dt) {
    const KVCache *c = sq->kv;
    const int nctx = seq_ctx(sq);
    const float scale = 1.0f / sqrtf((float)hd);
    const int g = h0 / (nheads / nkv), qdim = nheads * hd;
    const float *qi = q + (size_t)i * qdim;
    for (int j = 0; j < nctx; j++) {
        const int vis = visible(sq, i, j);
        const size_t k = kv_at(c, layer, j) + (size_t)g * hd;
        for (int a = 0; a < nh; a++)
            s[(size_t)a * nctx + j] = vis ? dot_hd(qi + (h0 + a) * hd, c->k, dt, k, hd) * scale : 0;
    }
    for (int a = 0; a < nh; a++) {
        softmax_row(s + (size_t)a * nctx, sq, i);
        memset(out + (size_t)i * qdim + (h0 + a) * hd, 0, sizeof(float) * hd);
    }
    for (int j = 0; j < nctx; j++) {
        const size_t v = kv_at(c, layer, j) + (size_t)g * hd;
        for (int a = 0; a < nh; a++) {
            const float w = s[(size_t)a * nctx + j];
            if (w != 0) axpy_hd(out + (size_t)i * qdim + (h0 + a) * hd, w, c->v, dt, v, hd);
        }
    }
}

#ifdef __AVX512F__
/* Sixteen of the cache's elements from index i as floats. */
static inline __m512 kv_load16(const void *base, DType dt, size_t i) {
    if (dt == DT_BF16)
        return _mm512_castsi512_ps(_mm512_slli_epi32(
            _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)((const uint16_t *)base + i))), 16));
    return _mm512_loadu_ps((const float *)base + i);
}

/* attend_dt for head sizes a multiple of 16 (HD, DT compile-time).  The
 * visible slots are listed in order first (at[0..m)), and everything runs
 * over that list: each score is one 16-lane chain over the head then a
 * fixed reduction; the exponentials 16 at a time and their sum
 * (exp_shifted16) by list position; each head's weighted sum of the values stays in HD/16
 * registers over the list and is scaled by 1/sum at the end.  So a query
 * of a tree, whose context is the committed slots and its ancestors' slots
 * among the tree's, sums exactly as the same token decoded alone over its
 * contiguous context: greedy verification stays lossless.  s: nh * nctx
 * floats, then nctx ints. */
static inline __attribute__((always_inline)) void attend16(float *out, const float *q, const AttnSeq *sq, int layer,
                                                           int i, int h0, int nh, int nheads, int nkv, float *s,
                                                           const DType DT, const int HD) {
    enum { V = 16 };   /* HD / 16 <= V */
    const KVCache *c = sq->kv;
    const int nctx = seq_ctx(sq);
    const float scale = 1.0f / sqrtf((float)HD);
    const int g = h0 / (nheads / nkv), qdim = nheads * HD;
    const float *qi = q + (size_t)i * qdim;
    const void *K = c->k, *Vc = c->v;
    int *at = (int *)(s + (size_t)nh * nctx);
    const int m = visible_slots(sq, i, at);
    for (int x = 0; x < m; x++) {
        const size_t base = kv_at(c, layer, at[x]) + (size_t)g * HD;
        __m512 k[V];
#pragma GCC unroll 16
        for (int v = 0; v < HD / 16; v++) k[v] = kv_load16(K, DT, base + 16 * v);
        for (int a = 0; a < nh; a++) {
            const float *qa = qi + (size_t)(h0 + a) * HD;
            __m512 acc = _mm512_mul_ps(_mm512_loadu_ps(qa), k[0]);
#pragma GCC unroll 16
            for (int v = 1; v < HD / 16; v++) acc = _mm512_fmadd_ps(_mm512_loadu_ps(qa + 16 * v), k[v], acc);
            s[(size_t)a * nctx + x] = _mm512_reduce_add_ps(acc) * scale;
        }
    }
    for (int a = 0; a < nh; a++) {
        float *sa = s + (size_t)a * nctx;
        float top;
        const double sum = exp_shifted16(sa, m, 1.0f, sa, &top);
        const __m512 inv = _mm512_set1_ps(sum > 0 ? (float)(1.0 / sum) : 0.0f);
        __m512 o[V];
#pragma GCC unroll 16
        for (int v = 0; v < HD / 16; v++) o[v] = _mm512_setzero_ps();
        for (int x = 0; x < m; x++) {
            if (sa[x] == 0) continue;
            const __m512 w = _mm512_set1_ps(sa[x]);
            const size_t base = kv_at(c, layer, at[x]) + (size_t)g * HD;
#pragma GCC unroll 16
            for (int v = 0; v < HD / 16; v++) o[v] = _mm512_fmadd_ps(w, kv_load16(Vc, DT, base + 16 * v), o[v]);
        }
        float *oa = out + (size_t)i * qdim + (size_t)(h0 + a) * HD;
#pragma GCC unroll 16
        for (int v = 0; v < HD / 16; v++) _mm512_storeu_ps(oa + 16 * v, _mm512_mul_ps(o[v], inv));
    }
}

#define ATTEND16(HD)                                                                                               \
    do {                                                                                                           \
        if (sq->kv->dt == DT_BF16) attend16(out, q, sq, layer, i, h0, nh, nheads, nkv, s, DT_BF16, HD);           \
        else attend16(out, q, sq, layer, i, h0, nh, nheads, nkv, s, DT_F32, HD);                                 \
        return;                                                                                                    \
    } while (0)
#endif

#if defined(__AVX2__) && defined(__FMA__) && !defined(__AVX512F__)
/* Eight of the cache's elements from index i as floats (load8). */
static inline __m256 kv_load8(const void *base, DType dt, size_t i) { return (__m256)load8(base, dt, (int64_t)i); }

/* attend16 on 8 lanes (AVX2), for head sizes a multiple of 8 (HD, DT
 * compile-time), with its contract: the visible slots listed in order
 * first, each score one 8-lane chain over the head then a fixed reduction,
 * the exponentials and their sum by list position (exp_shifted8), each
 * head's weighted sum of the values in registers over the list, at most
 * O_VECTORS of them a pass (AVX2's 16 registers: a head of 128 takes two
 * passes, each over its half of every value row).  So a tree's query sums
 * exactly as the same token decoded alone.  s: nh * nctx floats, then nctx
 * ints. */
static inline __attribute__((always_inline)) void attend8(float *out, const float *q, const AttnSeq *sq, int layer,
                                                          int i, int h0, int nh, int nheads, int nkv, float *s,
                                                          const DType DT, const int HD) {
    enum { O_VECTORS = 8 };
    const KVCache *c = sq->kv;
    const int nctx = seq_ctx(sq);
    const float scale = 1.0f / sqrtf((float)HD);
    const int g = h0 / (nheads / nkv), qdim = nheads * HD;
    const float *qi = q + (size_t)i * qdim;
    const void *K = c->k, *Vc = c->v;
    int *at = (int *)(s + (size_t)nh * nctx);
    const int m = visible_slots(sq, i, at);
    for (int x = 0; x < m; x++) {
        const size_t base = kv_at(c, layer, at[x]) + (size_t)g * HD;
        for (int a = 0; a < nh; a++) {
            const float *qa = qi + (size_t)(h0 + a) * HD;
            __m256 acc = _mm256_mul_ps(_mm256_loadu_ps(qa), kv_load8(K, DT, base));
#pragma GCC unroll 16
            for (int v = 1; v < HD / 8; v++) acc = _mm256_fmadd_ps(_mm256_loadu_ps(qa + 8 * v), kv_load8(K, DT, base + 8 * v), acc);
            __m128 t = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
            t = _mm_add_ps(t, _mm_movehl_ps(t, t));
            s[(size_t)a * nctx + x] = _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1))) * scale;
        }
    }
    for (int a = 0; a < nh; a++) {
        float *sa = s + (size_t)a * nctx;
        float top;
        const double sum = exp_shifted8(sa, m, 1.0f, sa, &top);
        const __m256 inv = _mm256_set1_ps(sum > 0 ? (float)(1.0 / sum) : 0.0f);
        float *oa = out + (size_t)i * qdim + (size_t)(h0 + a) * HD;
        for (int v0 = 0; v0 < HD / 8; v0 += O_VECTORS) {
            const int nv = HD / 8 - v0 < O_VECTORS ? HD / 8 - v0 : O_VECTORS;
            __m256 o[O_VECTORS];
#pragma GCC unroll 8
            for (int v = 0; v < nv; v++) o[v] = _mm256_setzero_ps();
            for (int x = 0; x < m; x++) {
                if (sa[x] == 0) continue;
                const __m256 w = _mm256_set1_ps(sa[x]);
                const size_t base = kv_at(c, layer, at[x]) + (size_t)g * HD + 8 * (size_t)v0;
#pragma GCC unroll 8
                for (int v = 0; v < nv; v++) o[v] = _mm256_fmadd_ps(w, kv_load8(Vc, DT, base + 8 * v), o[v]);
            }
#pragma GCC unroll 8
            for (int v = 0; v < nv; v++) _mm256_storeu_ps(oa + 8 * (v0 + v), _mm256_mul_ps(o[v], inv));
        }
    }
}

#define ATTEND8(HD)                                                                                                \
    do {                                                                                                           \
        if (sq->kv->dt == DT_BF16) attend8(out, q, sq, layer, i, h0, nh, nheads, nkv, s, DT_BF16, HD);            \
        else attend8(out, q, sq, layer, i, h0, nh, nheads, nkv, s, DT_F32, HD);                                  \
        return;                                                                                                    \
    } while (0)
#endif

/* attend16 (AVX-512) or attend8 (AVX2) for the head sizes of the LLaMA
 * family's shapes, else attend_dt; the element type a constant in each copy */
static void attend(float *out, const float *q, const AttnSeq *sq, int layer, int i, int h0, int nh, int nheads,
                   int nkv, int hd, float *s) {
#ifdef __AVX512F__
    switch (hd) {
    case 32: ATTEND16(32);
    case 64: ATTEND16(64);
    case 128: ATTEND16(128);
    case 256: ATTEND16(256);
    }
#elif defined(__AVX2__) && defined(__FMA__)
    switch (hd) {
    case 32: ATTEND8(32);
    case 64: ATTEND8(64);
    case 128: ATTEND8(128);
    case 256: ATTEND8(256);
    }
#endif
    if (sq->kv->dt == DT_BF16) attend_dt(out, q, sq, layer, i, h0, nh, nheads, nkv, hd, s, DT_BF16);
    else attend_dt(out, q, sq, layer, i, h0, nh, nheads, nkv, hd, s, DT_F32);
}

/* Decode and small trees: every query of the sequences listed in few[0..nf)
 * (indices into seqs), split over the threads whenever there is more than a
 * few microseconds of work (the other core would otherwise wait at the
 * next product's barrier).  With enough queries a work item is a query and
 * a KV head (its K/V rows read once for the heads that share it), else a
 * query and a head (more items to split).  Each (query, head) is summed
 * the same either way, whatever the split and whatever else is in the
 * call, so results depend neither on the thread count nor on the batch. */
typedef struct {
    float *out;
    const float *q;
    const AttnSeq *seqs;
    const int *seq_of, *query_of;   /* per query of the call: its sequence and its index there */
    int layer, nheads, nkv, hd, per, items, total, max_ctx;   /* items: head groups of per heads */
} FewAttnJob;

/* A contiguous share of the (query, head group) items. */
static void few_attn_part(void *v, int part, int parts) {
    const FewAttnJob *j = v;
    const size_t qdim = (size_t)j->nheads * j->hd;
    int64_t lo, hi;
    part_range((int64_t)j->total * j->items, part, parts, &lo, &hi);
    if (lo >= hi) return;
    float *s = malloc(sizeof(float) * (j->per + 1) * j->max_ctx);   /* scores, then attend16's slot list */
    for (int64_t it = lo; it < hi; it++) {
        const int t = (int)(it / j->items), h = (int)(it % j->items);
        const AttnSeq *a = &j->seqs[j->seq_of[t]];
        attend(j->out + a->off * qdim, j->q + a->off * qdim, a, j->layer, j->query_of[t], h * j->per, j->per, j->nheads,
               j->nkv, j->hd, s);
    }
    free(s);
}

static void attention_few(float *out, const float *q, const AttnSeq *seqs, const int *few, int nf, int layer,
                          int nheads, int nkv, int hd) {
    int total = 0, max_ctx = 1;
    int64_t work = 0;
    for (int f = 0; f < nf; f++) {
        const AttnSeq *a = &seqs[few[f]];
        total += a->n;
        work += (int64_t)a->n * nheads * seq_ctx(a) * hd;
        if (seq_ctx(a) > max_ctx) max_ctx = seq_ctx(a);
    }
    int *seq_of = malloc(sizeof(int) * (total ? total : 1)), *query_of = malloc(sizeof(int) * (total ? total : 1));
    for (int f = 0, t = 0; f < nf; f++)
        for (int i = 0; i < seqs[few[f]].n; i++, t++) { seq_of[t] = few[f]; query_of[t] = i; }
    const int per = total * nkv >= 8 ? nheads / nkv : 1;
    FewAttnJob j = {out, q, seqs, seq_of, query_of, layer, nheads, nkv, hd, per, nheads / per, total, max_ctx};
    cpu_parallel(few_attn_part, &j, work > PAR_MIN_WORK / 16);
    free(seq_of); free(query_of);
}

/* A head's nctx rows of K or V as F32 at kv (row stride kvd): the cache
 * itself, or (BF16) widened into w[nctx][hd]; the row stride in *ld. */
static const float *head_rows(const KVCache *c, void *base, int layer, int g, int hd, int nctx, float *w, int *ld) {
    if (c->dt == DT_F32) { *ld = c->kv_dim; return (const float *)kv_row(c, base, layer, 0) + (size_t)g * hd; }
    for (int j = 0; j < nctx; j++) {
        const size_t at = kv_at(c, layer, j) + (size_t)g * hd;
        for (int e = 0; e < hd; e++) w[(size_t)j * hd + e] = load1(base, DT_BF16, (int64_t)(at + e));
    }
    *ld = hd;
    return w;
}

/* Heads in parallel, each through single-threaded sgemm (see sgemm_rows in
 * matmul.c: results independent of the thread count). */
typedef struct {
    float *out;
    const float *q;
    const KVCache *c;
    int layer, n, nctx, nheads, nkv, hd;
    int window;          /* AttnSeq's sliding window, 0: none */
    const int *qpos;
} ManyAttnJob;

/* A contiguous share of the heads. */
static void many_attn_part(void *v, int part, int parts) {
    const ManyAttnJob *j = v;
    const float scale = 1.0f / sqrtf((float)j->hd);
    const int group = j->nheads / j->nkv, qdim = j->nheads * j->hd, n = j->n, nctx = j->nctx, hd = j->hd;
    int64_t lo, hi;
    part_range(j->nheads, part, parts, &lo, &hi);
    if (lo >= hi) return;
    float *s = malloc(sizeof(float) * (size_t)n * nctx);
    float *wide = j->c->dt == DT_F32 ? NULL : malloc(sizeof(float) * (size_t)nctx * hd);
    for (int h = (int)lo; h < (int)hi; h++) {
        const int g = h / group;
        int ld;
        const float *K = head_rows(j->c, j->c->k, j->layer, g, hd, nctx, wide, &ld);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, nctx, hd, scale, j->q + h * hd, qdim,
                    K, ld, 0.0f, s, nctx);
        const int past = nctx - n;
        const AttnSeq causal = {j->c, 0, n, &past, nctx, NULL, 0, j->window, j->qpos};
        for (int i = 0; i < n; i++) softmax_row(s + (size_t)i * nctx, &causal, i);
        const float *V = head_rows(j->c, j->c->v, j->layer, g, hd, nctx, wide, &ld);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, hd, nctx, 1.0f, s, nctx, V, ld,
                    0.0f, j->out + h * hd, qdim);
    }
    free(s);
    free(wide);
}

static void attention_many(float *out, const float *q, const AttnSeq *a, int layer, int nheads, int nkv, int hd) {
    cpu_threads_max();   /* first call: OpenBLAS to one thread */
    const int n = a->n, nctx = seq_ctx(a);
    ManyAttnJob j = {out, q, a->kv, layer, n, nctx, nheads, nkv, hd, a->window, a->qpos};
    cpu_parallel(many_attn_part, &j, (int64_t)n * nctx * hd * nheads > PAR_MIN_WORK);
}

/* A causal sequence of more than 8 queries (a prompt) through sgemm; the
 * others, trees (masked) of any size included, together through
 * attention_few, so that every row of a tree sums as the same token decoded
 * alone (attend16's slot list; attend_dt's chains skip hidden slots). */
void cpu_attention(float *out, const float *q, const AttnSeq *seqs, int n_seq, int layer, int nheads, int nkv,
                   int head_dim) {
    const size_t qdim = (size_t)nheads * head_dim;
    int *few = malloc(sizeof(int) * (n_seq ? n_seq : 1)), nf = 0;
    for (int i = 0; i < n_seq; i++) {
        const AttnSeq *a = &seqs[i];
        if (a->n <= 0) continue;
        if (a->n <= 8 || a->mask) few[nf++] = i;
        else attention_many(out + a->off * qdim, q + a->off * qdim, a, layer, nheads, nkv, head_dim);
    }
    if (nf) attention_few(out, q, seqs, few, nf, layer, nheads, nkv, head_dim);
    free(few);
}
