/* The simple policies: ar (no drafting), chain (vanilla speculative
 * decoding, optionally with C2T / DyMax / DyJoint early stopping), static (a fixed
 * tree of sibling-rank paths; EAGLE-1's default tree as preset "eagle1"). */
#include "infer/speculative/classifier.h"
#include "infer/speculative/cycle.h"
#include "infer/speculative/policy.h"
#include "kernels/base/util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- ar ---- */
static int ar_build(Policy *p, Draft *d, DevCycle *c, StageTimes *tm) {
    (void)p; (void)d; (void)c; (void)tm;
    return 0;   /* the root alone: the target decodes one token per cycle */
}
static int ar_init(Policy *p) {
    p->build = ar_build;
    p->needs_draft = 0;
    return 0;
}

/* ---- chain ---- */
/* The chain's settings (--draft-len, --early-stop, --threshold for DyMax and
 * DyJoint, --classifier and --beta for C2T's early stop; program: an early
 * stop's device program, policy_program_fixed).  draft_len auto:
 * each cycle drafts while one more token can pay for its draft step under
 * the decoder's measured costs (cost.h; a token's acceptance estimated by
 * its joint probability P), at most CHAIN_AUTO_MAX, and verifies the prefix
 * that maximises expected tokens per second. */
#define CHAIN_AUTO_MAX 32
typedef struct {
    int draft_len;         /* draft tokens per cycle, or POLICY_SIZE_AUTO */
    char early_stop[16];   /* none | c2t | dymax | dyjoint */
    float threshold;       /* dymax, dyjoint: stop below it */
    char classifier[512];  /* c2t: weights spec-train wrote */
    float beta;            /* c2t: stop when the confidence is below it */
    char program[8];       /* auto | layers | fixed */
} ChainParams;

static const PolicyParamDef chain_params[] = {
    POLICY_INT_OR_AUTO(ChainParams, draft_len, 5, 1, 256), POLICY_TEXT(ChainParams, early_stop, "none"),
    POLICY_FLOAT(ChainParams, threshold, 0.5, 0, 1, 0), POLICY_TEXT(ChainParams, classifier, ""),
    POLICY_FLOAT(ChainParams, beta, 0.5, 0, 1, 0), POLICY_TEXT(ChainParams, program, "auto"),
};

typedef enum { STOP_NONE, STOP_DYMAX, STOP_DYJOINT, STOP_C2T } ChainStop;

typedef struct {
    ChainStop stop;
    Classifier *cls;
    DevScores dev;   /* the device program's early stop */
    Tree mirror;     /* draft_len auto's program: its chain on the host */
} ChainState;

/* draft_len auto's program: the chain grown in c's pool from the host's
 * choices, t mirroring it node for node (cycle_expand_read). */
