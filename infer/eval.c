/* spec-eval's engine (infer/eval.h). */
#include "infer/eval.h"
#include "infer/speculative/cycle.h"
#include "kernels/base/util.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A growing list of A/B pairs. */
typedef struct { AbPair *p; int n, cap; } Pairs;

static void pairs_add(Pairs *l, const AbPair *p, int n) {
    if (n <= 0) return;   /* p may then be NULL (a list never grown) */
    if (l->n + n > l->cap) {
        l->cap = 2 * (l->n + n);
        l->p = xrealloc(l->p, sizeof(AbPair) * l->cap);
    }
    memcpy(l->p + l->n, p, sizeof(AbPair) * n);
    l->n += n;
}

typedef struct {
    Session *s;
    Decoder *ar;              /* baseline, NULL without it */
    int check_lossless;
    int repeats;              /* A/B pairs per question */
    EvalTotals bench;
    Pairs bench_pairs, all_pairs;
    int64_t pairs_done;       /* over the run: the next pair's number (its order) */
    cJSON *jq;                /* the current question's turn list */
    Progress *prog;
    EvalResult *r;
    const char *bench_name;
    int in_ar;                /* the ar baseline is decoding (progress line) */
    BatchDevice batch_dev;    /* batched: what the policy's slots' cycles sent through the gates */
    const volatile sig_atomic_t *stop;   /* EvalOptions.stop */
} EvalCtx;

/* The run is to stop (EvalOptions.stop). */
static int stopped(const EvalCtx *c) { return c->stop && *c->stop; }

/* Every cycle of a turn: the progress line (rate-limited there), so that a
 * long turn still shows one every 10 s, saying which decoder runs.  Non-zero
 * (the decoder then gives up the turn, decode.h) when the run is to stop. */
static int eval_tick(void *vctx, const Tree *t, const int *path, int n_path, int cycle) {
    (void)t; (void)path; (void)n_path; (void)cycle;
    EvalCtx *c = vctx;
    char extra[96];
    if (c->in_ar) snprintf(extra, sizeof extra, "ar baseline of turn %lld", (long long)c->r->turns + 1);
    else snprintf(extra, sizeof extra, "tau %.2f gamma %.1fk", decode_stats_tau(&c->bench.run), c->bench.run.gamma / 1000.0);
    progress_update(c->prog, c->r->turns, extra);
    return stopped(c);
}

static void stage_times_json(cJSON *o, const StageTimes *t) {
    cJSON_AddNumberToObject(o, "wall_s", t->total);
    cJSON_AddNumberToObject(o, "prefill_s", t->prefill);
    cJSON_AddNumberToObject(o, "draft_s", t->draft);
    cJSON_AddNumberToObject(o, "distribution_s", t->dist);
    cJSON_AddNumberToObject(o, "features_s", t->features);
    cJSON_AddNumberToObject(o, "classifier_s", t->classifier);
    cJSON_AddNumberToObject(o, "verify_s", t->verify);
    cJSON_AddNumberToObject(o, "calibration_s", t->calibrate);
}

static cJSON *stats_json(const DecodeStats *st) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "new_tokens", (double)st->new_tokens);
    cJSON_AddNumberToObject(o, "cycles", (double)st->cycles);
    cJSON_AddNumberToObject(o, "gamma", (double)st->gamma);
    cJSON_AddNumberToObject(o, "tau", decode_stats_tau(st));
    stage_times_json(o, &st->t);
    const StageTimes *t = &st->t;
    cJSON_AddNumberToObject(o, "other_s", t->total - t->prefill - t->draft - t->dist - t->features - t->classifier - t->verify - t->calibrate);
    return o;
}

double eval_speed(const EvalTotals *t) { return t->decode_s > 0 ? t->run.new_tokens / t->decode_s : 0; }

double eval_speedup(const EvalTotals *t) { return t->speedup.n ? t->speedup.median : 0; }

/* batched: the slots' cycles have no tuner of their own (their rounds do),
 * so the one-thread counts are left out */
static cJSON *totals_json(const EvalTotals *t, int batched) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "new_tokens", (double)t->run.new_tokens);
    cJSON_AddNumberToObject(o, "cycles", (double)t->run.cycles);
    cJSON_AddNumberToObject(o, "drafted_cycles", (double)t->run.drafted_cycles);
    cJSON_AddNumberToObject(o, "gamma", (double)t->run.gamma);
    cJSON_AddNumberToObject(o, "tau", decode_stats_tau(&t->run));
    cJSON_AddNumberToObject(o, "v", eval_speed(t));
    cJSON_AddNumberToObject(o, "decode_s", t->decode_s);
    stage_times_json(o, &t->run.t);
    if (!batched) cJSON_AddNumberToObject(o, "one_thread_cycles", (double)t->run.one_thread_cycles);
    if (t->ar_decode_s > 0) {
        cJSON_AddNumberToObject(o, "v_ar", t->ar_tokens / t->ar_decode_s);
        cJSON_AddNumberToObject(o, "ar_decode_s", t->ar_decode_s);
        cJSON_AddNumberToObject(o, "ar_prefill_s", t->ar_prefill_s);
        if (!batched) cJSON_AddNumberToObject(o, "ar_one_thread_cycles", (double)t->ar_one_thread_cycles);
    }
    if (t->speedup.n) {
        cJSON_AddNumberToObject(o, "speedup", t->speedup.median);
        cJSON *ci = cJSON_AddArrayToObject(o, "speedup_ci95");
        cJSON_AddItemToArray(ci, cJSON_CreateNumber(t->speedup.lo));
        cJSON_AddItemToArray(ci, cJSON_CreateNumber(t->speedup.hi));
        cJSON_AddNumberToObject(o, "speedup_pairs", t->speedup.n);
        cJSON_AddNumberToObject(o, "speedup_blocks", t->speedup.blocks);
        cJSON_AddNumberToObject(o, "speedup_ci_level", t->speedup.level);
    }
    return o;
}

static void totals_add(EvalTotals *sum, const EvalTotals *x) {
    decode_stats_add(&sum->run, &x->run);
    sum->decode_s += x->decode_s;
    sum->ar_tokens += x->ar_tokens;
    sum->ar_one_thread_cycles += x->ar_one_thread_cycles;
    sum->ar_decode_s += x->ar_decode_s;
    sum->ar_prefill_s += x->ar_prefill_s;
}

