/* An EAGLE-1/2 head as a draft source: fc over [embedding(token); feature]
 * (+ bias), one decoder layer without its input norm, and the target's LM
 * head.  A node's input feature is its parent's output feature; the root's
 * comes from the target's hidden states at catch-up.  The bookkeeping here
 * (buffers, catch-up, tree nodes) also serves the EAGLE-3 head
 * (draft_eagle3.c, see draft_eagle.h). */
#include "infer/spec/draft_eagle.h"
#include "kernels/base/util.h"
#include <stdlib.h>
#include <string.h>

EagleHead *eagle_head_open(Draft *d, const char *dir) {
    EagleHead *e = xcalloc(1, sizeof *e);
    d->impl = e;
    char *cfg = path_join(dir, "config.json");
    int rc = config_load(cfg, &d->cfg);
    if (rc == 0) rc = file_hash_hex(cfg, d->config_hash);
    free(cfg);
    if (rc) return NULL;
    const ModelConfig *c = &d->cfg;
    e->h = c->hidden;
    e->st = st_open(dir);
    if (!e->st) return NULL;
    e->inv_freq = xmalloc(sizeof(float) * (c->head_dim / 2));
    config_inv_freq(c, e->inv_freq);
    e->kv = d->be->kv_create(1, d->slots, c->kv_heads * c->head_dim);
    if (!e->kv) { err_set("cannot allocate the EAGLE head's KV cache"); return NULL; }
    e->embed = &d->target->embed;
    e->lm_head = &d->target->lm_head;
    return e;
}

/* The head on n (token, feature) pairs: x = fc([embed(token); feature]),
 * then the layer; its output goes straight into the LM head. */
static void eagle1_forward(Draft *d, EagleHead *e, const int *tokens, const float *feat, int from_target,
                           const int *pos, int n, const uint8_t *mask) {
    (void)from_target;   /* the target's features and the head's own have the same width */
    const Backend *be = d->be;
    eagle_reserve(d, e, n);
    be->embed(e->emb, e->embed, tokens, n);
    be->concat(e->cat, e->emb, e->h, feat, e->h, n);
    be->matmul(e->x, e->cat, &e->fc_w, n);
    if (e->has_fc_bias) be->add_bias(e->x, &e->fc_b, n);
    llama_layer_forward(be, &d->cfg, &e->layer, e->inv_freq, e->kv, 0, &e->ls, e->x, n, pos, mask,
                        d->n_past + d->n_temp);
    be->matmul(e->logits, e->x, e->lm_head, n);
}

/* EAGLE-1/2 head layout (SafeAILab/EAGLE cnets1.py): fc.weight [h, 2h]
 * (+ fc.bias), one decoder layer "layers.0." without input_layernorm, no
 * final norm; the target's embedding and lm_head are reused. */
static int eagle_load(Draft *d, const char *dir) {
    EagleHead *e = eagle_head_open(d, dir);
    if (!e) return -1;
    e->forward = eagle1_forward;
    const ModelConfig *c = &d->cfg, *tc = &d->target->cfg;
    if (c->draft_vocab || st_find(e->st, "midlayer.self_attn.q_proj.weight")) {
        err_set("%s: this is an EAGLE-3 head (draft_vocab_size / midlayer.*): use --draft-kind eagle3", dir);
        return -1;
    }
    if (c->hidden != tc->hidden || c->vocab != tc->vocab) {
        err_set("%s: EAGLE head does not fit the target: hidden %d vs %d, vocab %d vs %d%s", dir, c->hidden,
                tc->hidden, c->vocab, tc->vocab,
                c->layers > 1 ? " (it has several layers: a draft LM? then --draft-kind lm)" : "");
        return -1;
    }
    const int64_t h = c->hidden;
    if (llama_load_weight(d->be, e->st, "fc.weight", h, 2 * h, &e->fc_w)) return -1;
    e->has_fc_bias = st_find(e->st, "fc.bias") != NULL;
    if (e->has_fc_bias && llama_load_weight(d->be, e->st, "fc.bias", 1, h, &e->fc_b)) return -1;
    return llama_load_layer(d->be, e->st, c, "layers.0.", 0, h, &e->layer);
}

static void release_vocab_head(const Backend *be, EagleHead *e) {
    if (e->vocab_head.data) be->weight_release(&e->vocab_head);
    free(e->vocab_host);
    e->vocab_host = NULL;
}

static void release_buffers(const Backend *be, EagleHead *e) {
    if (e->cap) {
        be->release(e->emb); be->release(e->cat); be->release(e->x); be->release(e->logits); be->release(e->feat);
        be->release(e->normed);
    }
    e->cap = 0;
}

static int eagle_set_vocab(Draft *d, const int *ids, int n) {
    EagleHead *e = d->impl;
    release_vocab_head(d->be, e);
    if (llama_lm_head_rows(d->target, ids, n, &e->vocab_head, &e->vocab_host)) return -1;
    e->lm_head = &e->vocab_head;
    release_buffers(d->be, e);   /* logits change width */
    return 0;
}

