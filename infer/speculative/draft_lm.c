/* A small LLaMA-family LM as a draft source: its own KV cache, tree nodes as
 * temporary entries that draft_end_cycle truncates away. */
#include "infer/speculative/draft.h"
#include "kernels/base/util.h"
#include <stdlib.h>
#include <string.h>

typedef struct {
    LlamaModel *lm;
    LlamaState *lms;
    int started;   /* the first catch-up also feeds tokens[0] */
    void *vocab_host;   /* bytes of a reduced draft vocabulary's LM head (set_vocab) */
    Weight full_head;   /* the LM's own head while a reduced one replaces it */
    int reduced;        /* lm->lm_head is a reduced vocabulary's */
    LlamaBatch *batch;  /* scratch of lm_run's forwards */
    ForwardCtl ctl;     /* device-cycle steps' tokens and positions, packed */
    int shared;         /* a clone: lm is another draft's */
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
    memcpy(d->weight_types, l->lm->weight_types, sizeof d->weight_types);
    l->lms = llama_state_new(l->lm, d->slots);
    return l->lms && !llama_warm(l->lm) ? 0 : -1;
}

static void lm_free(Draft *d) {
    DraftLM *l = d->impl;
    if (!l) return;
    llama_state_free(l->lms);
    llama_batch_free(l->batch);
    forward_ctl_free(&l->ctl);
    if (!l->shared) {
        if (l->reduced) {   /* llama_free releases the model's own head */
            d->be->weight_release(&l->lm->lm_head);
            l->lm->lm_head = l->full_head;
        }
        llama_free(l->lm);
        free(l->vocab_host);
    }
    free(l);
}

static void lm_rewind(Draft *d) {
    DraftLM *l = d->impl;
    l->started = d->n_past > 0;
    llama_truncate(l->lms, d->n_past);
}

/* A catch-up's inputs are tokens[1..m) then next, and on a draft's very
 * first catch-up also tokens[0], less the tokens whose entries it keeps
 * (DraftStep.keep: moved to the committed slots first); tree nodes are
 * temporary entries that draft_end_cycle truncates away.  All steps'
 * tokens in one forward. */