/* The sizes an "auto" tree size chose since `before` (NULL: since the
 * start), the τ their estimates predicted and the τ those cycles measured,
 * into o. */
static void cost_choices_add(cJSON *o, const CostModel *m, const CostModel *before) {
    CostModel d = *m;
    if (before) {
        d.chosen -= before->chosen;
        d.chosen_sum -= before->chosen_sum;
        d.predicted_tokens -= before->predicted_tokens;
        for (int k = 0; k < COST_HIST; k++) d.hist[k] -= before->hist[k];
        d.verified_cycles -= before->verified_cycles;
        d.verified_tokens -= before->verified_tokens;
    }
    cJSON_AddNumberToObject(o, "choices", (double)d.chosen);
    cJSON_AddNumberToObject(o, "chosen_mean", d.chosen ? (double)d.chosen_sum / (double)d.chosen : 0);
    cJSON_AddNumberToObject(o, "chosen_p10", cost_chosen_quantile(&d, 0.1));
    cJSON_AddNumberToObject(o, "chosen_p50", cost_chosen_quantile(&d, 0.5));
    cJSON_AddNumberToObject(o, "chosen_p90", cost_chosen_quantile(&d, 0.9));
    cJSON_AddNumberToObject(o, "predicted_tau", d.chosen ? d.predicted_tokens / (double)d.chosen : 0);
    cJSON_AddNumberToObject(o, "measured_tau_drafting",
                            d.verified_cycles ? d.verified_tokens / (double)d.verified_cycles : 0);
}

/* a mode's tokens per second over every cycle the switch saw of it (0: none) */
static double switch_rate(const DraftSwitch *sw, int off) {
    return sw->seen_seconds[off] > 0 ? sw->seen_tokens[off] / sw->seen_seconds[off] : 0.0;
}

/* P against acceptance by depth: each depth's verified nodes' P summed, its
 * accepted nodes and the factor its estimates carried at the end. */
static cJSON *acceptance_json(const CostModel *m) {
    cJSON *a = cJSON_CreateArray();
    for (int d = 1; d <= COST_DEPTHS && m->accept_p_total[d] > 0; d++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddNumberToObject(x, "depth", d);
        cJSON_AddNumberToObject(x, "p_sum", m->accept_p_total[d]);
        cJSON_AddNumberToObject(x, "accepted", m->accept_n_total[d]);
        cJSON_AddNumberToObject(x, "factor", m->accept_ratio[d]);
        cJSON_AddItemToArray(a, x);
    }
    return a;
}

/* The cost model of an "auto" tree size (cost.h): the calibrated curve
 * (measured, or read from the cache under its key), the curve the cycles
 * corrected it to (and whether that replaced the cached one), what else
 * they made of it and the sizes chosen.  Batched, the curve's token counts are a
 * round's, all its trees together. */
static cJSON *cost_json(const CostModel *m, const char *cache, int refreshed) {
    cJSON *o = cJSON_CreateObject();
    cJSON *n = cJSON_AddArrayToObject(o, "verify_n"), *v = cJSON_AddArrayToObject(o, "verify_s");
    cJSON *cv = cJSON_AddArrayToObject(o, "verify_s_corrected"), *w = cJSON_AddArrayToObject(o, "verify_observations");
    CostModel c;
    cost_corrected_curve(m, &c);
    for (int i = 0; i < m->n_pts; i++) {
        cJSON_AddItemToArray(n, cJSON_CreateNumber(m->n[i]));
        cJSON_AddItemToArray(v, cJSON_CreateNumber(m->verify_s[i]));
        cJSON_AddItemToArray(cv, cJSON_CreateNumber(c.verify_s[i]));
        cJSON_AddItemToArray(w, cJSON_CreateNumber(m->weight[i]));
    }
    cJSON_AddNumberToObject(o, "calibration_s", m->calibration_s);
    cJSON_AddStringToObject(o, "calibration", m->from_cache ? "cache" : "measured");
    if (cache) {
        cJSON_AddStringToObject(o, "cache", cache);
        cJSON_AddStringToObject(o, "cache_key", m->cache_key);
        cJSON_AddBoolToObject(o, "cache_refreshed", refreshed);
    } else {
        cJSON_AddNullToObject(o, "cache");
    }
    cJSON_AddNumberToObject(o, "verify_scale", m->scale);
    cJSON_AddNumberToObject(o, "lazy_nodes", m->lazy_nodes);   /* past it, each walked row adds row_s */
    cJSON_AddNumberToObject(o, "row_s", m->row_s);
    cJSON_AddNumberToObject(o, "draft_s", m->draft_s);
    cJSON_AddNumberToObject(o, "expand_s", m->expand_s);
    cJSON_AddNumberToObject(o, "expands_mean", m->expands);
    cJSON_AddNumberToObject(o, "cycles", (double)m->cycles);
    cost_choices_add(o, m, NULL);
    cJSON_AddItemToObject(o, "acceptance_by_depth", acceptance_json(m));
    /* whether drafting paid: the cycles (batched: rounds) of each mode, the
     * tokens per second of each's last window and over all its cycles, the
     * choice's changes and the last choice */
    const DraftSwitch *sw = &m->sw;
    cJSON *d = cJSON_AddObjectToObject(o, "draft_switch");
    cJSON_AddNumberToObject(d, "cycles_drafting", (double)sw->cycles[0]);
    cJSON_AddNumberToObject(d, "cycles_not_drafting", (double)sw->cycles[1]);
    cJSON_AddNumberToObject(d, "tokens_per_s_drafting", sw->rate[0]);
    cJSON_AddNumberToObject(d, "tokens_per_s_not_drafting", sw->rate[1]);
    cJSON_AddNumberToObject(d, "tokens_per_s_drafting_all", switch_rate(sw, 0));
    cJSON_AddNumberToObject(d, "tokens_per_s_not_drafting_all", switch_rate(sw, 1));
    cJSON_AddNumberToObject(d, "changes", (double)sw->changes);
    cJSON_AddBoolToObject(d, "drafting_at_end", !sw->chosen_off);
    return o;
}

