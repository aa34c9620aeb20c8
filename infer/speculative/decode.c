#include "infer/speculative/decode.h"
#include "infer/speculative/cycle.h"
#include "kernels/base/util.h"
#include <stdlib.h>
#include <string.h>

static void reserve_nodes(Decoder *dec, int n);

/* Verification: which path of a drafted tree the target accepts, greedily
 * (the target's argmax at every node) or by sampling.  The cycle walks the
 * tree in backend memory (below: sample_dev or argmax_dev at every row,
 * then tree_accept); here are the rule's reasons and the prefill's
 * one-row draw (the lazy-logits bound: cycle.h).
 *
 * Sampling.  The tree's tokens do not depend on the draft's randomness
 * (they are its top-k), and for such candidates EAGLE's rule — at a node
 * try the children in rank order, accept child x with the residual target
 * probability of x, else remove x's mass and renormalise; with none
 * accepted draw the bonus from the residual — reaches child x untaken with
 * probability 1 - S (S: the mass of the distinct tokens tried before it)
 * and takes it with p(x) / (1 - S): p(x) in all; with none taken the bonus
 * is drawn from p restricted to the ids no child holds.  One draw y ~ p
 * does exactly that: the child holding y if any, else y is the bonus.
 * So each path node draws one id from the target's distribution and the
 * walk is the greedy one with a draw in place of the argmax; every emitted
 * token is a draw from the target given its prefix.  The draw's number is
 * counter-based, rng_uniform_at(key, node) with one key a cycle from the
 * decoder's stream: no sequence of draws to replay (EAGLE's rule draws a
 * number per child tried, then one for the bonus: a count known only as
 * the walk goes), so the cycle draws every row at once (sample_dev) and
 * walks (tree_accept) to the path and bonus a walk drawing only along the
 * path would reach (the lazy-logits walk, one row at a time, does). */
int sample_row(const Backend *be, const float *logits, int V, const SampleParams *sp, uint64_t key, int node,
               float *row) {
    const uint32_t words[2] = {(uint32_t)key, (uint32_t)(key >> 32)};
    int id;
    be->to_host(row, logits, V);
    cpu_backend.sample_dev(row, 1, V, sp, words, node, &id);   /* the CPU's memory is the host's */
    return id;
}

Decoder *decoder_new(const LlamaModel *target, Draft *draft, Policy *policy, int slots, SampleParams sp) {
    if (policy->needs_draft && !draft) {
        err_set("policy %s needs a draft model (--draft)", policy->name);
        return NULL;
    }
    Decoder *dec = xcalloc(1, sizeof *dec);
    dec->target = llama_state_new(target, slots);
    if (!dec->target) { free(dec); return NULL; }
    if (draft && draft_capture(draft, dec->target)) { llama_state_free(dec->target); free(dec); return NULL; }
    dec->draft = draft;
    /* a scripted draft (tests) reads nothing: any width will do */
    dec->pending.feat_width = draft && draft->feat_width ? draft->feat_width : target->cfg.hidden;
    dec->policy = policy;
    dec->sp = sp;
    rng_seed(&dec->rng, sp.seed);
    tree_init(&dec->tree);
    dec->v.row = xmalloc(sizeof(float) * target->cfg.vocab);
    /* the cycle's buffers in the target's backend memory (a batched run
     * then points dc->be at its gated copy of that backend) */
    const Backend *be = dec->target->m->be;
    const int cap = policy_max_nodes(policy);
    dec->dc = cycle_new(be, cap);
    /* a recording backend replays each bucket's verification: the target's
     * buffers hold every padded size from the start */
    if (be->record_begin) llama_reserve(dec->target, dec->dc->pad_max);
    if (policy->program_for) policy->program_for(policy, be);
    reserve_nodes(dec, cap);
    return dec;
}

void decoder_watch(Decoder *dec, Observer *o) {
    Observer **at = &dec->observers;
    while (*at) at = &(*at)->next;
    o->next = NULL;
    *at = o;
}

Observer *decoder_observer(const Decoder *dec, const char *name) {
    for (Observer *o = dec->observers; o; o = o->next)
        if (!strcmp(o->name, name)) return o;
    return NULL;
}

