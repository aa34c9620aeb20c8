/* The helpers every policy module may call (declared in policy.h): apart
 * from the registry in policy.c, which calls the modules. */
#include "infer/speculative/cycle.h"
#include "infer/speculative/policy.h"
#include "kernels/base/util.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
