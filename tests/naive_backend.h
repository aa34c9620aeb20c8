/* A naive scalar implementation of the kernels/ interface: obviously
 * correct loops in double precision, no BLAS, no threads.  The parity
 * harness runs any backend against it (CPU here; CUDA against CPU on a GPU
 * machine). */
#ifndef C2T_NAIVE_BACKEND_H
#define C2T_NAIVE_BACKEND_H
#include "kernels/kernels.h"
#include "kernels/base/rng.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static double nv_w(const Weight *w, int64_t r, int64_t c) {
    const int64_t i = r * w->cols + c;
    if (w->dtype == DT_F32) return ((const float *)w->data)[i];
    uint16_t v = ((const uint16_t *)w->data)[i];
    if (w->dtype == DT_BF16) { uint32_t u = (uint32_t)v << 16; float f; memcpy(&f, &u, 4); return f; }
    /* IEEE half by hand */
    int s = v >> 15, e = (v >> 10) & 31, m = v & 1023;
    double x = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return s ? -x : x;
}

static float *nv_alloc(size_t n) { return calloc(n ? n : 1, sizeof(float)); }
static void nv_release(void *p) { free(p); }
static void nv_copy(float *d, const float *s, size_t n) { memmove(d, s, n * sizeof(float)); }
static int nv_weight(Weight *w, const void *h, DType dt, int64_t r, int64_t c) {
    w->data = h; w->dtype = dt; w->rows = r; w->cols = c; return 0;
}
static void nv_weight_release(Weight *w) { (void)w; }

static void nv_embed(float *out, const Weight *t, const int *tok, int n) {
    for (int i = 0; i < n; i++)
        for (int64_t j = 0; j < t->cols; j++)
            out[i * t->cols + j] = tok[i] < 0 || tok[i] >= t->rows ? 0.0f : (float)nv_w(t, tok[i], j);
}
static void nv_matmul(float *out, const float *x, const Weight *w, int n) {
    for (int t = 0; t < n; t++)
        for (int64_t r = 0; r < w->rows; r++) {
            double s = 0;
            for (int64_t c = 0; c < w->cols; c++) s += nv_w(w, r, c) * x[t * w->cols + c];
            out[t * w->rows + r] = (float)s;
        }
}
static void nv_add_bias(float *x, const Weight *b, int n) {
    for (int t = 0; t < n; t++) for (int64_t j = 0; j < b->cols; j++) x[t * b->cols + j] += (float)nv_w(b, 0, j);
}
static void nv_rmsnorm(float *out, const float *x, const Weight *w, int n, float eps) {
    for (int t = 0; t < n; t++) {
        double ss = 0;
        for (int64_t j = 0; j < w->cols; j++) ss += (double)x[t * w->cols + j] * x[t * w->cols + j];
        double inv = 1.0 / sqrt(ss / w->cols + eps);
        for (int64_t j = 0; j < w->cols; j++) out[t * w->cols + j] = (float)(nv_w(w, 0, j) * x[t * w->cols + j] * inv);
    }
}
static void nv_add(float *x, const float *y, size_t n);
static void nv_add_rmsnorm(float *out, float *x, const float *y, const Weight *w, int n, float eps) {
    nv_add(x, y, (size_t)n * w->cols);
    nv_rmsnorm(out, x, w, n, eps);
}
static void nv_rope(float *x, const int *pos, int n, int nh, int hd, const float *inv_freq) {
    for (int t = 0; t < n; t++)
        for (int h = 0; h < nh; h++)
            for (int i = 0; i < hd / 2; i++) {
                /* the angle rounded to float32, as HF computes it */
                double a = (float)((float)pos[t] * inv_freq[i]);
                float *v = x + ((size_t)t * nh + h) * hd;
                double x0 = v[i], x1 = v[i + hd / 2];
                v[i] = (float)(x0 * cos(a) - x1 * sin(a));
                v[i + hd / 2] = (float)(x1 * cos(a) + x0 * sin(a));
            }
}
static void nv_add(float *x, const float *y, size_t n) { for (size_t i = 0; i < n; i++) x[i] += y[i]; }
static void nv_swiglu(float *g, const float *u, size_t n) {
    for (size_t i = 0; i < n; i++) g[i] = (float)(g[i] / (1.0 + exp(-(double)g[i])) * u[i]);
}
static void nv_geglu(float *g, const float *u, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const double x = g[i];
        g[i] = (float)(0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))) * u[i]);
    }
}
static void nv_scale(float *x, float s, size_t n) { for (size_t i = 0; i < n; i++) x[i] *= s; }
static void nv_copy_rows(float *dst, const int *dr, const float *src, const int *sr, int n, int width) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < width; j++) dst[(size_t)(dr ? dr[i] : i) * width + j] = src[(size_t)(sr ? sr[i] : i) * width + j];
}
static void nv_concat(float *out, const float *a, int da, const float *b, int db, int n) {
    for (int t = 0; t < n; t++) {
        for (int j = 0; j < da; j++) out[t * (da + db) + j] = a[t * da + j];
        for (int j = 0; j < db; j++) out[t * (da + db) + da + j] = b[t * db + j];
    }
}