void decoder_free(Decoder *dec) {
    if (!dec) return;
    const Backend *be = dec->target->m->be;
    if (dec->pending.hidden) be->release(dec->pending.hidden);
    llama_state_free(dec->target);
    cycle_free(dec->dc);
    tree_free(&dec->tree);
    for (Observer *o = dec->observers, *next; o; o = next) {
        next = o->next;
        o->destroy(o);
    }
    free(dec->v.path); free(dec->v.tokens); free(dec->v.row); free(dec->pending.tokens); free(dec->cache.ids);
    free(dec);
}

/* path_hidden for `rows` rows, its pending rows kept. */
static void reserve_hidden(Decoder *dec, int rows) {
    if (rows <= dec->pending.hidden_cap) return;
    const Backend *be = dec->target->m->be;
    const int cap = rows * 2;
    float *h = be->alloc((size_t)cap * dec->pending.feat_width);
    if (dec->pending.hidden) {
        if (dec->pending.n) be->copy(h, dec->pending.hidden, (size_t)dec->pending.n * dec->pending.feat_width);
        be->release(dec->pending.hidden);
    }
    dec->pending.hidden = h;
    dec->pending.hidden_cap = cap;
}

/* ids[0..*n) += add[0..k), the array grown as needed (*cap) */
static void ids_append(int **ids, int *n, int *cap, const int *add, int k) {
    if (*n + k > *cap) {
        *cap = 2 * (*n + k);
        *ids = xrealloc(*ids, sizeof(int) * (size_t)*cap);
    }
    memcpy(*ids + *n, add, sizeof(int) * (size_t)k);
    *n += k;
}

/* Appends n committed tokens to those the draft has not caught up on
 * (their features are the caller's to place in path_hidden). */
static void pending_add(Decoder *dec, const int *tokens, int n) {
    ids_append(&dec->pending.tokens, &dec->pending.n, &dec->pending.cap, tokens, n);
}

/* The accepted path of a tree of n nodes, and its features. */
static void reserve_nodes(Decoder *dec, int n) {
    if (n > dec->v.cap_nodes) {
        dec->v.cap_nodes = n * 2;
        dec->v.path = xrealloc(dec->v.path, sizeof(int) * dec->v.cap_nodes);
        dec->v.tokens = xrealloc(dec->v.tokens, sizeof(int) * dec->v.cap_nodes);
    }
    reserve_hidden(dec, dec->pending.n + n);
}

/* Appends tokens to out; returns 1 when generation must stop (eos or
 * max_new reached). */
static int is_stop(const Decoder *dec, int token) {
    if (config_is_eos(&dec->target->m->cfg, token)) return 1;
    for (int i = 0; i < dec->n_stop; i++) if (dec->stop_ids[i] == token) return 1;
    return 0;
}

static int emit(const Decoder *dec, const int *tokens, int n, int *out, int *n_out, int max_new) {
    for (int i = 0; i < n; i++) {
        if (*n_out >= max_new) return 1;
        out[(*n_out)++] = tokens[i];
        if (is_stop(dec, tokens[i])) return 1;
    }
    return *n_out >= max_new;
}

const char *verify_mode_name(VerifyMode m) {
    return m == VERIFY_ROOT ? "root" : m == VERIFY_WALK ? "walk" : "tree";
}

void decode_stats_add(DecodeStats *sum, const DecodeStats *x) {
    sum->new_tokens += x->new_tokens;
    sum->cycle_tokens += x->cycle_tokens;
    sum->cycles += x->cycles;
    sum->drafted_cycles += x->drafted_cycles;
    sum->gamma += x->gamma;
    sum->one_thread_cycles += x->one_thread_cycles;
    sum->prompt_kept += x->prompt_kept;
    sum->t.prefill += x->t.prefill;
    sum->t.draft += x->t.draft;
    sum->t.dist += x->t.dist;
    sum->t.features += x->t.features;
    sum->t.classifier += x->t.classifier;
    sum->t.verify += x->t.verify;
    sum->t.calibrate += x->t.calibrate;
    sum->t.total += x->t.total;
}

double decode_stats_tau(const DecodeStats *st) { return st->cycles ? (double)st->cycle_tokens / st->cycles : 0; }

