/* Policy registry, parameters and the helpers the policies share. */
#include "infer/spec/policy.h"
#include "kernels/base/util.h"
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct { const char *name; int (*init)(Policy *); } registry[] = {
    {"ar", policy_ar_init},
    {"chain", policy_chain_init},
    {"static", policy_static_init},
    {"eagle2", policy_eagle2_init},
    {"c2t", policy_c2t_init},
    {"sage", policy_sage_init},
    {"wetap", policy_wetap_init},
};

void policy_params_default(PolicyParams *p) {
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "eagle2");
    p->topk = 10;         /* EAGLE-2 paper, 7B setting */
    p->depth = -1;        /* the policy's own default (eagle2 6, c2t 8, chain 5) */
    p->total = 60;
    p->draft_len = 5;
    p->topm = 1000;       /* C2T paper eq. 7 */
    snprintf(p->static_tree, sizeof p->static_tree, "eagle1");
    p->beta = 0.5f;
    snprintf(p->early_stop, sizeof p->early_stop, "none");
    p->threshold = 0.5f;
    /* SAGE paper §5.1: Dmax 8, Dmin 3, Wmax 10, Wmin 2, k 10, 64 nodes,
     * history window 10 with thresholds 2 and 3; α starts at 0.5 (Alg. 1) */
    p->sage_dmin = 3; p->sage_dmax = 8;
    p->sage_wmin = 2; p->sage_wmax = 10;
    p->sage_k = 10;
    p->sage_nmax = 64;
    p->sage_window = 10;
    p->sage_lower = 2.0f; p->sage_upper = 3.0f;
    p->sage_dceil = 12;   /* our choice: the paper gives no ceiling */
    p->sage_alpha0 = 0.5f;
    p->sage_theta = 0.1f;
    /* WETAP paper: length 8, tree size 64 (App. B.3), width range [16, 128]
     * (§4.4.1), γ = 1.2 (§4.4.2, best on MT-Bench), α = 0.6 (§4.4.3) */
    p->wetap_depth = 8;
    p->wetap_wmin = 16; p->wetap_wmax = 128;
    p->wetap_gamma = 1.2f;
    p->wetap_alpha = 0.6f;
    p->wetap_budget = 64;
}

/* The parameters --param sets: type, place and range. */
typedef struct { const char *key; char type; size_t off; double lo, hi; int lo_open; } ParamDef;
#define PINT(f, lo, hi) {#f, 'i', offsetof(PolicyParams, f), lo, hi, 0}
#define PFLT(f, lo, hi, open) {#f, 'f', offsetof(PolicyParams, f), lo, hi, open}
static const ParamDef param_defs[] = {
    PINT(sage_dmin, 1, 64), PINT(sage_dmax, 1, 64), PINT(sage_wmin, 1, 1000), PINT(sage_wmax, 1, 1000),
    PINT(sage_k, 1, 1000), PINT(sage_nmax, 1, 100000), PINT(sage_window, 1, 100000),
    PFLT(sage_lower, 0, 1000, 0), PFLT(sage_upper, 0, 1000, 0), PINT(sage_dceil, 1, 64),
    PFLT(sage_alpha0, 0, 1, 0), PFLT(sage_theta, 0, 1, 0),
    PINT(wetap_depth, 1, 64), PINT(wetap_wmin, 1, 100000), PINT(wetap_wmax, 1, 100000),
    PFLT(wetap_gamma, 0, 100, 1), PFLT(wetap_alpha, 0, 1, 0), PINT(wetap_budget, 1, 100000),
};
#define N_PARAMS ((int)(sizeof param_defs / sizeof *param_defs))

int policy_params_set(PolicyParams *p, const char *key, const char *value) {
    char name[64];
    if (!value) {
        const char *eq = strchr(key, '=');
        if (!eq) { err_set("--param '%s': expected KEY=VALUE", key); return -1; }
        snprintf(name, sizeof name, "%.*s", (int)(eq - key < 63 ? eq - key : 63), key);
        key = name;
        value = eq + 1;
    }
    for (int i = 0; i < N_PARAMS; i++) {
        const ParamDef *d = &param_defs[i];
        if (strcmp(key, d->key)) continue;
        char *end;
        errno = 0;
        if (d->type == 'i') {
            long v = strtol(value, &end, 10);
            if (!*value || *end || errno || v < d->lo || v > d->hi) {
                err_set("--param %s: expected an integer in [%g, %g], got '%s'", key, d->lo, d->hi, value);
                return -1;
            }
            *(int *)((char *)p + d->off) = (int)v;
        } else {
            double v = strtod(value, &end);
            if (!*value || *end || errno || !(d->lo_open ? v > d->lo : v >= d->lo) || !(v <= d->hi)) {
                err_set("--param %s: expected a number in %c%g, %g], got '%s'", key, d->lo_open ? '(' : '[',
                        d->lo, d->hi, value);
                return -1;
            }
            *(float *)((char *)p + d->off) = (float)v;
        }
        return 0;
    }
    char keys[1024] = "";
    for (int i = 0; i < N_PARAMS; i++)
        snprintf(keys + strlen(keys), sizeof keys - strlen(keys), "%s%s", i ? " " : "", param_defs[i].key);
    err_set("--param: unknown key '%s' (%s)", key, keys);
    return -1;
}

int policy_param_get(const PolicyParams *p, int i, const char **key, double *value) {
    if (i < 0 || i >= N_PARAMS) return -1;
    const ParamDef *d = &param_defs[i];
    if (key) *key = d->key;
    if (value)
        *value = d->type == 'i' ? *(const int *)((const char *)p + d->off) : *(const float *)((const char *)p + d->off);
    return 0;
}

const char *policy_names(void) {
    static char buf[256];
    if (!buf[0])
        for (size_t i = 0; i < sizeof registry / sizeof *registry; i++)
            snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", i ? " " : "", registry[i].name);
    return buf;
}

Policy *policy_new(const PolicyParams *prm) {
    for (size_t i = 0; i < sizeof registry / sizeof *registry; i++) {
        if (strcmp(prm->name, registry[i].name)) continue;
        Policy *p = xcalloc(1, sizeof *p);
        p->name = registry[i].name;
        p->prm = *prm;
        p->needs_draft = 1;
        if (registry[i].init(p)) { free(p); return NULL; }
        return p;
    }
    err_set("unknown policy '%s' (%s)", prm->name, policy_names());
    return NULL;
}

void policy_free(Policy *p) {
    if (!p) return;
    if (p->destroy) p->destroy(p);
    free(p);
}

int policy_max_nodes(const Policy *p) {
    const PolicyParams *q = &p->prm;
    if (!strcmp(p->name, "ar")) return 1;
    if (!strcmp(p->name, "chain")) return 1 + q->draft_len;
    if (!strcmp(p->name, "eagle2")) return 1 + q->topk + q->depth * q->topk * q->topk;
    if (!strcmp(p->name, "c2t")) return 1 + q->depth * q->topk * q->topk;
    if (!strcmp(p->name, "sage")) return 1 + q->sage_nmax;
    if (!strcmp(p->name, "wetap")) return 1 + q->wetap_budget;
    /* static: bounded by a full tree of topk × depth */
    return 1 + q->topk + (q->depth + 2) * q->topk * q->topk + 64;
}

int policy_expand(Draft *d, const Tree *t, const int *nodes, int n, int k, int topm, int *ids,
                  float *probs, float *ent, PolicyTimes *tm) {
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
