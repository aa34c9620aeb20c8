/* Synthetic trace files for tests and benchmarks (a test fixture, not part
 * of the library; header-only, included by tests/test_train.c and
 * tests/bench_train.c), written through the
 * trace writer (collect/trace.h).  Trees are grown like EAGLE-2's complete
 * tree T1 (the paper's training data, App. C.1): topk children of the root,
 * then per layer the topk nodes of the previous layer by joint probability
 * get topk children each, until nodes_per_tree nodes.  A simulated target
 * model walks down the tree greedily; the nodes on its path are the
 * accepted ones.  Its choices follow the draft probabilities with the
 * paper's biases (over-confident top token at low entropy, under-confident
 * at high entropy, deeper = less likely), so P, H and d all carry signal.
 *
 * Only integer and IEEE basic arithmetic is used (own log), so a seed gives
 * the same trees, bit for bit, on every machine. */
#ifndef C2T_TESTS_SYNTH_H
#define C2T_TESTS_SYNTH_H
#include <stdint.h>

typedef struct {
    int64_t n_trees;
    int nodes_per_tree;      /* 1011 in the paper */
    int topk;                /* 10 in the paper */
    int trees_per_question;  /* trees between trace_finish_question calls */
    uint64_t seed;
    int compress;            /* TraceCompress */
    double nonfinite_rate;   /* share of trees with one NaN H (bad-input tests) */
    int no_positives;        /* label every node 0 (bad-input tests) */
    int progress;
    int fast;                /* trace_create_ex with durable = 0 (big bench files) */
} SynthOpts;


#include "collect/trace.h"
#include "kernels/base/util.h"
#include "kernels/base/rng.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SYN_MAXK 64
#define SYN_VOCAB_TOP 1000   /* entropy over the top-1000 probabilities (paper eq. 7) */

static void synth_defaults(SynthOpts *o) {
    memset(o, 0, sizeof *o);
    o->n_trees = 100;
    o->nodes_per_tree = 1011;
    o->topk = 10;
    o->trees_per_question = 20;
    o->seed = 1;
    o->compress = TRACE_ZSTD;
}

static double synth_log(double x) {
    int e;
    double m = frexp(x, &e);            /* x = m * 2^e, m in [0.5, 1); exact */
    double s = (m - 1) / (m + 1), s2 = s * s, term = s, sum = 0;
    for (int k = 0; k < 24; k++) { sum += term / (2 * k + 1); term *= s2; }
    return 2 * sum + e * 0.69314718055994530942;
}

/* One draft distribution: topk probabilities (descending) + its entropy. */
typedef struct { double p[SYN_MAXK]; double H, tail; } Dist;

static void draw_dist(Rng *r, int k, Dist *d) {
    double u = rng_uniform(r), v = rng_uniform(r);
    double ratio = 0.03 + 0.94 * u * u;           /* geometric decay between ranks */
    double tail = (0.02 + 0.55 * v) * ratio;      /* mass outside the topk: flatter -> more */
    double w = 1, tot = 0;
    for (int i = 0; i < k; i++) { d->p[i] = w; tot += w; w *= ratio; }
    double H = 0;
    for (int i = 0; i < k; i++) {
        d->p[i] = d->p[i] / tot * (1 - tail);
        if (d->p[i] > 0) H -= d->p[i] * synth_log(d->p[i]);
    }
    /* the tail spread evenly over the rest of the top-1000 */
    double each = tail / (SYN_VOCAB_TOP - k);
    if (each > 0) H -= tail * synth_log(each);
    d->H = H;
    d->tail = tail;
}

/* The target's choice among the children given the draft distribution:
 * index, or -1 when its token is not among them. */
static int target_choice(Rng *r, const Dist *d, int k, int depth) {
    double w[SYN_MAXK], tot = 0;
    double agree = 0.98 - 0.03 * depth;           /* deeper drafts agree less */
    if (agree < 0.3) agree = 0.3;
    for (int i = 0; i < k; i++) {
        double q = d->p[i];
        if (i == 0) {
            if (d->H < 1) q *= 0.82;               /* over-confident at low entropy */
            else if (d->H > 3) q *= 1.35;          /* under-confident at high entropy */
        }
        w[i] = q * agree;
        tot += w[i];
    }
    if (tot > 0.995) { for (int i = 0; i < k; i++) w[i] *= 0.995 / tot; }
    double u = rng_uniform(r), acc = 0;
    for (int i = 0; i < k; i++) { acc += w[i]; if (u < acc) return i; }
    return -1;
}

