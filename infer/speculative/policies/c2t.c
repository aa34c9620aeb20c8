/* C2T (the C2T paper, §4.2 and Algorithm 1): the tree is built layer by layer and
 * pruned while it grows by a classifier over node features (the paper's
 * P, H, d by default; the weights file names them).
 *
 * Each layer: the draft expands the frontier; every expanded node's top-K
 * children become candidates with the known features of classifier.h: P
 * (joint probability), H (the top-M entropy of the distribution they were
 * drawn from, eq. 7), depth (root's children 1), p (their own
 * probability), rank (j among the K), parent_H (the expanded node's H; for
 * the root, which has none, the candidate's own H, as spec-train reads
 * traces); the classifier scores all candidates of the layer in
 * one call; candidates with confidence C < β are dropped (first pruning);
 * every candidate that passed joins the tree; the K passing candidates of
 * highest confidence form the next frontier (second pruning).  Building stops
 * at depth d_max or when no candidate passes.  Children exist only under
 * expanded nodes, so no node is ever kept without its parent.
 *
 * A cap on the tree (`total`, not in the paper; default all): the nodes are
 * ranked by the smallest confidence on their path from the root (ties: the
 * earlier node), an order closed under parents, and the first `total` are
 * verified.  total auto keeps, each cycle, the prefix of that order that
 * maximises expected tokens per second under the decoder's measured costs
 * (cost.h), each node's acceptance estimated by its joint probability P (the
 * confidence is trained on sampled negatives, so it overstates acceptance),
 * expands only the frontier nodes whose P reaches the price of a verified
 * token, and stops growing layers once no further layer can pay for its
 * draft step. */
#include "infer/speculative/classifier.h"
#include "infer/speculative/cycle.h"
#include "infer/speculative/policy.h"
#include "kernels/base/util.h"
#include <stdlib.h>
#include <string.h>

/* C2T's settings (--topk, --depth, --classifier, --beta); defaults: the
 * C2T paper's §5.1, d_max = EAGLE-2's depth + 2.  program: the device
 * cycle's program (policy_program_fixed; the same tree either way):
 * "layers" reads each layer's count of passing nodes and stops where the
 * tree dies; "fixed" expands topk rows every layer, dead ones too, all
 * d_max layers, and reads once. */
typedef struct {
    int topk;              /* children per expanded node */
    int depth;             /* d_max, the maximum node depth */
    char classifier[512];  /* weights spec-train wrote (required) */
    float beta;            /* confidence threshold */
    int total;             /* nodes kept, root excluded: -1 all, or POLICY_SIZE_AUTO */
    char program[8];       /* auto | layers | fixed */
} C2TParams;

static const PolicyParamDef c2t_params[] = {
    POLICY_INT(C2TParams, topk, 10, 1, 1000), POLICY_INT(C2TParams, depth, 8, 1, 250),
    POLICY_TEXT(C2TParams, classifier, ""), POLICY_FLOAT(C2TParams, beta, 0.5, 0, 1, 0),
    POLICY_INT_OR_ALL(C2TParams, total, -1, 1, 1000000), POLICY_TEXT(C2TParams, program, "auto"),
};

typedef struct {
    Classifier *cls;
    int cap;
    int *ids, *cand_parent, *order, *frontier;
    float *probs, *ent, *conf;
    PolicyCand *cand;      /* a layer's passing candidates (total auto) */
    ClsNode *node;         /* per candidate: its features */
    int node_cap;
    float *path_conf;      /* per tree node: the smallest confidence from the root to it */
    float *est;            /* per kept candidate of the cap: its P, in rank order */
    int *rank;             /* tree nodes in the cap's order */
    Tree scratch;
    Tree mirror;           /* total auto's program: its pool on the host */
    DevScores dev;         /* the fixed-total programs' classifier and scores */
} C2TState;

static void c2t_reserve_nodes(C2TState *s, int n) {
    if (n <= s->node_cap) return;
    s->node_cap = n;
    s->path_conf = xrealloc(s->path_conf, sizeof(float) * n);
    s->est = xrealloc(s->est, sizeof(float) * n);
    s->rank = xrealloc(s->rank, sizeof(int) * n);
}

static void c2t_reserve(C2TState *s, int n) {
    if (n <= s->cap) return;
    s->cap = n;
    s->ids = xrealloc(s->ids, sizeof(int) * n);
    s->cand_parent = xrealloc(s->cand_parent, sizeof(int) * n);
    s->order = xrealloc(s->order, sizeof(int) * n);
    s->frontier = xrealloc(s->frontier, sizeof(int) * n);
    s->probs = xrealloc(s->probs, sizeof(float) * n);
    s->ent = xrealloc(s->ent, sizeof(float) * n);
    s->node = xrealloc(s->node, sizeof(ClsNode) * n);
    s->conf = xrealloc(s->conf, sizeof(float) * n);
    s->cand = xrealloc(s->cand, sizeof(PolicyCand) * n);
}