/* The target's logits of a path node, computed now (lazy logits), through
 * the decoder's gate when it has one. */
static const float *path_logits(Decoder *dec, int node) {
    if (!dec->gate) return llama_row_logits(dec->target, node);
    GateCall call = {.kind = GATE_ROW, .state = dec->target, .row = node};
    return dec->gate->pass(dec->gate, &call) ? NULL : call.logits;
}

/* The target's forward, through the decoder's gate when it has one; its
 * arrays on the host, or in backend memory (on_device). */
static int target_forward(Decoder *dec, GateKind kind, const int *tokens, const int *pos, int n, const uint8_t *mask,
                          LogitsMode mode, int on_device) {
    if (!dec->gate)
        return on_device ? llama_forward_dev(dec->target, tokens, pos, n, mask, mode)
                         : llama_forward(dec->target, tokens, pos, n, mask, mode);
    GateCall call = {.kind = kind, .state = dec->target, .tokens = tokens, .pos = pos, .n = n, .mask = mask,
                     .mode = mode, .on_device = on_device};
    return dec->gate->pass(dec->gate, &call);
}

/* A cycle's drafting: the draft's forwards and catch-up, the distribution
 * step, a classifier's features and forward. */
static double drafting_s(const DecodeStats *st) { return st->t.draft + st->t.dist + st->t.features + st->t.classifier; }

/* Appends n ids to those whose entries the target's cache holds. */
static void cache_add(Decoder *dec, const int *ids, int n) {
    ids_append(&dec->cache.ids, &dec->cache.n, &dec->cache.cap, ids, n);
}

/* The prompt tokens whose entries a turn keeps (Decoder.cache): the prefix
 * it shares with the cache's ids, less its last token (whose row gives the
 * first token's logits), within the entries the draft holds; the token
 * after them is the draft's root (draft_rewind), so it is shared too. */
static int kept_prefix(const Decoder *dec, const int *prompt, int n_prompt) {
    if (!dec->cache.keep_prefix) return 0;
    int shared = 0;
    const int n = dec->cache.n < dec->target->n_past ? dec->cache.n : dec->target->n_past;
    while (shared < n && shared < n_prompt && dec->cache.ids[shared] == prompt[shared]) shared++;
    int k = shared - 1 < n_prompt - 1 ? shared - 1 : n_prompt - 1;
    if (dec->draft && k > draft_prefix_max(dec->draft)) k = draft_prefix_max(dec->draft);
    return k > 0 ? k : 0;
}

static int decoder_begin(Decoder *dec, const int *prompt, int n_prompt, int max_new, int *out, DecodeStats *st) {
    LlamaState *ts = dec->target;
    const Backend *be = ts->m->be;
    const int V = ts->m->cfg.vocab;
    memset(st, 0, sizeof *st);
    dec->turn.st = st;
    dec->turn.out = out;
    dec->turn.n_out = 0;
    dec->turn.max_new = max_new;
    dec->turn.done = 1;
    if (n_prompt <= 0) { err_set("empty prompt"); return -1; }
    if (dec->policy->wants_cost && !dec->policy->cost) {
        err_set("policy %s sizes its trees from measured costs: its decoder has no cost model (decoder_watch_costs)",
                dec->policy->name);
        return -1;
    }
    dec->turn.t_start = now_seconds();
    const int kept = kept_prefix(dec, prompt, n_prompt);
    llama_truncate(ts, kept);
    if (dec->draft) draft_rewind(dec->draft, kept);
    dec->cache.n = kept;
    st->prompt_kept = kept;

    /* prefill: the prompt past its kept entries, then the target's first token */
    const int n_fwd = n_prompt - kept;
    int *pos = xmalloc(sizeof(int) * n_fwd);
    for (int i = 0; i < n_fwd; i++) pos[i] = kept + i;
    int rc = target_forward(dec, GATE_PREFILL, prompt + kept, pos, n_fwd, NULL, LOGITS_LAST, 0);
    free(pos);
    if (rc) return -1;
    llama_commit(ts, NULL, n_fwd);
    cache_add(dec, prompt + kept, n_fwd);
    if (dec->sp.temperature > 0) dec->turn.root = sample_row(be, ts->logits, V, &dec->sp, rng_next(&dec->rng), 0, dec->v.row);
    else be->argmax(ts->logits, 1, V, &dec->turn.root);
    dec->turn.done = emit(dec, &dec->turn.root, 1, out, &dec->turn.n_out, max_new);
    st->t.prefill = now_seconds() - dec->turn.t_start;   /* the target's; the draft's catch-up is draft time */
    /* the draft catches up on the prompt past its kept entries when the
     * first cycle drafts (its features copied: the calibration's forwards
     * replace the target's) */
    dec->pending.n = 0;
    dec->pending.owed = 0;
    if (dec->draft && !dec->turn.done) {
        reserve_hidden(dec, n_fwd);
        be->copy(dec->pending.hidden, draft_features(dec->draft, ts), (size_t)n_fwd * dec->pending.feat_width);
        pending_add(dec, prompt + kept, n_fwd);
    }
    for (Observer *o = dec->observers; o; o = o->next)
        if (o->turn_begin && o->turn_begin(o, dec)) return -1;
    return 0;
}