static int lm_run(DraftStep *const *steps, int n_seq) {
    const int catch_up = steps[0]->catch_up;
    LlamaState **states = xmalloc(sizeof *states * n_seq);
    const uint8_t **masks = xmalloc(sizeof *masks * n_seq);
    int *mask_w = xmalloc(sizeof(int) * n_seq);
    LogitsMode *modes = xmalloc(sizeof *modes * n_seq);
    int *off = xmalloc(sizeof(int) * (n_seq + 1)), total = 0;
    for (int i = 0; i < n_seq; i++) {
        const DraftStep *s = steps[i];
        const DraftLM *l = s->d->impl;
        total += catch_up ? s->m - (l->started ? 1 : 0) - s->kept + 1 : s->n;
    }
    int *tok = xmalloc(sizeof(int) * total), *pos = xmalloc(sizeof(int) * total), rc = 0;
    off[0] = 0;
    for (int i = 0; i < n_seq && !rc; i++) {
        const DraftStep *s = steps[i];
        const Draft *d = s->d;
        const DraftLM *l = d->impl;
        const int o = off[i], first = (l->started ? 1 : 0) + s->kept;
        const int ni = catch_up ? s->m - first + 1 : s->n;
        if (catch_up && d->n_past + s->kept + ni > d->slots) {
            err_set("draft context of %d exceeds its KV cache (%d slots)", d->n_past + s->kept + ni, d->slots);
            rc = -1;
        }
        if (catch_up && !rc) {   /* the kept entries to the committed slots, then the rest */
            llama_truncate(l->lms, d->n_past);
            llama_commit(l->lms, s->kept ? s->keep : NULL, s->kept);
        }
        if (catch_up) {
            for (int j = 0; j < ni - 1; j++) tok[o + j] = s->tokens[first + j];
            tok[o + ni - 1] = s->next;
            for (int j = 0; j < ni; j++) pos[o + j] = d->n_past + s->kept + j;
        } else if (!s->on_device) {
            memcpy(tok + o, s->tok, sizeof(int) * ni);
            memcpy(pos + o, s->pos, sizeof(int) * ni);
        }
        off[i + 1] = o + ni;
        states[i] = l->lms;
        if (!catch_up) {
            /* this cycle's entries so far (a no-op but where the step is
             * issued again: a recorded draft phase), then the first slot
             * where a device step keeps it */
            llama_truncate(l->lms, d->n_past + d->n_temp);
            l->lms->past_dev = s->on_device ? s->past : NULL;
        }
        masks[i] = catch_up ? NULL : s->mask;
        mask_w[i] = catch_up ? ni : s->mask_w;
        modes[i] = catch_up ? LOGITS_LAST : LOGITS_ALL;
    }
    DraftLM *l0 = steps[0]->d->impl;
    if (!rc && !l0->batch) l0->batch = llama_batch_new(l0->lm);
    if (!rc && steps[0]->on_device && catch_up) {
        err_set("a draft LM's catch-up has no device inputs");
        rc = -1;
    } else if (!rc && steps[0]->on_device && n_seq == 1) {   /* the device cycle's step: read where it is */
        rc = llama_forward_batch_dev(l0->batch, states, 1, steps[0]->tok, steps[0]->pos, off, masks, mask_w, modes);
    } else if (!rc && steps[0]->on_device) {   /* the device cycle's steps: tokens and positions packed there */
        forward_ctl_begin(&l0->ctl);
        const size_t at_tok = l0->ctl.used;
        for (int i = 0; i < n_seq; i++) forward_ctl_add_dev(&l0->ctl, steps[i]->tok, steps[i]->n);
        const size_t at_pos = l0->ctl.used;
        for (int i = 0; i < n_seq; i++) forward_ctl_add_dev(&l0->ctl, steps[i]->pos, steps[i]->n);
        forward_ctl_send(&l0->ctl, steps[0]->d->be);
        rc = llama_forward_batch_dev(l0->batch, states, n_seq, forward_ctl_at(&l0->ctl, at_tok),
                                     forward_ctl_at(&l0->ctl, at_pos), off, masks, mask_w, modes);
    } else if (!rc) {
        rc = llama_forward_batch(l0->batch, states, n_seq, tok, pos, off, masks, mask_w, modes);
    }
    for (int i = 0; i < n_seq; i++) ((DraftLM *)steps[i]->d->impl)->lms->past_dev = NULL;
    for (int i = 0; i < n_seq && !rc; i++) {
        DraftStep *s = steps[i];
        DraftLM *l = s->d->impl;
        llama_commit(l->lms, NULL, off[i + 1] - off[i]);   /* tree nodes: dropped by draft_end_cycle */
        if (catch_up) {
            s->d->be->copy(s->d->root_logits, l->lms->logits, s->d->Vd);
            l->started = 1;
            s->added = l->lms->n_past - s->d->n_past;
        } else {
            s->logits = l->lms->logits;
        }
    }
    free(states); free(masks); free(mask_w); free(modes); free(off); free(tok); free(pos);
    return rc;
}

static int lm_clone(Draft *dst, const Draft *src) {
    const DraftLM *s = src->impl;
    DraftLM *l = xcalloc(1, sizeof *l);
    dst->impl = l;
    l->lm = s->lm;
    l->shared = 1;
    l->lms = llama_state_new(l->lm, dst->slots);
    return l->lms ? 0 : -1;
}

/* The LM's own head shrinks to the chosen rows; its logits rows then have n
 * columns (the state's buffers, sized for the full vocabulary, still fit).
 * The full head is kept aside, and ids NULL puts it back. */
static int lm_set_vocab(Draft *d, const int *ids, int n) {
    DraftLM *l = d->impl;
    LlamaModel *m = l->lm;
    Weight w = {0};
    void *host = NULL;
    if (ids && llama_lm_head_rows(m, ids, n, &w, &host)) return -1;
    if (l->reduced) d->be->weight_release(&m->lm_head);
    else l->full_head = m->lm_head;
    free(l->vocab_host);
    m->lm_head = ids ? w : l->full_head;
    l->vocab_host = host;
    l->reduced = ids != NULL;
    return 0;
}

static void lm_end_cycle(Draft *d) {
    DraftLM *l = d->impl;
    llama_truncate(l->lms, d->n_past);
}

/* EAGLE heads, every one published, are a single decoder layer; a draft of
 * several layers is a language model of its own (a smaller sibling). */
static int lm_detect(const ModelConfig *c) { return c->layers > 1; }

const DraftOps draft_lm_ops = {
    .kind = "lm",
    .detect = lm_detect,
    .detect_rule = "has more than one layer",
    .load = lm_load,
    .free = lm_free,
    .rewind = lm_rewind,
    .run = lm_run,
    .clone = lm_clone,
    .end_cycle = lm_end_cycle,
    .set_vocab = lm_set_vocab,
    .keeps_path = 1,
    .first_token_entry = 1,
};
