/* A scripted draft for tests: the top-k children of a node and the entropy
 * of its distribution come from a function over a fixed table, with no
 * model.  It tracks no context (n_past stays 0). */
#ifndef C2T_SCRIPT_DRAFT_H
#define C2T_SCRIPT_DRAFT_H
#include "infer/speculative/draft.h"
#include "kernels/base/util.h"
#include <stdlib.h>

typedef int (*DraftScript)(void *ctx, const Tree *t, int node, int k, int *ids, float *probs, float *entropy);
typedef struct { DraftScript fn; void *ctx; } ScriptDraft;

static int script_expand(Draft *d, const Tree *t, const int *nodes, int n, int k, int topm, int *ids, float *probs,
                         float *entropy) {
    (void)topm;
    const ScriptDraft *s = d->impl;
    for (int i = 0; i < n; i++)
        if (s->fn(s->ctx, t, nodes[i], k, ids + (size_t)i * k, probs + (size_t)i * k, entropy ? entropy + i : NULL))
            return -1;
    return 0;
}
/* catch-ups commit nothing; tree nodes never reach here (expand) */
static int script_run(DraftStep *const *steps, int n) {
    for (int i = 0; i < n; i++) steps[i]->added = 0;
    return 0;
}
static void script_free(Draft *d) { free(d->impl); }

static const DraftOps script_draft_ops = {
    .kind = "script", .free = script_free, .run = script_run, .expand = script_expand};

static inline Draft *draft_scripted(DraftScript fn, void *ctx) {
    ScriptDraft *s = xmalloc(sizeof *s);
    s->fn = fn;
    s->ctx = ctx;
    return draft_new(&script_draft_ops, s);
}
#endif