typedef struct { double P; int idx; } Cand;
static int cmp_cand(const void *a, const void *b) {
    const Cand *x = a, *y = b;
    if (x->P != y->P) return x->P > y->P ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int synth_trace_write(const char *path, const SynthOpts *o) {
    int K = o->topk, N = o->nodes_per_tree;
    if (K < 1 || K > SYN_MAXK || N < 1) { err_set("synth: bad topk/nodes_per_tree"); return -1; }
    TraceCreateOpts co = {0};
    co.durable = !o->fast;
    TraceWriter *w = trace_create_ex(path, (TraceCompress)o->compress, &co);
    if (!w) return -1;
    trace_set_attr_str(w, "generator", "spec-train synthetic (tests/synth.h)");
    trace_set_attr_num(w, "synth_seed", (double)o->seed);
    trace_set_attr_num(w, "topk", K);
    TraceNode *nodes = xcalloc(N, sizeof(TraceNode));
    Dist *dist = xcalloc(N + 1, sizeof(Dist));    /* children distribution of node i (root = N) */
    int *first_child = xmalloc(sizeof(int) * (N + 1));
    Cand *cand = xmalloc(sizeof(Cand) * (N + 1));
    int *layer = xmalloc(sizeof(int) * (N + 1));
    Progress pr;
    if (o->progress) progress_start(&pr, "writing synthetic trace (trees)", o->n_trees);
    int rc = 0, q = 0;
    for (int64_t t = 0; t < o->n_trees; t++) {
        Rng r;
        rng_seed_stream(&r, o->seed, RNG_STREAM_MISC, (uint64_t)t);
        int n = 0;
        for (int i = 0; i <= N; i++) first_child[i] = -1;
        /* root's children */
        draw_dist(&r, K, &dist[N]);
        first_child[N] = 0;
        for (int i = 0; i < K && n < N; i++, n++)
            nodes[n] = (TraceNode){(float)dist[N].p[i], (float)dist[N].H, (float)dist[N].p[i],
                                   (int32_t)rng_below(&r, 32000), -1, 1, 0, (uint8_t)i};
        int lay0 = 0, lay1 = n, depth = 1;
        while (n < N && lay1 > lay0) {
            /* expand the topk nodes of this layer by P */
            int m = 0;
            for (int i = lay0; i < lay1; i++) cand[m++] = (Cand){nodes[i].P, i};
            qsort(cand, m, sizeof(Cand), cmp_cand);
            int ex = m < K ? m : K;
            for (int e = 0; e < ex; e++) layer[e] = cand[e].idx;
            /* children in parent index order so parents precede children */
            for (int a = 0; a < ex; a++)
                for (int b = a + 1; b < ex; b++)
                    if (layer[b] < layer[a]) { int tmp = layer[a]; layer[a] = layer[b]; layer[b] = tmp; }
            int start = n;
            for (int e = 0; e < ex && n < N; e++) {
                int par = layer[e];
                draw_dist(&r, K, &dist[par]);
                first_child[par] = n;
                for (int i = 0; i < K && n < N; i++, n++) {
                    double P = (double)nodes[par].P * dist[par].p[i];
                    nodes[n] = (TraceNode){(float)P, (float)dist[par].H, (float)dist[par].p[i],
                                           (int32_t)rng_below(&r, 32000), par, (uint8_t)(depth + 1), 0, (uint8_t)i};
                }
            }
            lay0 = start; lay1 = n; depth++;
        }
        /* greedy verification walk */
        int acc = 0, cur = N, d = 1;
        while (first_child[cur] >= 0) {
            int c = target_choice(&r, &dist[cur], K, d);
            if (c < 0) break;
            int node = first_child[cur] + c;
            if (node >= n || nodes[node].parent != (cur == N ? -1 : cur)) break;   /* truncated layer */
            if (!o->no_positives) nodes[node].accepted = 1;
            acc++;
            cur = node; d++;
        }
        if (o->nonfinite_rate > 0 && rng_uniform(&r) < o->nonfinite_rate) nodes[rng_below(&r, n)].H = NAN;
        TraceTree tr = {0};
        tr.turn = 0;
        tr.cycle = (int32_t)(t % (o->trees_per_question > 0 ? o->trees_per_question : 1));
        tr.n_nodes = n;
        tr.accept_len = o->no_positives ? 0 : acc;
        if (trace_add_tree(w, &tr, nodes)) { rc = -1; break; }
        if (o->trees_per_question <= 0 || (t + 1) % o->trees_per_question == 0 || t + 1 == o->n_trees) {
            char qid[32];
            snprintf(qid, sizeof qid, "q%d", q++);
            if (trace_finish_question(w, "synthetic", qid)) { rc = -1; break; }
        }
        if (o->progress) progress_update(&pr, t + 1, NULL);
    }
    if (o->progress) progress_end(&pr, o->n_trees, NULL);
    if (trace_close(w) && rc == 0) rc = -1;
    free(nodes); free(dist); free(first_child); free(cand); free(layer);
    return rc;
}
#endif
