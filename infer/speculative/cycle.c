#include "infer/speculative/cycle.h"
#include "kernels/base/replay.h"
#include "kernels/base/util.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

DevCycle *cycle_new(const Backend *be, int cap) {
    DevCycle *c = xcalloc(1, sizeof *c);
    c->be = be;
    c->cap = cap;
    c->pad_max = backend_pad_rows(be) < cap ? backend_pad_rows(be) : cap;
    c->pool = backend_tree_alloc(be, cap);
    c->tree = backend_tree_alloc(be, cap);
    c->padded = backend_tree_alloc(be, cap);
    int *iota = xmalloc(sizeof(int) * cap);
    for (int i = 0; i < cap; i++) iota[i] = i;
    c->iota = backend_alloc_ints(be, cap);
    backend_ints_to_device(be, c->iota, iota, cap);
    free(iota);
    c->start = backend_alloc_ints(be, 4);
    c->rows = backend_alloc_ints(be, cap);
    c->keep = backend_alloc_ints(be, cap);   /* keep[0] = 0: the root, never rewritten */
    c->want = backend_alloc_ints(be, cap);
    c->walk = backend_alloc_ints(be, 3 + 2 * (size_t)cap);
    c->picks = backend_alloc_ints(be, 2 * (size_t)cap);
    c->h_walk = xmalloc(sizeof(int) * (3 + 2 * cap));
    tree_inputs_reserve(&c->inputs, be, cap, cap);   /* never moves: verifications of every size read it there */
    tree_init(&c->keys);
    return c;
}

void cycle_free(DevCycle *c) {
    if (!c) return;
    const Backend *be = c->be;
    backend_tree_release(be, &c->pool);
    backend_tree_release(be, &c->tree);
    backend_tree_release(be, &c->padded);
    void *bufs[] = {c->iota, c->start, c->rows, c->keep, c->ids, c->probs, c->ent, c->want, c->walk, c->picks};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) if (bufs[i]) be->release(bufs[i]);
    tree_inputs_free(&c->inputs);
    tree_free(&c->keys);
    free(c->h_walk);
    free(c);
}

void cycle_tree_op(DevCycle *c, const TreeOp *op) { gate_tree_op(c->gate, c->be, op); }

void cycle_op_root(DevCycle *c, const DevTree *t, const int *root) {
    cycle_tree_op(c, &(TreeOp){.kind = TREE_OP_ROOT, .t = *t, .root = root});
}
void cycle_op_grow(DevCycle *c, const DevTree *t, int n0, const int *rows, const int *ids, const float *probs,
                   const float *ent, int k, const int *picks, int count, const int *map) {
    cycle_tree_op(c, &(TreeOp){.kind = TREE_OP_GROW, .t = *t, .n0 = n0, .rows = rows, .ids = ids, .probs = probs,
                               .ent = ent, .k = k, .picks = picks, .count = count, .map = map});
}
void cycle_op_top(DevCycle *c, const DevTree *t, const float *score, int from, int n, int m, int *sel) {
    cycle_tree_op(c, &(TreeOp){.kind = TREE_OP_TOP, .t = *t, .score = score, .from = from, .n = n, .m = m, .sel = sel});
}
void cycle_op_classify(DevCycle *c, const DevTree *t, int from, int n, const NodeNet *net, float *conf) {
    cycle_tree_op(c, &(TreeOp){.kind = TREE_OP_CLASSIFY, .t = *t, .from = from, .n = n, .net = *net, .conf = conf});
}
void cycle_op_pass(DevCycle *c, const DevTree *t, int from, int n, float *conf, float beta, float *path_conf,
                   int *count) {
    cycle_tree_op(c, &(TreeOp){.kind = TREE_OP_PASS, .t = *t, .from = from, .n = n, .conf = conf, .beta = beta,
                               .path_conf = path_conf, .count_out = count});
}
void cycle_op_compact(DevCycle *c, const DevTree *dst, const DevTree *src, const int *keep, int m, int pad) {
    cycle_tree_op(c, &(TreeOp){.kind = TREE_OP_COMPACT, .t = *dst, .src = *src, .keep = keep, .m = m, .pad = pad});
}
void cycle_op_accept(DevCycle *c, const DevTree *t, int n, const int *want, int from_start, int steps, int *walk) {
    cycle_tree_op(c, &(TreeOp){.kind = TREE_OP_ACCEPT, .t = *t, .n = n, .want = want, .from_start = from_start,
                               .steps = steps, .walk = walk});
}
void cycle_op_argmax(DevCycle *c, const float *logits, int n, int vocab, int *ids) {
    cycle_tree_op(c, &(TreeOp){.kind = TREE_OP_ARGMAX, .logits = logits, .n = n, .vocab = vocab, .out_ids = ids});
}
void cycle_op_sample(DevCycle *c, const float *logits, int n, int vocab, const SampleParams *sp, const uint32_t *key,
                     int node0, int *ids) {
    cycle_tree_op(c, &(TreeOp){.kind = TREE_OP_SAMPLE, .logits = logits, .n = n, .vocab = vocab, .sp = *sp, .key = key,
                               .n0 = node0, .out_ids = ids});
}