/* --draft-vocab auto's candidates, measurements and choice */
static cJSON *vocab_auto_json(const VocabAuto *va) {
    cJSON *o = cJSON_CreateObject(), *c = cJSON_AddArrayToObject(o, "candidates");
    for (int i = 0; i < va->n_cand; i++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddNumberToObject(x, "vocab", va->cand[i]);
        cJSON_AddNumberToObject(x, "coverage", va->coverage[i]);
        cJSON_AddNumberToObject(x, "step_s", va->step_s[i]);
        cJSON_AddNumberToObject(x, "step1_s", va->step1_s[i]);
        cJSON_AddNumberToObject(x, "step_fit_s", va->step_fit_s[i]);
        cJSON_AddNumberToObject(x, "step1_fit_s", va->step1_fit_s[i]);
        cJSON_AddNumberToObject(x, "predicted_tokens_per_s", va->rate[i]);
        cJSON_AddNumberToObject(x, "cycles", (double)va->drafted[i]);
        cJSON_AddItemToArray(c, x);
    }
    cJSON_AddNumberToObject(o, "explored", va->cand[va->n_cand - 1]);
    cJSON_AddNumberToObject(o, "choices", (double)va->choices);
    cJSON_AddNumberToObject(o, "reexplored", (double)va->reexplored);
    if (va->chosen >= 0) cJSON_AddNumberToObject(o, "chosen", va->cand[va->chosen]);
    else cJSON_AddNullToObject(o, "chosen");   /* the run ended while exploring */
    cJSON_AddNumberToObject(o, "calibration_s", va->calibration_s);
    return o;
}

/* Every setting that shapes the run: models, template, the policy's own
 * settings as it resolved them, sampling. */
static cJSON *settings_json(const Session *s, const Policy *policy, const EvalOptions *eo) {
    const SessionConfig *cfg = &s->cfg;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "target", cfg->target_dir);
    cJSON_AddStringToObject(o, "target_config_hash", s->target->config_hash);
    cJSON_AddStringToObject(o, "target_weight_types", s->target->weight_types);
    cJSON_AddStringToObject(o, "device", s->target->be->name);
    if (s->draft) {
        cJSON_AddStringToObject(o, "draft", cfg->draft_dir);
        cJSON_AddStringToObject(o, "draft_kind", draft_kind_name(s->draft));
        cJSON_AddNumberToObject(o, "draft_vocab", s->draft->Vd);   /* with auto: the explored one */
        cJSON_AddBoolToObject(o, "draft_vocab_auto", s->cfg.draft_vocab == DRAFT_VOCAB_AUTO);
        cJSON_AddNumberToObject(o, "draft_temperature", s->draft->temperature);
        cJSON_AddStringToObject(o, "draft_config_hash", s->draft->config_hash);
        if (s->draft->weight_types[0]) cJSON_AddStringToObject(o, "draft_weight_types", s->draft->weight_types);
    }
    cJSON_AddStringToObject(o, "tokenizer", tokenizer_path(s->tok));
    cJSON_AddStringToObject(o, "template", chat_template_name(s->tmpl));
    cJSON_AddStringToObject(o, "policy", policy->name);
    const char *key;
    cJSON_AddNumberToObject(o, "entropy_topm", policy->prm.topm);
    const char *text;
    double num;
    for (int i = 0; policy_param_get(policy, i, &key, &num, &text) == 0; i++) {
        if (text) cJSON_AddStringToObject(o, key, text);
        else cJSON_AddNumberToObject(o, key, num);
    }
    cJSON_AddStringToObject(o, "verify", verify_mode_name(cfg->verify));
    cJSON_AddNumberToObject(o, "batch", eo->batch.slots);
    cJSON_AddBoolToObject(o, "static_batches", eo->batch.static_batches);
    cJSON_AddNumberToObject(o, "repeats", eo->repeats > 1 ? eo->repeats : 1);
    cJSON_AddNumberToObject(o, "max_new_tokens", cfg->max_new);
    cJSON_AddNumberToObject(o, "temperature", cfg->sp.temperature);
    cJSON_AddNumberToObject(o, "top_k", cfg->sp.top_k);
    cJSON_AddNumberToObject(o, "top_p", cfg->sp.top_p);
    cJSON_AddNumberToObject(o, "seed", (double)cfg->sp.seed);
    cJSON_AddBoolToObject(o, "arithmetic_auto", cfg->arith_auto);   /* the plain run's rule decided cpu_fast_gemm, kv_dtype */
    cJSON_AddStringToObject(o, "cpu_isa", backend_cpu_isa());   /* what the CPU kernels were built for */
    cJSON_AddStringToObject(o, "cpu_blas", backend_cpu_blas());   /* OpenBLAS's kernels: sgemm's order */
    char value[64];
    for (int i = 0; backend_setting_text(&cfg->backend, i, &key, value, sizeof value) == 0; i++)
        cJSON_AddStringToObject(o, key, value);
    return o;
}

/* One decode of prompt[0..np) by dec into out; -1 with err_set naming the
 * question and turn on a decoding or backend failure. */
static int decode_turn(const Session *s, Decoder *dec, const Question *q, int turn, const char *who,
                       const int32_t *prompt, size_t np, int *out, DecodeStats *st) {
    int *p = xmalloc(sizeof(int) * (np ? np : 1));
    for (size_t i = 0; i < np; i++) p[i] = prompt[i];
    int n = decoder_run(dec, p, (int)np, s->cfg.max_new, out, st);
    free(p);
    const char *failure = backend_failure(s->target->be);
    if (failure) {
        err_set("question %s turn %d (%s): %s backend failed: %s", q->id, turn + 1, who, s->target->be->name, failure);
        return -1;
    }
    if (n < 0) err_set("question %s turn %d (%s): %s", q->id, turn + 1, who, err_get());
    return n;
}

static int run_ar(EvalCtx *c, const Question *q, int turn, const int32_t *prompt, size_t np, int *out, DecodeStats *st) {
    c->in_ar = 1;
    const int n = decode_turn(c->s, c->ar, q, turn, "ar baseline", prompt, np, out, st);
    c->in_ar = 0;
    return n;
}

/* A decoded turn into the report and the totals: the policy's stats and
 * tokens, ar's time, and whether ar's tokens (ref, nr) equal the policy's. */
