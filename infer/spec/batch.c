/* Batched decoding (infer/spec/batch.h). */
#include "infer/spec/batch.h"
#include "kernels/base/util.h"
#include <stdlib.h>
#include <string.h>

typedef struct {
    Decoder *dec;
    Policy *policy;
    Draft *draft;         /* the slot's own (NULL for ar) */
    int job;              /* index of its question, -1 when idle */
    int turn;             /* 0-based turn in progress */
    const char **answers; /* the question's answers so far */
    int32_t *ids;         /* the turn's prompt */
    size_t n_ids;
    int *out;             /* the turn's tokens */
    DecodeStats st;
} Slot;

typedef struct {
    Session *s;
    const BatchOptions *o;
    const Question *const *qs;
    int n, next;          /* questions, and the next one not yet taken */
    TurnFn fn;
    void *const *ctxs;
} Run;

static void slot_drop_job(Slot *sl, const Question *q) {
    for (int i = 0; i < q->n_turns; i++) free((char *)sl->answers[i]);
    free(sl->answers);
    sl->answers = NULL;
    sl->job = -1;
}

/* Prefill of the slot's next turn. */
static int slot_start_turn(Run *r, Slot *sl) {
    const Question *q = r->qs[sl->job];
    if (session_prompt(r->s, q, sl->answers, sl->turn, &sl->ids, &sl->n_ids)) return -1;
    int *prompt = xmalloc(sizeof(int) * sl->n_ids);
    for (size_t i = 0; i < sl->n_ids; i++) prompt[i] = sl->ids[i];
    int rc = decoder_begin(sl->dec, prompt, (int)sl->n_ids, r->s->cfg.max_new, sl->out, &sl->st);
    free(prompt);
    return rc;
}

/* The slot's turn is done: its answer joins the question's, fn sees it;
 * the question ends with its last turn. */
static int slot_finish_turn(Run *r, Slot *sl) {
    const Question *q = r->qs[sl->job];
    int n = decoder_end(sl->dec);
    sl->answers[sl->turn] = session_answer(r->s, sl->out, n);
    int rc = r->fn ? r->fn(r->ctxs[sl->job], q, sl->turn, sl->ids, sl->n_ids, sl->out, n, &sl->st) : 0;
    free(sl->ids);
    sl->ids = NULL;
    if (++sl->turn == q->n_turns) slot_drop_job(sl, q);
    return rc;
}

/* Gives the slot a turn in progress: the next of its question, or the first
 * of the next question when take_new; idle when there is none. */
static int slot_advance(Run *r, Slot *sl, int take_new) {
    for (;;) {
        if (sl->job < 0) {
            if (!take_new || r->next >= r->n) return 0;
            sl->job = r->next++;
            sl->turn = 0;
            sl->answers = xcalloc(r->qs[sl->job]->n_turns, sizeof(char *));
        }
        if (slot_start_turn(r, sl)) return -1;
        if (!sl->dec->done) return 0;
        if (slot_finish_turn(r, sl)) return -1;   /* ended at its first token */
    }
}

static void slots_free(Slot *sl, int n, const Run *r) {
    for (int i = 0; i < n; i++) {
        if (r && sl[i].job >= 0) slot_drop_job(&sl[i], r->qs[sl[i].job]);
        free(sl[i].ids);
        free(sl[i].out);
        decoder_free(sl[i].dec);
        policy_free(sl[i].policy);
        draft_free(sl[i].draft);
    }
    free(sl);
}

static Slot *slots_new(Session *s, const PolicyParams *prm, int n) {
    Slot *sl = xcalloc(n, sizeof *sl);
    for (int i = 0; i < n; i++) {
        sl[i].job = -1;
        sl[i].out = xmalloc(sizeof(int) * (s->cfg.max_new + 1));
        if (!(sl[i].policy = policy_new(prm)) ||
            (sl[i].policy->needs_draft && !(sl[i].draft = session_draft_new(s))) ||
            !(sl[i].dec = session_decoder_with(s, sl[i].policy, sl[i].draft))) {
            slots_free(sl, i + 1, NULL);
            return NULL;
        }
    }
    return sl;
}

