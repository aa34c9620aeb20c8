/* An EAGLE-1/2 head as a draft source: fc over [embedding(token); feature]
 * (+ bias), one decoder layer without its input norm, and the target's LM
 * head.  A node's input feature is its parent's output feature; the root's
 * comes from the target's hidden states at catch-up.  The bookkeeping here
 * (buffers, catch-up, tree nodes) also serves the EAGLE-3 head
 * (draft_eagle3.c, see draft_eagle.h). */
#include "infer/speculative/draft_eagle.h"
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
    st_weight_types(e->st, d->weight_types, sizeof d->weight_types);
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
                           const int *pos, int n, const SeqView *seqs, int n_seq, const int *logit_rows,
                           int n_logit) {
    (void)from_target;   /* the target's features and the head's own have the same width */
    const Backend *be = d->be;
    be->embed(e->emb, e->embed, tokens, n);
    be->concat(e->cat, e->emb, e->h, feat, e->h, n);
    be->matmul(e->x, e->cat, &e->fc_w, n);
    if (e->has_fc_bias) be->add_bias(e->x, &e->fc_b, n);
    llama_layer_forward(be, &d->cfg, &e->layer, e->inv_freq, 0, &e->ls, e->x, n, pos, seqs, n_seq);
    eagle_logits(d, e, e->x, logit_rows, n_logit);
}

void eagle_logits(Draft *d, EagleHead *e, const float *out, const int *rows, int n) {
    const Backend *be = d->be;
    if (rows) {   /* e->emb is free by now */
        be->copy_rows(e->emb, NULL, out, rows, n, e->h);
        out = e->emb;
    }
    be->matmul(e->logits, out, e->lm_head, n);
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
        be->release(e->normed); be->release(e->tfeat);
    }
    e->cap = 0;
}

/* ids NULL: back to the target's head (an EAGLE-1/2 head's, as loaded). */
static int eagle_set_vocab(Draft *d, const int *ids, int n) {
    EagleHead *e = d->impl;
    release_vocab_head(d->be, e);
    e->lm_head = &d->target->lm_head;
    if (ids && llama_lm_head_rows(d->target, ids, n, &e->vocab_head, &e->vocab_host)) return -1;
    if (ids) e->lm_head = &e->vocab_head;
    release_buffers(d->be, e);   /* logits change width */
    return 0;
}

void eagle_head_free(Draft *d) {
    EagleHead *e = d->impl;
    if (!e) return;
    const Backend *be = d->be;
    release_buffers(be, e);
    layer_scratch_free(be, &e->ls);
    forward_ctl_free(&e->ctl);
    if (e->kv) be->kv_free(e->kv);
    if (e->node_feat) be->release(e->node_feat);
    if (e->shared) { free(e); return; }
    llama_release_layer(be, &e->layer);
    Weight *w[] = {&e->fc_w, &e->fc_b, &e->hidden_norm, &e->norm, &e->own_lm_head, &e->own_embed};
    for (size_t i = 0; i < sizeof w / sizeof *w; i++)
        if (w[i]->data) be->weight_release(w[i]);
    release_vocab_head(be, e);
    st_close(e->st);
    free(e->inv_freq);
    free(e);
}

int eagle_clone(Draft *dst, const Draft *src) {
    const EagleHead *s = src->impl;
    EagleHead *e = xmalloc(sizeof *e);
    *e = *s;   /* the weights and the pointers to them (lm_head may point into s) */
    dst->impl = e;
    e->shared = 1;
    e->cap = 0;
    e->emb = e->cat = e->x = e->logits = e->feat = e->tfeat = e->normed = e->node_feat = NULL;
    e->node_cap = 0;
    memset(&e->ls, 0, sizeof e->ls);
    memset(&e->ctl, 0, sizeof e->ctl);
    e->kv = dst->be->kv_create(1, dst->slots, src->cfg.kv_heads * src->cfg.head_dim);
    if (!e->kv) { err_set("cannot allocate the EAGLE head's KV cache"); return -1; }
    return 0;
}