static void record_turn(EvalCtx *c, const Question *q, int turn, size_t np, const int *out, int n,
                        const DecodeStats *st, const int *ref, int nr, const DecodeStats *ast) {
    decode_stats_add(&c->bench.run, st);
    c->bench.decode_s += stage_decode_s(&st->t);
    cJSON *jt = stats_json(st);
    cJSON_AddNumberToObject(jt, "turn", turn + 1);   /* 1-based, as every message counts turns */
    cJSON_AddNumberToObject(jt, "prompt_tokens", (double)np);
    cJSON_AddItemToObject(jt, "output_ids", cJSON_CreateIntArray(out, n));
    if (c->ar) {
        c->bench.ar_tokens += ast->new_tokens;
        c->bench.ar_one_thread_cycles += ast->one_thread_cycles;
        c->bench.ar_decode_s += stage_decode_s(&ast->t);
        c->bench.ar_prefill_s += ast->t.prefill;
        cJSON_AddNumberToObject(jt, "ar_wall_s", ast->t.total);
        cJSON_AddNumberToObject(jt, "ar_prefill_s", ast->t.prefill);
        cJSON_AddNumberToObject(jt, "ar_new_tokens", (double)ast->new_tokens);
        if (c->check_lossless) {
            int same = nr == n;
            for (int i = 0; same && i < n; i++) same = ref[i] == out[i];
            cJSON_AddBoolToObject(jt, "lossless", same);
            if (!same) {
                c->r->lossless_failures++;
                fprintf(stderr, "\nspec-eval: NOT LOSSLESS: %s question %s turn %d differs from ar\n", c->bench_name, q->id,
                        turn + 1);
            }
        }
    }
    cJSON_AddItemToArray(c->jq, jt);
    c->r->turns++;
    char extra[96];
    snprintf(extra, sizeof extra, "tau %.2f gamma %.1fk", decode_stats_tau(&c->bench.run), c->bench.run.gamma / 1000.0);
    progress_update(c->prog, c->r->turns, extra);
}

/* Every turn of q: the policy's decode and ar's on the same prompt, as
 * c->repeats A/B pairs in alternating order (ab_ar_first); the first pair's
 * policy decode is the turn's output, the next turn's prompt holds it.  The
 * question's pairs (decode times summed over its finished turns) go to the
 * benchmark's list.  0; 1 when the run is to stop (checked before each turn;
 * a turn it cut short is not counted); -1 with err_set. */
static int eval_question(EvalCtx *c, Decoder *dec, const Question *q) {
    Session *s = c->s;
    const int R = c->repeats;
    const char **answers = xcalloc(q->n_turns, sizeof(char *));
    int *out = xmalloc(sizeof(int) * (s->cfg.max_new + 1)), *ref = xmalloc(sizeof(int) * (s->cfg.max_new + 1)),
        *scratch = xmalloc(sizeof(int) * (s->cfg.max_new + 1));
    AbPair *qp = xcalloc(R, sizeof *qp), *tp = xcalloc(R, sizeof *tp);
    int rc = 0, done = 0;
    for (int turn = 0; turn < q->n_turns && !rc; turn++) {
        if (stopped(c)) { rc = 1; break; }
        int32_t *ids = NULL;
        size_t np = 0;
        if ((rc = session_prompt(s, q, answers, turn, &ids, &np))) break;
        DecodeStats st = {0}, ast = {0};
        int n = 0, nr = 0;
        memset(tp, 0, sizeof *tp * R);
        for (int r = 0; r < R && !rc; r++) {
            const int ar_first = c->ar && ab_ar_first(c->pairs_done + r);
            DecodeStats pst, rst = {0};
            int np_out = 0, nr_out = 0;
            if ((ar_first && (nr_out = run_ar(c, q, turn, ids, np, r ? scratch : ref, &rst)) < 0) ||
                (np_out = decode_turn(s, dec, q, turn, "policy", ids, np, r ? scratch : out, &pst)) < 0 ||
                (c->ar && !ar_first && (nr_out = run_ar(c, q, turn, ids, np, r ? scratch : ref, &rst)) < 0)) {
                rc = stopped(c) ? 1 : -1;   /* a stop: the hook gave up the decode */
                break;
            }
            tp[r].policy_s = stage_decode_s(&pst.t);
            tp[r].policy_tokens = pst.new_tokens;
            tp[r].ar_s = stage_decode_s(&rst.t);
            tp[r].ar_tokens = rst.new_tokens;
            if (r == 0) { st = pst; ast = rst; n = np_out; nr = nr_out; }
        }
        if (!rc) {   /* the turn is finished: counted, its pairs' times the question's */
            record_turn(c, q, turn, np, out, n, &st, ref, nr, &ast);
            answers[turn] = session_answer(s, out, n);
            for (int r = 0; r < R; r++) {
                qp[r].policy_s += tp[r].policy_s;
                qp[r].policy_tokens += tp[r].policy_tokens;
                qp[r].ar_s += tp[r].ar_s;
                qp[r].ar_tokens += tp[r].ar_tokens;
            }
            done++;
        }
        free(ids);
    }
    if (rc >= 0 && done && c->ar && c->s->cfg.verify == VERIFY_TREE) pairs_add(&c->bench_pairs, qp, R);
    c->pairs_done += R;
    for (int i = 0; i < q->n_turns; i++) free((char *)answers[i]);
    free(answers); free(out); free(ref); free(scratch); free(qp); free(tp);
    return rc;
}

/* An untimed warm-up of both decoders, so that one-time costs (CUDA module
 * loading, cuBLAS handles, workspace growth: about 0.1 s on an H100) are not
 * charged to the first question's policy turn.  On CUDA only (the CPU has no
 * such cost) and greedy only: a sampled warm-up would move the decoder's
 * random stream.  Adaptive policies (SAGE, WETAP) see its cycles as they
 * see every earlier question's. */
static int warm_up(const Session *s, Decoder *dec, Decoder *ar) {
    if (s->cfg.sp.temperature > 0 || strcmp(s->target->be->name, "cuda")) return 0;
    int prompt[8], out[64];
    for (int i = 0; i < 8; i++) prompt[i] = 1 + i % (s->target->cfg.vocab - 1);
    DecodeStats st;
    if (decoder_run(dec, prompt, 8, 8, out, &st) < 0) return -1;
    return ar && decoder_run(ar, prompt, 8, 8, out, &st) < 0 ? -1 : 0;
}

