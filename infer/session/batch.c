/* Batched decoding (infer/session/batch.h).  Each slot is a fiber (fiber.h)
 * running the one-sequence code, session_question over decoder_run, with
 * its gate (slot_pass) as its decoder's, its draft's and its device
 * cycle's (Decoder.gate, Draft.gate, DevCycle.gate).
 *
 * Where a sequence waits: at every call of a gate's pass (gate.h lists
 * them): the target's forwards and rows (decode.c: target_forward,
 * path_logits), the draft's forwards and distributions (draft.c:
 * draft_step, dist_pass), calibration (observers.c: decoder_calibrate), and
 * the device cycle's tree ops and reads (gate.c: gate_tree_op and
 * gate_to_host, which a policy's or the decoder's cycle_op_*,
 * cycle_to_host and tree_inputs_make reach).  slot_pass suspends the
 * fiber there until the scheduler has run the call.
 *
 * The scheduler's order (schedule): resume every ready fiber until each
 * waits, then run the calls of the first kind in this order that has any,
 * every waiting slot's as one product, and resume those slots:
 *   GATE_PREFILL: prompts, together and apart from verification (a prompt
 *     of hundreds of tokens would change how the trees' products are
 *     summed, see batch.h), so that new sequences join the next round;
 *   GATE_CALIBRATE: the round's cost curve, once;
 *   GATE_TREE: tree ops, those of one kind as one tree_batch (a launch for
 *     all the trees instead of one per slot; tree_calls);
 *   GATE_READ: reads of backend memory, one transfer (read_calls);
 *   GATE_DIST: the distributions of draft logits, all rows in one call;
 *   GATE_ROW: verification rows (a slot whose walk ended waits for the
 *     others' walks, so that the slots catch up and draft in step);
 *   GATE_DRAFT: draft forwards;
 *   GATE_VERIFY: the target's forward, last, so that the slots whose trees
 *     are ready wait for the rest and it verifies as many trees as
 *     possible. */
#include "infer/session/batch.h"
#include "infer/speculative/cycle.h"
#include "infer/session/fiber.h"
#include "kernels/base/util.h"
#include <stdlib.h>
#include <string.h>

/* Each fiber's stack: the decoding loop, a policy's build and the kernels'
 * host code run on it (OpenMP's other threads have their own). */
#define FIBER_STACK (1 << 20)

typedef enum { FIBER_READY, FIBER_WAITING, FIBER_BARRIER, FIBER_DONE } FiberState;

typedef struct Run Run;

typedef struct {
    Gate gate;            /* first member: a gate is its slot */
    Run *run;
    Fiber fiber;
    FiberState state;
    GateCall *call;       /* what it waits on (FIBER_WAITING) */
    int rc;               /* that call's result */
    Decoder *dec;
    Policy *policy;
    Draft *draft;         /* its own clone of the session's (NULL for ar) */
} Slot;

struct Run {
    Session *s;
    const BatchOptions *o;
    const Question *const *qs;
    int n, next;          /* questions, and the next one not yet taken */
    TurnFn fn;
    void *const *ctxs;
    Fiber sched;          /* the scheduler: the calling thread's own context */
    Slot *slots;
    LlamaBatch *lb;       /* the target's batched forwards */
    ForwardCtl ctl;       /* device-cycle calls' inputs, packed */
    /* Auto tree sizes (cost.h): the round's curve, calibrated once for all
     * the slots (GATE_CALIBRATE); when the last round's verification ended
     * (0 before the first), and the seconds of prefills and calibration
     * since, which are no round's */
    CostModel curve;
    double round_end, round_aside;
    /* whether the rounds draft at all (cost.h), every slot alike; the last
     * round's seconds and mode, waiting for its tokens (they are counted as
     * its trees are accepted, after the next round's verification began) */
    DraftSwitch sw;
    double last_round_s;
    int last_off;
    double calibration_s;   /* what calibrating took: not decoding time */
    BatchDevice device;   /* the device cycles' tree ops and reads that went through the gates, and their batches */
    int failed;
    char err[1024];       /* the first failure */
    int stopped;          /* BatchOptions.stop ended the run (failed is set too, to unwind the fibers) */
};