struct KVCache { int layers, slots, kv_dim; float *k, *v; int *pos; };
static KVCache *nv_kv_create(int layers, int slots, int kv_dim) {
    KVCache *c = calloc(1, sizeof *c);
    c->layers = layers; c->slots = slots; c->kv_dim = kv_dim;
    c->k = calloc((size_t)layers * slots * kv_dim, sizeof(float));
    c->v = calloc((size_t)layers * slots * kv_dim, sizeof(float));
    c->pos = calloc((size_t)slots, sizeof(int));
    for (int s = 0; s < slots; s++) c->pos[s] = s;
    return c;
}
static void nv_kv_free(KVCache *c) { free(c->k); free(c->v); free(c->pos); free(c); }
static int nv_kv_slots(const KVCache *c) { return c->slots; }
static float *nv_at(const KVCache *c, float *b, int l, int s) { return b + ((size_t)l * c->slots + s) * c->kv_dim; }
/* a value as the cache keeps it (BackendOptions.kv_dtype) */
static float nv_kv_round(float x) {
    if (backend_settings()->kv_dtype != DT_BF16) return x;
    uint32_t u = (uint32_t)f32_to_bf16(x) << 16;
    memcpy(&x, &u, 4);
    return x;
}
static void nv_kv_write(KVCache *c, int l, int slot, const float *k, const float *v, int n) {
    for (int i = 0; i < n; i++) c->pos[slot + i] = slot + i;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < c->kv_dim; j++) {
            nv_at(c, c->k, l, slot + i)[j] = nv_kv_round(k[i * c->kv_dim + j]);
            nv_at(c, c->v, l, slot + i)[j] = nv_kv_round(v[i * c->kv_dim + j]);
        }
}
static void nv_rope_kv(float *q, float *k, const float *v, const int *pos, int n, int heads, int kv_heads, int hd,
                       const float *inv_freq, KVCache *c, int l, const int *slot) {
    nv_rope(q, pos, n, heads, hd, inv_freq);
    nv_rope(k, pos, n, kv_heads, hd, inv_freq);
    nv_kv_write(c, l, *slot, k, v, n);
    for (int i = 0; i < n; i++) c->pos[*slot + i] = pos[i];
}
static void nv_kv_keep(KVCache *c, int dst, const int *keep, int m) {
    for (int i = 0; i < m; i++) c->pos[dst + i] = c->pos[dst + keep[i]];
    for (int l = 0; l < c->layers; l++)
        for (int i = 0; i < m; i++)
            for (int j = 0; j < c->kv_dim; j++) {
                nv_at(c, c->k, l, dst + i)[j] = nv_at(c, c->k, l, dst + keep[i])[j];
                nv_at(c, c->v, l, dst + i)[j] = nv_at(c, c->v, l, dst + keep[i])[j];
            }
}
static void nv_attention_one(float *out, const float *q, const KVCache *c, int l, int n, int nctx,
                             const uint8_t *mask, int mask_w, int window, const int *qpos, int nh, int nkv, int hd) {
    double *s = malloc(sizeof(double) * nctx);
    for (int i = 0; i < n; i++)
        for (int h = 0; h < nh; h++) {
            int g = h / (nh / nkv);
            double mx = -INFINITY, sum = 0;
            for (int j = 0; j < nctx; j++) {
                const int w0 = nctx - mask_w;   /* the window's first slot */
                int vis = !mask ? j <= nctx - n + i : j < w0 || mask[(size_t)i * mask_w + (j - w0)];
                if (window && qpos[i] - c->pos[j] >= window) vis = 0;
                if (!vis) { s[j] = -INFINITY; continue; }
                double d = 0;
                for (int e = 0; e < hd; e++) d += (double)q[((size_t)i * nh + h) * hd + e] * nv_at(c, c->k, l, j)[g * hd + e];
                s[j] = d / sqrt((double)hd);
                if (s[j] > mx) mx = s[j];
            }
            for (int j = 0; j < nctx; j++) { s[j] = s[j] == -INFINITY ? 0 : exp(s[j] - mx); sum += s[j]; }
            for (int e = 0; e < hd; e++) {
                double o = 0;
                for (int j = 0; j < nctx; j++) o += s[j] / sum * nv_at(c, c->v, l, j)[g * hd + e];
                out[((size_t)i * nh + h) * hd + e] = (float)o;
            }
        }
    free(s);
}
static void nv_attention(float *out, const float *q, const AttnSeq *seqs, int n_seq, int l, int nh, int nkv, int hd) {
    for (int i = 0; i < n_seq; i++)
        nv_attention_one(out + (size_t)seqs[i].off * nh * hd, q + (size_t)seqs[i].off * nh * hd, seqs[i].kv, l,
                         seqs[i].n, *seqs[i].past + seqs[i].n, seqs[i].mask, seqs[i].mask_w, seqs[i].window, seqs[i].qpos,
                         nh, nkv, hd);
}
static int nv_cmp_desc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}
static void nv_softmax_topk(const float *logits, int n, int vocab, float temp, int k, int *ids,
                            float *probs, int topm, float *entropy) {
    double *p = malloc(sizeof(double) * vocab), *sorted = malloc(sizeof(double) * vocab);
    char *taken = malloc(vocab);
    for (int r = 0; r < n; r++) {
        const float *l = logits + (size_t)r * vocab;
        double mx = -INFINITY, sum = 0, t = temp > 0 ? temp : 1;
        for (int j = 0; j < vocab; j++) if (l[j] > mx) mx = l[j];
        for (int j = 0; j < vocab; j++) { p[j] = exp((l[j] - mx) / t); sum += p[j]; }
        for (int j = 0; j < vocab; j++) p[j] /= sum;
        memset(taken, 0, vocab);
        for (int i = 0; i < k; i++) {   /* k passes of argmax, ties to the lower id */
            int best = -1;
            for (int j = 0; j < vocab; j++) if (!taken[j] && (best < 0 || p[j] > p[best])) best = j;
            if (best >= 0) taken[best] = 1;
            if (ids) ids[(size_t)r * k + i] = best;
            if (probs) probs[(size_t)r * k + i] = best >= 0 ? (float)p[best] : 0;
        }
        if (entropy) {
            memcpy(sorted, p, sizeof(double) * vocab);
            qsort(sorted, vocab, sizeof(double), nv_cmp_desc);
            int m = topm <= 0 || topm > vocab ? vocab : topm;
            double h = 0;
            for (int j = 0; j < m; j++) if (sorted[j] > 0) h -= sorted[j] * log(sorted[j]);
            entropy[r] = (float)h;
        }
    }
    free(p); free(sorted); free(taken);
}
static void nv_argmax(const float *logits, int n, int vocab, int *ids) {
    for (int r = 0; r < n; r++) {
        int b = 0;
        for (int j = 1; j < vocab; j++) if (logits[(size_t)r * vocab + j] > logits[(size_t)r * vocab + b]) b = j;
        ids[r] = b;
    }
}

