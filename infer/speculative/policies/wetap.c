/* WETAP (the WETAP paper, §3.2): a token tree whose layer widths follow the
 * entropy of the layer above, pruned to a budget by a score mixing
 * probability and depth.
 *
 * Construction (§3.2.1, Algorithm 1 lines 5–16), L = wetap_depth layers:
 *   layer 1 = the root's top-Wmin tokens;
 *   for t = 1 … L−1: the joint probabilities P of layer t's n_t nodes are
 *   normalised to p' (eq. 3), H_t = −Σ p' log p' (eq. 4),
 *   H_norm = min(1, max(0, H_t / log n_t)) (eq. 6) and
 *   W_{t+1} = round(Wmin + (Wmax − Wmin)·H_norm^γ) (eq. 5); every node of
 *   layer t is expanded and layer t+1 = the W_{t+1} children of highest
 *   joint probability among all of them (eqs. 1–2: the layer maximising
 *   the sum of cumulative probabilities).
 * Pruning (§3.2.2), when the pool holds more than B = wetap_budget nodes:
 *   Score = α·p_norm + (1 − α)·d/L with p_norm = (P − Pmin)/(Pmax − Pmin + ε)
 *   over the pool (eqs. 7–8); keep the B best; re-add their omitted
 *   ancestors; then trim back to B: first leaves from shallow to deep
 *   layers, then the leaves of lowest probability.
 * Verification is the loop's standard one, lossless.  WETAP's beam-level
 * acceptance (§3.3, eq. 9, accept if Π p/q ≥ τ, deepest layer first) is
 * not lossless and is deliberately not implemented.
 *
 * Where the paper is ambiguous, and what is chosen here:
 *  1. "p(x_i) the original probability" in eq. 3: we normalise the nodes'
 *     joint (cumulative) probabilities — layers are selected by them and
 *     §3.1.2 reasons about which parents "grow" the next layer's tokens,
 *     which the joint probability decides.
 *  2. log W_t in eq. 6 uses the layer's actual node count n_t (less than
 *     W_t when fewer candidates exist); n_t = 1 gives H_norm = 0.
 *  3. W_{t+1} is real: rounded half up, kept in [Wmin, Wmax].
 *  4. PolicyCandidates per node: Appendix B.3's top-K = 10 / top-P = 0.9 are the
 *     sampling processors of their stochastic runs; for the exact top-W
 *     selection of eqs. 1–2 each node is asked for W_{t+1} children (one
 *     parent may supply the whole layer).  Tokens the draft gives with
 *     probability 0 (or beyond the vocabulary) are never candidates.  Ties
 *     in selection: earlier parent, then lower rank.
 *  5. Score: Algorithm 1 line 21 uses the raw q_i, §3.2.2 the normalised
 *     p_norm — we use p_norm of the joint probability (eq. 7; "the
 *     probability of a token in deep layers will be multiplied cumulatively
 *     to be very small"), min/max over the whole pool without the root,
 *     ε = 1e-6.  The text calls α "a predefined weight coefficient of
 *     length" but eq. 8 puts α on the probability; we follow eq. 8.  D is
 *     the configured length L (Alg. 1 line 21: i/L).  Score ties: shallower
 *     first, then tree order.
 *  6. The budget B counts draft tokens, the root excluded ("size of the
 *     token tree as 64", like eagle2's total); a pool of ≤ B nodes is kept
 *     whole (Alg. 1 line 19).
 *  7. Trimming after re-adding parents: "first prune the leaf tokens from
 *     shallow to deep layers, then tokens with lowest probabilities".
 *     Appendix D removes one shallow leaf (token 12) in stage 1 and then
 *     two deepest-layer tokens (15, 16) by probability, so stage 1 cannot
 *     include the deepest layer's leaves.  Stage 1: the leaves of the
 *     re-added tree that lie above its deepest layer, taken once (a parent
 *     left childless by stage 1 is not itself a stage-1 leaf), removed
 *     shallowest first (ties: lower P, then later node) until the budget
 *     is met.  Stage 2: repeatedly remove the leaf of lowest joint
 *     probability (ties: deeper, then later node) — always a leaf, so the
 *     tree stays connected; a lowest-P node always has a lowest-P leaf
 *     below it since P never grows along a path.
 *  8. The beam-level verification and the paper's temperature-1 sampling
 *     setting are outside this policy; at temperature 0 the loop's greedy
 *     verification gives exactly the ar tokens.
 */
#include "infer/speculative/cycle.h"
#include "infer/speculative/policy.h"
#include "kernels/base/util.h"
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define WETAP_EPS 1e-6


/* WETAP's own parameters (--param KEY=VALUE).  Defaults from the paper:
 * length 8, tree size 64 (App. B.3), width range [16, 128] (§4.4.1),
 * γ = 1.2 (§4.4.2, best on MT-Bench), α = 0.6 (§4.4.3). */