/* The slots' Gate.pass: the fiber waits here until run_calls has run the
 * call with the other slots' of its kind, and returns its result (-1 where
 * the run failed and unwinds: a GATE_TREE or GATE_READ caller then runs it
 * alone, gate.h). */
static int slot_pass(Gate *g, GateCall *call) {
    Slot *sl = (Slot *)g;
    sl->call = call;
    sl->state = FIBER_WAITING;
    fiber_switch(&sl->fiber, &sl->run->sched);
    return sl->rc;
}

/* The waiting slots' tree ops w[0..n): those of each kind as one batch. */
static void tree_calls(Run *r, Slot *const *w, int n) {
    TreeOp *ops = xmalloc(sizeof *ops * (n ? n : 1));
    for (int kind = 0; kind < TREE_OP_KINDS; kind++) {
        int m = 0;
        for (int i = 0; i < n; i++)
            if ((int)w[i]->call->tree->kind == kind) ops[m++] = *w[i]->call->tree;
        if (!m) continue;
        backend_tree_batch(r->s->target->be, ops, m);
        r->device.tree_ops += m;
        r->device.tree_batches++;
    }
    free(ops);
}

/* The waiting slots' reads w[0..n) as one to_host_many. */
static void read_calls(Run *r, Slot *const *w, int n) {
    float **host = xmalloc(sizeof *host * n);
    const float **dev = xmalloc(sizeof *dev * n);
    size_t *words = xmalloc(sizeof *words * n);
    for (int i = 0; i < n; i++) { host[i] = w[i]->call->host; dev[i] = w[i]->call->dev; words[i] = w[i]->call->words; }
    backend_to_host_many(r->s->target->be, host, dev, words, n);
    r->device.reads += n;
    r->device.read_batches++;
    free(host); free(dev); free(words);
}

static void fail(Run *r) {
    if (!r->failed) snprintf(r->err, sizeof r->err, "%s", err_get());
    r->failed = 1;
}

/* A slot's life: the next question not yet taken, all its turns, again;
 * with static batches each group of questions starts when every slot is
 * idle (the barrier). */
static void fiber_main(void *arg) {
    Slot *sl = arg;
    Run *r = sl->run;
    for (;;) {
        if (r->o->static_batches) {
            sl->state = FIBER_BARRIER;
            fiber_switch(&sl->fiber, &r->sched);
        }
        if (r->failed || r->next >= r->n) break;
        const int job = r->next++;
        if (r->o->hook) decoder_set_hook(sl->dec, r->o->hook, r->ctxs[job], r->o->hook_reads_tree);
        if (session_question(r->s, sl->dec, r->qs[job], r->fn, r->ctxs[job]) ||
            (r->o->question_done && r->o->question_done(r->ctxs[job]))) {
            fail(r);
            break;
        }
    }
    sl->state = FIBER_DONE;   /* the fiber then switches to the scheduler */
}

/* The target's forwards of n calls (GATE_PREFILL or GATE_VERIFY: one
 * sequence's tokens each) as one batched forward; calls of the device
 * cycle (on_device) have their tokens and positions packed side by side in
 * backend memory, their masks read where they are. */