/* A cycle's start: its observers (drafting may be off for it), then the
 * draft's catch-up on the tokens committed since it last drafted, under the
 * next root. */
static int decoder_cycle_begin(Decoder *dec) {
    dec->cycle_off = 0;
    for (Observer *o = dec->observers; o; o = o->next)
        if (o->cycle_begin) o->cycle_begin(o, dec);
    dec->turn.deferred_s = 0;
    if (!dec->draft || dec->cycle_off || !dec->pending.n) {
        dec->draft_mark = drafting_s(dec->turn.st);
        return 0;
    }
    for (Observer *o = dec->observers; o; o = o->next)
        if (o->before_catch_up && o->before_catch_up(o, dec, dec->turn.root)) return -1;
    const double t0 = now_seconds();
    const int rc = draft_catch_up(dec->draft, dec->pending.tokens, dec->pending.hidden, dec->pending.n, dec->turn.root);
    const double s = now_seconds() - t0;
    dec->turn.st->t.draft += s;
    if (!dec->pending.owed) dec->turn.deferred_s = s;
    dec->pending.n = 0;
    dec->draft_mark = drafting_s(dec->turn.st) - (dec->pending.owed ? s : 0);
    return rc;
}

/* The key of a cycle's draws (sample_dev): one number of the decoder's
 * stream a cycle where it samples. */
static uint64_t cycle_key(Decoder *dec) { return dec->sp.temperature > 0 ? rng_next(&dec->rng) : 0; }

/* The target's choices at nodes node0.. of logits[n][V] into want (backend
 * memory): argmaxes, or sampled with the cycle's key (DevCycle.start). */
static void device_choices(Decoder *dec, const float *logits, int n, int node0, int *want) {
    DevCycle *c = dec->dc;
    const int V = dec->target->m->cfg.vocab;
    if (dec->sp.temperature > 0) cycle_op_sample(c, logits, n, V, &dec->sp, (const uint32_t *)(c->start + 2), node0, want);
    else cycle_op_argmax(c, logits, n, V, want);
}

/* The walk on the device over every row's choice at once: nothing read,
 * so it may join the cycle's unit; the host reads the walk after. */
static void walk_all_rows(Decoder *dec, int n) {
    DevCycle *c = dec->dc;
    device_choices(dec, dec->target->logits, n, 0, c->want);
    cycle_op_accept(c, c->rows_tree, n, c->want, 1, n, c->walk);
}

/* The walk read to the host: its one read where all rows were scored
 * (walk_all_rows ran), else (lazy logits) one path node at a time, a read
 * of the walk after each. */
