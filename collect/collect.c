/* spec-collect's engine (collect/collect.h). */
#include "collect/collect.h"
#include "infer/model/safetensors.h"
#include "infer/session/batch.h"
#include "kernels/base/util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct CollectRun CollectRun;

/* One question's trees, held until it and every question before it are
 * done: the file keeps the shard's order, which --resume counts on, while
 * batched questions finish in any order. */
typedef struct {
    CollectRun *run;
    const Question *q;
    char bench[64];
    int turn, finished;
    int turn_tree;            /* the current turn's first tree */
    int64_t turn_node;        /* and its first node */
    TraceTree *trees;
    int n_trees, cap_trees;
    TraceNode *nodes;
    int64_t n_nodes, cap_nodes;
} QuestionTrees;

struct CollectRun {
    TraceWriter *w;
    QuestionTrees *qt;
    int n, next;              /* questions of this run, the next one to write */
    int skip;                 /* finished in the file before this run */
    int every_position;       /* root verification: labels from each turn's output */
    Progress bar;
    int64_t trees, records;   /* in the file: a resumed file's rows included */
    int64_t records_before;   /* the resumed file's rows (this run's rate leaves them out) */
    double t0, t_write, t_features;
};

/* One verified tree -> one /trees row and its nodes (root excluded), held
 * with its question. */
void collect_tree_rows(const Tree *t, TraceNode *rows) {
    for (int i = 0; i < t->n - 1; i++) {
        int v = i + 1;
        rows[i] = (TraceNode){.P = t->P[v], .H = t->H[v], .p = t->p[v], .token = t->token[v],
                              .parent = t->parent[v] - 1, .depth = (uint8_t)t->depth[v], .accepted = 0,
                              .rank = (uint8_t)t->rank[v]};
    }
}

static int on_cycle(void *vctx, const Tree *t, const int *path, int n_path, int cycle) {
    QuestionTrees *qt = vctx;
    double t0 = now_seconds();
    const int n = t->n - 1;
    if (qt->n_nodes + n > qt->cap_nodes) {
        qt->cap_nodes = (qt->n_nodes + n) * 2;
        qt->nodes = xrealloc(qt->nodes, sizeof(TraceNode) * qt->cap_nodes);
    }
    if (qt->n_trees == qt->cap_trees) {
        qt->cap_trees = qt->cap_trees ? 2 * qt->cap_trees : 64;
        qt->trees = xrealloc(qt->trees, sizeof(TraceTree) * qt->cap_trees);
    }
    TraceNode *nodes = qt->nodes + qt->n_nodes;
    collect_tree_rows(t, nodes);
    for (int i = 1; i < n_path; i++) nodes[path[i] - 1].accepted = 1;
    qt->trees[qt->n_trees++] = (TraceTree){.turn = (int16_t)qt->turn, .cycle = cycle, .n_nodes = n, .accept_len = n_path - 1};
    qt->n_nodes += n;
    CollectRun *r = qt->run;
    r->t_features += now_seconds() - t0;
    char extra[96];   /* a line every 10 s even while one question takes longer */
    snprintf(extra, sizeof extra, "trees %lld  records %lld written", (long long)r->trees, (long long)r->records);
    progress_update(&r->bar, r->skip + r->next, extra);
    return 0;
}

/* Root verification (--every-position) accepts no node: the trees of a
 * finished turn take their labels from its output.  Tree c is rooted at
 * out[c], so the nodes whose path spells out[c+1], out[c+2], ... are those
 * that greedy verification of the whole tree accepts, up to the turn's end
 * (a whole-tree walk may go on past a stop token; its tokens are never
 * emitted). */
static void label_from_output(QuestionTrees *qt, const int *out, int n_out) {
    TraceNode *nodes = qt->nodes + qt->turn_node;
    for (int k = qt->turn_tree; k < qt->n_trees; nodes += qt->trees[k].n_nodes, k++) {
        TraceTree *tr = &qt->trees[k];
        int cur = -1, len = 0;
        for (int d = tr->cycle + 1; d < n_out; d++) {
            int next = -1;
            for (int i = cur + 1; i < tr->n_nodes && next < 0; i++)
                if (nodes[i].parent == cur && nodes[i].token == out[d]) next = i;
            if (next < 0) break;
            nodes[next].accepted = 1;
            cur = next;
            len++;
        }
        tr->accept_len = len;
    }
}