/* One benchmark file: its questions into jbench, its totals into c->bench.
 * 0; 1 when the run is to stop (the totals are then those of the turns
 * finished); -1 with err_set. */
static int eval_bench(Decoder *dec, const QuestionSet *set, const char *file, EvalCtx *c, cJSON *jbench) {
    cJSON *jb = cJSON_CreateObject();
    cJSON_AddItemToArray(jbench, jb);
    cJSON_AddStringToObject(jb, "name", c->bench_name);
    cJSON_AddStringToObject(jb, "file", file);
    cJSON *jqs = cJSON_AddArrayToObject(jb, "questions");
    const CostModel before = dec->policy->cost ? *dec->policy->cost : (CostModel){0};
    int rc = 0;
    for (int j = 0; j < set->n && !rc; j++) {
        const Question *q = &set->q[j];
        cJSON *jq = cJSON_CreateObject();
        cJSON_AddStringToObject(jq, "question_id", q->id);
        cJSON_AddStringToObject(jq, "category", q->category);
        c->jq = cJSON_AddArrayToObject(jq, "turns");
        cJSON_AddItemToArray(jqs, jq);
        if ((rc = eval_question(c, dec, q)) < 0) return -1;
    }
    c->bench.speedup = speedup_estimate(c->bench_pairs.p, c->bench_pairs.n);
    pairs_add(&c->all_pairs, c->bench_pairs.p, c->bench_pairs.n);
    c->bench_pairs.n = 0;
    cJSON_AddItemToObject(jb, "total", totals_json(&c->bench, 0));
    if (dec->policy->cost) cost_choices_add(cJSON_AddObjectToObject(jb, "cost_model"), dec->policy->cost, &before);
    return rc;
}

/* ---- batched runs ---- */

/* What a question's turns report to in a batched run. */
typedef struct {
    EvalCtx *c;
    int bench;
    cJSON *turns;
} QuestionCtx;

static int on_batch_turn(void *vq, const Question *q, int turn, const int32_t *prompt, size_t np, const int *out,
                         int n, const DecodeStats *st) {
    (void)q; (void)prompt;
    QuestionCtx *qc = vq;
    EvalResult *r = qc->c->r;
    DecodeStats run = *st;
    run.t.total = 0;   /* turns overlap: the run's wall time is the one that counts */
    decode_stats_add(&r->per[qc->bench].run, &run);
    cJSON *jt = stats_json(st);
    cJSON_AddNumberToObject(jt, "turn", turn + 1);
    cJSON_AddNumberToObject(jt, "prompt_tokens", (double)np);
    cJSON_AddItemToObject(jt, "output_ids", cJSON_CreateIntArray(out, n));
    cJSON_AddItemToArray(qc->turns, jt);
    r->turns++;
    char extra[96];
    snprintf(extra, sizeof extra, "tau %.2f", decode_stats_tau(&r->per[qc->bench].run));
    progress_update(qc->c->prog, r->turns, extra);
    return 0;
}

/* ar's turn of the same question: its tokens against the policy's. */
static int on_batch_ar_turn(void *vq, const Question *q, int turn, const int32_t *prompt, size_t np, const int *out,
                            int n, const DecodeStats *st) {
    (void)prompt; (void)np;
    QuestionCtx *qc = vq;
    EvalCtx *c = qc->c;
    c->r->per[qc->bench].ar_tokens += st->new_tokens;
    cJSON *jt = cJSON_GetArrayItem(qc->turns, turn);
    if (!jt) { err_set("question %s turn %d: ar decoded a turn the policy did not", q->id, turn + 1); return -1; }
    cJSON_AddNumberToObject(jt, "ar_new_tokens", (double)st->new_tokens);
    if (c->check_lossless) {
        const cJSON *ids = cJSON_GetObjectItem(jt, "output_ids");
        int same = cJSON_GetArraySize(ids) == n;
        for (int i = 0; same && i < n; i++) same = cJSON_GetArrayItem(ids, i)->valueint == out[i];
        cJSON_AddBoolToObject(jt, "lossless", same);
        if (!same) {
            c->r->lossless_failures++;
            fprintf(stderr, "\nspec-eval: NOT LOSSLESS: %s question %s turn %d differs from ar\n", c->r->names[qc->bench],
                    q->id, turn + 1);
        }
    }
    return 0;
}

/* A repeated run's turn: its time is all that counts. */
static int on_batch_repeat(void *vq, const Question *q, int turn, const int32_t *prompt, size_t np, const int *out,
                           int n, const DecodeStats *st) {
    (void)vq; (void)q; (void)turn; (void)prompt; (void)np; (void)out; (void)n; (void)st;
    return 0;
}

/* Every question of every file through batch_run, the policy's run and
 * ar's at the same batch size, as c->repeats A/B pairs of whole runs (wall
 * times, prefills included: the turns overlap).  0; 1 when the run is to
 * stop: the turns finished are counted, and only runs that ended are timed
 * (a run cut short has decoded turns it does not count), so a stop in the
 * first policy run leaves no speed, and one before a pair's end no speedup
 * from it; -1 with err_set. */
