/* The cycle's observers (observers.h): a caller's hook, the cost model with
 * its draft switch and calibration, the draft-vocabulary chooser and the
 * backend's thread tuner. */
#include "infer/session/observers.h"
#include "infer/speculative/cycle.h"
#include "kernels/base/util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void free_observer(Observer *o) { free(o); }

/* The caller's hook. */
typedef struct {
    Observer base;
    CycleHook hook;
    void *ctx;
    int reads_tree;
    Tree tree;   /* the cycle's tree, read to the host for the hook */
} HookWatch;

static int hook_cycle_end(Observer *o, Decoder *dec, const CycleReport *r) {
    HookWatch *h = (HookWatch *)o;
    const Tree *t = r->tree;
    if (!t && h->reads_tree) {
        cycle_read_tree(dec->dc, &h->tree);
        t = &h->tree;
    }
    return h->hook(h->ctx, t, r->path, r->n_path, r->index);
}

static void hook_destroy(Observer *o) {
    tree_free(&((HookWatch *)o)->tree);
    free(o);
}

void decoder_set_hook(Decoder *dec, CycleHook hook, void *ctx, int reads_tree) {
    HookWatch *h = (HookWatch *)decoder_observer(dec, "hook");
    if (!h) {
        h = xcalloc(1, sizeof *h);
        h->base = (Observer){.name = "hook", .cycle_end = hook_cycle_end, .destroy = hook_destroy};
        tree_init(&h->tree);
        decoder_watch(dec, &h->base);
    }
    h->hook = hook;
    h->ctx = ctx;
    h->reads_tree = reads_tree;
    h->base.cycle_end = hook ? hook_cycle_end : NULL;
}

const Tree *decoder_hook_tree(const Decoder *dec) {
    const HookWatch *h = (const HookWatch *)decoder_observer(dec, "hook");
    return h ? &h->tree : NULL;
}

/* The cost model and its switch. */
CostWatch *decoder_cost_watch(const Decoder *dec) { return (CostWatch *)decoder_observer(dec, "cost"); }

static int cost_turn_begin(Observer *o, Decoder *dec) {
    CostWatch *cw = (CostWatch *)o;
    if (!dec->turn.done && cw->model.n_pts == 0) {
        const double t0 = now_seconds();
        if (decoder_calibrate(dec)) return -1;
        dec->turn.st->t.calibrate = now_seconds() - t0;
    }
    cw->cycle_mark = now_seconds();
    return 0;
}

/* A single sequence's switch pauses while --draft-vocab auto explores
 * (cost_cycle_end does not show it those cycles), and so does its choice:
 * exploring moves on only on cycles that draft, so a switch left off (one
 * that began a probe without drafting as the watch sent the vocabulary back
 * to exploring) would hold both still for the rest of the run. */
static void cost_cycle_begin(Observer *o, Decoder *dec) {
    const CostWatch *cw = (const CostWatch *)o;
    const VocabAuto *va = decoder_vocab(dec);
    if (cw->sw && cw->sw->off && (!va || va->chosen >= 0)) dec->cycle_off = 1;
}

/* A single sequence's switch learns each cycle's tokens per second (not
 * while --draft-vocab auto explores: it drafts from its largest vocabulary
 * then, slower than what it will choose, and a switch that turned drafting
 * off would also stall the exploration); a batch's learns its rounds
 * (batch.c), where this cycle's verification includes waiting for the other
 * trees.  The model learns the acceptance of the verified tree's keys and,
 * alone, the cycle's costs; a cycle that drafted nothing says nothing of
 * drafting, nor does one that ended the turn (it was not caught up on). */
static int cost_cycle_end(Observer *o, Decoder *dec, const CycleReport *r) {
    CostWatch *cw = (CostWatch *)o;
    if (cw->sw && dec->gate) {
        cw->sw->round_tokens += r->emitted;
    } else if (cw->sw) {
        const double now = now_seconds();
        const VocabAuto *va = decoder_vocab(dec);
        if ((!va || va->chosen >= 0) && !cw->model.hold)
            draft_switch_observe(cw->sw, !r->drafted, r->emitted, now - cw->cycle_mark - r->deferred_s);
        cw->cycle_mark = now;
    }
    if (!r->drafted || dec->turn.done) return 0;
    if (r->keys) cost_observe_acceptance(&cw->model, r->keys->P, r->keys->depth, r->keys->n, r->n_path - 1);
    if (!dec->gate) cost_observe(&cw->model, r->n_nodes, r->verify_s, r->draft_s, r->walked_rows);
    return 0;
}