typedef struct {
    int wetap_depth;              /* layers L of the tree before pruning */
    int wetap_wmin, wetap_wmax;   /* width range; layer 1 has wmin nodes */
    float wetap_gamma;            /* W_{t+1} = wmin + (wmax − wmin)·H_norm(t)^γ */
    float wetap_alpha;            /* pruning score α·p_norm + (1 − α)·d/L */
    int wetap_budget;             /* draft nodes kept by pruning, root excluded */
} WetapParams;

static const PolicyParamDef wetap_params[] = {
    POLICY_INT(WetapParams, wetap_depth, 8, 1, 64), POLICY_INT(WetapParams, wetap_wmin, 16, 1, 100000),
    POLICY_INT(WetapParams, wetap_wmax, 128, 1, 100000), POLICY_FLOAT(WetapParams, wetap_gamma, 1.2, 0, 100, 1),
    POLICY_FLOAT(WetapParams, wetap_alpha, 0.6, 0, 1, 0), POLICY_INT(WetapParams, wetap_budget, 64, 1, 100000),
};

typedef struct {
    Tree mirror;   /* the pool on the host (wetap_pool) */
} WetapState;

/* H_norm of the layer nodes[0..n): entropy of their normalised joint
 * probabilities over log n. */
static double layer_entropy_norm(const Tree *t, const int *nodes, int n) {
    if (n <= 1) return 0;
    double sum = 0, h = 0;
    for (int i = 0; i < n; i++) sum += t->P[nodes[i]];
    if (sum <= 0) return 0;
    for (int i = 0; i < n; i++) {
        double q = t->P[nodes[i]] / sum;
        if (q > 0) h -= q * log(q);
    }
    double hn = h / log((double)n);
    return hn < 0 ? 0 : hn > 1 ? 1 : hn;
}

/* Builds the unpruned pool of L layers in c's, layer by layer from the
 * host's choices on t, which mirrors it node for node (cycle_expand_read).
 * Layer 1 is the root's top-Wmin: every candidate, as W = Wmin keeps. */
static int wetap_pool(const WetapParams *q, int topm, Draft *d, Tree *t, DevCycle *c, StageTimes *tm) {
    const int L = q->wetap_depth, wmin = q->wetap_wmin, wmax = q->wetap_wmax;
    const int vcap = d->Vd > 0 ? d->Vd : INT_MAX;
    int *cur = xcalloc(1, sizeof(int)), ncur = 1, rc = 0;
    for (int layer = 0; layer < L && ncur > 0 && !rc; layer++) {
        int w = wmin;
        if (layer > 0) {
            double hn = layer_entropy_norm(t, cur, ncur);
            w = policy_round_half_up(wmin + (wmax - wmin) * pow(hn, q->wetap_gamma));
            if (w < wmin) w = wmin;
            if (w > wmax) w = wmax;
        }
        const int K = w < vcap ? w : vcap;
        int *ids = xmalloc(sizeof(int) * ncur * K);
        float *probs = xmalloc(sizeof(float) * ncur * K), *ents = xmalloc(sizeof(float) * ncur);
        PolicyCand *cand = xmalloc(sizeof(PolicyCand) * ncur * K);
        rc = cycle_expand_read(c, d, cur, ncur, K, topm, ids, probs, ents, tm);
        int nc = 0;
        for (int i = 0; i < ncur && !rc; i++)
            for (int r = 0; r < K; r++) {
                const int j = i * K + r;
                if (ids[j] >= 0 && probs[j] > 0) cand[nc++] = (PolicyCand){t->P[cur[i]] * probs[j], i, r};
            }
        nc = rc ? 0 : policy_keep_top_P(cand, nc, w);
        int *next = xmalloc(sizeof(int) * (nc ? nc : 1));
        for (int k = 0; k < nc; k++) {
            const int j = cand[k].row * K + cand[k].rank;
            next[k] = tree_add(t, cur[cand[k].row], ids[j], probs[j], ents[cand[k].row], cand[k].rank);
        }
        cycle_grow_cands(c, d, cand, nc, K);
        free(cur);
        cur = next;
        ncur = nc;
        free(ids); free(probs); free(ents); free(cand);
    }
    free(cur);
    return rc;
}

/* qsort_r context: the pool and its nodes' pruning scores */
typedef struct { const Tree *t; const double *score; } ScoredTree;

/* Higher score first; ties: shallower, then earlier. */
static int by_score(const void *a, const void *b, void *ctx) {
    int x = *(const int *)a, y = *(const int *)b;
    const ScoredTree *s = ctx;
    if (s->score[x] != s->score[y]) return s->score[x] > s->score[y] ? -1 : 1;
    if (s->t->depth[x] != s->t->depth[y]) return s->t->depth[x] - s->t->depth[y];
    return x - y;
}
/* Stage 1 order: shallower first; ties: lower P, then later. */
static int by_depth_then_P(const void *a, const void *b, void *ctx) {
    int x = *(const int *)a, y = *(const int *)b;
    const Tree *t = ((const ScoredTree *)ctx)->t;
    if (t->depth[x] != t->depth[y]) return t->depth[x] - t->depth[y];
    if (t->P[x] != t->P[y]) return t->P[x] < t->P[y] ? -1 : 1;
    return y - x;
}