static int device_walk(Decoder *dec, int n) {
    DevCycle *c = dec->dc;
    const size_t words = 3 + 2 * (size_t)n;
    if (!dec->lazy) {
        cycle_ints_to_host(c, c->h_walk, c->walk, words);
        c->walk_reads++;
    } else {
        cycle_op_accept(c, c->rows_tree, n, c->want, 1, 0, c->walk);
        for (int cur = 0;;) {
            const float *logits = path_logits(dec, cur);
            if (!logits) return -1;
            device_choices(dec, logits, 1, cur, c->want + cur);
            cycle_op_accept(c, c->rows_tree, n, c->want, 0, 1, c->walk);
            cycle_ints_to_host(c, c->h_walk, c->walk, words);
            c->walk_reads++;
            if (c->h_walk[0]) break;
            cur = c->h_walk[3 + c->h_walk[1] - 1];
        }
    }
    return 0;
}

/* A cycle's ops, from the host counts they start from: the draft phase
 * (draft: the root, and the policy's program unless root_only), the
 * verification (verify), or both. */
typedef struct {
    Decoder *dec;
    int draft, root_only, verify;
    DraftCounts counts;
    StageTimes times;
    int rc;
} CycleOps;

/* The target's forward over the verified tree (its rows as cycle_pad set
 * them) and, where every row gets logits, the walk. */
static int verify_ops(Decoder *dec) {
    DevCycle *c = dec->dc;
    LlamaState *ts = dec->target;
    dec->t_verify = now_seconds();
    const int n = c->n_rows;
    tree_inputs_make(&c->inputs, c->be, c->gate, c->rows_tree, NULL, n, c->start, 0, 0, 0, n);
    /* Up to lazy_logits_nodes nodes one product scores them all, reading
     * the LM head once; a bigger tree scores only the path the walk takes
     * (one LM-head product per accepted node, against one per node). */
    dec->lazy = n > lazy_logits_nodes(ts->m->be);
    const int *in = c->inputs.dev;
    ts->past_dev = in + 4 * n;   /* the tree's first KV slot, where tree_inputs wrote it */
    const int rc = target_forward(dec, GATE_VERIFY, in, in + n, n, n > 1 ? c->inputs.dev_mask : NULL,
                                  dec->lazy ? LOGITS_NONE : LOGITS_ALL, 1);
    ts->past_dev = NULL;
    if (!rc && !dec->lazy) walk_all_rows(dec, n);
    return rc;
}

/* The root and the policy's program, then the verification, or either
 * alone; nothing returned to the host.  Issued twice where the backend
 * records it (a GPU signs, then records), each issue from the same counts
 * so that the cycle counts once.  The root and the forward's inputs come
 * from DevCycle.start in backend memory, so that a cycle issues the same
 * ops as the last, and the ops write nothing they read (a unit may run
 * twice where it is emulated). */
static void cycle_ops(void *arg) {
    CycleOps *co = arg;
    Decoder *dec = co->dec;
    if (dec->draft) draft_counts_restore(dec->draft, &co->counts);
    dec->turn.st->t = co->times;
    co->rc = 0;
    if (co->draft) cycle_begin(dec->dc);
    if (co->draft && !co->root_only) co->rc = dec->policy->build(dec->policy, dec->draft, dec->dc, &dec->turn.st->t);
    if (!co->rc && co->verify && co->draft) cycle_pad(dec->dc);   /* else the caller padded after its read */
    if (!co->rc && co->verify) co->rc = verify_ops(dec);
}

/* cycle_ops as one recorded unit where unit is set, else op by op. */
static int run_cycle_ops(Decoder *dec, int draft, int verify, int unit) {
    CycleOps co = {dec,           draft, dec->cycle_off, verify, dec->draft ? draft_counts(dec->draft) : (DraftCounts){0},
                   dec->turn.st->t, 0};
    if (unit) backend_recorded(dec->dc->be, cycle_ops, &co);
    else cycle_ops(&co);
    dec->dc->verify_units += unit && verify;
    dec->dc->walked_units += unit && verify && !dec->lazy;
    return co.rc;
}

/* A cycle's draft phase: the root (its token, the target's committed
 * length and the draws' key uploaded to DevCycle.start) and the policy's
 * program, or the root alone where drafting is off.  Where the policy and
 * draft allow it (Policy.build_unit, draft_unit_ok) the phase is one
 * recorded unit (a GPU replays one graph a cycle), and where the program
 * reads nothing after drafting (no Policy.build_end) the verification joins
 * that unit (Decoder.unit_verified); a cycle's first phase runs op by op,
 * since it allocates the buffers the later ones reuse (nothing may be
 * allocated inside a recording). */