static int forward_calls(Run *r, const GateCall *const *calls, int n) {
    for (int i = 1; i < n; i++)
        if (calls[i]->on_device != calls[0]->on_device) {
            err_set("a batched forward mixes host and device inputs");
            return -1;
        }
    int total = 0;
    for (int i = 0; i < n; i++) total += calls[i]->n;
    LlamaState **states = xmalloc(sizeof *states * n);
    const uint8_t **masks = xmalloc(sizeof *masks * n);
    LogitsMode *modes = xmalloc(sizeof *modes * n);
    int *off = xmalloc(sizeof(int) * (n + 1)), *tokens = xmalloc(sizeof(int) * (total ? total : 1)),
        *pos = xmalloc(sizeof(int) * (total ? total : 1));
    off[0] = 0;
    for (int i = 0; i < n; i++) {
        const GateCall *c = calls[i];
        if (!c->on_device) {
            memcpy(tokens + off[i], c->tokens, sizeof(int) * c->n);
            memcpy(pos + off[i], c->pos, sizeof(int) * c->n);
        }
        off[i + 1] = off[i] + c->n;
        states[i] = c->state;
        masks[i] = c->mask;
        modes[i] = c->mode;
    }
    int rc;
    if (calls[0]->on_device) {
        forward_ctl_begin(&r->ctl);
        const size_t at_tok = r->ctl.used;
        for (int i = 0; i < n; i++) forward_ctl_add_dev(&r->ctl, calls[i]->tokens, calls[i]->n);
        const size_t at_pos = r->ctl.used;
        for (int i = 0; i < n; i++) forward_ctl_add_dev(&r->ctl, calls[i]->pos, calls[i]->n);
        forward_ctl_send(&r->ctl, r->s->target->be);
        rc = llama_forward_batch_dev(r->lb, states, n, forward_ctl_at(&r->ctl, at_tok), forward_ctl_at(&r->ctl, at_pos),
                                     off, masks, NULL, modes);
    } else {
        rc = llama_forward_batch(r->lb, states, n, tokens, pos, off, masks, NULL, modes);
    }
    free(states); free(masks); free(modes); free(off); free(tokens); free(pos);
    return rc;
}

/* The round's curve for auto tree sizes: the time of one batched forward
 * of a chain of m tokens in each of the n sequences waiting on it, at each
 * of decoder_calibrate's token counts m, as a point at n * m tokens (a
 * round's trees share the forward: its cost follows their total), while
 * decoder_calib_next allows (the curve's last segment extends beyond).
 * Once a session (Session.batch_curve: the A/B repeats reuse
 * it); from and to the cost cache under the decoder's key and the batch
 * size.  Each waiting slot's decoder gets the curve. */
typedef struct {
    Run *r;
    Slot **w;
    int n;
    Tree *chains;
    GateCall *calls;
    const GateCall **cp;
    const int *counts;
} CalibBatch;

/* One batched forward of a chain of counts[c] tokens in each waiting
 * sequence, waited for. */
static int calib_forward(void *ctx, int c) {
    const CalibBatch *f = ctx;
    for (int i = 0; i < f->n; i++) decoder_chain_call(f->w[i]->dec, &f->chains[i], f->counts[c], &f->calls[i]);
    if (forward_calls(f->r, f->cp, f->n)) return -1;
    const Decoder *d0 = f->w[0]->dec;
    d0->target->m->be->to_host(d0->v.row, d0->target->logits, 1);
    return 0;
}

