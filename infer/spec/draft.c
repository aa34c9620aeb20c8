#include "infer/spec/draft.h"
#include "kernels/base/util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *draft_kind_name(const Draft *d) {
    return d->kind == DRAFT_EAGLE ? "eagle" : d->kind == DRAFT_LM ? "lm" : "script";
}

Draft *draft_scripted(DraftScript fn, void *ctx) {
    Draft *d = xcalloc(1, sizeof *d);
    d->kind = DRAFT_SCRIPT;
    d->script = fn;
    d->script_ctx = ctx;
    return d;
}

/* EAGLE-1/2 head layout (SafeAILab/EAGLE cnets1.py): fc.weight [h, 2h]
 * (+ fc.bias), one decoder layer "layers.0." without input_layernorm, no
 * final norm; the target's embedding and lm_head are reused. */
static int load_eagle(Draft *d, const char *dir) {
    char *cfg = path_join(dir, "config.json");
    int rc = config_load(cfg, &d->cfg);
    if (rc == 0) rc = file_hash_hex(cfg, d->config_hash);
    free(cfg);
    if (rc) return -1;
    const ModelConfig *c = &d->cfg, *tc = &d->target->cfg;
    if (c->hidden != tc->hidden || c->vocab != tc->vocab) {
        err_set("%s: EAGLE head does not fit the target: hidden %d vs %d, vocab %d vs %d", dir, c->hidden,
                tc->hidden, c->vocab, tc->vocab);
        return -1;
    }
    d->st = st_open(dir);
    if (!d->st) return -1;
    const int64_t h = c->hidden;
    if (llama_load_weight(d->be, d->st, "fc.weight", h, 2 * h, &d->fc_w)) return -1;
    d->has_fc_bias = st_find(d->st, "fc.bias") != NULL;
    if (d->has_fc_bias && llama_load_weight(d->be, d->st, "fc.bias", 1, h, &d->fc_b)) return -1;
    if (llama_load_layer(d->be, d->st, c, "layers.0.", 0, &d->layer)) return -1;
    d->inv_freq = xmalloc(sizeof(float) * (c->head_dim / 2));
    config_inv_freq(c, d->inv_freq);
    d->kv = d->be->kv_create(1, d->slots, c->kv_heads * c->head_dim);
    if (!d->kv) { err_set("cannot allocate the EAGLE head's KV cache"); return -1; }
    d->root_feat = d->be->alloc(h);
    return 0;
}

static int load_lm(Draft *d, const char *dir) {
    d->lm = llama_load(dir, d->be);
    if (!d->lm) return -1;
    const ModelConfig *c = &d->lm->cfg, *tc = &d->target->cfg;
    if (c->vocab != tc->vocab) {
        err_set("%s: draft LM vocabulary %d differs from the target's %d", dir, c->vocab, tc->vocab);
        return -1;
    }
    d->cfg = *c;
    memcpy(d->config_hash, d->lm->config_hash, sizeof d->config_hash);
    d->lms = llama_state_new(d->lm, d->slots);
    return d->lms ? 0 : -1;
}

Draft *draft_load(const char *kind, const char *dir, const LlamaModel *target, int slots) {
    Draft *d = xcalloc(1, sizeof *d);
    d->target = target;
    d->be = target->be;
    d->slots = slots;
    d->V = target->cfg.vocab;
    d->H = target->cfg.hidden;
    snprintf(d->dir, sizeof d->dir, "%s", dir);
    int rc;
    if (!strcmp(kind, "eagle")) { d->kind = DRAFT_EAGLE; rc = load_eagle(d, dir); }
    else if (!strcmp(kind, "lm")) { d->kind = DRAFT_LM; rc = load_lm(d, dir); }
    else { err_set("unknown draft kind '%s' (eagle, lm)", kind); rc = -1; }
    if (rc) { draft_free(d); return NULL; }
    d->root_logits = d->be->alloc(d->V);
    return d;
}

static void release_buffers(Draft *d) {
    const Backend *be = d->be;
    if (d->cap) { be->release(d->emb); be->release(d->cat); be->release(d->x); be->release(d->logits); be->release(d->feat); }
    d->cap = 0;
}

void draft_free(Draft *d) {
    if (!d) return;
    if (d->kind == DRAFT_SCRIPT) { free(d); return; }
    const Backend *be = d->be;
    release_buffers(d);
    layer_scratch_free(be, &d->ls);
    if (d->kind == DRAFT_EAGLE) {
        llama_release_layer(be, &d->layer);
        if (d->fc_w.data) be->weight_release(&d->fc_w);
        if (d->fc_b.data) be->weight_release(&d->fc_b);
    }
    if (d->kv) be->kv_free(d->kv);
    if (d->root_feat) be->release(d->root_feat);
    if (d->node_feat) be->release(d->node_feat);
    if (d->root_logits) be->release(d->root_logits);
    st_close(d->st);
    free(d->inv_freq);
    free(d->slot_of);
    llama_state_free(d->lms);
    llama_free(d->lm);
    free(d);
}

void draft_reset(Draft *d) {
    d->n_past = d->n_temp = 0;
    d->lm_started = 0;
    if (d->lms) llama_truncate(d->lms, 0);
}

static void reserve(Draft *d, int n) {
    if (n <= d->cap) return;
    release_buffers(d);
    const Backend *be = d->be;
    d->cap = n;
    d->emb = be->alloc((size_t)n * d->H);
    d->feat = be->alloc((size_t)n * d->H);
    d->cat = be->alloc((size_t)n * 2 * d->H);
    d->x = be->alloc((size_t)n * d->H);
    d->logits = be->alloc((size_t)n * d->V);
    if (d->kind == DRAFT_EAGLE) layer_scratch_reserve(be, &d->cfg, &d->ls, n);
}

