/* EAGLE-2 dynamic draft trees (the EAGLE-2 paper, Li et al. 2024): expand, then rerank.
 *
 * Layer 1 is the root's top-k.  Each of `depth` expansion steps feeds the k
 * nodes of highest joint probability P of the newest layer to the draft and
 * adds all their top-k children (k² nodes) to the pool, so the pool holds
 * 1 + k + depth·k² nodes and its deepest nodes have depth depth+1.  Rerank
 * keeps the `total` nodes of highest P (ties to the shallower, then to the
 * earlier node); since P never grows along a path, that set is closed under
 * parents, i.e. a connected tree.  min_p > 0 keeps, of those, only the
 * nodes with P >= min_p (one threshold for every tree: many nodes where
 * the draft is sure, few where it is not; still closed under parents).
 * total = -1 keeps the whole pool; total =
 * auto keeps, each cycle, the prefix of that order that maximises expected
 * tokens per second under the decoder's measured costs (cost.h), each node's
 * acceptance estimated by its P, expands only the frontier nodes whose P
 * reaches the price of a verified token (cost_node_price: cheaper children
 * could never be kept) and stops expanding (before `depth`) once no further
 * layer can pay for its draft step.  Its programs (program): layers, the
 * choices made on a host mirror of the device pool (a read per expansion);
 * fixed, the whole pool and one read of its keys. */
#include "infer/speculative/cycle.h"
#include "infer/speculative/policy.h"
#include "kernels/base/util.h"
#include <stdlib.h>
#include <string.h>

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* The k nodes of highest P among nodes[0..n), in that order, into sel. */
static int top_by_P(const Tree *t, const int *nodes, int n, int k, int *sel) {
    int *tmp = xmalloc(sizeof(int) * n);
    memcpy(tmp, nodes, sizeof(int) * n);
    qsort_r(tmp, n, sizeof(int), policy_by_joint_prob, (void *)t);
    int m = n < k ? n : k;
    memcpy(sel, tmp, sizeof(int) * m);
    qsort(sel, m, sizeof(int), cmp_int);   /* expand in tree order */
    free(tmp);
    return m;
}

/* Builds the pool in c's (no rerank) from the host's choices on t, which
 * mirrors it node for node: all `depth` steps, or with a cost model (total
 * auto) until a further layer cannot pay.
 * Returns -1 on a draft failure, else the expansion steps run (the root's
 * included). */
static int eagle2_expand_pool(Draft *d, Tree *t, DevCycle *c, int k, int depth, int topm, int want_entropy,
                              StageTimes *tm, CostModel *cost) {
    int *ids = xmalloc(sizeof(int) * k * k), *sel = xmalloc(sizeof(int) * k);
    float *probs = xmalloc(sizeof(float) * k * k), *ent = xcalloc(k, sizeof(float));
    PolicyCand *cand = xmalloc(sizeof(PolicyCand) * k * k);   /* every child, in order */
    for (int i = 0; i < k * k; i++) cand[i] = (PolicyCand){0, i / k, i % k};
    /* the entropy is a feature for traces and classifiers; plain EAGLE-2
     * does not need it (want_entropy 0 leaves H at 0) */
    float *want = want_entropy ? ent : NULL;
    int *newest = xmalloc(sizeof(int) * k * k), n_newest = 0, root = 0, rc, expands = 1;
    const double t0 = now_seconds();
    rc = cycle_expand_read(c, d, &root, 1, k, topm, ids, probs, want, tm);
    for (int j = 0; j < k && !rc; j++) newest[n_newest++] = tree_add(t, 0, ids[j], probs[j], ent[0], j);
    if (!rc) cycle_grow_cands(c, d, cand, k, k);
    for (int step = 0; step < depth && !rc; step++) {
        int m = top_by_P(t, newest, n_newest, k, sel), pays = 1;
        if (cost) m = policy_front_worth(t, sel, m, k, cost, expands, &pays);
        if (!pays) break;
        rc = cycle_expand_read(c, d, sel, m, k, topm, ids, probs, want, tm);
        expands++;
        n_newest = 0;
        for (int i = 0; i < m && !rc; i++)
            for (int j = 0; j < k; j++)
                newest[n_newest++] = tree_add(t, sel[i], ids[i * k + j], probs[i * k + j], ent[i], j);
        if (!rc) cycle_grow_cands(c, d, cand, m * k, k);
    }
    if (cost && !rc) cost_observe_expand(cost, expands, now_seconds() - t0);
    free(ids); free(sel); free(probs); free(ent); free(newest); free(cand);
    return rc ? -1 : expands;
}