static int calibrate(Run *r, Slot **w, int n) {
    const double t0 = now_seconds();
    Decoder *d0 = w[0]->dec;
    const char *cache = decoder_cost_watch(d0)->cache;
    char key[sizeof r->curve.cache_key];
    int rc = 0;
    if (!r->curve.n_pts && r->s->batch_curve.n_pts) r->curve = r->s->batch_curve;
    if (!r->curve.n_pts) {
        decoder_cost_key(d0, key, sizeof key - 32);
        snprintf(key + strlen(key), 32, "; batch %d", n);
        int got = cache ? cost_cache_get(cache, key, &r->curve) : 0;
        if (got < 0) return -1;
        r->curve.from_cache = got;
        if (!got) {
            cost_init(&r->curve);
            Tree *chains = xcalloc(n, sizeof *chains);
            GateCall *calls = xcalloc(n, sizeof *calls);
            const GateCall **cp = xcalloc(n, sizeof *cp);
            int *n_past = xcalloc(n, sizeof(int)), counts[DECODER_CALIB_MAX];
            const int n_counts = decoder_calib_counts(d0, counts);
            for (int i = 0; i < n; i++) { tree_init(&chains[i]); n_past[i] = w[i]->dec->target->n_past; cp[i] = &calls[i]; }
            double best[DECODER_CALIB_MAX];
            CalibBatch f = {r, w, n, chains, calls, cp, counts};
            const int timed = decoder_calib_rounds(counts, n_counts, calib_forward, &f, best);
            rc = timed < 0 ? -1 : 0;
            for (int c = 0; c < timed; c++) cost_add_point(&r->curve, n * counts[c], best[c]);
            for (int i = 0; i < n; i++) { llama_truncate(w[i]->dec->target, n_past[i]); tree_free(&chains[i]); }
            free(chains); free(calls); free(cp); free(n_past);
            cost_settle_calibration(&r->curve);
            if (!rc && cache && cost_cache_put(cache, key, &r->curve))
                fprintf(stderr, "warning: the calibrated cost curve is not cached: %s\n", err_get());
        }
        r->curve.calibration_s = now_seconds() - t0;
        if (cache) snprintf(r->curve.cache_key, sizeof r->curve.cache_key, "%s", key);
        if (!rc) r->s->batch_curve = r->curve;
    }
    for (int i = 0; i < n && !rc; i++) *w[i]->policy->cost = r->curve;
    return rc;
}

/* Auto sizes: each slot's choice counts the other live slots' latest ones
 * as its load (CostModel.load_tokens, load_gain), so that the slots, each
 * in turn, choose the trees that maximise the round's tokens per second. */
static void set_loads(Run *r) {
    const int ns = r->o->slots;
    int tokens = 0;
    double gain = 0;
    for (int i = 0; i < ns; i++) {
        const Slot *sl = &r->slots[i];
        if (sl->state == FIBER_DONE || !sl->policy->cost) continue;
        tokens += sl->policy->cost->last_tokens;
        gain += sl->policy->cost->last_gain;
    }
    for (int i = 0; i < ns; i++) {
        CostModel *m = r->slots[i].policy->cost;
        if (r->slots[i].state == FIBER_DONE || !r->slots[i].policy->cost) continue;
        m->load_tokens = tokens - m->last_tokens;
        m->load_gain = gain - m->last_gain;
    }
}

/* A round's verification: `tokens` in all took verify_s; the rest of the
 * round since the last one's (drafting, the acceptance, a tree's rows), but
 * for the prefills and calibration between them, is its drafting time.
 * Every live slot's model learns both when the round drafted; the switch
 * learns the last round's tokens per second. */
static void observe_round(Run *r, int tokens, double verify_s) {
    const double now = now_seconds();
    if (r->round_end > 0) {
        const double round_s = now - r->round_end - r->round_aside, draft_s = round_s - verify_s;
        const int off = r->sw.off;   /* what this round's trees were built under */
        for (int i = 0; i < r->o->slots && !off; i++)
            if (r->slots[i].state != FIBER_DONE && r->slots[i].policy->cost && r->slots[i].policy->cost->n_pts)
                cost_observe(r->slots[i].policy->cost, tokens, verify_s, draft_s > 0 ? draft_s : 0, 0);
        if (r->last_round_s > 0 && r->slots[0].policy->cost && r->slots[0].draft)   /* auto sizes only */
            draft_switch_observe(&r->sw, r->last_off, r->sw.round_tokens, r->last_round_s);
        r->sw.round_tokens = 0;
        r->last_round_s = round_s;
        r->last_off = off;
    }
    r->round_end = now;
    r->round_aside = 0;
}

