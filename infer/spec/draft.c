/* What every draft source shares: loading by kind, the committed length, the
 * temporary slots and masks of a cycle's tree nodes, and the distribution op
 * on their logits.  The sources' forwards are in draft_eagle.c and
 * draft_lm.c. */
#include "infer/spec/draft.h"
#include "kernels/base/util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const DraftOps *const sources[] = {&draft_eagle_ops, &draft_lm_ops};

const char *draft_kind_name(const Draft *d) { return d->ops->kind; }

Draft *draft_new(const DraftOps *ops, void *impl) {
    Draft *d = xcalloc(1, sizeof *d);
    d->ops = ops;
    d->impl = impl;
    return d;
}

Draft *draft_load(const char *kind, const char *dir, const LlamaModel *target, int slots) {
    const DraftOps *ops = NULL;
    for (size_t i = 0; i < sizeof sources / sizeof *sources; i++)
        if (!strcmp(kind, sources[i]->kind)) ops = sources[i];
    if (!ops) { err_set("unknown draft kind '%s' (eagle, lm)", kind); return NULL; }
    Draft *d = draft_new(ops, NULL);
    d->target = target;
    d->be = target->be;
    d->slots = slots;
    d->V = target->cfg.vocab;
    d->H = target->cfg.hidden;
    snprintf(d->dir, sizeof d->dir, "%s", dir);
    if (ops->load(d, dir)) { draft_free(d); return NULL; }
    d->root_logits = d->be->alloc(d->V);
    return d;
}

void draft_free(Draft *d) {
    if (!d) return;
    if (d->ops->free) d->ops->free(d);
    if (d->root_logits) d->be->release(d->root_logits);
    free(d->slot_of);
    free(d);
}

void draft_reset(Draft *d) {
    d->n_past = d->n_temp = 0;
    if (d->ops->reset) d->ops->reset(d);
}

int draft_catch_up(Draft *d, const int *tokens, const float *hidden, int m, int next) {
    d->n_temp = 0;
    int added = d->ops->catch_up(d, tokens, hidden, m, next);
    if (added < 0) return -1;
    d->n_past += added;
    return 0;
}

static void reserve_nodes(Draft *d, int nodes) {
    if (nodes <= d->node_cap) return;
    d->node_cap = nodes * 2;
    d->slot_of = xrealloc(d->slot_of, sizeof(int) * d->node_cap);
}

int draft_expand(Draft *d, const Tree *t, const int *nodes, int n, int k, int topm, int *ids,
                 float *probs, float *entropy) {
    if (d->ops->expand) return d->ops->expand(d, t, nodes, n, k, topm, ids, probs, entropy);
    const Backend *be = d->be;
    if (n == 1 && nodes[0] == 0) {
        double t0 = now_seconds();
        be->softmax_topk(d->root_logits, 1, d->V, 1.0f, k, ids, probs, topm, entropy);
        d->t_dist += now_seconds() - t0;
        return 0;
    }
    reserve_nodes(d, t->n);
    const int base = d->n_past + d->n_temp, nctx = base + n;
    if (nctx > d->slots) {
        err_set("draft tree of %d entries exceeds the draft KV cache (%d slots)", nctx, d->slots);
        return -1;
    }
    int *tok = xmalloc(sizeof(int) * n), *pos = xmalloc(sizeof(int) * n);
    uint8_t *mask = xcalloc((size_t)n * nctx, 1);
    for (int i = 0; i < n; i++) {
        int v = nodes[i];
        tok[i] = t->token[v];
        pos[i] = d->n_past - 1 + t->depth[v];
        uint8_t *row = mask + (size_t)i * nctx;
        memset(row, 1, d->n_past);
        for (int a = t->parent[v]; a > 0; a = t->parent[a]) row[d->slot_of[a]] = 1;
        row[base + i] = 1;
        d->slot_of[v] = base + i;
    }
    const float *logits = d->ops->forward_nodes(d, t, nodes, tok, pos, n, mask);
    if (logits) {
        d->n_temp += n;
        double t0 = now_seconds();
        be->softmax_topk(logits, n, d->V, 1.0f, k, ids, probs, topm, entropy);
        d->t_dist += now_seconds() - t0;
    }
    free(tok); free(pos); free(mask);
    return logits ? 0 : -1;
}

void draft_end_cycle(Draft *d) {
    d->n_temp = 0;
    if (d->ops->end_cycle) d->ops->end_cycle(d);
}