static void nv_matmul_many(float *const *outs, const float *x, const Weight *const *ws, int count, int n) {
    for (int i = 0; i < count; i++) nv_matmul(outs[i], x, ws[i], n);
}

/* Tree ops, the plainest way: selection by repeated best-of-the-rest,
 * parents found by search. */
static void nv_tree_root(const DevTree *t, const int *root) {
    t->token[0] = *root; t->parent[0] = -1; t->depth[0] = 0; t->rank[0] = 0; t->slot[0] = -1;
    t->p[0] = 1; t->P[0] = 1; t->H[0] = 0;
}
static void nv_tree_grow(const DevTree *t, int n0, const int *rows, const int *ids, const float *probs, const float *ent,
                         int k, const int *picks, int count, const int *map) {
    for (int c = 0; c < count; c++) {
        int r = c / k, j = c % k;
        if (picks) { r = picks[2 * c]; j = picks[2 * c + 1]; }
        int v = n0 + c, par = rows[r];
        t->token[v] = ids[r * k + j] < 0 ? -1 : map ? map[ids[r * k + j]] : ids[r * k + j];
        t->parent[v] = par; t->depth[v] = t->depth[par] + 1; t->rank[v] = j; t->slot[v] = -1;
        t->p[v] = probs[r * k + j];
        float P = t->P[par] * t->p[v];
        t->P[v] = P;
        t->H[v] = ent ? ent[r] : 0;
    }
}
/* whether node a comes before node b: higher score, shallower, lower index */
static int nv_before(const DevTree *t, const float *score, int a, int b) {
    if (score[a] != score[b]) return score[a] > score[b];
    if (t->depth[a] != t->depth[b]) return t->depth[a] < t->depth[b];
    return a < b;
}
static void nv_tree_top(const DevTree *t, const float *score, int from, int n, int m, int *sel) {
    char *taken = calloc(n ? n : 1, 1);
    if (!score) score = t->P;
    for (int s = 0; s < m && s < n; s++) {
        int best = -1;
        for (int i = 0; i < n; i++) if (!taken[i] && (best < 0 || nv_before(t, score, from + i, from + best))) best = i;
        taken[best] = 1;
    }
    for (int i = 0, o = 0; i < n; i++) if (taken[i]) sel[o++] = from + i;
    free(taken);
}
/* node_net.h's order, one node and one unit at a time */
static void nv_tree_classify(const DevTree *t, int from, int n, const NodeNet *net, float *conf) {
    for (int v = from; v < from + n; v++) {
        const int par = t->parent[v];
        const float raw[NODE_N_FEAT] = {t->P[v], t->H[v], (float)t->depth[v], t->p[v], (float)t->rank[v],
                                        par > 0 ? t->H[par] : t->H[v]};
        float x[NODE_N_FEAT], acc[2] = {0, 0};
        for (int k = 0; k < net->n_feat; k++) {
            const NodeNetInput *f = &net->in[k];
            float u = raw[f->id];
            if (f->kind == NODE_T_LOG) u = (float)log((double)(u + f->eps));
            x[k] = (u - f->mean) / f->std;
        }
        for (int j = 0; j < net->hidden; j++) {
            float z = net->fc1_b[j];
            for (int k = 0; k < net->n_feat; k++) {
                const float wx = net->fc1_w[j * net->n_feat + k] * x[k];
                z = z + wx;
            }
            const float vr = net->fc2_w[j] * (z > 0 ? z : 0.0f);
            acc[j % 2] = acc[j % 2] + vr;
        }
        const float logit = (acc[0] + acc[1]) + net->fc2_b;
        conf[v] = (float)(1.0 / (1.0 + exp(-(double)logit)));
    }
}
static void nv_tree_pass(const DevTree *t, int from, int n, float *conf, float beta, float *path_conf, int *count) {
    int kept = 0;
    for (int v = from; v < from + n; v++) {
        if (t->token[v] < 0 || t->token[t->parent[v]] < 0 || !(conf[v] >= beta || conf[v] != conf[v])) continue;
        const int w = from + kept++, par = t->parent[v];
        t->token[w] = t->token[v]; t->parent[w] = par; t->depth[w] = t->depth[v]; t->rank[w] = t->rank[v];
        t->slot[w] = t->slot[v]; t->p[w] = t->p[v]; t->P[w] = t->P[v]; t->H[w] = t->H[v];
        conf[w] = conf[v];
        path_conf[w] = conf[w] < path_conf[par] ? conf[w] : path_conf[par];
    }
    for (int v = from + kept; v < from + n; v++) {   /* the rest of the layer, dead */
        t->token[v] = -1;
        conf[v] = -1;
        path_conf[v] = -1;
    }
    *count = kept;
}
static void nv_tree_compact(const DevTree *dst, const DevTree *src, const int *keep, int m, int pad) {
    for (int j = 0; j < pad; j++) {
        int i = j < m ? keep[j] : -1, par = j < m ? -1 : 0;
        for (int q = 0; q < j && i >= 0; q++) if (keep[q] == src->parent[i]) par = q;
        dst->token[j] = i >= 0 ? src->token[i] : -1; dst->parent[j] = par; dst->depth[j] = i >= 0 ? src->depth[i] : 1;
        dst->rank[j] = i >= 0 ? src->rank[i] : 0; dst->slot[j] = i >= 0 ? src->slot[i] : -1;
        dst->p[j] = i >= 0 ? src->p[i] : 0; dst->P[j] = i >= 0 ? src->P[i] : 0; dst->H[j] = i >= 0 ? src->H[i] : 0;
    }
}
static void nv_tree_inputs(const DevTree *t, const int *rows, int m, const int *at, int base, int ones, int pos0,
                           int nctx, int *out, uint8_t *mask) {
    if (at) { base += *at; ones += *at; pos0 += *at; nctx += *at; }
    out[4 * m] = base;
    for (int i = 0; i < m; i++) t->slot[rows ? rows[i] : i] = base + i;
    for (int i = 0; i < m; i++) {
        int v = rows ? rows[i] : i;
        out[i] = t->token[v]; out[m + i] = pos0 + t->depth[v]; out[2 * m + i] = t->parent[v]; out[3 * m + i] = v;
        for (int j = ones; j < nctx; j++) {   /* the window [ones, nctx) */
            int on = 0;
            for (int a = v; a >= 0 && !on; a = t->parent[a]) on = t->slot[a] == j;
            mask[(size_t)i * (nctx - ones) + (j - ones)] = (uint8_t)on;
        }
    }
}
static void nv_tree_accept(const DevTree *t, int n, const int *want, int from_start, int steps, int *walk) {
    if (from_start) { walk[0] = 0; walk[1] = 1; walk[2] = 0; walk[3] = 0; walk[3 + n] = t->token[0]; }
    while (steps-- > 0 && !walk[0]) {
        int cur = walk[3 + walk[1] - 1], next = -1;
        for (int c = n - 1; c > cur; c--) if (t->parent[c] == cur && t->token[c] == want[cur]) next = c;
        if (next < 0) { walk[0] = 1; walk[2] = want[cur]; continue; }
        walk[3 + walk[1]] = next; walk[3 + n + walk[1]] = t->token[next]; walk[1]++;
    }
}