static int decoder_draft(Decoder *dec) {
    DevCycle *c = dec->dc;
    Policy *p = dec->policy;
    if (dec->draft) draft_cycle_origin(dec->draft);
    const uint64_t key = cycle_key(dec);
    backend_ints_to_device(c->be, c->start,
                           (const int[]){dec->target->n_past, dec->turn.root, (int)(uint32_t)key, (int)(key >> 32)}, 4);
    dec->unit = dec->draft && !dec->gate && p->build_unit && draft_unit_ok(dec->draft) && c->cycles > 0 &&
                !dec->cycle_off && !c->op_by_op;
    c->op_by_op = 0;
    dec->unit_verified = dec->unit && !p->build_end && !dec->walk;
    int rc = run_cycle_ops(dec, 1, dec->unit_verified, dec->unit);
    if (!rc && p->build_end && !dec->cycle_off) rc = p->build_end(p, c, &dec->turn.st->t);
    /* with the cap, before the verification's unit: its ops depend on the rows alone */
    if (!rc && !dec->unit_verified && !dec->walk) cycle_pad(c);
    return rc;
}

/* Verification by walking (Decoder.walk): the tree read to the host
 * (counted), then the root and the child holding the target's choice, one
 * forward each, every node kept in the cache with its features as it is
 * forwarded; the first choice no child holds is the bonus. */
static int decoder_walk(Decoder *dec) {
    LlamaState *ts = dec->target;
    const Backend *be = ts->m->be;
    const Tree *t = &dec->tree;
    cycle_read_tree(dec->dc, &dec->tree);
    dec->t_verify = now_seconds();
    int len = 0, node = 0, want = 0;
    for (;;) {
        const int pos = ts->n_past;
        if (target_forward(dec, GATE_VERIFY, &t->token[node], &pos, 1, NULL, LOGITS_ALL, 0)) return -1;
        if (dec->draft)   /* after the pending rows */
            be->copy(dec->pending.hidden + (size_t)(dec->pending.n + len) * dec->pending.feat_width, draft_features(dec->draft, ts),
                     dec->pending.feat_width);
        llama_commit(ts, NULL, 1);
        dec->v.tokens[len] = t->token[node];
        dec->v.path[len++] = node;
        be->argmax(ts->logits, 1, ts->m->cfg.vocab, &want);
        int next = 0;
        for (int c = node + 1; c < t->n && !next; c++)
            if (t->parent[c] == node && t->token[c] == want) next = c;
        if (!next || dec->walk_root_only) break;
        node = next;
    }
    dec->v.len = len;
    dec->v.bonus = want;
    return 0;
}

/* A cycle's verification: the target's forward over the tree (unless the
 * draft phase's unit issued it: Decoder.unit_verified; as a unit of its own
 * where the tree fits the largest so far) and the walk read to the host,
 * the accepted path into dec->v; or, walking (Decoder.walk), the host's
 * walk of the tree read back. */
static int decoder_verify(Decoder *dec) {
    DevCycle *c = dec->dc;
    int rc = 0;
    if (!dec->walk && !dec->unit_verified) rc = run_cycle_ops(dec, 0, 1, dec->unit && c->n_rows <= c->n_rows_max);
    if (c->n_rows > c->n_rows_max) c->n_rows_max = c->n_rows;
    c->cycles++;
    c->units += dec->unit;
    if (rc) return -1;
    if (dec->draft && !dec->cycle_off) draft_end_cycle(dec->draft);
    reserve_nodes(dec, c->n_verified);   /* the path and its features; the mask is the cycle's */
    if (dec->walk) return decoder_walk(dec);
    const int rows = c->n_rows;
    if (device_walk(dec, rows)) return -1;
    dec->v.len = c->h_walk[1];
    dec->v.bonus = c->h_walk[2];
    memcpy(dec->v.path, c->h_walk + 3, sizeof(int) * dec->v.len);
    memcpy(dec->v.tokens, c->h_walk + 3 + rows, sizeof(int) * dec->v.len);
    return 0;
}