static int on_turn(void *vctx, const Question *q, int turn, const int32_t *prompt, size_t np,
                   const int *out, int n, const DecodeStats *st) {
    (void)q; (void)prompt; (void)np; (void)st;
    QuestionTrees *qt = vctx;
    if (qt->run->every_position) label_from_output(qt, out, n);
    qt->turn = turn + 1;   /* the hook of the next turn */
    qt->turn_tree = qt->n_trees;
    qt->turn_node = qt->n_nodes;
    return 0;
}

/* A question is done: write it, and every done one after it, in order. */
static int question_done(void *vctx) {
    QuestionTrees *qt = vctx;
    CollectRun *r = qt->run;
    qt->finished = 1;
    for (; r->next < r->n && r->qt[r->next].finished; r->next++) {
        QuestionTrees *x = &r->qt[r->next];
        double t0 = now_seconds();
        const TraceNode *nodes = x->nodes;
        for (int i = 0; i < x->n_trees; nodes += x->trees[i].n_nodes, i++)
            if (trace_add_tree(r->w, &x->trees[i], nodes)) return -1;
        if (trace_finish_question(r->w, x->bench, x->q->id)) return -1;
        r->t_write += now_seconds() - t0;
        r->trees += x->n_trees;
        r->records += x->n_nodes;
        free(x->trees); free(x->nodes);
        x->trees = NULL; x->nodes = NULL;
        char extra[128];
        double el = now_seconds() - r->t0;
        snprintf(extra, sizeof extra, "trees %lld  records %lld (%.0f/s)", (long long)r->trees, (long long)r->records,
                 el > 0 ? (r->records - r->records_before) / el : 0);
        progress_update(&r->bar, r->skip + r->next + 1, extra);
    }
    return 0;
}

/* Settings that must agree between a file and a --resume of it. */
typedef struct { const char *key; char value[1024]; } Setting;

/* Every settings attribute a new file gets was written ("device" is the
 * last), whatever its value. */
static int settings_complete(TraceWriter *w, const Setting *set, int ns) {
    for (int i = 0; i <= ns; i++) {
        char *v = trace_get_attr_str(w, i < ns ? set[i].key : "device");
        if (!v) return 0;
        free(v);
    }
    return 1;
}

#define MAX_SETTINGS 40

/* The settings of this run, as the trace's root attributes record them. */
static int run_settings(const Session *s, const Policy *policy, const char *const *files, int n,
                        const CollectOptions *o, Setting *set) {
    const SessionConfig *cfg = &s->cfg;
    int ns = 0;
#define SET(k, ...) do { set[ns].key = k; snprintf(set[ns].value, sizeof set[ns].value, __VA_ARGS__); ns++; } while (0)
    double topk = 0, depth = 0;
    policy_param_num(policy, "topk", &topk);
    policy_param_num(policy, "depth", &depth);
    char draft_weights[17];
    if (st_weights_hash_hex(cfg->draft_dir, draft_weights)) return -1;
    SET("tool", "spec-collect");
    SET("target", "%s", cfg->target_dir);
    SET("target_config_hash", "%s", s->target->config_hash);
    SET("target_weight_types", "%s", s->target->weight_types);
    SET("draft", "%s", cfg->draft_dir);
    SET("draft_kind", "%s", draft_kind_name(s->draft));
    SET("draft_config_hash", "%s", s->draft->config_hash);
    SET("draft_weights_hash", "%s", draft_weights);
    SET("draft_weight_types", "%s", s->draft->weight_types);
    SET("draft_vocab", "%d", s->draft->Vd);
    SET("draft_temperature", "%g", s->draft->temperature);
    SET("tokenizer", "%s", tokenizer_path(s->tok));
    SET("template", "%s", chat_template_name(s->tmpl));
    SET("system", "%s", cfg->system ? cfg->system : "(template default)");
    SET("policy", "eagle2 total=all");
    SET("topk", "%d", (int)topk);
    SET("depth", "%d", (int)depth);
    SET("entropy_topm", "%d", policy->prm.topm);
    SET("max_new_tokens", "%d", cfg->max_new);
    SET("max_questions", "%d", o->max_questions);
    SET("max_turns", "%d", o->max_turns);
    SET("depth_convention", "children of the root have depth 1");
    char qlist[1024] = "";
    for (int i = 0; i < n; i++) snprintf(qlist + strlen(qlist), sizeof qlist - strlen(qlist), "%s%s", i ? ";" : "", files[i]);
    SET("questions", "%s", qlist);
    SET("n_shards", "%d", o->shard_n);
    /* batched products of more than FEW_TOKENS rows sum in another order
     * (infer/session/batch.h), so a resume must not mix batch sizes */
    SET("batch", "%d", o->batch);
    /* a walk's draft features come from one-token forwards (decode.h) */
    SET("verify", "%s", verify_mode_name(cfg->verify));
    /* the backend's settings: one changes the arithmetic (cuda_fast_gemm),
     * and a resume must not mix trees of two */
    const char *key;
    char value[64];
    for (int i = 0; backend_setting_text(&cfg->backend, i, &key, value, sizeof value) == 0; i++) SET(key, "%s", value);
#undef SET
    return ns;
}