static int chain_grow(Policy *p, Draft *d, Tree *t, DevCycle *c, StageTimes *tm) {
    const ChainState *s = p->state;
    const ChainParams *q = p->own;
    int node = 0, id;
    float prob, ent = 0;
    /* the entropy only where the classifier reads it or the caller keeps
     * it (its top-M pass costs about as much as the softmax) */
    float *want_ent = s->stop == STOP_C2T || p->prm.want_entropy ? &ent : NULL;
    CostModel *cost = q->draft_len == POLICY_SIZE_AUTO ? p->cost : NULL;
    const int len = cost ? CHAIN_AUTO_MAX : q->draft_len;
    float est[CHAIN_AUTO_MAX];   /* with cost: the chain's tokens' acceptance estimates so far */
    const double t_start = now_seconds();
    int expands = 0;
    for (int i = 0; i < len; i++) {
        /* the next token's P is at most its parent's */
        if (cost && i > 0 && !cost_layer_pays(cost, est, i, expands, cost_estimate(cost, t->P[node], t->depth[node] + 1)))
            break;
        if (cycle_expand_read(c, d, &node, 1, 1, p->prm.topm, &id, &prob, want_ent, tm)) return -1;
        expands++;
        /* Early stopping (C2T paper, App. I / Table 7): DyMax when the
         * draft's top probability is low, DyJoint when the chain's joint
         * probability is, C2T when the classifier's confidence is < β. */
        float P = t->P[node] * prob;
        if (s->stop == STOP_DYMAX && prob < q->threshold) break;
        if (s->stop == STOP_DYJOINT && P < q->threshold) break;
        if (s->stop == STOP_C2T) {
            double t0 = now_seconds();
            /* the features of classifier.h: rank 0 (the top child);
             * parent_H is the chain node's H, or the candidate's own
             * entropy under the root */
            ClsNode x = cls_node(P, ent, t->depth[node] + 1, prob, 0, node == 0 ? ent : t->H[node]);
            float conf;
            classifier_forward(s->cls, &x, 1, &conf);
            tm->classifier += now_seconds() - t0;
            if (conf < q->beta) break;
        }
        node = tree_add(t, node, id, prob, ent, 0);
        cycle_grow_cands(c, d, &(PolicyCand){P, 0, 0}, 1, 1);
        if (cost) est[i] = cost_estimate(cost, t->P[node], t->depth[node]);
    }
    if (cost) {   /* a chain's prefix is its first nodes */
        cost_observe_expand(cost, expands, now_seconds() - t_start);
        t->n = 1 + cost_best_prefix(cost, est, t->n - 1, cost_draft_s(cost, expands));
    }
    c->n = c->n_verified = t->n;
    cycle_keys_from(c, t);
    return 0;
}

/* draft_len auto's program: a read per token, each choice made on a host
 * mirror of the chain. */
static int chain_build_auto(Policy *p, Draft *d, DevCycle *c, StageTimes *tm) {
    ChainState *s = p->state;
    tree_reset(&s->mirror, -1);   /* the root's token stays on the device: no choice reads it */
    return chain_grow(p, d, &s->mirror, c, tm);
}

/* Node i+1 is the top child of node i.  Early stopping keeps it only
 * where tree_pass passes it: by its own p (DyMax), its P (DyJoint) or the
 * classifier's confidence (tree_classify: C2T) against the threshold, the
 * host reading whether it passed. */
static int chain_build(Policy *p, Draft *d, DevCycle *c, StageTimes *tm) {
    ChainState *s = p->state;
    const ChainParams *q = p->own;
    const int want = p->prm.want_entropy || s->stop == STOP_C2T;
    if (s->stop != STOP_NONE) dev_scores_reserve(&s->dev, c, s->cls);
    for (int i = 0; i < q->draft_len; i++) {
        if (cycle_expand(c, d, i == 0, c->iota + i, 1, 1, p->prm.topm, want, tm)) return -1;
        cycle_grow(c, d, c->iota + i, 1, NULL, 1, want);
        if (s->stop == STOP_NONE) continue;
        const double t0 = s->stop == STOP_C2T ? now_seconds() : 0;
        float *score = s->stop == STOP_DYMAX ? c->pool.p : s->stop == STOP_DYJOINT ? c->pool.P : s->dev.conf;
        if (s->stop == STOP_C2T) cycle_op_classify(c, &c->pool, i + 1, 1, &s->dev.net, s->dev.conf);
        const int kept = dev_scores_pass(&s->dev, c, i + 1, 1, score, s->stop == STOP_C2T ? q->beta : q->threshold);
        if (s->stop == STOP_C2T) tm->classifier += now_seconds() - t0;
        if (!kept) {
            c->n = c->n_verified = i + 1;
            break;
        }
    }
    return 0;
}

/* The early stop without a read while drafting: all draft_len nodes
 * drafted, each thresholded by tree_pass into its own count (a node
 * under a dead one is dead: tree_pass), the counts read once after the
 * draft phase (chain_end_fixed): the live nodes are the chain's first. */