/* A cycle's commit of the accepted path dec->v (path, tokens, len) of the
 * n_verified nodes and the bonus: both caches keep the path, the tokens are
 * emitted, the next root is the bonus, and the observers see the cycle.
 * The draft catches up on the committed tokens when the next cycle drafts;
 * until then they wait in pending. */
static int decoder_commit(Decoder *dec) {
    LlamaState *ts = dec->target;
    const Backend *be = ts->m->be;
    DevCycle *c = dec->dc;
    DecodeStats *st = dec->turn.st;
    const int len = dec->v.len, n = c->n_verified, bonus = dec->v.bonus;
    const int *toks = dec->v.tokens;
    if (!dec->walk) {   /* a walk kept each node and its features as it went */
        /* the path's rows in backend memory, where the device walk left
         * them; a path of the tree's first len nodes (a chain's) needs no
         * cache compaction */
        int prefix = 1;
        for (int i = 0; i < len && prefix; i++) prefix = dec->v.path[i] == i;
        const int *rows = c->walk + 3;
        if (dec->draft) {   /* the path's features before the cache compaction, after the pending ones */
            reserve_hidden(dec, dec->pending.n + len);
            be->copy_rows(dec->pending.hidden + (size_t)dec->pending.n * dec->pending.feat_width, NULL,
                          draft_features(dec->draft, ts), rows, len, dec->pending.feat_width);
        }
        llama_commit(ts, prefix ? NULL : rows, len);
    }
    cache_add(dec, toks, len);
    const double verify_s = now_seconds() - dec->t_verify;
    st->t.verify += verify_s;
    st->cycles++;
    if (dec->draft && !dec->cycle_off) st->drafted_cycles++;
    st->gamma += n - 1;
    if (dec->policy->feedback && !dec->cycle_off) dec->policy->feedback(dec->policy, len - 1);

    /* emit accepted nodes and the bonus token */
    int before = dec->turn.n_out;
    for (int i = 1; i < len && !dec->turn.done; i++) dec->turn.done = emit(dec, &toks[i], 1, dec->turn.out, &dec->turn.n_out, dec->turn.max_new);
    if (!dec->turn.done) dec->turn.done = emit(dec, &bonus, 1, dec->turn.out, &dec->turn.n_out, dec->turn.max_new);
    st->cycle_tokens += dec->turn.n_out - before;
    if (dec->draft && !dec->turn.done) {
        dec->pending.owed = !dec->cycle_off;   /* a drafting cycle caught up at its start */
        pending_add(dec, toks, len);
    }
    dec->turn.root = bonus;
    /* the tree where a walk read it; the keys where the host has them (the
     * walk's tree, or what a program read to size it) */
    const Tree *t = dec->walk ? &dec->tree : NULL;
    const CycleReport r = {.tree = t, .keys = t ? t : c->keys.n ? &c->keys : NULL,
                           .path = dec->v.path, .tokens = toks, .n_path = len, .n_nodes = n, .bonus = bonus,
                           .emitted = dec->turn.n_out - before, .drafted = !dec->cycle_off, .index = (int)st->cycles - 1,
                           .verify_s = verify_s, .walked_rows = !dec->walk && dec->lazy ? len : 0, .draft_s = drafting_s(st) - dec->draft_mark,
                           .deferred_s = dec->turn.deferred_s};
    for (Observer *o = dec->observers; o; o = o->next)
        if (o->cycle_end && o->cycle_end(o, dec, &r)) return -1;
    return 0;
}

static int decoder_end(Decoder *dec) {
    dec->turn.st->new_tokens = dec->turn.n_out;
    dec->turn.st->t.total = now_seconds() - dec->turn.t_start;
    return dec->turn.n_out;
}

int decoder_run(Decoder *dec, const int *prompt, int n_prompt, int max_new, int *out, DecodeStats *st) {
    int rc = decoder_begin(dec, prompt, n_prompt, max_new, out, st);
    while (!rc && !dec->turn.done)
        rc = decoder_cycle_begin(dec) || decoder_draft(dec) || decoder_verify(dec) || decoder_commit(dec);
    if (rc) {
        dec->cache.n = 0;   /* what the caches hold is unknown */
        return -1;
    }
    return decoder_end(dec);
}
