/* Verification: which path of a drafted tree the target accepts, greedily
 * (the target's argmax at every node) or by sampling (EAGLE's rule for
 * deterministic candidates), and the sampling processors both share. */
#include "infer/speculative/verify.h"
#include "kernels/base/util.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

void sample_probs(const float *logits, int vocab, const SampleParams *sp, float *probs) {
    float mx = -INFINITY;
    for (int j = 0; j < vocab; j++) if (logits[j] > mx) mx = logits[j];
    float kth = -INFINITY;   /* top-k: keep logits >= the k-th largest */
    if (sp->top_k > 0 && sp->top_k < vocab) {
        float *tmp = xmalloc(sizeof(float) * vocab);
        memcpy(tmp, logits, sizeof(float) * vocab);
        for (int i = 0; i < sp->top_k; i++) {   /* partial selection; k is small */
            int best = i;
            for (int j = i + 1; j < vocab; j++) if (tmp[j] > tmp[best]) best = j;
            float t = tmp[i]; tmp[i] = tmp[best]; tmp[best] = t;
        }
        kth = tmp[sp->top_k - 1];
        free(tmp);
    }
    double sum = 0;
    for (int j = 0; j < vocab; j++) {
        probs[j] = logits[j] >= kth ? expf((logits[j] - mx) / sp->temperature) : 0.0f;
        sum += probs[j];
    }
    for (int j = 0; j < vocab; j++) probs[j] = (float)(probs[j] / sum);
    if (sp->top_p > 0 && sp->top_p < 1) {
        /* keep the smallest set of most probable tokens whose mass reaches
         * top_p (the token crossing the threshold is kept) */
        int *idx = xmalloc(sizeof(int) * vocab), n = 0;
        for (int j = 0; j < vocab; j++) if (probs[j] > 0) idx[n++] = j;
        for (int i = 1; i < n; i++) {   /* insertion sort by prob, descending */
            int v = idx[i], k = i;
            while (k > 0 && probs[idx[k - 1]] < probs[v]) { idx[k] = idx[k - 1]; k--; }
            idx[k] = v;
        }
        double cum = 0;
        int keep = n;
        for (int i = 0; i < n; i++) { cum += probs[idx[i]]; if (cum >= sp->top_p) { keep = i + 1; break; } }
        double kept = 0;
        for (int i = keep; i < n; i++) probs[idx[i]] = 0;
        for (int i = 0; i < keep; i++) kept += probs[idx[i]];
        for (int i = 0; i < keep; i++) probs[idx[i]] = (float)(probs[idx[i]] / kept);
        free(idx);
    }
}

int sample_from(const float *p, int vocab, Rng *rng) {
    double u = rng_uniform(rng), c = 0;
    int last = 0;
    for (int j = 0; j < vocab; j++) {
        if (p[j] <= 0) continue;
        c += p[j];
        last = j;
        if (u < c) return j;
    }
    return last;
}

/* Greedy verification: from the root follow the child whose token is the
 * target's argmax.  Returns the path length (root included); *bonus is the
 * target's token after the path. */
int verify_greedy(const Tree *t, const Backend *be, int V, NodeLogits lg, int *path, int *bonus) {
    int len = 0, cur = 0, want;
    path[len++] = 0;
    for (;;) {
        int next = -1;
        const float *logits = lg.of(lg.ctx, cur);
        if (!logits) return -1;
        be->argmax(logits, 1, V, &want);
        for (int c = cur + 1; c < t->n && next < 0; c++)
            if (t->parent[c] == cur && t->token[c] == want) next = c;
        if (next < 0) break;
        path[len++] = cur = next;
    }
    *bonus = want;
    return len;
}

/* Sampling verification for deterministic candidates (EAGLE's rule): at
 * each node try the children in rank order; child x is accepted with the
 * current residual target probability of x, otherwise x's mass is removed
 * and the rest renormalised.  If no child is accepted the bonus token is
 * drawn from the residual.  This emits exactly the target's distribution. */
int verify_sample(const Tree *t, const Backend *be, int V, NodeLogits lg, const SampleParams *sp, Rng *rng,
                  float *row, int *path, int *bonus) {
    float *p = xmalloc(sizeof(float) * V);
    int len = 0, cur = 0;
    path[len++] = 0;
    for (;;) {
        const float *logits = lg.of(lg.ctx, cur);
        if (!logits) { free(p); return -1; }
        be->to_host(row, logits, V);
        sample_probs(row, V, sp, p);
        int next = -1;
        for (int c = cur + 1; c < t->n && next < 0; c++) {
            if (t->parent[c] != cur) continue;
            int x = t->token[c];
            if (p[x] <= 0) continue;   /* already tried (duplicate token) or impossible */
            if (rng_uniform(rng) < p[x]) { next = c; break; }
            double rest = 1.0 - p[x];
            p[x] = 0;
            if (rest <= 0) break;
            for (int j = 0; j < V; j++) p[j] = (float)(p[j] / rest);
        }
        if (next < 0) { *bonus = sample_from(p, V, rng); break; }
        path[len++] = cur = next;
    }
    free(p);
    return len;
}