static int chain_build_fixed(Policy *p, Draft *d, DevCycle *c, StageTimes *tm) {
    ChainState *s = p->state;
    const ChainParams *q = p->own;
    const int want = p->prm.want_entropy || s->stop == STOP_C2T;
    dev_scores_reserve(&s->dev, c, s->cls);
    for (int i = 0; i < q->draft_len; i++) {
        if (cycle_expand(c, d, i == 0, c->iota + i, 1, 1, p->prm.topm, want, tm)) return -1;
        cycle_grow(c, d, c->iota + i, 1, NULL, 1, want);
        const double t0 = now_seconds();
        float *score = s->stop == STOP_DYMAX ? c->pool.p : s->stop == STOP_DYJOINT ? c->pool.P : s->dev.conf;
        if (s->stop == STOP_C2T) cycle_op_classify(c, &c->pool, i + 1, 1, &s->dev.net, s->dev.conf);
        cycle_op_pass(c, &c->pool, i + 1, 1, score, s->stop == STOP_C2T ? q->beta : q->threshold, s->dev.path_conf,
                      s->dev.count + i);
        tm->classifier += now_seconds() - t0;
    }
    return 0;
}

static int chain_end_fixed(Policy *p, DevCycle *c, StageTimes *tm) {
    ChainState *s = p->state;
    const ChainParams *q = p->own;
    (void)tm;
    c->n = c->n_verified = 1 + dev_scores_counts(&s->dev, c, q->draft_len);
    return 0;
}

/* An early stop's program on be (ChainParams.program): without one the
 * chain reads nothing anyway. */
static void chain_program_for(Policy *p, const Backend *be) {
    ChainState *s = p->state;
    ChainParams *q = p->own;
    const int fixed = policy_program_fixed(q->program, sizeof q->program, be) && s->stop != STOP_NONE;
    p->build = fixed ? chain_build_fixed : chain_build;
    p->build_end = fixed ? chain_end_fixed : NULL;
    p->build_unit = fixed || s->stop == STOP_NONE;
}

static void chain_destroy(Policy *p) {
    ChainState *s = p->state;
    classifier_free(s->cls);
    dev_scores_release(&s->dev);
    tree_free(&s->mirror);
    free(s);
}
static int chain_init(Policy *p) {
    const ChainParams *q = p->own;
    const char *es = q->early_stop;
    ChainState *s = xcalloc(1, sizeof *s);
    if (!strcmp(es, "none")) s->stop = STOP_NONE;
    else if (!strcmp(es, "dymax")) s->stop = STOP_DYMAX;
    else if (!strcmp(es, "dyjoint")) s->stop = STOP_DYJOINT;
    else if (!strcmp(es, "c2t")) s->stop = STOP_C2T;
    else { free(s); err_set("chain: unknown --early-stop '%s' (none, c2t, dymax, dyjoint)", es); return -1; }
    if (policy_program_valid("chain", q->program)) { free(s); return -1; }
    if (s->stop == STOP_C2T) {
        if (!q->classifier[0]) { free(s); err_set("chain: --early-stop c2t needs --classifier WEIGHTS.json (spec-train writes one)"); return -1; }
        s->cls = classifier_load(q->classifier);
        if (!s->cls) { free(s); return -1; }
    }
    tree_init(&s->mirror);
    p->state = s;
    p->wants_cost = q->draft_len == POLICY_SIZE_AUTO;
    p->build = p->wants_cost ? chain_build_auto : chain_build;
    if (!p->wants_cost) p->program_for = chain_program_for;
    /* an early stop's per-node program reads whether each passed, auto's each token */
    p->build_unit = s->stop == STOP_NONE && !p->wants_cost;
    p->destroy = chain_destroy;
    return 0;
}

/* ---- static ---- */
/* EAGLE-1's default tree (mc_sim_7b_63 in SafeAILab/EAGLE choices.py). */
static const char *EAGLE1_TREE =
    "0;1;2;3;0,0;0,1;0,2;1,0;1,1;2,0;2,1;3,0;0,0,0;0,0,1;0,0,2;0,1,0;0,1,1;0,2,0;0,2,1;1,0,0;"
    "0,0,0,0;0,0,0,1;0,0,0,2;0,0,0,0,0;0,0,0,0,1";