/* A file resumed: its settings must be this run's. */
static int check_resumed(TraceWriter *w, const CollectOptions *o, const Setting *set, int ns) {
    for (int i = 0; i < ns; i++) {
        char *have = trace_get_attr_str(w, set[i].key);
        int same = have && !strcmp(have, set[i].value);
        if (!same)
            err_set("--resume: %s was written with %s = '%s', this run has '%s'", o->out, set[i].key,
                    have ? have : "(absent)", set[i].value);
        free(have);
        if (!same) return -1;
    }
    char *sh = trace_get_attr_str(w, "shard"), want[32];
    snprintf(want, sizeof want, "%d/%d", o->shard_i, o->shard_n);
    int same = sh && !strcmp(sh, want);
    if (!same) err_set("--resume: %s was written as shard %s, this run is %s", o->out, sh ? sh : "(absent)", want);
    free(sh);
    return same ? 0 : -1;
}

/* A new file with this run's settings, all of them written before the file
 * appears at its path (trace_create_ex's attrs): an interrupt can leave no
 * file there, or a whole one. */
static TraceWriter *create_trace(const Session *s, const CollectOptions *o, const Setting *set, int ns) {
    char sh[32], stamp[32];
    snprintf(sh, sizeof sh, "%d/%d", o->shard_i, o->shard_n);
    time_t now = time(NULL);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    const char **attrs = xmalloc(sizeof(char *) * (2 * ns + 9)), **a = attrs;
    for (int i = 0; i < ns; i++) { *a++ = set[i].key; *a++ = set[i].value; }
    const char *run[] = {"shard", sh, "start_time", stamp, "version", C2T_VERSION, "device", s->target->be->name};
    for (size_t i = 0; i < sizeof run / sizeof *run; i++) *a++ = run[i];
    *a = NULL;
    TraceCreateOpts opts = {1, 0, attrs};
    TraceWriter *w = trace_create_ex(o->out, o->compress, &opts);
    free(attrs);
    return w;
}

/* The trace file, resumed or created.  NULL with err_set. */
static TraceWriter *open_trace(const Session *s, const CollectOptions *o, const Setting *set, int ns) {
    if (!o->resume) return create_trace(s, o, set, ns);
    TraceWriter *w = trace_resume(o->out);
    if (!w) return NULL;
    /* A file killed before its first finished question may lack some
     * settings (they are written one by one after it is created): it holds
     * nothing, so it is started again rather than refused. */
    if (trace_n_questions(w) == 0 && !settings_complete(w, set, ns)) {
        fprintf(stderr, "spec-collect: %s holds no finished question and not all its settings: starting it again\n", o->out);
        trace_close(w);
        if (unlink(o->out) != 0) { err_set("cannot remove %s to start it again", o->out); return NULL; }
        return create_trace(s, o, set, ns);
    }
    if (check_resumed(w, o, set, ns)) { trace_close(w); return NULL; }
    return w;
}