void cycle_to_host(DevCycle *c, float *host, const float *dev, size_t words) {
    gate_to_host(c->gate, c->be, host, dev, words);
}
void cycle_ints_to_host(DevCycle *c, int *host, const int *dev, size_t n) {
    cycle_to_host(c, (float *)(void *)host, (const float *)(const void *)dev, n);
}
void cycle_to_host_many(DevCycle *c, float *const *host, const float *const *dev, const size_t *words, int count) {
    if (!c->gate) backend_to_host_many(c->be, host, dev, words, count);
    else for (int i = 0; i < count; i++) cycle_to_host(c, host[i], dev[i], words[i]);
}

void cycle_begin(DevCycle *c) {
    cycle_op_root(c, &c->pool, c->start + 1);
    c->n = c->n_verified = 1;
    c->verified = &c->pool;
    c->keys.n = 0;
    c->t_begin = now_seconds();
}

/* A tree of n nodes in backend memory as a host Tree (out is reset). */
static void read_tree(DevCycle *c, const DevTree *t, int n, Tree *out) {
    tree_set_size(out, n);
    cycle_ints_to_host(c, out->token, t->token, n);
    cycle_ints_to_host(c, out->parent, t->parent, n);
    cycle_ints_to_host(c, out->depth, t->depth, n);
    cycle_ints_to_host(c, out->rank, t->rank, n);
    cycle_to_host(c, out->p, t->p, n);
    cycle_to_host(c, out->P, t->P, n);
    cycle_to_host(c, out->H, t->H, n);
}

/* cycle_expand for a draft without a model: its DraftOps.expand on the
 * pool read to the host, the results uploaded where tree_grow reads them. */
static int expand_on_host(DevCycle *c, Draft *d, int root, const int *rows, int m, int k, int topm, int want_ent) {
    const Backend *be = c->be;
    Tree t;
    tree_init(&t);
    read_tree(c, &c->pool, c->n, &t);
    if (root) m = 1;
    int *nodes = xcalloc(m, sizeof(int)), *ids = xmalloc(sizeof(int) * m * k);
    float *probs = xmalloc(sizeof(float) * m * k), *ent = xcalloc(m, sizeof(float));
    if (!root) cycle_ints_to_host(c, nodes, rows, m);
    c->expand_reads++;
    const int rc = draft_expand(d, &t, nodes, m, k, topm, ids, probs, want_ent ? ent : NULL);
    backend_ints_to_device(be, c->ids, ids, (size_t)m * k);
    be->to_device(c->probs, probs, (size_t)m * k);
    be->to_device(c->ent, ent, m);
    tree_free(&t);
    free(nodes); free(ids); free(probs); free(ent);
    return rc;
}