typedef struct {
    int n;         /* nodes excluding the root */
    int *parent;   /* index in the static tree (0 = root, i+1 = path i) */
    int *rank;
    int *depth;
    int max_depth, max_rank;
    /* the device program (static_program): per depth d >= 1, the tree
     * nodes expanded (rows) and the (row, rank) of each new node (picks),
     * from offsets row_off[d] and pick_off[d] (pairs) in backend memory */
    const Backend *be;
    int *rows, *picks;
    int *row_off, *pick_off;
} StaticTree;

/* Parses "0;1;0,0" into a tree; paths may come in any order but every
 * prefix must be listed too. */
static int static_parse(const char *spec, StaticTree *s) {
    char *text = xstrdup(spec);
    int cap = 16, n = 0;
    int (*paths)[16] = xmalloc(sizeof *paths * cap);
    int *len = xmalloc(sizeof(int) * cap);
    int rc = 0;
    for (char *save, *tok = strtok_r(text, ";", &save); tok && !rc; tok = strtok_r(NULL, ";", &save)) {
        if (n == cap) { cap *= 2; paths = xrealloc(paths, sizeof *paths * cap); len = xrealloc(len, sizeof(int) * cap); }
        len[n] = 0;
        for (char *s2, *r = strtok_r(tok, ", ", &s2); r; r = strtok_r(NULL, ", ", &s2)) {
            char *end;
            long v = strtol(r, &end, 10);
            if (*end || v < 0 || v > 1000 || len[n] == 16) { err_set("static tree: bad path element '%s'", r); rc = -1; break; }
            paths[n][len[n]++] = (int)v;
        }
        if (!rc && len[n] == 0) { err_set("static tree: empty path"); rc = -1; }
        n++;
    }
    /* order by length so parents come first */
    int *order = xmalloc(sizeof(int) * (n ? n : 1));
    int k = 0;
    for (int l = 1; l <= 16 && !rc; l++) for (int i = 0; i < n; i++) if (len[i] == l) order[k++] = i;
    s->n = n;
    s->parent = xmalloc(sizeof(int) * (n + 1));
    s->rank = xmalloc(sizeof(int) * (n + 1));
    s->depth = xmalloc(sizeof(int) * (n + 1));
    s->max_depth = s->max_rank = 0;
    for (int j = 0; j < n && !rc; j++) {
        int i = order[j], par = 0;
        if (len[i] > 1) {
            par = -1;
            for (int q = 0; q < j && par < 0; q++) {
                int o = order[q];
                if (len[o] == len[i] - 1 && !memcmp(paths[o], paths[i], sizeof(int) * (len[i] - 1))) par = q + 1;
            }
            if (par < 0) { err_set("static tree: path %d has no parent path listed", j); rc = -1; break; }
        }
        for (int q = 0; q < j; q++)
            if (len[order[q]] == len[i] && !memcmp(paths[order[q]], paths[i], sizeof(int) * len[i])) {
                err_set("static tree: duplicate path"); rc = -1;
            }
        s->parent[j] = par;
        s->rank[j] = paths[i][len[i] - 1];
        s->depth[j] = len[i];
        if (len[i] > s->max_depth) s->max_depth = len[i];
        if (s->rank[j] > s->max_rank) s->max_rank = s->rank[j];
    }
    if (!rc && n == 0) { err_set("static tree: no paths"); rc = -1; }
    free(order); free(paths); free(len); free(text);
    return rc;
}

/* The tree's node numbering (depth by depth, in path order) and
 * expansions, which depend only on the paths, as index lists in be's
 * memory. */