static int eval_batched(Session *s, Policy *policy, QuestionSet *const *sets, const char *const *files, int n,
                        const EvalOptions *o, EvalCtx *c, cJSON *jbench, CostModel *cost) {
    EvalResult *r = c->r;
    int nq = 0;
    for (int i = 0; i < n; i++) nq += sets[i]->n;
    const Question **qs = xcalloc(nq ? nq : 1, sizeof *qs);
    QuestionCtx *qc = xcalloc(nq ? nq : 1, sizeof *qc);
    void **ctxs = xcalloc(nq ? nq : 1, sizeof *ctxs);
    for (int i = 0, k = 0; i < n; i++) {
        cJSON *jb = cJSON_CreateObject();
        cJSON_AddItemToArray(jbench, jb);
        cJSON_AddStringToObject(jb, "name", r->names[i]);
        cJSON_AddStringToObject(jb, "file", files[i]);
        cJSON *jqs = cJSON_AddArrayToObject(jb, "questions");
        for (int j = 0; j < sets[i]->n; j++, k++) {
            const Question *q = &sets[i]->q[j];
            cJSON *jq = cJSON_CreateObject();
            cJSON_AddStringToObject(jq, "question_id", q->id);
            cJSON_AddStringToObject(jq, "category", q->category);
            qc[k] = (QuestionCtx){c, i, cJSON_AddArrayToObject(jq, "turns")};
            cJSON_AddItemToArray(jqs, jq);
            qs[k] = q;
            ctxs[k] = &qc[k];
        }
    }
    /* A/B pairs of whole runs in alternating order; the first pair (policy
     * first) records the turns, the rest only time */
    PolicyParams ap = policy->prm;
    snprintf(ap.name, sizeof ap.name, "ar");
    ap.settings[0] = 0;
    const int R = c->repeats;
    AbPair *pairs = xcalloc(R, sizeof *pairs);
    int rc = 0, whole = 0;   /* whole: pairs whose runs both ended */
    int policy_ended = 0, ar_ended = 0;   /* the first pair's runs */
    for (int k = 0; k < R && !rc; k++) {
        for (int side = 0; side < (o->baseline ? 2 : 1) && !rc; side++) {
            const int run_ar = o->baseline && side != ab_ar_first(k);
            TurnFn fn = k ? on_batch_repeat : run_ar ? on_batch_ar_turn : on_batch_turn;
            double wall = 0;
            BatchOptions bo = o->batch;
            bo.cost = k == 0 && !run_ar && policy->wants_cost ? cost : NULL;   /* the recorded run's */
            bo.device = k == 0 && !run_ar ? &c->batch_dev : NULL;
            bo.stop = o->stop;
            rc = batch_run(s, run_ar ? &ap : &policy->prm, &bo, qs, nq, fn, ctxs, &wall);
            *(run_ar ? &pairs[k].ar_s : &pairs[k].policy_s) = rc ? 0 : wall;
            if (!rc && k == 0) *(run_ar ? &ar_ended : &policy_ended) = 1;
        }
        whole += !rc;
    }
    if (rc < 0) { free(pairs); free(qs); free(qc); free(ctxs); return -1; }
    for (int i = 0; i < n; i++) {
        cJSON_AddItemToObject(cJSON_GetArrayItem(jbench, i), "total", totals_json(&r->per[i], 1));
        totals_add(&r->all, &r->per[i]);
    }
    r->all.decode_s = policy_ended ? pairs[0].policy_s : 0;
    r->all.ar_decode_s = ar_ended ? pairs[0].ar_s : 0;
    for (int k = 0; k < R; k++) {
        pairs[k].policy_tokens = r->all.run.new_tokens;
        pairs[k].ar_tokens = r->all.ar_tokens;
    }
    if (o->baseline && s->cfg.verify == VERIFY_TREE) pairs_add(&c->all_pairs, pairs, whole);
    free(pairs); free(qs); free(qc); free(ctxs);
    return rc;
}

/* A partial run's report: the questions without a finished turn left out
 * (a batched run lists every question before it starts). */
static void unreached_left_out(cJSON *jbench) {
    cJSON *jb;
    cJSON_ArrayForEach(jb, jbench) {
        cJSON *jqs = cJSON_GetObjectItem(jb, "questions");
        for (int j = cJSON_GetArraySize(jqs) - 1; j >= 0; j--)
            if (!cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetArrayItem(jqs, j), "turns")))
                cJSON_DeleteItemFromArray(jqs, j);
    }
}

