/* The helpers every policy module may call (declared in policy.h): apart
 * from the registry in policy.c, which calls the modules. */
#include "infer/speculative/policy.h"
#include "kernels/base/util.h"
#include <math.h>
#include <stdlib.h>

int policy_expand(Draft *d, const Tree *t, const int *nodes, int n, int k, int topm, int *ids,
                  float *probs, float *ent, StageTimes *tm) {
    double t0 = now_seconds(), dist0 = d->t_dist;
    int rc = draft_expand(d, t, nodes, n, k, topm, ids, probs, ent);
    double dist = d->t_dist - dist0;   /* softmax, top-k, top-M entropy */
    tm->dist += dist;
    tm->draft += now_seconds() - t0 - dist;
    return rc;
}

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

int policy_round_half_up(double x) { return (int)floor(x + 0.5); }