void eagle_head_free(Draft *d) {
    EagleHead *e = d->impl;
    if (!e) return;
    const Backend *be = d->be;
    release_buffers(be, e);
    layer_scratch_free(be, &e->ls);
    llama_release_layer(be, &e->layer);
    Weight *w[] = {&e->fc_w, &e->fc_b, &e->hidden_norm, &e->norm, &e->own_lm_head, &e->own_embed};
    for (size_t i = 0; i < sizeof w / sizeof *w; i++)
        if (w[i]->data) be->weight_release(w[i]);
    if (e->kv) be->kv_free(e->kv);
    if (e->node_feat) be->release(e->node_feat);
    release_vocab_head(be, e);
    st_close(e->st);
    free(e->inv_freq);
    free(e);
}

void eagle_reserve(Draft *d, EagleHead *e, int n) {
    if (n <= e->cap) return;
    const Backend *be = d->be;
    release_buffers(be, e);
    e->cap = n;
    e->emb = be->alloc((size_t)n * e->h);
    e->feat = be->alloc((size_t)n * e->h);
    e->cat = be->alloc((size_t)n * 2 * e->h);
    e->x = be->alloc((size_t)n * e->h);
    e->normed = be->alloc((size_t)n * e->h);
    e->logits = be->alloc((size_t)n * d->Vd);
    layer_scratch_reserve(be, &d->cfg, &e->ls, n);
}

/* keeps the features of nodes expanded so far */
static void reserve_node_feat(Draft *d, EagleHead *e, int nodes) {
    if (nodes <= e->node_cap) return;
    int old = e->node_cap;
    e->node_cap = nodes * 2;
    float *nf = d->be->alloc((size_t)e->node_cap * e->h);
    if (e->node_feat) {
        d->be->copy(nf, e->node_feat, (size_t)old * e->h);
        d->be->release(e->node_feat);
    }
    e->node_feat = nf;
}

/* inputs: pair j = (target feature at committed position j, token j+1), the
 * last token being `next`; tokens[0] is never an input of the head */
int eagle_catch_up(Draft *d, const int *tokens, const float *hidden, int m, int next) {
    EagleHead *e = d->impl;
    const int n = m;
    if (d->n_past + n > d->slots) {
        err_set("draft context of %d exceeds its KV cache (%d slots)", d->n_past + n, d->slots);
        return -1;
    }
    int *in = xmalloc(sizeof(int) * n), *pos = xmalloc(sizeof(int) * n);
    for (int i = 0; i < n - 1; i++) in[i] = tokens[1 + i];
    in[n - 1] = next;
    for (int i = 0; i < n; i++) pos[i] = d->n_past + i;
    e->forward(d, e, in, hidden, 1, pos, n, NULL);
    reserve_node_feat(d, e, 1);
    d->be->copy(e->node_feat, e->x + (size_t)(n - 1) * e->h, e->h);
    d->be->copy(d->root_logits, e->logits + (size_t)(n - 1) * d->Vd, d->Vd);
    free(in); free(pos);
    return n;
}

typedef struct {
    Draft *d;
    EagleHead *e;
    const int *nodes, *par, *tok, *pos;
    int n;
    const uint8_t *mask;
} NodesArgs;

/* one draft step's ops, nothing returned to the host (one graph on a GPU) */
static void nodes_ops(void *arg) {
    const NodesArgs *a = arg;
    const Backend *be = a->d->be;
    EagleHead *e = a->e;
    be->copy_rows(e->feat, NULL, e->node_feat, a->par, a->n, e->h);
    e->forward(a->d, e, a->tok, e->feat, 0, a->pos, a->n, a->mask);
    be->copy_rows(e->node_feat, a->nodes, e->x, NULL, a->n, e->h);
}

const float *eagle_forward_nodes(Draft *d, const Tree *t, const int *nodes, const int *tok, const int *pos,
                                 int n, const uint8_t *mask) {
    EagleHead *e = d->impl;
    const Backend *be = d->be;
    eagle_reserve(d, e, n);
    reserve_node_feat(d, e, t->n);
    /* each node's input feature is its parent's output: one gather from
     * node_feat (row 0 = the root) and one scatter of the outputs back (a
     * GPU pays a launch per copy, so per-node copies cost more than the head) */
    int *par = xmalloc(sizeof(int) * n);
    for (int i = 0; i < n; i++) par[i] = t->parent[nodes[i]];
    NodesArgs a = {d, e, nodes, par, tok, pos, n, mask};
    backend_recorded(be, nodes_ops, &a);
    free(par);
    return e->logits;
}

const DraftOps draft_eagle_ops = {
    .kind = "eagle",
    .auto_default = 1,
    .load = eagle_load,
    .free = eagle_head_free,
    .catch_up = eagle_catch_up,
    .forward_nodes = eagle_forward_nodes,
    .set_vocab = eagle_set_vocab,
};