/* This shard's questions after the skip first ones, in file order. */
static int shard_questions(QuestionSet *const *sets, const char *const *files, int n, const CollectOptions *o, int skip,
                           CollectRun *r) {
    int g = 0, k = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < sets[i]->n; j++, g++) {
            if (g % o->shard_n != o->shard_i || k++ < skip) continue;
            QuestionTrees *qt = &r->qt[r->n++];
            qt->run = r;
            qt->q = &sets[i]->q[j];
            benchmark_name(files[i], qt->bench, sizeof qt->bench);
        }
    return r->n;
}

int collect_run(Session *s, Policy *policy, QuestionSet *const *sets, const char *const *files, int n,
                const CollectOptions *o) {
    int mine = 0, total_q = 0;   /* this shard's questions, in file order */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < sets[i]->n; j++, total_q++) mine += total_q % o->shard_n == o->shard_i;
    Setting set[MAX_SETTINGS];
    int ns = run_settings(s, policy, files, n, o, set);
    if (ns < 0) return -1;
    const int batched = o->batch > 1;   /* batch_run makes its own decoders */
    Decoder *dec = batched ? NULL : session_decoder(s, policy);
    if (!batched && !dec) return -1;
    TraceWriter *w = open_trace(s, o, set, ns);
    if (!w) { decoder_free(dec); return -1; }
    int rc = -1;
    CollectRun r = {.w = w, .qt = xcalloc(mine ? mine : 1, sizeof(QuestionTrees)),
                    .every_position = s->cfg.verify == VERIFY_ROOT};
    int64_t skip = trace_n_questions(w);
    if (skip > mine) {
        err_set("--resume: %s holds %lld questions, more than this shard has (%d)", o->out, (long long)skip, mine);
        goto done;
    }
    if (skip) fprintf(stderr, "spec-collect: resuming after %lld finished questions\n", (long long)skip);
    r.skip = (int)skip;
    r.trees = trace_n_trees(w);
    r.records = r.records_before = trace_n_nodes(w);
    shard_questions(sets, files, n, o, r.skip, &r);
    progress_start(&r.bar, "spec-collect questions", mine);
    r.bar.base = r.skip;
    r.t0 = now_seconds();
    if (batched) {
        const Question **qs = xcalloc(r.n ? r.n : 1, sizeof *qs);
        void **ctxs = xcalloc(r.n ? r.n : 1, sizeof *ctxs);
        for (int i = 0; i < r.n; i++) { qs[i] = r.qt[i].q; ctxs[i] = &r.qt[i]; }
        BatchOptions bo = {.slots = o->batch, .hook = on_cycle, .hook_reads_tree = 1, .question_done = question_done};
        double wall;
        int brc = batch_run(s, &policy->prm, &bo, qs, r.n, on_turn, ctxs, &wall);
        free(qs); free(ctxs);
        if (brc) goto done;
    } else {
        for (int i = 0; i < r.n; i++) {
            /* the cycle's trees, read to the host once a cycle */
            decoder_set_hook(dec, on_cycle, &r.qt[i], 1);
            if (session_question(s, dec, r.qt[i].q, on_turn, &r.qt[i]) || question_done(&r.qt[i])) goto done;
        }
    }
    double el = now_seconds() - r.t0;
    char extra[160];
    snprintf(extra, sizeof extra, "trees %lld  records %lld  features %.2f%%  writing %.2f%% of the time",
             (long long)r.trees, (long long)r.records, 100 * r.t_features / (el > 0 ? el : 1),
             100 * r.t_write / (el > 0 ? el : 1));
    progress_end(&r.bar, r.skip + r.next, extra);
    rc = 0;
done:
    for (int i = 0; i < r.n; i++) { free(r.qt[i].trees); free(r.qt[i].nodes); }
    free(r.qt);
    if (rc == 0) {
        if (trace_close(w)) rc = -1;
    } else {   /* the first error is the one to report */
        char why[1024];
        snprintf(why, sizeof why, "%s", err_get());
        trace_close(w);
        err_set("%s", why);
    }
    decoder_free(dec);
    return rc;
}