static void eagle_reserve(Draft *d, EagleHead *e, int n) {
    if (n <= e->cap) return;
    const Backend *be = d->be;
    release_buffers(be, e);
    e->cap = n;
    e->emb = be->alloc((size_t)n * e->h);
    e->feat = be->alloc((size_t)n * e->h);
    e->cat = be->alloc((size_t)n * 2 * e->h);
    e->x = be->alloc((size_t)n * e->h);
    e->normed = be->alloc((size_t)n * e->h);
    e->tfeat = be->alloc((size_t)n * d->feat_width);
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

/* One batched step; tokens, pos, par, nodes, logit_rows and the seqs'
 * masks are backend memory (par and nodes: each tree node's parent and
 * node index, at the batch's rows). */
typedef struct {
    DraftStep *const *steps;
    int n_seq, n, n_logit;
    const int *off, *tokens, *pos, *par, *nodes, *logit_rows;
    const SeqView *seqs;
} RunArgs;

/* The input features of every pair into the first head's scratch: a
 * catch-up's are the target's (one step reads them where they are), a
 * node's are its parent's output. */
static const float *gather_features(const RunArgs *a, EagleHead *e0) {
    const DraftStep *s0 = a->steps[0];
    const Backend *be = s0->d->be;
    const int fw = s0->d->feat_width;
    if (s0->catch_up && a->n_seq == 1) return s0->hidden;
    for (int i = 0; i < a->n_seq; i++) {
        const DraftStep *s = a->steps[i];
        const int o = a->off[i], ni = a->off[i + 1] - o;
        if (s->catch_up) be->copy(e0->tfeat + (size_t)o * fw, s->hidden, (size_t)ni * fw);
        else be->copy_rows(e0->feat + (size_t)o * e0->h, NULL, ((EagleHead *)s->d->impl)->node_feat, a->par + o, ni,
                           e0->h);
    }
    return s0->catch_up ? e0->tfeat : e0->feat;
}

/* one batched step's ops, nothing returned to the host (one graph on a GPU) */
static void run_ops(void *arg) {
    const RunArgs *a = arg;
    Draft *d0 = a->steps[0]->d;
    EagleHead *e0 = d0->impl;
    const Backend *be = d0->be;
    const int h = e0->h, catch_up = a->steps[0]->catch_up;
    const float *feat = gather_features(a, e0);
    e0->forward(d0, e0, a->tokens, feat, catch_up, a->pos, a->n, a->seqs, a->n_seq, a->logit_rows, a->n_logit);
    for (int i = 0; i < a->n_seq; i++) {
        const DraftStep *s = a->steps[i];
        EagleHead *e = s->d->impl;
        const int o = a->off[i], ni = a->off[i + 1] - o;
        if (catch_up) {   /* the root's feature and logits: the last pair's */
            be->copy(e->node_feat, e0->x + (size_t)(o + ni - 1) * h, h);
            be->copy(s->d->root_logits, e0->logits + (size_t)i * d0->Vd, d0->Vd);
        } else {
            be->copy_rows(e->node_feat, a->nodes + o, e0->x + (size_t)o * h, NULL, ni, h);
        }
    }
}

/* A catch-up's pair j is (the target's feature at committed position j,
 * token j+1), the last token being `next` (tokens[0] is never an input of
 * the head); a tree node's pair is (its parent's output, its token). */
int eagle_run(DraftStep *const *steps, int n_seq) {
    const int catch_up = steps[0]->catch_up;
    int *off = xmalloc(sizeof(int) * (n_seq + 1));
    off[0] = 0;
    for (int i = 0; i < n_seq; i++) {
        const Draft *d = steps[i]->d;
        const int ni = catch_up ? steps[i]->m : steps[i]->n;
        if (d->n_past + d->n_temp + ni > d->slots) {
            err_set("draft context of %d exceeds its KV cache (%d slots)", d->n_past + d->n_temp + ni, d->slots);
            free(off);
            return -1;
        }
        off[i + 1] = off[i] + ni;
    }
    const int n = off[n_seq];
    Draft *d0 = steps[0]->d;
    EagleHead *e0 = d0->impl;
    const int on_device = steps[0]->on_device;   /* the device cycle's steps (draft_run_steps groups them) */
    if (on_device && catch_up) {
        err_set("an EAGLE draft's catch-up has no device inputs");
        free(off);
        return -1;
    }
    for (int i = 0; i < n_seq && on_device; i++)
        if (!steps[i]->past) {
            err_set("a device cycle's draft step without its first slot in backend memory");
            free(off);
            return -1;
        }
    eagle_reserve(d0, e0, n);
    int *tokens = xmalloc(sizeof(int) * n), *pos = xmalloc(sizeof(int) * n), *par = xmalloc(sizeof(int) * n);
    int *nodes = xmalloc(sizeof(int) * n), *rows = xmalloc(sizeof(int) * n_seq);
    SeqView *seqs = xmalloc(sizeof *seqs * n_seq);
    for (int i = 0; i < n_seq; i++) {
        DraftStep *s = steps[i];
        Draft *d = s->d;
        const int o = off[i], ni = off[i + 1] - o;
        if (catch_up) {
            for (int j = 0; j < ni - 1; j++) tokens[o + j] = s->tokens[1 + j];
            tokens[o + ni - 1] = s->next;
            for (int j = 0; j < ni; j++) pos[o + j] = d->n_past + j;
            rows[i] = o + ni - 1;
            reserve_node_feat(d, d->impl, 1);
        } else {
            if (!on_device) {
                memcpy(tokens + o, s->tok, sizeof(int) * ni);
                memcpy(pos + o, s->pos, sizeof(int) * ni);
                memcpy(par + o, s->par, sizeof(int) * ni);
                memcpy(nodes + o, s->nodes, sizeof(int) * ni);
            }
            reserve_node_feat(d, d->impl, s->tree_n);
        }
        seqs[i] = (SeqView){((EagleHead *)d->impl)->kv, d->n_past + d->n_temp, o, ni, catch_up ? NULL : s->mask,
                            catch_up ? 0 : s->mask_w, NULL};
    }
    /* every control array of the step in backend memory, side by side: the
     * host's in one upload, the device cycle's copied there (one step's
     * are read where they are, first slots included: nothing to send) */
    ForwardCtl *ctl = &e0->ctl;
    size_t at_tok = 0, at_pos = 0, at_masks = 0, at_par = 0, at_nodes = 0, at_rows = 0, at_pasts = 0;
    if (on_device)
        for (int i = 0; i < n_seq; i++) seqs[i].past = steps[i]->past;
    if (on_device && n_seq > 1) {
        forward_ctl_begin(ctl);
        size_t *at[4] = {&at_tok, &at_pos, &at_par, &at_nodes};
        for (int f = 0; f < 4; f++) {   /* the same array of every step */
            *at[f] = ctl->used;
            for (int i = 0; i < n_seq; i++) {
                const DraftStep *st = steps[i];
                forward_ctl_add_dev(ctl, f == 0 ? st->tok : f == 1 ? st->pos : f == 2 ? st->par : st->nodes,
                                    off[i + 1] - off[i]);
            }
        }
        forward_ctl_send(ctl, d0->be);
    } else if (!on_device) {
        forward_ctl_begin(ctl);
        forward_ctl_add_inputs(ctl, tokens, pos, n, seqs, n_seq, &at_tok, &at_pos, &at_masks);
        const size_t tree = catch_up ? 0 : sizeof(int) * n;
        at_par = forward_ctl_add(ctl, par, tree);
        at_nodes = forward_ctl_add(ctl, nodes, tree);
        at_rows = forward_ctl_add(ctl, rows, catch_up ? sizeof(int) * n_seq : 0);
        at_pasts = forward_ctl_add_pasts(ctl, seqs, n_seq);
        forward_ctl_send(ctl, d0->be);
        forward_ctl_pasts(ctl, seqs, n_seq, at_pasts);
        forward_ctl_masks(ctl, seqs, n_seq, at_masks);
    }
    RunArgs a = {steps, n_seq, n, catch_up ? n_seq : n, off, NULL, NULL, NULL, NULL, NULL, seqs};
    if (on_device && n_seq == 1) {
        a.tokens = steps[0]->tok; a.pos = steps[0]->pos; a.par = steps[0]->par; a.nodes = steps[0]->nodes;
    } else {
        a.tokens = forward_ctl_at(ctl, at_tok);
        a.pos = forward_ctl_at(ctl, at_pos);
        a.par = forward_ctl_at(ctl, at_par);
        a.nodes = forward_ctl_at(ctl, at_nodes);
        a.logit_rows = catch_up ? forward_ctl_at(ctl, at_rows) : NULL;
    }
    backend_recorded(d0->be, run_ops, &a);
    for (int i = 0; i < n_seq; i++) {
        if (catch_up) steps[i]->added = off[i + 1] - off[i];
        else steps[i]->logits = e0->logits + (size_t)off[i] * d0->Vd;
    }
    free(tokens); free(pos); free(par); free(nodes); free(rows); free(seqs); free(off);
    return 0;
}

const DraftOps draft_eagle_ops = {
    .kind = "eagle",
    .auto_default = 1,
    .load = eagle_load,
    .free = eagle_head_free,
    .run = eagle_run,
    .clone = eagle_clone,
    .set_vocab = eagle_set_vocab,
};
