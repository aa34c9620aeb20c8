/* An EAGLE-3 head as a draft source (SafeAILab/EAGLE cnets.py, the layout
 * of the published EAGLE3-* checkpoints):
 *   fc.weight [h, 3·ht], no bias: the target's three layer inputs -> h;
 *   midlayer.*: one decoder layer whose attention reads 2h floats,
 *     [input_layernorm(embed(token)); hidden_norm(feature)], and whose
 *     residual is the feature itself;
 *   norm.weight [h] and lm_head.weight [draft_vocab, h]: its own output
 *     norm and LM head over a reduced draft vocabulary;
 *   d2t [draft_vocab] I64: offsets, target id = draft id + d2t[draft id]
 *     (t2d, the inverse mask, is not needed).
 * At catch-up a pair's feature is fc over the target's features; in the
 * tree a node's feature is its parent's layer output before the norm, fed
 * back as it is (no fc).  Embeddings are the target's unless the head ships
 * embed_tokens.weight (then its own win, as in EAGLE's loader). */
#include "infer/speculative/draft_eagle.h"
#include "kernels/base/util.h"
#include <stdlib.h>
#include <string.h>

static void eagle3_forward(Draft *d, EagleHead *e, const int *tokens, const float *feat, int from_target,
                           const int *pos, int n, const SeqView *seqs, int n_seq, const int *logit_rows,
                           int n_logit) {
    const Backend *be = d->be;
    const ModelConfig *c = &d->cfg;
    const int h = e->h;
    if (from_target) be->matmul(e->x, feat, &e->fc_w, n);
    else be->copy(e->x, feat, (size_t)n * h);
    be->embed(e->emb, e->embed, tokens, n);
    be->rmsnorm(e->ls.xb, e->emb, &e->layer.attn_norm, n, c->rms_eps);
    be->rmsnorm(e->normed, e->x, &e->hidden_norm, n, c->rms_eps);
    be->concat(e->cat, e->ls.xb, h, e->normed, h, n);
    llama_attention_block(be, c, &e->layer, e->inv_freq, 0, &e->ls, e->cat, n, pos, seqs, n_seq);
    llama_mlp_block(be, c, &e->layer, &e->ls, e->x, n);
    be->rmsnorm(e->normed, e->x, &e->norm, n, c->rms_eps);
    eagle_logits(d, e, e->normed, logit_rows, n_logit);
}