/* sample_dev by its definition (kernels.h): the cuts from sorted copies */
static int nv_desc(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}
static void nv_sample_dev(const float *logits, int n, int vocab, const SampleParams *sp, const uint32_t *key, int node0,
                          int *ids) {
    float *w = malloc(sizeof(float) * vocab), *s = malloc(sizeof(float) * vocab);
    for (int r = 0; r < n; r++) {
        const float *l = logits + (size_t)r * vocab;
        memcpy(s, l, sizeof(float) * vocab);
        qsort(s, vocab, sizeof(float), nv_desc);
        const float mx = s[0], kth = sp->top_k > 0 && sp->top_k < vocab ? s[sp->top_k - 1] : -INFINITY;
        double total = 0;
        for (int j = 0; j < vocab; j++) total += w[j] = l[j] >= kth && mx > -INFINITY ? expf((l[j] - mx) / sp->temperature) : 0;
        if (sp->top_p > 0 && sp->top_p < 1) {
            memcpy(s, w, sizeof(float) * vocab);
            qsort(s, vocab, sizeof(float), nv_desc);
            double cum = 0;
            int i = 0;
            while (i < vocab - 1 && (cum += s[i]) < sp->top_p * total) i++;
            total = 0;
            for (int j = 0; j < vocab; j++) total += w[j] = w[j] >= s[i] ? w[j] : 0;
        }
        const double target = rng_uniform_at(key[0] | (uint64_t)key[1] << 32, (uint64_t)(node0 + r)) * total;
        double c = 0;
        ids[r] = 0;
        for (int j = 0; j < vocab; j++)
            if (w[j] > 0) {
                ids[r] = j;
                if (target < (c += w[j])) break;
            }
    }
    free(w); free(s);
}