static void cost_destroy(Observer *o) {
    CostWatch *cw = (CostWatch *)o;
    free(cw->pos);
    free(cw->mask);
    free(cw);
}

/* Attached by session_decoder where the policy wants costs. */
void decoder_watch_costs(Decoder *dec) {
    CostWatch *cw = xcalloc(1, sizeof *cw);
    cw->base = (Observer){.name = "cost", .turn_begin = cost_turn_begin, .cycle_begin = cost_cycle_begin,
                          .cycle_end = cost_cycle_end, .destroy = cost_destroy};
    cost_init(&cw->model);
    if (dec->draft) cw->sw = &cw->model.sw;
    dec->policy->cost = &cw->model;
    decoder_watch(dec, &cw->base);
}

void decoder_chain_call(Decoder *dec, Tree *chain, int n, GateCall *call) {
    CostWatch *cw = decoder_cost_watch(dec);
    LlamaState *ts = dec->target;
    if (chain->n == 0 || chain->n > n) tree_reset(chain, dec->turn.root);
    while (chain->n < n) tree_add(chain, chain->n - 1, dec->turn.root, 1, 0, 0);
    if (n > cw->cap) {
        cw->cap = n;
        cw->pos = xrealloc(cw->pos, sizeof(int) * n);
        cw->mask = xrealloc(cw->mask, (size_t)n * n);
    }
    tree_positions(chain, ts->n_past, cw->pos);
    tree_mask(chain, cw->mask);
    *call = (GateCall){.kind = GATE_VERIFY, .state = ts, .tokens = chain->token, .pos = cw->pos, .n = n,
                       .mask = n > 1 ? cw->mask : NULL, .mode = n > lazy_logits_nodes(ts->m->be) ? LOGITS_NONE : LOGITS_ALL};
}

/* The token counts calibration times: dense where trees usually are, then
 * sparser; the curve interpolates between them and goes on past the last
 * along its last segment, at least in proportion to the last point (trees
 * past 128 rarely pay; timing them would make the pass several seconds on
 * a CPU). */
static const int calib_n[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128};

int decoder_calib_counts(const Decoder *dec, int *counts) {
    const int max_n = policy_max_nodes(dec->policy);
    int n = 0;
    for (int i = 0; i < (int)(sizeof calib_n / sizeof *calib_n) && calib_n[i] <= max_n; i++) counts[n++] = calib_n[i];
    return n;
}

int decoder_calib_next(double elapsed_s, double first_s, double last_s, int last_n, int next_n) {
    if (last_n <= 0) return 1;
    double budget = DECODER_CALIB_BUDGET_ONES * first_s;
    if (budget < DECODER_CALIB_BUDGET_S) budget = DECODER_CALIB_BUDGET_S;
    return DECODER_CALIB_ROUNDS * (elapsed_s + last_s * next_n / last_n) <= budget;
}