int cycle_expand(DevCycle *c, Draft *d, int root, const int *rows, int m, int k, int topm, int want_ent,
                 StageTimes *tm) {
    if ((size_t)m * k > c->dist_cap) {   /* the distribution rows, grown to the largest expansion */
        const Backend *be = c->be;
        if (c->ids) { be->release(c->ids); be->release(c->probs); be->release(c->ent); }
        c->dist_cap = (size_t)m * k;
        c->ids = backend_alloc_ints(be, c->dist_cap);
        c->probs = be->alloc(c->dist_cap);
        c->ent = be->alloc(c->dist_cap);
    }
    double t0 = now_seconds(), dist0 = d->t_dist;
    int rc = d->ops->expand ? expand_on_host(c, d, root, rows, m, k, topm, want_ent)
                            : draft_expand_dev(d, c->be, c->gate, &c->pool, c->n, root, rows, m, k, topm, c->ids, c->probs,
                                               want_ent ? c->ent : NULL);
    double dist = d->t_dist - dist0;
    tm->dist += dist;
    tm->draft += now_seconds() - t0 - dist;
    return rc;
}

int cycle_expand_read(DevCycle *c, Draft *d, const int *nodes, int m, int k, int topm, int *ids, float *probs,
                      float *ent, StageTimes *tm) {
    backend_ints_to_device(c->be, c->rows, nodes, m);
    c->cands_ent = ent != NULL;
    if (cycle_expand(c, d, m == 1 && nodes[0] == 0, c->rows, m, k, topm, c->cands_ent, tm)) return -1;
    const size_t mk = (size_t)m * k, n[] = {mk, mk, (size_t)m};
    float *host[] = {(float *)(void *)ids, probs, ent};
    const float *dev[] = {(const float *)(const void *)c->ids, c->probs, c->ent};
    cycle_to_host_many(c, host, dev, n, ent ? 3 : 2);
    c->expand_reads++;
    if (d->d2t) for (size_t i = 0; i < mk; i++) if (ids[i] >= 0) ids[i] = d->d2t[ids[i]];
    return 0;
}

void cycle_grow_cands(DevCycle *c, const Draft *d, const PolicyCand *cand, int count, int k) {
    if (count <= 0) return;
    int *picks = xmalloc(sizeof(int) * 2 * count);
    for (int i = 0; i < count; i++) { picks[2 * i] = cand[i].row; picks[2 * i + 1] = cand[i].rank; }
    backend_ints_to_device(c->be, c->picks, picks, 2 * (size_t)count);
    free(picks);
    cycle_grow(c, d, c->rows, k, c->picks, count, c->cands_ent);
}

void cycle_keep_nodes(DevCycle *c, const int *keep, int m) {
    if (m >= c->n) return;
    backend_ints_to_device(c->be, c->keep, keep, m);
    cycle_op_compact(c, &c->tree, &c->pool, c->keep, m, m);
    c->verified = &c->tree;
    c->n_verified = m;
}

void cycle_keys_from(DevCycle *c, const Tree *t) {
    tree_set_size(&c->keys, t->n);
    memcpy(c->keys.P, t->P, sizeof(float) * t->n);
    memcpy(c->keys.depth, t->depth, sizeof(int) * t->n);
}

void cycle_grow(DevCycle *c, const Draft *d, const int *rows, int k, const int *picks, int count, int want_ent) {
    cycle_op_grow(c, &c->pool, c->n, rows, c->ids, c->probs, want_ent ? c->ent : NULL, k, picks, count,
                  d ? d->d2t_dev : NULL);
    c->n += count;
    if (c->verified == &c->pool) c->n_verified = c->n;
}

void cycle_keep_best(DevCycle *c, const float *score, int total) {
    if (total == -1 || total >= c->n - 1) return;
    cycle_op_top(c, &c->pool, score, 1, c->n - 1, total, c->keep + 1);
    cycle_op_compact(c, &c->tree, &c->pool, c->keep, total + 1, total + 1);
    c->verified = &c->tree;
    c->n_verified = total + 1;
}

void cycle_pad(DevCycle *c) {
    const int n = c->n_verified;
    c->n_rows = n;
    c->rows_tree = c->verified;
    if (!c->be->record_begin) return;
    /* always from the same tree, so that a bucket's verification launches
     * alike whether or not its tree fills it */
    c->n_rows = n <= c->pad_max ? verify_rows_bound(n, c->pad_max) : n;
    cycle_op_compact(c, &c->padded, c->verified, c->iota, n, c->n_rows);
    c->rows_tree = &c->padded;
}

