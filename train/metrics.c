#include "train/metrics.h"
#include "kernels/base/util.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

Rates rates_of(Confusion c) {
    Rates r;
    memset(&r, 0, sizeof r);
    r.c = c;
    double n = (double)(c.tp + c.fp + c.fn + c.tn), pp = (double)(c.tp + c.fp), p = (double)(c.tp + c.fn);
    r.recall = p > 0 ? c.tp / p : 0;
    r.theta = n > 0 ? pp / n : 0;
    r.precision = pp > 0 ? c.tp / pp : 0;
    r.f1 = r.precision + r.recall > 0 ? 2 * r.precision * r.recall / (r.precision + r.recall) : 0;
    r.accuracy = n > 0 ? (c.tp + c.tn) / n : 0;
    return r;
}

void confusion_count(Confusion *c, int pred, int y) {
    if (pred) { if (y) c->tp++; else c->fp++; }
    else { if (y) c->fn++; else c->tn++; }
}

const char *entropy_bucket_name(int b, char *buf) {
    if (b == N_BUCKETS) snprintf(buf, 16, "total");
    else if (b == N_BUCKETS - 1) snprintf(buf, 16, "[%d,inf)", b);
    else snprintf(buf, 16, "[%d,%d)", b, b + 1);
    return buf;
}

void bucket_count(BucketTable *t, float H, int y, int c2t, int e2) {
    int b = entropy_bucket(H);
    for (int k = 0; k < 2; k++, b = N_BUCKETS) {
        confusion_count(&t->tree[b], c2t, y);
        confusion_count(&t->e2[b], e2, y);
        t->n[b]++;
    }
}

int entropy_bucket(float H) {
    if (!(H >= 1)) return 0;   /* [0, 1) and anything below */
    if (H >= N_BUCKETS - 1) return N_BUCKETS - 1;
    return (int)floorf(H);
}

