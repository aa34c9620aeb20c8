/* A small LLaMA-family LM as a draft source: its own KV cache, tree nodes as
 * temporary entries that draft_end_cycle truncates away. */
#include "infer/spec/draft.h"
#include "kernels/base/util.h"
#include <stdlib.h>
#include <string.h>

typedef struct {
    LlamaModel *lm;
    LlamaState *lms;
    int started;   /* the first catch-up also feeds tokens[0] */
    void *vocab_host;   /* bytes of a reduced draft vocabulary's LM head (set_vocab) */
} DraftLM;

static int lm_load(Draft *d, const char *dir) {
    DraftLM *l = xcalloc(1, sizeof *l);
    d->impl = l;
    l->lm = llama_load(dir, d->be);
    if (!l->lm) return -1;
    const ModelConfig *c = &l->lm->cfg, *tc = &d->target->cfg;
    if (c->vocab != tc->vocab) {
        err_set("%s: draft LM vocabulary %d differs from the target's %d", dir, c->vocab, tc->vocab);
        return -1;
    }
    d->cfg = *c;
    memcpy(d->config_hash, l->lm->config_hash, sizeof d->config_hash);
    l->lms = llama_state_new(l->lm, d->slots);
    return l->lms ? 0 : -1;
}

static void lm_free(Draft *d) {
    DraftLM *l = d->impl;
    if (!l) return;
    llama_state_free(l->lms);
    llama_free(l->lm);
    free(l->vocab_host);
    free(l);
}

static void lm_reset(Draft *d) {
    DraftLM *l = d->impl;
    l->started = 0;
    llama_truncate(l->lms, 0);
}

/* inputs: tokens[1..m) then next, and on the very first call also
 * tokens[0]; returns the entries committed */
static int lm_catch_up(Draft *d, const int *tokens, const float *hidden, int m, int next) {
    (void)hidden;
    DraftLM *l = d->impl;
    const int first = l->started ? 1 : 0, n = m - first + 1;
    if (d->n_past + n > d->slots) {
        err_set("draft context of %d exceeds its KV cache (%d slots)", d->n_past + n, d->slots);
        return -1;
    }
    int *in = xmalloc(sizeof(int) * n), *pos = xmalloc(sizeof(int) * n);
    for (int i = 0; i < n - 1; i++) in[i] = tokens[first + i];
    in[n - 1] = next;
    for (int i = 0; i < n; i++) pos[i] = d->n_past + i;
    int rc = llama_forward(l->lms, in, pos, n, NULL, LOGITS_LAST);
    free(in); free(pos);
    if (rc) return -1;
    llama_commit(l->lms, NULL, n);
    d->be->copy(d->root_logits, l->lms->logits, d->Vd);
    l->started = 1;
    return l->lms->n_past - d->n_past;
}

static const float *lm_forward_nodes(Draft *d, const Tree *t, const int *nodes, const int *tok, const int *pos, int n,
                                     const uint8_t *mask) {
    (void)t; (void)nodes;
    DraftLM *l = d->impl;
    if (llama_forward(l->lms, tok, pos, n, mask, LOGITS_ALL)) return NULL;
    llama_commit(l->lms, NULL, n);   /* temporary: dropped by draft_end_cycle */
    return l->lms->logits;
}

/* The LM's own head shrinks to the chosen rows; its logits rows then have n
 * columns (the state's buffers, sized for the full vocabulary, still fit). */
static int lm_set_vocab(Draft *d, const int *ids, int n) {
    DraftLM *l = d->impl;
    LlamaModel *m = l->lm;
    Weight w;
    void *host;
    if (llama_lm_head_rows(m, ids, n, &w, &host)) return -1;
    if (m->lm_head.data && m->lm_head.data != m->embed.data) d->be->weight_release(&m->lm_head);
    free(l->vocab_host);
    m->lm_head = w;
    l->vocab_host = host;
    return 0;
}

static void lm_end_cycle(Draft *d) {
    DraftLM *l = d->impl;
    llama_truncate(l->lms, d->n_past);
}

const DraftOps draft_lm_ops = {
    .kind = "lm",
    .load = lm_load,
    .free = lm_free,
    .reset = lm_reset,
    .catch_up = lm_catch_up,
    .forward_nodes = lm_forward_nodes,
    .end_cycle = lm_end_cycle,
    .set_vocab = lm_set_vocab,
};
