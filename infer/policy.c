/* Policy registry, parameters and the helpers the policies share. */
#include "infer/policy.h"
#include "infer/util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct { const char *name; int (*init)(Policy *); } registry[] = {
    {"ar", policy_ar_init},
    {"chain", policy_chain_init},
    {"static", policy_static_init},
    {"eagle2", policy_eagle2_init},
};

void policy_params_default(PolicyParams *p) {
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "eagle2");
    p->topk = 10;         /* EAGLE-2 paper, 7B setting */
    p->depth = 6;
    p->total = 60;
    p->draft_len = 5;
    p->topm = 1000;       /* C2T paper eq. 7 */
    snprintf(p->static_tree, sizeof p->static_tree, "eagle1");
    p->beta = 0.5f;
    snprintf(p->early_stop, sizeof p->early_stop, "none");
    p->threshold = 0.5f;
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
    /* static, c2t, sage, wetap: bounded by a full tree of topk × depth */
    return 1 + q->topk + (q->depth + 2) * q->topk * q->topk + 64;
}

int policy_expand(Draft *d, const Tree *t, const int *nodes, int n, int k, int topm, int *ids,
                  float *probs, float *ent, PolicyTimes *tm) {
    double t0 = now_seconds();
    int rc = draft_expand(d, t, nodes, n, k, topm, ids, probs, ent);
    tm->draft += now_seconds() - t0;
    return rc;
}