/* The nodes of the pool in t that pruning to wetap_budget nodes (root
 * excluded) keeps, ascending, into keep (t->n of them); returns how many. */
static int wetap_prune_keep(const Tree *t, const WetapParams *q, int *keep) {
    const int n = t->n - 1, B = q->wetap_budget, L = q->wetap_depth;
    if (n <= B) return t->n;
    double pmin = INFINITY, pmax = -INFINITY;
    for (int i = 1; i < t->n; i++) {
        if (t->P[i] < pmin) pmin = t->P[i];
        if (t->P[i] > pmax) pmax = t->P[i];
    }
    double *score = xmalloc(sizeof(double) * t->n);
    const double a = q->wetap_alpha;
    score[0] = INFINITY;
    for (int i = 1; i < t->n; i++)
        score[i] = a * (t->P[i] - pmin) / (pmax - pmin + WETAP_EPS) + (1 - a) * (double)t->depth[i] / L;
    int *order = xmalloc(sizeof(int) * n);
    for (int i = 0; i < n; i++) order[i] = i + 1;
    ScoredTree st = {t, score};
    qsort_r(order, n, sizeof(int), by_score, &st);
    /* the B best, then their omitted ancestors */
    char *in = xcalloc(t->n, 1);
    in[0] = 1;
    for (int i = 0; i < B; i++)
        for (int v = order[i]; v > 0 && !in[v]; v = t->parent[v]) in[v] = 1;
    int count = 0, maxd = 0;
    for (int i = 1; i < t->n; i++)
        if (in[i]) { count++; if (t->depth[i] > maxd) maxd = t->depth[i]; }
    int *children = xcalloc(t->n, sizeof(int));   /* kept children per node */
    for (int i = 1; i < t->n; i++) if (in[i]) children[t->parent[i]]++;
    /* stage 1: the leaves above the deepest layer, shallow to deep */
    int nl = 0;
    for (int i = 1; i < t->n; i++) if (in[i] && !children[i] && t->depth[i] < maxd) order[nl++] = i;
    qsort_r(order, nl, sizeof(int), by_depth_then_P, &st);
    for (int i = 0; i < nl && count > B; i++) {
        in[order[i]] = 0;
        children[t->parent[order[i]]]--;
        count--;
    }
    /* stage 2: the leaf of lowest joint probability (ties: deeper, later) */
    while (count > B) {
        int worst = -1;
        for (int i = 1; i < t->n; i++) {
            if (!in[i] || children[i]) continue;
            if (worst < 0 || t->P[i] < t->P[worst] ||
                (t->P[i] == t->P[worst] && t->depth[i] >= t->depth[worst]))
                worst = i;
        }
        in[worst] = 0;
        children[t->parent[worst]]--;
        count--;
    }
    int m = 0;
    for (int i = 0; i < t->n; i++) if (in[i]) keep[m++] = i;
    free(score); free(order); free(in); free(children);
    return m;
}

/* The pool by the host's choices on a mirror of it (whose root's token
 * stays on the device: no choice reads it), pruned by the choice made
 * there. */
static int wetap_build(Policy *p, Draft *d, DevCycle *c, StageTimes *tm) {
    WetapState *s = p->state;
    tree_reset(&s->mirror, -1);
    if (wetap_pool(p->own, p->prm.topm, d, &s->mirror, c, tm)) return -1;
    int *keep = xmalloc(sizeof(int) * s->mirror.n);
    cycle_keep_nodes(c, keep, wetap_prune_keep(&s->mirror, p->own, keep));
    free(keep);
    return 0;
}

static void wetap_destroy(Policy *p) {
    WetapState *s = p->state;
    tree_free(&s->mirror);
    free(s);
}

static int wetap_init(Policy *p) {
    const WetapParams *q = p->own;
    if (q->wetap_depth < 1 || q->wetap_budget < 1) {
        err_set("wetap: wetap_depth and wetap_budget must be at least 1");
        return -1;
    }
    if (q->wetap_wmin < 1 || q->wetap_wmin > q->wetap_wmax) {
        err_set("wetap: need 1 <= wetap_wmin <= wetap_wmax (got %d, %d)", q->wetap_wmin, q->wetap_wmax);
        return -1;
    }
    if (!(q->wetap_gamma > 0) || !(q->wetap_alpha >= 0 && q->wetap_alpha <= 1)) {
        err_set("wetap: need wetap_gamma > 0 and wetap_alpha in [0, 1]");
        return -1;
    }
    WetapState *s = xcalloc(1, sizeof *s);
    tree_init(&s->mirror);
    p->state = s;
    p->build = wetap_build;
    p->destroy = wetap_destroy;
    return 0;
}

/* The pool before pruning: the device program grows it whole. */
static int wetap_max_nodes(const Policy *p) {
    const WetapParams *q = p->own;
    return 1 + q->wetap_wmin + (q->wetap_depth - 1) * q->wetap_wmax;
}

const PolicyClass policy_wetap = {"wetap", wetap_init, wetap_max_nodes, POLICY_PARAMS(wetap_params, WetapParams)};