void cycle_read_keys(DevCycle *c, Tree *out) {
    const int n = c->n, cap = c->cap;
    const DevTree *t = &c->pool;
    float *block = xmalloc(sizeof(float) * 5 * (size_t)cap);   /* depth, rank, slot, p, P */
    cycle_to_host(c, block, (const float *)(const void *)t->depth, 5 * (size_t)cap);
    tree_set_size(out, n);
    memcpy(out->depth, block, sizeof(int) * n);
    memcpy(out->P, block + 4 * (size_t)cap, sizeof(float) * n);
    free(block);
    c->key_reads++;
}

void cycle_read_tree(DevCycle *c, Tree *out) {
    read_tree(c, c->verified, c->n_verified, out);
    c->tree_reads++;
}

void dev_scores_release(DevScores *s) {
    if (!s->be) return;
    void *bufs[] = {s->weights, s->conf, s->path_conf, s->count};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) if (bufs[i]) s->be->release(bufs[i]);
    memset(s, 0, sizeof *s);
}

void dev_scores_reserve(DevScores *s, const DevCycle *c, const Classifier *cls) {
    if (s->be == c->be && s->cap >= c->cap) return;
    dev_scores_release(s);
    const Backend *be = c->be;
    s->be = be;
    s->cap = c->cap;
    if (cls) {
        const size_t h = cls->hidden, nf = cls->n_feat;
        s->weights = be->alloc(h * (nf + 2));
        be->to_device(s->weights, cls->fc1_w, h * nf);
        be->to_device(s->weights + h * nf, cls->fc1_b, h);
        be->to_device(s->weights + h * (nf + 1), cls->fc2_w, h);
        s->net = classifier_net(cls);
        s->net.fc1_w = s->weights;
        s->net.fc1_b = s->weights + h * nf;
        s->net.fc2_w = s->weights + h * (nf + 1);
    }
    s->conf = be->alloc(c->cap);
    s->path_conf = be->alloc(c->cap);
    const float above = 2;
    be->to_device(s->path_conf, &above, 1);
    s->count = backend_alloc_ints(be, c->cap);
}

int dev_scores_pass(DevScores *s, DevCycle *c, int from, int n, float *score, float beta) {
    int passed;
    cycle_op_pass(c, &c->pool, from, n, score, beta, s->path_conf, s->count);
    cycle_ints_to_host(c, &passed, s->count, 1);
    c->count_reads++;
    return passed;
}

int dev_scores_counts(DevScores *s, DevCycle *c, int layers) {
    int *counts = xmalloc(sizeof(int) * layers), sum = 0;
    cycle_ints_to_host(c, counts, s->count, layers);
    c->count_reads++;
    for (int i = 0; i < layers; i++) sum += counts[i];
    free(counts);
    return sum;
}

long cycle_host_reads(const DevCycle *c) { return c->count_reads + c->key_reads + c->expand_reads + c->walk_reads + c->tree_reads; }

int lazy_logits_nodes(const Backend *be) {
    const int group = backend_product_tokens(be);
    return 2 * group > LAZY_LOGITS_NODES ? 2 * group : LAZY_LOGITS_NODES;
}

/* ---- The tree on the host (tree.h): what a policy grows beside its
 * program, what observers and the tests read. */

void tree_init(Tree *t) { memset(t, 0, sizeof *t); }

void tree_free(Tree *t) {
    free(t->token); free(t->parent); free(t->depth); free(t->rank);
    free(t->p); free(t->P); free(t->H);
    memset(t, 0, sizeof *t);
}