/* Order-preserving map of a float to uint32 (-0 folded into +0). */
static inline uint32_t float_key(float f) {
    if (f == 0) f = 0;
    uint32_t u;
    memcpy(&u, &f, 4);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

double auc_exact(const float *score, const uint8_t *label, int64_t n) {
    int64_t npos = 0;
    for (int64_t i = 0; i < n; i++) npos += label[i] != 0;
    int64_t nneg = n - npos;
    if (npos == 0 || nneg == 0) return 0.5;
    /* items key << 1 | label, LSD radix sort on the key (11 + 11 + 10 bits) */
    uint64_t *a = xmalloc(sizeof(uint64_t) * (size_t)n), *b = xmalloc(sizeof(uint64_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) a[i] = (uint64_t)float_key(score[i]) << 1 | (label[i] != 0);
    static const int shift[3] = {1, 12, 23}, bits[3] = {11, 11, 10};
    for (int p = 0; p < 3; p++) {
        int64_t cnt[2048] = {0};
        uint64_t mask = ((uint64_t)1 << bits[p]) - 1;
        for (int64_t i = 0; i < n; i++) cnt[(a[i] >> shift[p]) & mask]++;
        int64_t sum = 0;
        for (int k = 0; k < 2048; k++) { int64_t c = cnt[k]; cnt[k] = sum; sum += c; }
        for (int64_t i = 0; i < n; i++) b[cnt[(a[i] >> shift[p]) & mask]++] = a[i];
        uint64_t *t = a; a = b; b = t;
    }
    /* sum of the (mid)ranks of the positives, 1-based */
    double rank_sum = 0;
    for (int64_t i = 0; i < n;) {
        int64_t j = i, pos = 0;
        while (j < n && (a[j] >> 1) == (a[i] >> 1)) { pos += a[j] & 1; j++; }
        rank_sum += pos * ((double)(i + 1) + (double)j) / 2;
        i = j;
    }
    free(a); free(b);
    return (rank_sum - (double)npos * (npos + 1) / 2) / ((double)npos * (double)nneg);
}

void c2t_tree_select(const float *conf, const int32_t *parent, int n, double beta, uint8_t *sel) {
    /* fast path: parents come before their children */
    int i;
    for (i = 0; i < n; i++) {
        int p = parent[i];
        if (p >= i) break;
        sel[i] = conf[i] >= beta && (p < 0 || sel[p]);
    }
    if (i >= n || n <= 0) return;
    /* general order: 0 unknown, 1 selected, 2 filtered */
    memset(sel, 0, (size_t)n);
    int *stack = xmalloc(sizeof(int) * (size_t)n);
    for (i = 0; i < n; i++) {
        int top = 0, j = i;
        while (j >= 0 && sel[j] == 0) { stack[top++] = j; j = parent[j]; }
        while (top > 0) {
            int k = stack[--top], p = parent[k];
            sel[k] = conf[k] >= beta && (p < 0 || sel[p] == 1) ? 1 : 2;
        }
    }
    for (i = 0; i < n; i++) sel[i] = sel[i] == 1;
    free(stack);
}

static const float *g_P;
static int cmp_by_P(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    if (g_P[x] != g_P[y]) return g_P[x] > g_P[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

void e2_rank(const float *P, int n, int *rank) {
    int *ix = xmalloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    for (int i = 0; i < n; i++) ix[i] = i;
    g_P = P;   /* callers are single-threaded here */
    qsort(ix, (size_t)n, sizeof(int), cmp_by_P);
    for (int i = 0; i < n; i++) rank[ix[i]] = i;
    free(ix);
}

void e2_select(const float *P, int n, int topn, uint8_t *sel) {
    if (n <= topn) { memset(sel, 1, (size_t)n); return; }
    int *rank = xmalloc(sizeof(int) * (size_t)n);
    e2_rank(P, n, rank);
    for (int i = 0; i < n; i++) sel[i] = rank[i] < topn;
    free(rank);
}

uint8_t *e2_select_all(const EvalSet *es, int topn) {
    uint8_t *sel = xmalloc((size_t)es->n_nodes + 1);
    for (int64_t t = 0; t < es->n_trees; t++) {
        int64_t s = es->start[t];
        e2_select(es->P + s, (int)(es->start[t + 1] - s), topn, sel + s);
    }
    return sel;
}

void c2t_path_min(const float *conf, const int32_t *parent, int n, float *pm) {
    int i;
    for (i = 0; i < n; i++) {   /* fast path: parents before children */
        int p = parent[i];
        if (p >= i) break;
        pm[i] = p < 0 || conf[i] < pm[p] ? conf[i] : pm[p];
    }
    if (i >= n || n <= 0) return;
    for (i = 0; i < n; i++) pm[i] = -1;   /* unknown (confidences are >= 0) */
    int *stack = xmalloc(sizeof(int) * (size_t)n);
    for (i = 0; i < n; i++) {
        int top = 0, j = i;
        while (j >= 0 && pm[j] < 0) { stack[top++] = j; j = parent[j]; }
        while (top > 0) {
            int k = stack[--top], p = parent[k];
            pm[k] = p < 0 || conf[k] < pm[p] ? conf[k] : pm[p];
        }
    }
    free(stack);
}

void evaluate(const Classifier *c, const EvalSet *es, const EvalOpts *o, EvalResult *r) {
    memset(r, 0, sizeof *r);
    int64_t M = es->n_nodes, T = es->n_trees;
    r->n_trees = T; r->n_nodes = M; r->n_pos = es->n_pos;
    if (M == 0) return;
    float *conf = xmalloc(sizeof(float) * (size_t)M), *pmin = xmalloc(sizeof(float) * (size_t)M);
    double *tree_loss = xcalloc((size_t)T, sizeof(double));
    /* per tree (one batch each): confidences, loss, and the minimum
     * confidence on the path from the root (C2T keeps a node at beta iff
     * that minimum is >= beta: itself and every ancestor pass) */
#pragma omp parallel for schedule(dynamic, 16)
    for (int64_t t = 0; t < T; t++) {
        int64_t s = es->start[t];
        int n = (int)(es->start[t + 1] - s);
        classifier_logits(c, es->x + s, n, conf + s);
        double L = 0;
        for (int i = 0; i < n; i++) {
            float z = conf[s + i], e = expf(-fabsf(z));
            conf[s + i] = z >= 0 ? 1.0f / (1.0f + e) : e / (1.0f + e);
            L += (double)((z > 0 ? z : 0) - z * es->y[s + i]) + (double)log1pf(e);
        }
        tree_loss[t] = L;
        c2t_path_min(conf + s, es->parent + s, n, pmin + s);
    }
    uint8_t *e2 = o->e2_sel ? (uint8_t *)o->e2_sel : e2_select_all(es, o->e2_topn);
    /* sweep thresholds in ascending order; a node with value v is positive at
     * the q-th smallest threshold iff #{thresholds <= v} > q */
    int S = o->n_sweep, order[64];
    double ts[64];
    for (int k = 0; k < S; k++) order[k] = k;
    for (int a = 1; a < S; a++)
        for (int b = a; b > 0 && o->sweep[order[b]] < o->sweep[order[b - 1]]; b--) {
            int x = order[b]; order[b] = order[b - 1]; order[b - 1] = x;
        }
    for (int k = 0; k < S; k++) ts[k] = o->sweep[order[k]];
    int64_t hc[2][65], ht[2][65];
    memset(hc, 0, sizeof hc); memset(ht, 0, sizeof ht);
    Confusion cls = {0}, tree = {0}, e2c = {0};
    double loss = 0;
    for (int64_t t = 0; t < T; t++) loss += tree_loss[t];
    for (int64_t i = 0; i < M; i++) {
        int y = es->y[i];
        int pc = conf[i] >= o->beta, pt = pmin[i] >= o->beta, pe = e2[i];
        confusion_count(&cls, pc, y);
        confusion_count(&tree, pt, y);
        confusion_count(&e2c, pe, y);
        bucket_count(&r->buckets, es->H[i], y, pt, pe);
        int jc = 0, jt = 0;
        for (int k = 0; k < S; k++) { jc += ts[k] <= conf[i]; jt += ts[k] <= pmin[i]; }
        hc[y][jc]++;
        ht[y][jt]++;
    }
    int64_t npos = cls.tp + cls.fn, nneg = cls.fp + cls.tn;
    for (int q = 0; q < S; q++) {
        Confusion a = {0}, b = {0};
        for (int j = q + 1; j <= S; j++) { a.tp += hc[1][j]; a.fp += hc[0][j]; b.tp += ht[1][j]; b.fp += ht[0][j]; }
        a.fn = npos - a.tp; a.tn = nneg - a.fp;
        b.fn = npos - b.tp; b.tn = nneg - b.fp;
        r->sweep_cls[order[q]] = rates_of(a);
        r->sweep_tree[order[q]] = rates_of(b);
    }
    r->cls = rates_of(cls);
    r->tree = rates_of(tree);
    r->tree_recall_at_e2_theta = recall_of_top(pmin, es->y, M, e2c.tp + e2c.fp);
    r->e2 = rates_of(e2c);
    r->loss = loss / (double)M;
    r->auc = auc_exact(conf, es->y, M);
    if (!o->e2_sel) free(e2);
    free(conf); free(pmin); free(tree_loss);
}

int select_epoch(const Rates *r, int n, double similar) {
    double best = -1;
    for (int e = 0; e < n; e++) if (r[e].recall > best) best = r[e].recall;
    int sel = -1;
    for (int e = 0; e < n; e++) {
        if (r[e].recall < best - similar - 1e-12) continue;
        if (sel < 0 || r[e].theta < r[sel].theta || (r[e].theta == r[sel].theta && r[e].recall > r[sel].recall))
            sel = e;
    }
    return sel;
}

typedef struct { float score; uint8_t label; } Scored;

static int by_score_desc(const void *a, const void *b) {
    float x = ((const Scored *)a)->score, y = ((const Scored *)b)->score;
    return (x < y) - (x > y);
}

double recall_of_top(const float *score, const uint8_t *label, int64_t n, int64_t k) {
    Scored *s = xmalloc(sizeof(Scored) * (size_t)(n > 0 ? n : 1));
    int64_t pos = 0;
    for (int64_t i = 0; i < n; i++) { s[i].score = score[i]; s[i].label = label[i]; pos += label[i] != 0; }
    qsort(s, (size_t)n, sizeof *s, by_score_desc);
    double kept = 0;
    for (int64_t i = 0; i < n && i < k;) {
        int64_t j = i, p = 0;
        while (j < n && s[j].score == s[i].score) p += s[j++].label != 0;
        kept += j <= k ? (double)p : (double)p * (double)(k - i) / (double)(j - i);
        i = j;
    }
    free(s);
    return pos ? kept / (double)pos : 0;
}

int select_epoch_ranking(const EvalResult *r, int n) {
    int sel = 0;
    for (int e = 1; e < n; e++)
        if (r[e].tree_recall_at_e2_theta > r[sel].tree_recall_at_e2_theta) sel = e;
    return sel;
}