static int cmp_node(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* qsort_r order over candidates: higher confidence first, then earlier */
static int by_conf(const void *a, const void *b, void *confidence) {
    int x = *(const int *)a, y = *(const int *)b;
    const float *conf = confidence;
    if (conf[x] != conf[y]) return conf[x] > conf[y] ? -1 : 1;
    return x - y;
}

/* qsort_r order over tree nodes: higher path confidence first, then earlier
 * (a parent's is at least its child's and the parent is earlier, so every
 * prefix is closed under parents) */
static int by_path_conf(const void *a, const void *b, void *path_conf) {
    int x = *(const int *)a, y = *(const int *)b;
    const float *c = path_conf;
    if (c[x] != c[y]) return c[x] > c[y] ? -1 : 1;
    return x - y;
}

/* The tree's nodes but the root in the cap's order into s->rank, their
 * acceptance estimates under cost (cost_estimate) into s->est; returns how
 * many. */
static int c2t_rank_nodes(const Tree *t, C2TState *s, const CostModel *cost) {
    const int n = t->n - 1;
    for (int i = 0; i < n; i++) s->rank[i] = i + 1;
    qsort_r(s->rank, n, sizeof(int), by_path_conf, s->path_conf);
    for (int i = 0; i < n; i++) s->est[i] = cost_estimate(cost, t->P[s->rank[i]], t->depth[s->rank[i]]);
    return n;
}

/* Whether growing the frontier's children can pay under cost (their P sum
 * to at most the frontier's). */
static int c2t_layer_pays(const Tree *t, C2TState *s, int nf, const CostModel *cost, int expands) {
    const int n = c2t_rank_nodes(t, s, cost);
    double bound = 0;
    for (int i = 0; i < nf; i++) bound += cost_estimate(cost, t->P[s->frontier[i]], t->depth[s->frontier[i]] + 1);
    return cost_layer_pays(cost, s->est, n, expands, bound);
}

/* Keeps the root and the first `total` nodes of the cap's order (auto: the
 * prefix cost_best_prefix picks for drafting that took draft_s), in c's
 * pool and in t, its mirror. */
static void c2t_cap(Tree *t, C2TState *s, int total, CostModel *cost, double draft_s, DevCycle *c) {
    const int n = c2t_rank_nodes(t, s, cost);
    if (total == POLICY_SIZE_AUTO) total = cost_best_prefix(cost, s->est, n, draft_s);
    if (total < 0 || total >= n) return;
    int *kept = xmalloc(sizeof(int) * (total + 1));   /* the root, then the kept nodes */
    kept[0] = 0;
    memcpy(kept + 1, s->rank, sizeof(int) * total);
    qsort(kept, total + 1, sizeof(int), cmp_node);
    cycle_keep_nodes(c, kept, total + 1);
    tree_subset(t, kept, total + 1, &s->scratch);
    Tree tmp = *t;
    *t = s->scratch;
    s->scratch = tmp;
    free(kept);
}

/* Algorithm 1 in c's pool from the host's choices on t, which mirrors it
 * node for node (cycle_expand_read): total auto's program. */
static int c2t_build_tree(Draft *d, Tree *t, DevCycle *c, const Classifier *cls, int K, int dmax, float beta,
                          int topm, StageTimes *tm, C2TState *s, CostModel *cost) {
    c2t_reserve(s, K * K > K ? K * K : K);
    c2t_reserve_nodes(s, 1);
    s->path_conf[0] = 2;   /* above every confidence */
    int nf = 1, expands = 0;
    s->frontier[0] = 0;
    const double t_start = now_seconds();
    for (int depth = 1; depth <= dmax && nf > 0; depth++) {
        /* auto: only frontier nodes whose P reaches a verified token's price (policy_front_worth) */
        if (cost && depth > 1 && (nf = policy_front_worth(t, s->frontier, nf, K, cost, expands, NULL)) == 0) break;
        if (cost && depth > 1 && !c2t_layer_pays(t, s, nf, cost, expands)) break;
        expands++;
        int nc = nf * K;
        c2t_reserve(s, nc);
        if (cycle_expand_read(c, d, s->frontier, nf, K, topm, s->ids, s->probs, s->ent, tm)) return -1;
        double t0 = now_seconds();
        for (int i = 0; i < nf; i++) {
            const int par = s->frontier[i];
            const float parent_H = par == 0 ? s->ent[i] : t->H[par];
            for (int j = 0; j < K; j++) {
                const int x = i * K + j;
                s->cand_parent[x] = par;
                s->node[x] = cls_node(t->P[par] * s->probs[x], s->ent[i], depth, s->probs[x], j, parent_H);
            }
        }
        double t1 = now_seconds();
        classifier_forward(cls, s->node, nc, s->conf);
        double t2 = now_seconds();
        /* first pruning: the threshold; passing nodes join the tree */
        int np = 0;
        c2t_reserve_nodes(s, t->n + nc);
        for (int x = 0; x < nc; x++) {
            if (s->conf[x] < beta || s->ids[x] < 0) continue;
            int node = tree_add(t, s->cand_parent[x], s->ids[x], s->probs[x], s->ent[x / K], x % K);
            const float up = s->path_conf[s->cand_parent[x]];
            s->path_conf[node] = s->conf[x] < up ? s->conf[x] : up;
            s->cand[np] = (PolicyCand){t->P[node], x / K, x % K};
            s->order[np] = x;
            s->ids[x] = node;    /* reuse: candidate -> tree node */
            np++;
        }
        cycle_grow_cands(c, d, s->cand, np, K);
        /* second pruning: the K most confident passing nodes expand next */
        qsort_r(s->order, np, sizeof(int), by_conf, s->conf);
        nf = np < K ? np : K;
        for (int i = 0; i < nf; i++) s->frontier[i] = s->ids[s->order[i]];
        /* expand in tree order so parents' rows come first */
        for (int i = 1; i < nf; i++)
            for (int j = i; j > 0 && s->frontier[j - 1] > s->frontier[j]; j--) {
                int tmp = s->frontier[j]; s->frontier[j] = s->frontier[j - 1]; s->frontier[j - 1] = tmp;
            }
        tm->features += t1 - t0 + (now_seconds() - t2);
        tm->classifier += t2 - t1;
    }
    if (cost) cost_observe_expand(cost, expands, now_seconds() - t_start);
    return expands;
}

/* total auto's program: the tree from the host's choices on t, a mirror
 * of c's pool, then the cap. */
static int c2t_grow(Policy *p, Draft *d, Tree *t, DevCycle *c, StageTimes *tm) {
    C2TState *s = p->state;
    const C2TParams *q = p->own;
    CostModel *cost = q->total == POLICY_SIZE_AUTO ? p->cost : NULL;
    const int expands = c2t_build_tree(d, t, c, s->cls, q->topk, q->depth, q->beta, p->prm.topm, tm, s, cost);
    if (expands < 0) return -1;
    if (q->total != -1) c2t_cap(t, s, q->total, cost, cost ? cost_draft_s(cost, expands) : 0, c);
    cycle_keys_from(c, t);
    return 0;
}

/* total auto's program: a read per layer (its expansion), the layer's
 * classifier, pruning and the cap on the host's mirror. */
static int c2t_build_auto(Policy *p, Draft *d, DevCycle *c, StageTimes *tm) {
    C2TState *s = p->state;
    tree_reset(&s->mirror, -1);   /* the root's token stays on the device: no choice reads it */
    return c2t_grow(p, d, &s->mirror, c, tm);
}

/* The programs at a fixed total (c2t_build_tree's tree without a cost
 * model, then the cap): each layer's children grown by tree_grow, scored
 * by tree_classify, thresholded by tree_pass; the next frontier is tree_top
 * by confidence over the layer (one layer shares a depth, so its ties go
 * to the earlier candidate, as by_conf's), the cap tree_top by path
 * confidence (the tree is in depth order, so shallower means earlier, as
 * by_path_conf's ties).
 *  - layers: the host reads each layer's count of passing nodes, the next
 *    layer grows after them, and the tree stops where none passes;
 *  - fixed: no read while it drafts.  Every layer after the first expands
 *    topk frontier rows, dead ones too, and grows their children at the
 *    layer's own place in the pool (so no layer needs the last one's
 *    count); tree_pass leaves a layer's failing nodes dead, below every
 *    confidence, so tree_top puts them last in the frontier and their
 *    children never pass; all d_max layers run, also where the tree died
 *    early.  Within a layer the live nodes keep the order the layers
 *    program gives them.  c2t_end_fixed reads the layers' counts once. */
static int c2t_program(Policy *p, Draft *d, DevCycle *c, StageTimes *tm, int fixed) {
    C2TState *s = p->state;
    const C2TParams *q = p->own;
    const int K = q->topk, topm = p->prm.topm;
    dev_scores_reserve(&s->dev, c, s->cls);
    int nf = 1;
    for (int depth = 1; depth <= q->depth && nf > 0; depth++) {
        if (cycle_expand(c, d, depth == 1, c->rows, nf, K, topm, 1, tm)) return -1;
        const int from = c->n, nc = nf * K;
        cycle_grow(c, d, depth == 1 ? c->iota : c->rows, K, NULL, nc, 1);
        const double t0 = now_seconds();
        cycle_op_classify(c, &c->pool, from, nc, &s->dev.net, s->dev.conf);
        const double t1 = now_seconds();
        int layer = nc;   /* the nodes the next frontier is picked from */
        if (fixed) {
            cycle_op_pass(c, &c->pool, from, nc, s->dev.conf, q->beta, s->dev.path_conf, s->dev.count + depth - 1);
        } else {
            layer = dev_scores_pass(&s->dev, c, from, nc, s->dev.conf, q->beta);
            c->n = c->n_verified = from + layer;
        }
        nf = fixed ? K : layer < K ? layer : K;
        if (nf > 0 && depth < q->depth) cycle_op_top(c, &c->pool, s->dev.conf, from, layer, K, c->rows);
        tm->classifier += t1 - t0;
        tm->features += now_seconds() - t1;
    }
    if (!fixed) cycle_keep_best(c, s->dev.path_conf, q->total);
    return 0;
}

static int c2t_build(Policy *p, Draft *d, DevCycle *c, StageTimes *tm) { return c2t_program(p, d, c, tm, 0); }
static int c2t_build_fixed(Policy *p, Draft *d, DevCycle *c, StageTimes *tm) {
    return c2t_program(p, d, c, tm, 1);
}

/* The fixed program's end: the live nodes counted (one read of every
 * layer's count), the cap's first `total` of them by path confidence, or
 * all (dead nodes rank below every live one), gathered by tree_compact. */
static int c2t_end_fixed(Policy *p, DevCycle *c, StageTimes *tm) {
    C2TState *s = p->state;
    const C2TParams *q = p->own;
    const double t0 = now_seconds();
    const int live = dev_scores_counts(&s->dev, c, q->depth);
    cycle_keep_best(c, s->dev.path_conf, q->total == -1 || q->total > live ? live : q->total);
    tm->features += now_seconds() - t0;
    return 0;
}

/* Which program runs on be (C2TParams.program), recorded in the settings
 * for the report. */
static void c2t_program_for(Policy *p, const Backend *be) {
    C2TParams *q = p->own;
    const int fixed = policy_program_fixed(q->program, sizeof q->program, be);
    p->build = fixed ? c2t_build_fixed : c2t_build;
    p->build_end = fixed ? c2t_end_fixed : NULL;
    p->build_unit = fixed;
}

static void c2t_destroy(Policy *p) {
    C2TState *s = p->state;
    classifier_free(s->cls);
    free(s->ids); free(s->cand_parent); free(s->order); free(s->frontier);
    free(s->probs); free(s->ent); free(s->node); free(s->conf); free(s->cand);
    free(s->path_conf); free(s->est); free(s->rank);
    tree_free(&s->scratch);
    tree_free(&s->mirror);
    dev_scores_release(&s->dev);
    free(s);
}

static int c2t_init(Policy *p) {
    const C2TParams *q = p->own;
    if (!q->classifier[0]) { err_set("c2t: --classifier WEIGHTS.json is required: spec-train writes one from this target's "
                                            "traces (data/demo/classifier.json is the demo family's)"); return -1; }
    if (policy_program_valid("c2t", q->program)) return -1;
    C2TState *s = xcalloc(1, sizeof *s);
    s->cls = classifier_load(q->classifier);
    if (!s->cls) { free(s); return -1; }
    tree_init(&s->scratch);
    tree_init(&s->mirror);
    p->state = s;
    p->wants_cost = q->total == POLICY_SIZE_AUTO;
    p->build = p->wants_cost ? c2t_build_auto : c2t_build;
    if (!p->wants_cost) p->program_for = c2t_program_for;   /* auto: the one program above */
    p->destroy = c2t_destroy;
    return 0;
}

static int c2t_max_nodes(const Policy *p) {
    const C2TParams *q = p->own;
    return 1 + q->depth * q->topk * q->topk;
}

const PolicyClass policy_c2t = {"c2t", c2t_init, c2t_max_nodes, POLICY_PARAMS(c2t_params, C2TParams)};