static void tree_grow(Tree *t, int cap) {
    if (cap <= t->cap) return;
    t->cap = cap;
    t->token = xrealloc(t->token, sizeof(int) * cap);
    t->parent = xrealloc(t->parent, sizeof(int) * cap);
    t->depth = xrealloc(t->depth, sizeof(int) * cap);
    t->rank = xrealloc(t->rank, sizeof(int) * cap);
    t->p = xrealloc(t->p, sizeof(float) * cap);
    t->P = xrealloc(t->P, sizeof(float) * cap);
    t->H = xrealloc(t->H, sizeof(float) * cap);
}

void tree_set_size(Tree *t, int n) {
    tree_grow(t, n);
    t->n = n;
}

void tree_reset(Tree *t, int root_token) {
    tree_grow(t, 64);
    t->n = 1;
    t->token[0] = root_token;
    t->parent[0] = -1;
    t->depth[0] = 0;
    t->rank[0] = 0;
    t->p[0] = t->P[0] = 1.0f;
    t->H[0] = 0.0f;
}

int tree_add(Tree *t, int parent, int token, float p, float H, int rank) {
    if (t->n == t->cap) tree_grow(t, t->cap * 2);
    int i = t->n++;
    t->token[i] = token;
    t->parent[i] = parent;
    t->depth[i] = t->depth[parent] + 1;
    t->rank[i] = rank;
    t->p[i] = p;
    t->P[i] = t->P[parent] * p;
    t->H[i] = H;
    return i;
}

void tree_positions(const Tree *t, int n_past, int *pos) {
    for (int i = 0; i < t->n; i++) pos[i] = n_past + t->depth[i];
}

void tree_mask(const Tree *t, uint8_t *mask) {
    memset(mask, 0, (size_t)t->n * t->n);
    for (int i = 0; i < t->n; i++)
        for (int a = i; a >= 0; a = t->parent[a]) mask[(size_t)i * t->n + a] = 1;
}

void tree_subset(const Tree *t, const int *keep, int m, Tree *out) {
    int *new_index = xmalloc(sizeof(int) * t->n);
    for (int i = 0; i < t->n; i++) new_index[i] = -1;
    tree_grow(out, m > 64 ? m : 64);
    out->n = m;
    for (int j = 0; j < m; j++) {
        int i = keep[j];
        new_index[i] = j;
        out->token[j] = t->token[i];
        out->parent[j] = t->parent[i] < 0 ? -1 : new_index[t->parent[i]];
        out->depth[j] = t->depth[i];
        out->rank[j] = t->rank[i];
        out->p[j] = t->p[i];
        out->P[j] = t->P[i];
        out->H[j] = t->H[i];
    }
    free(new_index);
}

int tree_path(const Tree *t, int node, int *path) {
    int len = t->depth[node] + 1;
    for (int v = node, k = len - 1; v >= 0; v = t->parent[v], k--) path[k] = v;
    return len;
}

int tree_max_depth(const Tree *t) {
    int d = 0;
    for (int i = 0; i < t->n; i++) if (t->depth[i] > d) d = t->depth[i];
    return d;
}

/* ---- The choices every policy module may call (declared in policy.h):
 * top-P candidates, programs, pool estimates from costs, the rerank by P.
 * They sit here, below the modules, so that only the registry (policy.c)
 * calls the modules. */

static int by_P_then_order(const void *a, const void *b) {
    const PolicyCand *x = a, *y = b;
    if (x->P != y->P) return x->P > y->P ? -1 : 1;
    if (x->row != y->row) return x->row - y->row;
    return x->rank - y->rank;
}
static int by_order(const void *a, const void *b) {
    const PolicyCand *x = a, *y = b;
    if (x->row != y->row) return x->row - y->row;
    return x->rank - y->rank;
}

int policy_keep_top_P(PolicyCand *c, int n, int keep) {
    if (n <= keep) return n;
    qsort(c, n, sizeof *c, by_P_then_order);
    qsort(c, keep, sizeof *c, by_order);
    return keep;
}

int policy_program_valid(const char *policy, const char *program) {
    if (!strcmp(program, "auto") || !strcmp(program, "layers") || !strcmp(program, "fixed")) return 0;
    err_set("%s: program must be auto, layers or fixed, not '%s'", policy, program);
    return -1;
}