/* EAGLE-2's settings (--topk, --depth, --total); defaults: the EAGLE-2
 * paper's 7B setting. */
typedef struct {
    int topk;    /* children per expanded node */
    int depth;   /* expansion steps after the root's: nodes reach depth depth+1 */
    int total;   /* nodes kept by rerank, root excluded; -1 (all) keeps the pool */
    float min_p; /* of them, only those of joint probability >= min_p (0: no threshold) */
    char program[8];   /* total auto's device program: auto | layers | fixed (policy_program_fixed) */
} Eagle2Params;

static const PolicyParamDef eagle2_params[] = {
    POLICY_INT(Eagle2Params, topk, 10, 1, 1000), POLICY_INT(Eagle2Params, depth, 6, 0, 250),
    POLICY_INT_OR_ALL(Eagle2Params, total, 60, 1, 1000000), POLICY_FLOAT(Eagle2Params, min_p, 0, 0, 1, 0),
    POLICY_TEXT(Eagle2Params, program, "auto"),
};

typedef struct {
    Tree scratch;
    Tree mirror;        /* the layers program's pool on the host (total auto) */
    Tree keys;          /* the device pool's P and depths (total auto) */
    int *order, *keep;
    float *est;
    int cap;
} Eagle2State;

/* The layers program (eagle2_program_for, min_p): the tree grown in c's
 * pool from the host's choices on t, a mirror of it. */
static int eagle2_grow(Policy *p, Draft *d, Tree *t, DevCycle *c, StageTimes *tm) {
    Eagle2State *s = p->state;
    const Eagle2Params *q = p->own;
    CostModel *cost = q->total == POLICY_SIZE_AUTO ? p->cost : NULL;
    int expands = eagle2_expand_pool(d, t, c, q->topk, q->depth, p->prm.topm, p->prm.want_entropy, tm, cost);
    if (expands < 0) return -1;
    policy_rerank_by_P(t, q->total, q->min_p, &s->scratch, cost, cost ? cost_draft_s(cost, expands) : 0, c);
    cycle_keys_from(c, t);
    return 0;
}

/* total auto's program where reads are free (a CPU), and min_p's: it
 * prunes as it drafts, reading each expansion (cycle_expand_read). */
static int eagle2_build_layers(Policy *p, Draft *d, DevCycle *c, StageTimes *tm) {
    Eagle2State *s = p->state;
    tree_reset(&s->mirror, -1);   /* the root's token stays on the device: no choice reads it */
    return eagle2_grow(p, d, &s->mirror, c, tm);
}

/* The device program's pool: grown by tree_grow, each step's frontier
 * chosen by tree_top (the k best of the newest layer).  Every shape follows
 * from topk and depth. */
static int eagle2_build_pool(Policy *p, Draft *d, DevCycle *c, StageTimes *tm) {
    const Eagle2Params *q = p->own;
    const int k = q->topk, want = p->prm.want_entropy, topm = p->prm.topm;
    if (cycle_expand(c, d, 1, NULL, 1, k, topm, want, tm)) return -1;
    cycle_grow(c, d, c->iota, k, NULL, k, want);
    int newest = 1, n_newest = k;
    for (int step = 0; step < q->depth; step++) {
        const int m = n_newest < k ? n_newest : k;
        cycle_op_top(c, &c->pool, NULL, newest, n_newest, k, c->rows);
        if (cycle_expand(c, d, 0, c->rows, m, k, topm, want, tm)) return -1;
        newest = c->n;
        n_newest = m * k;
        cycle_grow(c, d, c->rows, k, NULL, n_newest, want);
    }
    return 0;
}

/* The program at a fixed total: the pool, then the rerank. */
static int eagle2_build(Policy *p, Draft *d, DevCycle *c, StageTimes *tm) {
    const Eagle2Params *q = p->own;
    if (eagle2_build_pool(p, d, c, tm)) return -1;
    cycle_keep_best(c, NULL, q->total);   /* tree_top's ties are policy_by_joint_prob's */
    return 0;
}