static void reserve_nodes(Draft *d, int nodes) {
    if (nodes <= d->node_cap) return;
    int old = d->node_cap;
    d->node_cap = nodes * 2;
    d->slot_of = xrealloc(d->slot_of, sizeof(int) * d->node_cap);
    if (d->kind == DRAFT_EAGLE) {   /* keep the features of nodes expanded so far */
        float *nf = d->be->alloc((size_t)d->node_cap * d->H);
        if (d->node_feat) {
            d->be->copy(nf, d->node_feat, (size_t)old * d->H);
            d->be->release(d->node_feat);
        }
        d->node_feat = nf;
    }
}

/* The head on n (token, feature) pairs at the given positions; writes K/V at
 * slots [base, base+n) where base = n_past + n_temp; output features in
 * d->x, logits in d->logits. */
static void eagle_forward(Draft *d, const int *tokens, const float *feat, const int *pos, int n,
                          const uint8_t *mask) {
    const Backend *be = d->be;
    reserve(d, n);
    be->embed(d->emb, &d->target->embed, tokens, n);
    be->concat(d->cat, d->emb, d->H, feat, d->H, n);
    be->matmul(d->x, d->cat, &d->fc_w, n);
    if (d->has_fc_bias) be->add_bias(d->x, &d->fc_b, n);
    llama_layer_forward(be, &d->cfg, &d->layer, d->inv_freq, d->kv, 0, &d->ls, d->x, n, pos, mask,
                        d->n_past + d->n_temp);
    be->matmul(d->logits, d->x, &d->target->lm_head, n);
}

int draft_catch_up(Draft *d, const int *tokens, const float *hidden, int m, int next) {
    const Backend *be = d->be;
    if (d->kind == DRAFT_SCRIPT) return 0;
    d->n_temp = 0;
    /* inputs: tokens[1..m) then next (for the LM's very first call also
     * tokens[0], which an EAGLE head never sees as input) */
    int first = (d->kind == DRAFT_LM && !d->lm_started) ? 0 : 1;
    int n = m - first + 1;
    if (d->n_past + n > d->slots) {
        err_set("draft context of %d exceeds its KV cache (%d slots)", d->n_past + n, d->slots);
        return -1;
    }
    int *in = xmalloc(sizeof(int) * n), *pos = xmalloc(sizeof(int) * n);
    for (int i = 0; i < n - 1; i++) in[i] = tokens[first + i];
    in[n - 1] = next;
    for (int i = 0; i < n; i++) pos[i] = d->n_past + i;
    int rc = 0;
    if (d->kind == DRAFT_EAGLE) {
        /* pair j: (target feature at committed position j, token j+1) */
        eagle_forward(d, in, hidden, pos, n, NULL);
        be->copy(d->root_feat, d->x + (size_t)(n - 1) * d->H, d->H);
        be->copy(d->root_logits, d->logits + (size_t)(n - 1) * d->V, d->V);
        d->n_past += n;
    } else {
        rc = llama_forward(d->lms, in, pos, n, NULL, LOGITS_LAST);
        if (rc == 0) {
            llama_commit(d->lms, NULL, n);
            be->copy(d->root_logits, d->lms->logits, d->V);
            d->n_past = d->lms->n_past;
            d->lm_started = 1;
        }
    }
    free(in); free(pos);
    return rc;
}

int draft_expand(Draft *d, const Tree *t, const int *nodes, int n, int k, int topm, int *ids,
                 float *probs, float *entropy) {
    const Backend *be = d->be;
    if (d->kind == DRAFT_SCRIPT) {
        for (int i = 0; i < n; i++)
            if (d->script(d->script_ctx, t, nodes[i], k, ids + (size_t)i * k, probs + (size_t)i * k, entropy ? entropy + i : NULL))
                return -1;
        return 0;
    }
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
    int rc = 0;
    const float *logits;
    if (d->kind == DRAFT_EAGLE) {
        reserve(d, n);
        /* each node's input feature is its parent's output: one gather from
         * node_feat, whose row 0 (the root, never expanded here) gets the
         * root's feature, and one scatter of the outputs back (a GPU pays
         * a launch per copy, so per-node copies cost more than the head) */
        int *par = xmalloc(sizeof(int) * n);
        for (int i = 0; i < n; i++) par[i] = t->parent[nodes[i]];
        be->copy(d->node_feat, d->root_feat, d->H);
        be->copy_rows(d->feat, NULL, d->node_feat, par, n, d->H);
        eagle_forward(d, tok, d->feat, pos, n, mask);
        be->copy_rows(d->node_feat, nodes, d->x, NULL, n, d->H);
        free(par);
        logits = d->logits;
    } else {
        rc = llama_forward(d->lms, tok, pos, n, mask, LOGITS_ALL);
        if (rc == 0) llama_commit(d->lms, NULL, n);   /* temporary: dropped by draft_end_cycle */
        logits = d->lms->logits;
    }
    if (rc == 0) {
        d->n_temp += n;
        double t0 = now_seconds();
        be->softmax_topk(logits, n, d->V, 1.0f, k, ids, probs, topm, entropy);
        d->t_dist += now_seconds() - t0;
    }
    free(tok); free(pos); free(mask);
    return rc;
}

void draft_end_cycle(Draft *d) {
    d->n_temp = 0;
    if (d->lms) llama_truncate(d->lms, d->n_past);
}