int policy_program_fixed(char *program, size_t size, const Backend *be) {
    if (!strcmp(program, "auto")) snprintf(program, size, "%s", be->record_begin ? "fixed" : "layers");
    return !strcmp(program, "fixed");
}

int policy_round_half_up(double x) { return (int)floor(x + 0.5); }

int policy_by_joint_prob(const void *a, const void *b, void *tree) {
    int x = *(const int *)a, y = *(const int *)b;
    const Tree *t = tree;
    if (t->P[x] != t->P[y]) return t->P[x] > t->P[y] ? -1 : 1;
    if (t->depth[x] != t->depth[y]) return t->depth[x] - t->depth[y];
    return x - y;
}

static int cmp_node(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

int policy_pool_estimates(const Tree *t, const CostModel *cost, int *order, float *est) {
    const int n = t->n - 1;
    for (int i = 0; i < n; i++) order[i] = i + 1;
    qsort_r(order, n, sizeof(int), policy_by_joint_prob, (void *)t);
    for (int i = 0; i < n; i++) est[i] = cost_estimate(cost, t->P[order[i]], t->depth[order[i]]);
    return n;
}

/* The most a child of `node` can be estimated at (its P is at most its parent's). */
static float child_bound(const Tree *t, const CostModel *cost, int node) {
    return cost_estimate(cost, t->P[node], t->depth[node] + 1);
}

int policy_layer_pays(const Tree *t, const int *front, int nf, const CostModel *cost, int expands) {
    int *order = xmalloc(sizeof(int) * t->n);
    float *est = xmalloc(sizeof(float) * t->n);
    const int n = policy_pool_estimates(t, cost, order, est);
    double bound = 0;
    for (int i = 0; i < nf; i++) bound += child_bound(t, cost, front[i]);
    const int pays = cost_layer_pays(cost, est, n, expands, bound);
    free(order); free(est);
    return pays;
}

int policy_front_worth(const Tree *t, int *front, int nf, int k, const CostModel *cost, int expands, int *pays) {
    int *order = xmalloc(sizeof(int) * t->n);
    float *est = xmalloc(sizeof(float) * t->n);
    const int n = policy_pool_estimates(t, cost, order, est);
    const double price = cost_node_price(cost, est, n, cost_draft_s(cost, expands + 1), nf * k);
    int kept = 0;
    double bound = 0;
    for (int i = 0; i < nf; i++) {
        const float most = child_bound(t, cost, front[i]);
        if (most >= price) {
            bound += most;
            front[kept++] = front[i];
        }
    }
    if (pays) *pays = kept > 0 && cost_layer_pays(cost, est, n, expands, bound);
    free(order); free(est);
    return kept;
}

void policy_rerank_by_P(Tree *t, int total, float min_p, Tree *scratch, CostModel *cost, double draft_s, DevCycle *c) {
    const int n = t->n - 1;
    if (min_p <= 0 && (total == -1 || (total >= n && total != POLICY_SIZE_AUTO))) return;
    int *order = xmalloc(sizeof(int) * t->n);
    if (total == POLICY_SIZE_AUTO) {
        float *est = xmalloc(sizeof(float) * t->n);
        policy_pool_estimates(t, cost, order, est);
        total = cost_best_prefix(cost, est, n, draft_s);
        free(est);
    } else {
        for (int i = 0; i < n; i++) order[i] = i + 1;
        qsort_r(order, n, sizeof(int), policy_by_joint_prob, t);
    }
    if (total == -1 || total > n) total = n;
    for (int i = 0; i < total; i++)
        if (t->P[order[i]] < min_p) { total = i; break; }
    if (total == n) { free(order); return; }
    int *keep = xmalloc(sizeof(int) * (total + 1));
    keep[0] = 0;
    memcpy(keep + 1, order, sizeof(int) * total);
    qsort(keep, total + 1, sizeof(int), cmp_node);
    cycle_keep_nodes(c, keep, total + 1);
    tree_subset(t, keep, total + 1, scratch);
    /* swap the reranked tree into t */
    Tree tmp = *t;
    *t = *scratch;
    *scratch = tmp;
    free(order); free(keep);
}