/* total auto's fixed program (a GPU): the whole pool is drafted (no frontier is cut
 * by price, so its shapes follow from topk and depth and the draft phase
 * reads nothing), then one read of the pool's P and depths, the host's
 * ranking and cost_best_prefix's prefix of it (the layers program's rule,
 * over the full pool), the rerank to that size on the device.  The phase's time
 * up to the read (which waits for it) is the cost model's expansion time. */
static int eagle2_end_auto(Policy *p, DevCycle *c, StageTimes *tm) {
    Eagle2State *s = p->state;
    const Eagle2Params *q = p->own;
    CostModel *cost = p->cost;
    const double t0 = now_seconds();
    cycle_read_keys(c, &s->keys);
    const int expands = q->depth + 1, n = c->n - 1;
    cost_observe_expand(cost, expands, now_seconds() - c->t_begin);
    if (n > s->cap) {
        s->cap = n;
        s->order = xrealloc(s->order, sizeof(int) * n);
        s->keep = xrealloc(s->keep, sizeof(int) * (n + 1));
        s->est = xrealloc(s->est, sizeof(float) * n);
    }
    policy_pool_estimates(&s->keys, cost, s->order, s->est);
    const int total = cost_best_prefix(cost, s->est, n, cost_draft_s(cost, expands));
    cycle_keep_best(c, NULL, total);
    /* the verified nodes' keys in tree order, for the acceptance the cost model learns */
    s->keep[0] = 0;
    memcpy(s->keep + 1, s->order, sizeof(int) * total);
    qsort(s->keep, total + 1, sizeof(int), cmp_int);
    tree_set_size(&c->keys, total + 1);
    for (int i = 0; i <= total; i++) {
        c->keys.P[i] = s->keys.P[s->keep[i]];
        c->keys.depth[i] = s->keys.depth[s->keep[i]];
    }
    tm->features += now_seconds() - t0;
    return 0;
}
static void eagle2_destroy(Policy *p) {
    Eagle2State *s = p->state;
    tree_free(&s->scratch);
    tree_free(&s->mirror);
    tree_free(&s->keys);
    free(s->order); free(s->keep); free(s->est);
    free(s);
}

/* total auto's program on be (Eagle2Params.program): layers (a read per
 * expansion, the pool pruned as it grows) or, where the
 * backend records units (a GPU) and no min_p prunes, fixed (the whole pool,
 * one read of its keys). */
static void eagle2_program_for(Policy *p, const Backend *be) {
    Eagle2Params *q = p->own;
    const int fixed = policy_program_fixed(q->program, sizeof q->program, be) && q->min_p <= 0;
    p->build = fixed ? eagle2_build_pool : eagle2_build_layers;
    p->build_end = fixed ? eagle2_end_auto : NULL;
    p->build_unit = fixed;
}

static int eagle2_init(Policy *p) {
    const Eagle2Params *q = p->own;
    if (policy_program_valid("eagle2", q->program)) return -1;
    Eagle2State *s = xcalloc(1, sizeof *s);
    tree_init(&s->scratch);
    tree_init(&s->mirror);
    tree_init(&s->keys);
    p->state = s;
    p->wants_cost = q->total == POLICY_SIZE_AUTO;
    /* fixed sizes without a threshold: the program's shapes follow from
     * topk and depth alone */
    if (p->wants_cost) {
        p->build = eagle2_build_layers;
        p->program_for = eagle2_program_for;
    } else if (q->min_p <= 0) {
        p->build = eagle2_build;
        p->build_unit = 1;
    } else {   /* min_p's threshold: the program that prunes on a mirror, reading each expansion */
        p->build = eagle2_build_layers;
    }
    p->destroy = eagle2_destroy;
    return 0;
}

static int eagle2_max_nodes(const Policy *p) {
    const Eagle2Params *q = p->own;
    return 1 + q->topk + q->depth * q->topk * q->topk;   /* the whole pool (spec-collect's total=all) */
}

const PolicyClass policy_eagle2 = {"eagle2", eagle2_init, eagle2_max_nodes, POLICY_PARAMS(eagle2_params, Eagle2Params)};