/* The calls of kind k of every slot waiting on one, as one product. */
static int run_calls(Run *r, GateKind k) {
    const int ns = r->o->slots;
    Slot **w = xmalloc(sizeof *w * ns);
    int n = 0, total = 0;
    for (int i = 0; i < ns; i++)
        if (r->slots[i].state == FIBER_WAITING && r->slots[i].call->kind == k) {
            w[n++] = &r->slots[i];
            total += r->slots[i].call->n;
        }
    int rc = 0;
    if (k == GATE_DRAFT) {
        DraftStep **steps = xmalloc(sizeof *steps * n);
        for (int i = 0; i < n; i++) steps[i] = w[i]->call->step;
        rc = draft_run_steps(steps, n);
        free(steps);
    } else if (k == GATE_DIST) {   /* before any other draft step can overwrite the logits they read */
        DistCall **calls = xmalloc(sizeof *calls * n);
        for (int i = 0; i < n; i++) calls[i] = w[i]->call->dist;
        draft_dists(r->s->target->be, calls, n);
        free(calls);
    } else if (k == GATE_ROW) {
        LlamaState **states = xmalloc(sizeof *states * n);
        int *rows = xmalloc(sizeof(int) * n);
        for (int i = 0; i < n; i++) { states[i] = w[i]->call->state; rows[i] = w[i]->call->row; }
        llama_rows_logits(r->lb, states, rows, n);
        for (int i = 0; i < n; i++) w[i]->call->logits = states[i]->logits;
        free(states); free(rows);
    } else if (k == GATE_TREE) {
        tree_calls(r, w, n);
    } else if (k == GATE_READ) {
        read_calls(r, w, n);
    } else if (k == GATE_CALIBRATE) {
        const double t0 = now_seconds();
        rc = calibrate(r, w, n);
        r->round_aside += now_seconds() - t0;
        r->calibration_s += now_seconds() - t0;
    } else {
        const GateCall **calls = xmalloc(sizeof *calls * n);
        for (int i = 0; i < n; i++) calls[i] = w[i]->call;
        const double t0 = now_seconds();
        rc = forward_calls(r, calls, n);
        if (!rc && k == GATE_VERIFY) observe_round(r, total, now_seconds() - t0);
        if (k == GATE_PREFILL) r->round_aside += now_seconds() - t0;
        free(calls);
    }
    const char *failure = backend_failure(r->s->target->be);
    if (!rc && failure) {
        err_set("batched forward: %s backend failed: %s", r->s->target->be->name, failure);
        rc = -1;
    }
    for (int i = 0; i < n; i++) {
        w[i]->rc = rc;
        w[i]->state = FIBER_READY;
    }
    free(w);
    return rc;
}

/* Until every fiber is done: resume the ready ones, then run the waiting
 * calls of the first kind in this order that has any.  A round of cycles
 * (drafts to verification) is the backend tuner's unit, as one cycle is
 * when decoding alone; prefills run first and outside the units, so that a
 * batch of prompts never lands in a unit that times one thread against
 * all (it made the tuner's one-thread probe take seconds). */
static void schedule(Run *r) {
    static const GateKind order[] = {GATE_PREFILL, GATE_CALIBRATE, GATE_TREE, GATE_READ, GATE_DIST, GATE_ROW,
                                     GATE_DRAFT, GATE_VERIFY};
    const int ns = r->o->slots;
    const Backend *be = r->s->target->be;
    BackendTuner tuner = {0};
    int in_unit = 0;
    for (;;) {
        set_loads(r);
        for (int i = 0; i < ns; i++) {
            Slot *sl = &r->slots[i];
            if (sl->state != FIBER_READY) continue;
            fiber_switch(&r->sched, &sl->fiber);
        }
        int waiting[GATE_KINDS] = {0}, live = 0, at_barrier = 0;
        for (int i = 0; i < ns; i++) {
            const Slot *sl = &r->slots[i];
            live += sl->state != FIBER_DONE;
            at_barrier += sl->state == FIBER_BARRIER;
            if (sl->state == FIBER_WAITING) waiting[sl->call->kind]++;
        }
        if (!live) break;
        if (!r->failed && r->o->stop && *r->o->stop) {   /* stopped: unwound as a failure is, not reported as one */
            r->stopped = 1;
            r->failed = 1;
        }
        if (r->failed || at_barrier == live) {   /* unwind every fiber, or open the barrier */
            for (int i = 0; i < ns; i++) {
                Slot *sl = &r->slots[i];
                if (sl->state == FIBER_BARRIER) sl->state = FIBER_READY;
                if (sl->state == FIBER_WAITING && r->failed) { sl->rc = -1; sl->state = FIBER_READY; }
            }
            continue;
        }
        for (size_t k = 0; k < sizeof order / sizeof *order; k++) {
            if (!waiting[order[k]]) continue;
            if (order[k] != GATE_PREFILL && order[k] != GATE_CALIBRATE && !in_unit) {
                backend_unit_begin(be, &tuner);
                in_unit = 1;
            }
            if (run_calls(r, order[k])) fail(r);
            if (order[k] == GATE_VERIFY) {
                backend_unit_end(be, &tuner);
                in_unit = 0;
            }
            break;
        }
    }
    if (in_unit) backend_unit_end(be, &tuner);
}