int eval_run(Session *s, Policy *policy, QuestionSet *const *sets, const char *const *files, int n,
             const EvalOptions *o, EvalResult *r) {
    memset(r, 0, sizeof *r);
    if (n > EVAL_MAX_BENCH) { err_set("at most %d question files", EVAL_MAX_BENCH); return -1; }
    /* every first turn must fit the cache: found now, not after the
     * questions before it were decoded (later turns depend on answers) */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < sets[i]->n; j++) {
            int32_t *ids;
            size_t n_ids;
            if (session_prompt(s, &sets[i]->q[j], NULL, 0, &ids, &n_ids)) return -1;
            free(ids);
        }
    const int batched = o->batch.slots > 1;   /* batch_run makes its own decoders */
    Decoder *dec = NULL, *ar = NULL;
    Policy *ar_policy = NULL;
    CostModel *batch_cost = NULL;   /* batched auto sizes: the slots' models as one */
    Progress prog;
    EvalCtx ctx = {.s = s, .check_lossless = o->check_lossless, .repeats = o->repeats > 1 ? o->repeats : 1,
                   .prog = &prog, .r = r, .stop = o->stop};
    int rc = -1;
    if (!batched) {
        if (!(dec = session_decoder(s, policy))) return -1;
        if (o->baseline) {
            PolicyParams ap = policy->prm;
            snprintf(ap.name, sizeof ap.name, "ar");
            ap.settings[0] = 0;   /* the policy's settings are not ar's */
            if (!(ar_policy = policy_new(&ap)) || !(ar = session_decoder(s, ar_policy))) goto done;
        }
        if (warm_up(s, dec, ar)) goto done;
    }

    r->report = cJSON_CreateObject();
    cJSON_AddStringToObject(r->report, "tool", "spec-eval");
    cJSON_AddStringToObject(r->report, "version", C2T_VERSION);
    char stamp[32];
    time_t now = time(NULL);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    cJSON_AddStringToObject(r->report, "start_time", stamp);
    int64_t total_turns = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < sets[i]->n; j++) total_turns += sets[i]->q[j].n_turns;
    r->turns_total = total_turns;
    /* whether every turn was decoded: set again at the end */
    cJSON_AddBoolToObject(r->report, "partial", 0);
    cJSON_AddNumberToObject(r->report, "turns_done", 0);
    cJSON_AddNumberToObject(r->report, "turns_total", (double)total_turns);
    cJSON_AddItemToObject(r->report, "settings", settings_json(s, policy, o));
    cJSON *jbench = cJSON_AddArrayToObject(r->report, "benchmarks");

    progress_start(&prog, "spec-eval turns", total_turns);
    ctx.ar = ar;
    for (Decoder *d = dec; d; d = d == dec ? ar : NULL) {   /* single-sequence runs: a line every 10 s */
        decoder_set_hook(d, eval_tick, &ctx, 0);
    }
    r->n_bench = n;
    for (int i = 0; i < n; i++) benchmark_name(files[i], r->names[i], sizeof r->names[i]);
    if (batched && policy->wants_cost) batch_cost = xcalloc(1, sizeof *batch_cost);
    if (batched) {
        const int st = eval_batched(s, policy, sets, files, n, o, &ctx, jbench, batch_cost);
        if (st < 0) goto done;
        r->partial = st > 0;
        n = 0;   /* done: no single-sequence pass below */
    }
    for (int i = 0; i < n && !r->partial; i++) {
        ctx.bench = (EvalTotals){0};
        ctx.bench_name = r->names[i];
        const int st = eval_bench(dec, sets[i], files[i], &ctx, jbench);
        if (st < 0) goto done;
        r->per[i] = ctx.bench;
        totals_add(&r->all, &ctx.bench);
        if (st > 0) {   /* stopped: the benchmarks after this one were not begun */
            r->partial = 1;
            r->n_bench = i + 1;
        }
    }
    progress_end(&prog, r->turns, NULL);
    if (r->partial) unreached_left_out(jbench);
    cJSON_ReplaceItemInObject(r->report, "partial", cJSON_CreateBool(r->partial));
    cJSON_ReplaceItemInObject(r->report, "turns_done", cJSON_CreateNumber((double)r->turns));
    r->all.speedup = speedup_estimate(ctx.all_pairs.p, ctx.all_pairs.n);
    cJSON_AddItemToObject(r->report, "total", totals_json(&r->all, batched));
    const CostModel *m = dec && dec->policy->cost ? dec->policy->cost : batch_cost;
    if (m) {
        /* every cycle counts, not only those the switch judged (none while
         * the draft vocabulary explores) */
        const double off_share = r->all.run.cycles ? 1 - (double)r->all.run.drafted_cycles / (double)r->all.run.cycles : 0;
        const int refreshed = cost_cache_refresh(s->cfg.cost_cache, m);
        if (refreshed < 0) fprintf(stderr, "warning: the corrected cost curve is not cached: %s\n", err_get());
        cJSON_AddItemToObject(r->report, "cost_model", cost_json(m, s->cfg.cost_cache, refreshed > 0));
        fprintf(stderr, "spec-eval: %s sized its trees from measured costs: %.1f nodes a cycle on average "
                "(p10 %d, p90 %d), %.1f expansion steps; calibration %.2f s%s, verification %.2fx the calibrated "
                "curve; tau %.2f predicted by its estimates, %.2f measured on the same cycles (those that drafted: the "
                "table's tau counts the others too); no draft in %.0f%% of the cycles (%.0f vs %.0f tokens/s drafting at "
                "the switch's last windows, %.0f vs %.0f over all their cycles)\n",
                policy->name,
                m->chosen ? (double)m->chosen_sum / (double)m->chosen : 0.0, cost_chosen_quantile(m, 0.1),
                cost_chosen_quantile(m, 0.9), m->expands, m->calibration_s, m->from_cache ? " (cached curve)" : "",
                m->scale,
                m->chosen ? m->predicted_tokens / (double)m->chosen : 0.0,
                m->verified_cycles ? m->verified_tokens / (double)m->verified_cycles : 0.0,
                100.0 * off_share, m->sw.rate[1], m->sw.rate[0],
                switch_rate(&m->sw, 1), switch_rate(&m->sw, 0));
        const double mean_nodes = m->chosen ? (double)m->chosen_sum / (double)m->chosen : 0.0;
        if (mean_nodes < EVAL_TINY_TREE || off_share >= EVAL_MOSTLY_OFF) {   /* the plain command says why */
            char arith[256], why[512];
            session_arith_text(s, arith, sizeof arith);
            cost_explain(m, why, sizeof why);
            fprintf(stderr, "spec-eval: why so little drafting: %s; %s\n", arith, why);
        }
    }
    if (dec) {   /* what the host waited for: the cycle's reads and recorded cycles */
        const DevCycle *c = dec->dc;
        cJSON *o = cJSON_AddObjectToObject(r->report, "device_cycle");
        cJSON_AddNumberToObject(o, "cycles", c->cycles);
        cJSON_AddNumberToObject(o, "cycle_units", c->units);
        cJSON_AddNumberToObject(o, "verify_units", c->verify_units);
        cJSON_AddNumberToObject(o, "walked_units", c->walked_units);
        cJSON_AddNumberToObject(o, "all_logits_nodes", lazy_logits_nodes(dec->target->m->be));
        cJSON_AddNumberToObject(o, "walk_reads", c->walk_reads);
        cJSON_AddNumberToObject(o, "count_reads", c->count_reads);
        cJSON_AddNumberToObject(o, "key_reads", c->key_reads);
        cJSON_AddNumberToObject(o, "expand_reads", c->expand_reads);
        cJSON_AddNumberToObject(o, "host_reads_per_cycle",
                                c->cycles ? (double)(cycle_host_reads(c) - c->tree_reads) / c->cycles : 0);
    } else if (batched) {   /* the slots' tree ops and reads, batched at their gates */
        const BatchDevice *b = &ctx.batch_dev;
        cJSON *o = cJSON_AddObjectToObject(r->report, "device_cycle");
        cJSON_AddNumberToObject(o, "tree_ops", (double)b->tree_ops);
        cJSON_AddNumberToObject(o, "tree_batches", (double)b->tree_batches);
        cJSON_AddNumberToObject(o, "tree_ops_per_batch", b->tree_batches ? (double)b->tree_ops / b->tree_batches : 0);
        cJSON_AddNumberToObject(o, "reads", (double)b->reads);
        cJSON_AddNumberToObject(o, "read_batches", (double)b->read_batches);
        cJSON_AddNumberToObject(o, "reads_per_batch", b->read_batches ? (double)b->reads / b->read_batches : 0);
    }
    const VocabAuto *va = dec ? decoder_vocab(dec) : NULL;
    if (va) {
        cJSON_AddItemToObject(r->report, "draft_vocab_auto", vocab_auto_json(va));
        const int x = va->n_cand - 1, k = va->chosen >= 0 ? va->chosen : x;   /* exploring again at the end: x */
        if (va->choices > 0)
            fprintf(stderr, "spec-eval: draft vocabulary %d %s from costs (of %d candidates, %d to %d; coverage %.3f; "
                    "%.2fx the explored %d's predicted tokens per second); %lld choice%s of %d cycles each, %lld "
                    "return%s to exploring; calibration %.2f s\n",
                    va->cand[k], va->chosen >= 0 ? "chosen" : "explored", va->n_cand, va->cand[0], va->cand[x],
                    va->coverage[k], va->rate[k] / va->rate[x], va->cand[x], va->choices, va->choices == 1 ? "" : "s",
                    VOCAB_AUTO_EXPLORE, va->reexplored, va->reexplored == 1 ? "" : "s", va->calibration_s);
        else
            fprintf(stderr, "spec-eval: --draft-vocab auto: the run ended after %lld of the %d cycles explored before "
                    "a choice; every cycle drafted from %d\n", va->cycles, VOCAB_AUTO_EXPLORE, va->cand[va->n_cand - 1]);
    }
    rc = 0;