/* The buffers of one batched forward: every active slot's tree. */
typedef struct {
    LlamaState **states;
    int *tokens, *pos, *off, cap;
    const uint8_t **masks;
    LogitsMode *modes;
} Forward;

static int forward_trees(LlamaBatch *lb, Forward *f, Slot *const *act, int na) {
    int total = 0;
    for (int i = 0; i < na; i++) total += act[i]->dec->tree.n;
    if (total > f->cap) {
        f->cap = total * 2;
        f->tokens = xrealloc(f->tokens, sizeof(int) * f->cap);
        f->pos = xrealloc(f->pos, sizeof(int) * f->cap);
    }
    f->off[0] = 0;
    for (int i = 0; i < na; i++) {
        const Decoder *d = act[i]->dec;
        const int n = d->tree.n;
        memcpy(f->tokens + f->off[i], d->tree.token, sizeof(int) * n);
        memcpy(f->pos + f->off[i], d->pos, sizeof(int) * n);
        f->off[i + 1] = f->off[i] + n;
        f->states[i] = d->target;
        f->masks[i] = n > 1 ? d->mask : NULL;
        f->modes[i] = d->lazy ? LOGITS_NONE : LOGITS_ALL;
    }
    return llama_forward_batch(lb, f->states, na, f->tokens, f->pos, f->off, f->masks, f->modes);
}

/* One cycle of every slot with a turn in progress (act[0..na)). */
static int cycle(Run *r, LlamaBatch *lb, Forward *f, Slot *const *act, int na) {
    const Backend *be = r->s->target->be;
    for (int i = 0; i < na; i++)
        if (decoder_draft(act[i]->dec)) return -1;
    if (forward_trees(lb, f, act, na)) return -1;
    const char *failure = backend_failure(be);
    if (failure) { err_set("batched forward: %s backend failed: %s", be->name, failure); return -1; }
    for (int i = 0; i < na; i++) {
        Slot *sl = act[i];
        if (decoder_accept(sl->dec)) return -1;
        if (!sl->dec->done) continue;
        if (slot_finish_turn(r, sl) || slot_advance(r, sl, !r->o->static_batches)) return -1;
    }
    return 0;
}

int batch_run(Session *s, const PolicyParams *prm, const BatchOptions *o, const Question *const *qs, int n,
              TurnFn fn, void *const *ctxs, double *wall) {
    *wall = 0;
    if (o->slots < 1) { err_set("--batch must be at least 1"); return -1; }
    Run r = {s, o, qs, n, 0, fn, ctxs};
    Slot *sl = slots_new(s, prm, o->slots);
    if (!sl) return -1;
    LlamaBatch *lb = llama_batch_new(s->target);
    Forward f = {0};
    f.states = xcalloc(o->slots, sizeof *f.states);
    f.off = xcalloc(o->slots + 1, sizeof *f.off);
    f.masks = xcalloc(o->slots, sizeof *f.masks);
    f.modes = xcalloc(o->slots, sizeof *f.modes);
    Slot **act = xcalloc(o->slots, sizeof *act);
    BackendTuner tuner = {0};
    int rc = 0;
    const double t0 = now_seconds();   /* after the slots are made: what decoding takes */
    while (!rc) {
        int busy = 0;
        for (int i = 0; i < o->slots; i++) busy |= sl[i].job >= 0;
        /* continuous: any idle slot takes the next question; static: a new
         * group once every slot is idle */
        for (int i = 0; i < o->slots && !rc; i++)
            if (sl[i].job < 0 && (!o->static_batches || !busy)) rc = slot_advance(&r, &sl[i], 1);
        int na = 0;
        for (int i = 0; i < o->slots; i++)
            if (sl[i].job >= 0 && !sl[i].dec->done) act[na++] = &sl[i];
        if (rc || (na == 0 && r.next >= n)) break;
        if (na == 0) continue;
        backend_unit_begin(s->target->be, &tuner);
        rc = cycle(&r, lb, &f, act, na);
        backend_unit_end(s->target->be, &tuner);
    }
    *wall = now_seconds() - t0;
    free(act);
    free(f.states); free(f.off); free(f.masks); free(f.modes); free(f.tokens); free(f.pos);
    llama_batch_free(lb);
    slots_free(sl, o->slots, &r);
    return rc;
}