static int timed(int (*forward)(void *ctx, int i), void *ctx, int i, double *seconds) {
    const double t0 = now_seconds();
    const int rc = forward(ctx, i);
    *seconds = now_seconds() - t0;
    return rc;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int decoder_calib_rounds(const int *counts, int n_counts, int (*forward)(void *ctx, int i), void *ctx, double *best) {
    enum { R = DECODER_CALIB_ROUNDS };
    const double t0 = now_seconds();
    double one, dt, ratio[DECODER_CALIB_MAX][R];
    int n = 0;
    if (n_counts <= 0) return 0;
    if (timed(forward, ctx, 0, &dt)) return -1;   /* warms */
    for (int r = 0; r < R; r++) {
        const int last = r ? n : n_counts;
        for (int i = 0; i < last; i++) {
            if (!r && i && !decoder_calib_next(now_seconds() - t0, best[0], best[i - 1], counts[i - 1], counts[i])) break;
            if (timed(forward, ctx, 0, &one)) return -1;   /* one token's, beside each point */
            if (i && timed(forward, ctx, i, &dt)) return -1;
            if (!i && (!r || one < best[0])) best[0] = one;
            if (i) ratio[i][r] = dt / one;
            if (!r) {
                if (i) best[i] = dt;
                n = i + 1;
            }
        }
    }
    for (int i = 1; i < n; i++) {   /* the median ratio over the rounds, at the best one-token time */
        qsort(ratio[i], R, sizeof(double), cmp_double);
        best[i] = best[0] * ratio[i][R / 2];
    }
    return n;
}

void decoder_cost_key(const Decoder *dec, char *key, size_t size) {
    static char exe[17];   /* this program's build: its kernels set the curve */
    if (!exe[0] && file_hash_hex("/proc/self/exe", exe)) snprintf(exe, sizeof exe, "unknown");
    const LlamaModel *m = dec->target->m;
    int counts[DECODER_CALIB_MAX];
    const int n = decoder_calib_counts(dec, counts);
    size_t len = (size_t)snprintf(key, size, "exe %s; target %s, %zu weight bytes; %s on %s, %d threads; largest %d",
                                  exe, m->config_hash, llama_weight_bytes(m), m->be->name, backend_device_name(m->be),
                                  cpu_threads_max(), n ? counts[n - 1] : 0);
    const char *k;
    char v[64];
    for (int i = 0; len < size && backend_setting_text(backend_settings(), i, &k, v, sizeof v) == 0; i++)
        len += (size_t)snprintf(key + len, size - len, "; %s %s", k, v);
}

typedef struct { Decoder *dec; Tree *chain; const int *counts; } CalibForward;

/* The target's forward over a chain of counts[i] tokens after the context,
 * waited for. */
static int calib_forward(void *ctx, int i) {
    const CalibForward *f = ctx;
    LlamaState *ts = f->dec->target;
    GateCall c;
    decoder_chain_call(f->dec, f->chain, f->counts[i], &c);
    if (llama_forward(ts, c.tokens, c.pos, c.n, c.mask, c.mode)) return -1;
    ts->m->be->to_host(f->dec->v.row, ts->logits, 1);
    return 0;
}

/* One path row's LM-head product after a forward without logits over
 * `count` tokens, what a lazily scored tree's walk pays a row (cost.h's
 * row_s): the least of 3. */
static int calib_row(CalibForward *f, int count, double *row_s) {
    LlamaState *ts = f->dec->target;
    GateCall c;
    decoder_chain_call(f->dec, f->chain, count, &c);
    if (llama_forward(ts, c.tokens, c.pos, c.n, c.mask, LOGITS_NONE)) return -1;
    for (int r = 0; r < 3; r++) {
        const double t0 = now_seconds();
        ts->m->be->to_host(f->dec->v.row, llama_row_logits(ts, 0), 1);
        const double dt = now_seconds() - t0;
        if (!r || dt < *row_s) *row_s = dt;
    }
    return 0;
}

int decoder_calibrate(Decoder *dec) {
    if (dec->gate) {   /* batched: the batch times all its sequences' forwards together */
        GateCall call = {.kind = GATE_CALIBRATE, .state = dec->target};
        return dec->gate->pass(dec->gate, &call);
    }
    CostWatch *cw = decoder_cost_watch(dec);
    LlamaState *ts = dec->target;
    const int n_past = ts->n_past;
    const double t0 = now_seconds();
    char key[1024];
    if (cw->cache) {
        decoder_cost_key(dec, key, sizeof key);
        CostModel cached;
        int got = cost_cache_get(cw->cache, key, &cached);
        if (got < 0) return -1;
        if (got) {
            cw->model = cached;
            cw->model.lazy_nodes = lazy_logits_nodes(ts->m->be);
            cw->model.from_cache = 1;
            cw->model.calibration_s = now_seconds() - t0;
            snprintf(cw->model.cache_key, sizeof cw->model.cache_key, "%s", key);
            return 0;
        }
    }
    Tree chain;   /* a chain of the root's token: the cost does not depend on the tokens */
    tree_init(&chain);
    cost_init(&cw->model);
    int counts[DECODER_CALIB_MAX];
    double best[DECODER_CALIB_MAX];
    const int n_counts = decoder_calib_counts(dec, counts);
    CalibForward f = {dec, &chain, counts};
    const int n = decoder_calib_rounds(counts, n_counts, calib_forward, &f, best), lazy = lazy_logits_nodes(ts->m->be);
    int rc = n < 0 ? -1 : 0;
    for (int i = 0; i < n; i++) cost_add_point(&cw->model, counts[i], best[i]);
    cw->model.lazy_nodes = lazy;
    if (!rc && policy_max_nodes(dec->policy) > lazy) rc = calib_row(&f, lazy + 1, &cw->model.row_s);
    llama_truncate(ts, n_past);
    tree_free(&chain);
    cost_settle_calibration(&cw->model);
    cw->model.calibration_s = now_seconds() - t0;
    if (cw->cache) snprintf(cw->model.cache_key, sizeof cw->model.cache_key, "%s", key);
    if (!rc && cw->cache && cost_cache_put(cw->cache, key, &cw->model))
        fprintf(stderr, "warning: the calibrated cost curve is not cached: %s\n", err_get());
    return rc;
}

/* The draft-vocabulary chooser: a switch comes before the catch-up, which
 * scores the next root in it; its calibration (timed steps at each
 * candidate, once a run) is a one-time cost, its other steps drafting. */
typedef struct {
    Observer base;
    VocabAuto *va;
} VocabWatch;

static int vocab_before_catch_up(Observer *o, Decoder *dec, int bonus) {
    VocabAuto *va = ((VocabWatch *)o)->va;
    const int timed = va->calibrated, vocab = dec->draft->Vd;
    const double t0 = now_seconds();
    const int rc = vocab_auto_step(va, dec->draft, bonus);
    *(timed ? &dec->turn.st->t.draft : &dec->turn.st->t.calibrate) += now_seconds() - t0;
    /* a switch released the draft's buffers: the cycle's next draft
     * phase grows them again, op by op (no allocation inside a unit) */
    if (va->calibrated != timed || dec->draft->Vd != vocab) dec->dc->op_by_op = 1;
    return rc;
}

static int vocab_cycle_end(Observer *o, Decoder *dec, const CycleReport *r) {
    if (r->drafted && !dec->turn.done)
        vocab_auto_observe(((VocabWatch *)o)->va, r->tokens + 1, r->n_path - 1, r->bonus, r->verify_s, r->draft_s,
                           dec->draft->rows_scored, dec->draft->steps_scored);
    return 0;
}

void decoder_watch_vocab(Decoder *dec, VocabAuto *va) {
    VocabWatch *w = xcalloc(1, sizeof *w);
    w->base = (Observer){.name = "vocab", .before_catch_up = vocab_before_catch_up, .cycle_end = vocab_cycle_end,
                         .destroy = free_observer};
    w->va = va;
    decoder_watch(dec, &w->base);
}

const VocabAuto *decoder_vocab(const Decoder *dec) {
    const VocabWatch *w = (const VocabWatch *)decoder_observer(dec, "vocab");
    return w ? w->va : NULL;
}

/* The thread tuner: a cycle is its unit, weighed by what the policy's cost
 * model predicts it costs at its size (one expansion per draft level), so
 * that the probes compare threads, not tree sizes.  A probe of the setting
 * not chosen holds the cost model's learning for its cycle: a curve that
 * learnt one thread's times while two run (or the reverse) would size the
 * trees for a machine the run is not on. */
typedef struct {
    Observer base;
    BackendTuner tuner;
    int64_t turn_start;   /* one_thread_units when the turn began */
} ThreadWatch;

static int threads_turn_begin(Observer *o, Decoder *dec) {
    (void)dec;
    ThreadWatch *w = (ThreadWatch *)o;
    w->turn_start = w->tuner.one_thread_units;
    return 0;
}

static void threads_cycle_begin(Observer *o, Decoder *dec) {
    if (dec->gate) return;
    BackendTuner *t = &((ThreadWatch *)o)->tuner;
    backend_unit_begin(dec->target->m->be, t);
    if (dec->policy->cost) dec->policy->cost->hold = t->probe;
}

static int threads_cycle_end(Observer *o, Decoder *dec, const CycleReport *r) {
    (void)r;
    ThreadWatch *w = (ThreadWatch *)o;
    const CostModel *m = dec->policy->cost;
    w->tuner.work = 0;
    if (m && m->n_pts) {
        int levels = r->n_nodes - 1;
        if (r->keys) {
            levels = 0;
            for (int i = 0; i < r->keys->n; i++)
                if (r->keys->depth[i] > levels) levels = r->keys->depth[i];
        }
        w->tuner.work = cost_verify_s(m, r->n_nodes) + (r->drafted ? cost_draft_s(m, levels) : 0);
    }
    if (!dec->gate) backend_unit_end(dec->target->m->be, &w->tuner);
    dec->turn.st->one_thread_cycles = w->tuner.one_thread_units - w->turn_start;
    return 0;
}

void decoder_watch_threads(Decoder *dec) {
    ThreadWatch *w = xcalloc(1, sizeof *w);
    w->base = (Observer){.name = "threads", .turn_begin = threads_turn_begin, .cycle_begin = threads_cycle_begin,
                         .cycle_end = threads_cycle_end, .destroy = free_observer};
    decoder_watch(dec, &w->base);
}