static void slots_free(Slot *sl, int n) {
    for (int i = 0; i < n; i++) {
        fiber_free(&sl[i].fiber);
        decoder_free(sl[i].dec);
        policy_free(sl[i].policy);
        draft_free(sl[i].draft);
    }
    free(sl);
}

static Slot *slots_new(Run *r, const PolicyParams *prm) {
    Session *s = r->s;
    const int n = r->o->slots;
    Slot *sl = xcalloc(n, sizeof *sl);
    for (int i = 0; i < n; i++) {
        sl[i].run = r;
        sl[i].gate.pass = slot_pass;
        if (!(sl[i].policy = policy_new(prm)) ||
            (sl[i].policy->needs_draft && !(sl[i].draft = session_draft_new(s))) ||
            !(sl[i].dec = session_decoder_with(s, sl[i].policy, sl[i].draft))) {
            slots_free(sl, i + 1);
            return NULL;
        }
        if (s->cfg.draft_vocab == DRAFT_VOCAB_AUTO) {
            err_set("--draft-vocab auto is not available with --batch > 1 (give a size)");
            slots_free(sl, i + 1);
            return NULL;
        }
        CostWatch *cw = decoder_cost_watch(sl[i].dec);
        if (cw && cw->sw) cw->sw = &r->sw;   /* the rounds draft or not as one */
        sl[i].dec->gate = &sl[i].gate;
        if (sl[i].draft) sl[i].draft->gate = &sl[i].gate;
        sl[i].dec->dc->gate = &sl[i].gate;
        if (fiber_init(&sl[i].fiber, FIBER_STACK, fiber_main, &sl[i], &r->sched)) {
            slots_free(sl, i + 1);
            return NULL;
        }
        sl[i].state = FIBER_READY;
    }
    return sl;
}

int batch_run(Session *s, const PolicyParams *prm, const BatchOptions *o, const Question *const *qs, int n,
              TurnFn fn, void *const *ctxs, double *wall) {
    *wall = 0;
    if (o->slots < 1) { err_set("--batch must be at least 1"); return -1; }
    Run r = {.s = s, .o = o, .qs = qs, .n = n, .fn = fn, .ctxs = ctxs};
    draft_switch_init(&r.sw, o->slots);
    fiber_init_thread(&r.sched);
    r.slots = slots_new(&r, prm);
    if (!r.slots) return -1;
    r.lb = llama_batch_new(s->target);
    const double t0 = now_seconds();   /* after the slots are made: what decoding takes */
    schedule(&r);
    *wall = now_seconds() - t0 - r.calibration_s;
    if (o->device) *o->device = r.device;
    if (o->cost && r.slots[0].policy->cost) {   /* the slots' models as one: slot 0's figures, all choices */
        *o->cost = *r.slots[0].policy->cost;
        cost_clear_choices(o->cost);
        for (int i = 0; i < o->slots; i++) cost_add_choices(o->cost, r.slots[i].policy->cost);
        o->cost->sw = r.sw;
    }
    llama_batch_free(r.lb);
    forward_ctl_free(&r.ctl);
    slots_free(r.slots, o->slots);
    if (r.stopped) return 1;
    if (r.failed) { err_set("%s", r.err); return -1; }
    return 0;
}