static const Backend naive_backend = {
    .name = "naive", .alloc = nv_alloc, .release = nv_release, .to_host = nv_copy, .to_device = nv_copy,
    .copy = nv_copy, .weight = nv_weight, .weight_release = nv_weight_release, .embed = nv_embed,
    .matmul = nv_matmul, .matmul_many = nv_matmul_many, .add_bias = nv_add_bias, .rmsnorm = nv_rmsnorm, .add_rmsnorm = nv_add_rmsnorm, .rope = nv_rope, .add = nv_add,
    .swiglu = nv_swiglu, .geglu = nv_geglu, .scale = nv_scale, .concat = nv_concat, .copy_rows = nv_copy_rows, .kv_create = nv_kv_create, .kv_free = nv_kv_free,
    .kv_slots = nv_kv_slots, .kv_write = nv_kv_write, .rope_kv = nv_rope_kv, .kv_keep = nv_kv_keep, .attention = nv_attention,
    .softmax_topk = nv_softmax_topk, .argmax = nv_argmax, .softmax_topk_dev = nv_softmax_topk, .argmax_dev = nv_argmax,
    .sample_dev = nv_sample_dev,
    .tree_root = nv_tree_root, .tree_grow = nv_tree_grow, .tree_top = nv_tree_top, .tree_classify = nv_tree_classify,
    .tree_pass = nv_tree_pass, .tree_compact = nv_tree_compact,
    .tree_inputs = nv_tree_inputs, .tree_accept = nv_tree_accept,
};
#endif