static int ascending(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

/* The target layers whose inputs the head reads: the config's list, else
 * EAGLE's 2, L/2, L-3; concatenated in layer order, as EAGLE and vLLM
 * collect them. */
static int feature_layers(Draft *d, const char *dir) {
    const ModelConfig *c = &d->cfg;
    const int L = d->target->cfg.layers;
    int *f = d->feat_layers;
    if (c->n_aux_layers) memcpy(f, c->aux_layers, sizeof(int) * EAGLE3_FEAT_LAYERS);
    else { f[0] = 2; f[1] = L / 2; f[2] = L - 3; }
    qsort(f, EAGLE3_FEAT_LAYERS, sizeof(int), ascending);
    d->n_feat_layers = EAGLE3_FEAT_LAYERS;
    if (f[0] >= 0 && f[2] < L && f[0] < f[1] && f[1] < f[2]) return 0;
    if (c->n_aux_layers)
        err_set("%s: eagle_aux_hidden_state_layer_ids %d, %d, %d are not three distinct layers of a target of %d",
                dir, f[0], f[1], f[2], L);
    else
        err_set("%s: EAGLE-3's layers 2, L/2, L-3 are not three distinct layers of a target of %d: "
                "name them with eagle_aux_hidden_state_layer_ids in config.json", dir, L);
    return -1;
}

/* d2t offsets -> the target id of each draft column; distinct and in range */
static int draft_to_target(Draft *d, const SafeTensors *st, const char *dir, int Vd) {
    const int V = d->V;
    const StTensor *t = st_find(st, "d2t");
    if (!t || t->dtype != DT_I64 || t->ndim != 1 || t->shape[0] != Vd) {
        err_set("%s: draft_vocab_size %d < vocab %d needs a tensor d2t of I64 [%d]", dir, Vd, V, Vd);
        return -1;
    }
    int *ids = xmalloc(sizeof(int) * Vd);
    uint8_t *seen = xcalloc(V, 1);
    int64_t *off = xmalloc(sizeof(int64_t) * Vd);   /* a copy: the mapped bytes may be unaligned */
    memcpy(off, t->data, sizeof(int64_t) * Vd);
    int rc = 0;
    for (int i = 0; i < Vd && !rc; i++) {
        if (off[i] < -(int64_t)i || off[i] >= (int64_t)V - i) {   /* no overflow: compared before adding */
            err_set("%s: d2t[%d] = %lld maps draft id %d outside the vocabulary of %d", dir, i, (long long)off[i],
                    i, V);
            rc = -1;
        } else if (seen[i + off[i]]) {
            err_set("%s: d2t maps two draft ids to target id %lld", dir, (long long)(i + off[i]));
            rc = -1;
        } else {
            seen[i + off[i]] = 1;
            ids[i] = (int)(i + off[i]);
        }
    }
    free(seen); free(off);
    if (rc) { free(ids); return -1; }
    d->d2t = ids;
    return 0;
}

static int eagle3_load(Draft *d, const char *dir) {
    EagleHead *e = eagle_head_open(d, dir);
    if (!e) return -1;
    e->forward = eagle3_forward;
    const ModelConfig *c = &d->cfg, *tc = &d->target->cfg;
    const int64_t h = c->hidden, th = c->target_hidden ? c->target_hidden : c->hidden;
    /* an EAGLE-1/2 head: its one decoder layer is layers.0, not midlayer */
    if (!st_find(e->st, "midlayer.self_attn.q_proj.weight") && st_find(e->st, "layers.0.self_attn.q_proj.weight")) {
        err_set("%s: this is an EAGLE-1/2 head (layers.0.*, no midlayer.*): use --draft-kind eagle", dir);
        return -1;
    }
    if (c->vocab != tc->vocab || th != tc->hidden) {
        err_set("%s: EAGLE-3 head does not fit the target: vocab %d vs %d, target hidden size %lld vs %d", dir,
                c->vocab, tc->vocab, (long long)th, tc->hidden);
        return -1;
    }
    if (feature_layers(d, dir)) return -1;
    d->feat_width = EAGLE3_FEAT_LAYERS * tc->hidden;
    const int Vd = c->draft_vocab ? c->draft_vocab : c->vocab;
    const Backend *be = d->be;
    if (llama_load_weight(be, e->st, "fc.weight", h, EAGLE3_FEAT_LAYERS * th, &e->fc_w) ||
        llama_load_layer(be, e->st, c, "midlayer.", 1, 2 * h, &e->layer) ||
        llama_load_weight(be, e->st, "midlayer.hidden_norm.weight", 1, h, &e->hidden_norm) ||
        llama_load_weight(be, e->st, "norm.weight", 1, h, &e->norm) ||
        llama_load_weight(be, e->st, "lm_head.weight", Vd, h, &e->own_lm_head))
        return -1;
    e->lm_head = &e->own_lm_head;
    if (st_find(e->st, "embed_tokens.weight")) {
        if (llama_load_weight(be, e->st, "embed_tokens.weight", c->vocab, h, &e->own_embed)) return -1;
        e->embed = &e->own_embed;
    } else if (h != tc->hidden) {
        err_set("%s: a head of hidden size %lld needs its own embed_tokens.weight (the target's are %d wide)", dir,
                (long long)h, tc->hidden);
        return -1;
    }
    /* a full-size draft vocabulary needs no map (EAGLE drops d2t then) */
    if (Vd < c->vocab && draft_to_target(d, e->st, dir, Vd)) return -1;
    d->Vd = Vd;
    return 0;
}

/* Every EAGLE-3 head EAGLE's own loader reads has draft_vocab_size (its
 * lm_head's rows); some name their feature layers. */
static int eagle3_detect(const ModelConfig *c) { return c->draft_vocab || c->n_aux_layers; }

const DraftOps draft_eagle3_ops = {
    .kind = "eagle3",
    .detect = eagle3_detect,
    .detect_rule = "has draft_vocab_size or\n                         eagle_aux_hidden_state_layer_ids",
    .load = eagle3_load,
    .free = eagle_head_free,
    .run = eagle_run,
    .clone = eagle_clone,
};