static void static_program(StaticTree *s, const Backend *be) {
    int *node_of = xmalloc(sizeof(int) * (s->n + 1)), *row_of = xmalloc(sizeof(int) * (s->n + 1));
    int *rows = xmalloc(sizeof(int) * (s->n + 1)), *picks = xmalloc(sizeof(int) * 2 * (s->n + 1));
    s->row_off = xmalloc(sizeof(int) * (s->max_depth + 2));
    s->pick_off = xmalloc(sizeof(int) * (s->max_depth + 2));
    int nr = 0, np = 0, next = 1;
    node_of[0] = 0;
    for (int depth = 1; depth <= s->max_depth; depth++) {
        s->row_off[depth] = nr;
        s->pick_off[depth] = np;
        const int r0 = nr;
        for (int j = 0; j < s->n; j++) {
            if (s->depth[j] != depth) continue;
            int par = s->parent[j], seen = 0;
            for (int q = r0; q < nr; q++) if (rows[q] == node_of[par]) seen = 1;
            if (!seen) { row_of[par] = nr - r0; rows[nr++] = node_of[par]; }
        }
        for (int j = 0; j < s->n; j++) {
            if (s->depth[j] != depth) continue;
            picks[2 * np] = row_of[s->parent[j]];
            picks[2 * np + 1] = s->rank[j];
            np++;
            node_of[j + 1] = next++;
        }
    }
    s->row_off[s->max_depth + 1] = nr;
    s->pick_off[s->max_depth + 1] = np;
    s->be = be;
    s->rows = backend_alloc_ints(be, nr);
    s->picks = backend_alloc_ints(be, 2 * (size_t)np);
    backend_ints_to_device(be, s->rows, rows, nr);
    backend_ints_to_device(be, s->picks, picks, 2 * (size_t)np);
    free(node_of); free(row_of); free(rows); free(picks);
}

static void static_program_free(StaticTree *s) {
    if (!s->be) return;
    s->be->release(s->rows);
    s->be->release(s->picks);
    free(s->row_off); free(s->pick_off);
    s->be = NULL;
}

static int static_build(Policy *p, Draft *d, DevCycle *c, StageTimes *tm) {
    StaticTree *s = p->state;
    if (s->be != c->be) {
        static_program_free(s);
        static_program(s, c->be);
    }
    const int k = s->max_rank + 1;
    for (int depth = 1; depth <= s->max_depth; depth++) {
        const int r = s->row_off[depth], m = s->row_off[depth + 1] - r;
        const int pk = s->pick_off[depth], count = s->pick_off[depth + 1] - pk;
        if (cycle_expand(c, d, depth == 1, s->rows + r, m, k, p->prm.topm, 1, tm)) return -1;
        cycle_grow(c, d, s->rows + r, k, s->picks + 2 * pk, count, 1);
    }
    return 0;
}

static void static_destroy(Policy *p) {
    StaticTree *s = p->state;
    static_program_free(s);
    free(s->parent); free(s->rank); free(s->depth); free(s);
}

/* The static tree's setting (--static-tree): its sibling-rank paths, or a
 * preset's name. */
typedef struct { char static_tree[4096]; } StaticParams;
static const PolicyParamDef static_params[] = {POLICY_TEXT(StaticParams, static_tree, "eagle1")};

static int static_init(Policy *p) {
    StaticTree *s = xcalloc(1, sizeof *s);
    const char *paths = ((const StaticParams *)p->own)->static_tree;
    const char *spec = strcmp(paths, "eagle1") ? paths : EAGLE1_TREE;
    if (static_parse(spec, s)) { free(s->parent); free(s->rank); free(s->depth); free(s); return -1; }
    p->state = s;
    p->build = static_build;
    p->build_unit = 1;
    p->destroy = static_destroy;
    return 0;
}

static int ar_max_nodes(const Policy *p) { (void)p; return 1; }
static int chain_max_nodes(const Policy *p) {
    const int len = ((const ChainParams *)p->own)->draft_len;
    return 1 + (len == POLICY_SIZE_AUTO ? CHAIN_AUTO_MAX : len);
}
static int static_max_nodes(const Policy *p) { return 1 + ((const StaticTree *)p->state)->n; }

const PolicyClass policy_ar = {"ar", ar_init, ar_max_nodes, NULL, 0, 0};
const PolicyClass policy_chain = {"chain", chain_init, chain_max_nodes, POLICY_PARAMS(chain_params, ChainParams)};
const PolicyClass policy_static = {"static", static_init, static_max_nodes, POLICY_PARAMS(static_params, StaticParams)};