done:
    free(batch_cost);
    free(ctx.bench_pairs.p);
    free(ctx.all_pairs.p);
    decoder_free(dec);
    decoder_free(ar);
    policy_free(ar_policy);
    return rc;
}

void eval_result_free(EvalResult *r) {
    cJSON_Delete(r->report);
    r->report = NULL;
}

/* One row of the table: the speedup with its 95% interval; "-" where the
 * totals have no time of their own (a benchmark of a batched run) or no
 * baseline. */
static void table_row(FILE *f, const char *name, const EvalTotals *t) {
    char sp[48] = "-", v[16] = "-";
    if (t->speedup.n) snprintf(sp, sizeof sp, "%.2fx [%.2f, %.2f]", t->speedup.median, t->speedup.lo, t->speedup.hi);
    if (t->decode_s > 0) snprintf(v, sizeof v, "%.1f", eval_speed(t));
    fprintf(f, "%-16s %10.2f %8.2f %10s  %s\n", name, t->run.gamma / 1000.0, decode_stats_tau(&t->run), v, sp);
}

void eval_print_table(const EvalResult *r, const Policy *policy, const SessionConfig *cfg, FILE *f) {
    fprintf(f, "policy %s  (target %s%s%s)\n", policy->name, cfg->target_dir, cfg->draft_dir ? ", draft " : "",
            cfg->draft_dir ? cfg->draft_dir : "");
    if (r->partial)
        fprintf(f, "PARTIAL: interrupted after %lld of %lld turns; every figure below is those turns'\n",
                (long long)r->turns, (long long)r->turns_total);
    fprintf(f, "%-16s %10s %8s %10s  %s\n", "benchmark", "gamma(k)", "tau", "v(tok/s)", "speedup [95% interval]");
    int untimed = 0;
    if (r->n_bench == 1) {   /* its totals are the run's, timed even when batched */
        table_row(f, r->names[0], &r->all);
    } else {
        for (int i = 0; i < r->n_bench; i++) {
            table_row(f, r->names[i], &r->per[i]);
            untimed |= r->per[i].decode_s <= 0;
        }
        table_row(f, "all", &r->all);
    }
    if (untimed) fprintf(f, "(batched: the benchmarks' turns overlap in time, so only \"all\" has a speed)\n");
    if (cfg->verify != VERIFY_TREE)
        fprintf(f, "(--verify %s: the target forwarded only the accepted paths: no speedup)\n", verify_mode_name(cfg->verify));
    if (r->all.run.t.prefill > 0 && !untimed && r->all.decode_s > 0 && r->all.run.t.total > r->all.decode_s)
        fprintf(f, "prefill, left out of v and the speedup: %.2f s (ar %.2f s)\n", r->all.run.t.prefill, r->all.ar_prefill_s);
    if (r->all.run.t.calibrate > 0 && !untimed)
        fprintf(f, "calibration (the cost curve, the draft vocabulary's steps), left out too: %.2f s\n",
                r->all.run.t.calibrate);
}

int eval_csv_check(const char *path) {
    char *old = file_exists(path) ? read_text_file(path, NULL) : NULL;
    size_t hl = strlen(EVAL_CSV_HEADER);
    int bad = old && *old && (strncmp(old, EVAL_CSV_HEADER, hl) || (old[hl] != '\n' && old[hl] != 0));
    free(old);
    if (bad) err_set("--csv %s: its header is not \"%s\" (another version's rows); choose a new file", path, EVAL_CSV_HEADER);
    return bad ? -1 : 0;
}

int eval_csv_append(const char *path, const char *label, const Policy *policy, const EvalResult *r) {
    int fresh = !file_exists(path);
    FILE *f = fopen(path, "a");
    if (!f) { err_set("%s: cannot open for appending: %s", path, strerror(errno)); return -1; }
    if (fresh) fprintf(f, "%s\n", EVAL_CSV_HEADER);
    const char *eq = label ? strchr(label, '=') : NULL;
    char sp[96] = ",,";   /* empty without the ar baseline */
    const Speedup *x = &r->all.speedup;
    if (x->n) snprintf(sp, sizeof sp, "%.4f,%.4f,%.4f", x->median, x->lo, x->hi);
    char partial[64] = "";
    if (r->partial) snprintf(partial, sizeof partial, ";partial=%lld/%lld", (long long)r->turns, (long long)r->turns_total);
    fprintf(f, "%s,%.*s,%s%s,%.4f,%lld,%.3f,%s\n", policy->name, eq ? (int)(eq - label) : 1, eq ? label : "-",
            eq ? eq + 1 : "-", partial, decode_stats_tau(&r->all.run), (long long)r->all.run.gamma, eval_speed(&r->all), sp);
    if (fclose(f) != 0) { err_set("%s: write failed: %s", path, strerror(errno)); return -1; }
    return 0;
}

int eval_json_write(const char *path, const EvalResult *r) {
    char *text = cJSON_Print(r->report);
    FILE *f = fopen(path, "w");
    int rc = 0;
    if (!f) {
        err_set("%s: cannot write the report: %s", path, strerror(errno));
        rc = -1;
    } else {
        const int put_failed = !text || fputs(text, f) < 0;   /* fclose either way */
        if (fclose(f) != 0 || put_failed) {
            err_set("%s: writing the report failed: %s", path, text ? strerror(errno) : "out of memory");
            rc = -1;
        }
    }
    free(text);
    return rc;
}
