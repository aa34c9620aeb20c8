/* spec-eval: τ, γ and speed of a tree policy on benchmark question files,
 * against plain autoregressive decoding (ar) measured in the same run. */
#include "infer/cli.h"
#include "kernels/base/util.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *prog = "spec-eval";
/* --csv rows: gamma as a count (the table prints thousands); speedup over the
 * ar baseline of the same run, empty with --no-baseline */
#define CSV_HEADER "policy,param,value,tau,gamma,v,speedup"

static void usage(FILE *f) {
    fprintf(f,
"usage: spec-eval --target DIR --questions FILE [--questions FILE ...] [options]\n"
"Speculative decoding with a tree policy; prints per benchmark gamma (verified\n"
"candidate tokens, thousands), tau (tokens per draft-verify cycle), v (tokens/s)\n"
"and the speedup over ar measured in the same run; --json writes everything.\n"
"\n"
"models\n"
"  --target DIR           target checkpoint (config.json + safetensors)\n"
"  --draft DIR            draft: an EAGLE-1/2 head, an EAGLE-3 head or a small LM\n"
"                         (config.json + model.safetensors or pytorch_model.bin)\n"
"  --draft-kind K         %s (default auto: eagle3 when the draft's config.json\n"
"                         has draft_vocab_size or eagle_aux_hidden_state_layer_ids, else eagle)\n"
"  --draft-vocab N|full   the draft scores only the N most frequent target tokens of its\n"
"                         training data (a reduced vocabulary as EAGLE-3's; needs the draft's\n"
"                         token_counts.safetensors; an EAGLE-3 head brings its own);\n"
"                         lossless, verification is unchanged\n"
"  --tokenizer PATH       tokenizer.json / tokenizer.model / dir (default: --target)\n"
"  --template NAME        chat template: %s (default: guessed, with a notice;\n"
"                         plain text when the checkpoint has none we recognise)\n"
"  --system TEXT          system prompt (default: the template's; \"\" for none)\n"
"  --device D             cpu | cuda | auto (default auto: cuda when a GPU is visible)\n"
"policy\n"
"  --policy NAME          %s (default eagle2)\n"
"  --topk K               children per expanded node (default 10)\n"
"  --depth D              eagle2: expansion steps after the root's, tree depth D+1 (default 6);\n"
"                         c2t: d_max, the maximum node depth (default 8 = EAGLE-2's depth + 2)\n"
"  --total N|all          eagle2: nodes kept by rerank, root excluded (default 60)\n"
"  --draft-len K          chain: draft tokens per cycle (default 5)\n"
"  --classifier FILE      c2t, chain --early-stop c2t (required there): weights spec-train\n"
"                         wrote from this target's traces\n"
"  --beta B               c2t: confidence threshold (default 0.5)\n"
"  --early-stop S         chain: none | c2t | dymax | dyjoint (default none)\n"
"  --threshold X          chain early-stop threshold (default 0.5)\n"
"  --static-tree PATHS    static: \"0;1;0,0;...\" sibling-rank paths, or eagle1 (default)\n"
"  --entropy-topm M       entropy over the top M probabilities, 0 = exact (default 1000)\n"
"  --param KEY=VALUE      a parameter the policy owns (repeatable), e.g. sage_dmax=8,\n"
"                         wetap_budget=64; see README \"Policies\" for the keys\n"
"decoding\n"
"  --questions FILE       question.jsonl (EAGLE/Spec-Bench format); repeatable, one benchmark each\n"
"  --max-questions N      first N questions of each file\n"
"  --max-turns N          first N turns of each question (1: first turns only)\n"
"  --max-new-tokens N     per turn (default 256)\n"
"  --max-ctx N            KV cache slots for prompt + answer (default 4096)\n"
"  --temperature T        0 = greedy (default 0)\n"
"  --top-k K, --top-p P   sampling processors (default off)\n"
"  --seed S               sampling seed (default 0)\n"
"  --check-lossless       also decode with ar and fail on any differing token (temperature 0)\n"
"  --no-baseline          skip the ar run (no speedup column)\n"
"  --json OUT             report: settings, model identities, per-question figures\n"
"  --csv FILE             append one row \"policy,param,value,tau,gamma,v,speedup\" (header if\n"
"                         new; gamma a count, speedup empty without the ar baseline)\n"
"  --label KEY=VALUE      the param,value columns of that row (default: -,-; needs --csv)\n"
"  --quiet                no progress line (on a terminal it is redrawn in place; into a\n"
"                         file, a line every 10 s)\n"
"  -h, --help\n", draft_kind_names(), CHAT_TEMPLATE_NAMES, policy_names());
}

typedef struct {
    int64_t new_tokens, cycle_tokens, cycles, gamma;
    double wall, t_draft, t_dist, t_features, t_classifier, t_verify, t_prefill;
    int64_t ar_tokens;
    double ar_wall;
} Totals;

static void add_stats(Totals *t, const DecodeStats *st) {
    t->new_tokens += st->new_tokens;
    t->cycle_tokens += st->cycle_tokens;
    t->cycles += st->cycles;
    t->gamma += st->gamma;
    t->wall += st->t_total;
    t->t_draft += st->t_draft;
    t->t_dist += st->t_dist;
    t->t_features += st->t_features;
    t->t_classifier += st->t_classifier;
    t->t_verify += st->t_verify;
    t->t_prefill += st->t_prefill;
}

static double tau_of(const Totals *t) { return t->cycles ? (double)t->cycle_tokens / t->cycles : 0; }

typedef struct {
    Session *s;
    Decoder *ar;              /* baseline, NULL with --no-baseline */
    int check_lossless;
    Totals bench;
    cJSON *jq;                /* current question's turn list */
    Progress *prog;
    int64_t turns_done;
    int lossless_failures;
    const char *bench_name;
} EvalCtx;

static cJSON *stats_json(const DecodeStats *st) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "new_tokens", st->new_tokens);
    cJSON_AddNumberToObject(o, "cycles", st->cycles);
    cJSON_AddNumberToObject(o, "gamma", (double)st->gamma);
    cJSON_AddNumberToObject(o, "tau", st->cycles ? (double)st->cycle_tokens / st->cycles : 0);
    cJSON_AddNumberToObject(o, "wall_s", st->t_total);
    cJSON_AddNumberToObject(o, "prefill_s", st->t_prefill);
    cJSON_AddNumberToObject(o, "draft_s", st->t_draft);
    cJSON_AddNumberToObject(o, "distribution_s", st->t_dist);
    cJSON_AddNumberToObject(o, "features_s", st->t_features);
    cJSON_AddNumberToObject(o, "classifier_s", st->t_classifier);
    cJSON_AddNumberToObject(o, "verify_s", st->t_verify);
    cJSON_AddNumberToObject(o, "other_s", st->t_total - st->t_prefill - st->t_draft - st->t_dist - st->t_features -
                                              st->t_classifier - st->t_verify);
    return o;
}

static int on_turn(void *vctx, const Question *q, int turn, const int32_t *prompt, size_t np,
                   const int *out, int n, const DecodeStats *st) {
    EvalCtx *c = vctx;
    add_stats(&c->bench, st);
    cJSON *jt = stats_json(st);
    cJSON_AddNumberToObject(jt, "turn", turn);
    cJSON_AddNumberToObject(jt, "prompt_tokens", (double)np);
    cJSON_AddItemToObject(jt, "output_ids", cJSON_CreateIntArray(out, n));
    if (c->ar) {
        int *p = xmalloc(sizeof(int) * np), *ref = xmalloc(sizeof(int) * (c->s->cfg.max_new + 1));
        for (size_t i = 0; i < np; i++) p[i] = prompt[i];
        DecodeStats ast;
        int nr = decoder_run(c->ar, p, (int)np, c->s->cfg.max_new, ref, &ast);
        free(p);
        const char *failure = backend_failure(c->s->target->be);
        if (failure) err_set("ar baseline: %s backend failed: %s", c->s->target->be->name, failure);
        if (nr < 0 || failure) { free(ref); cJSON_Delete(jt); return -1; }
        c->bench.ar_tokens += ast.new_tokens;
        c->bench.ar_wall += ast.t_total;
        cJSON_AddNumberToObject(jt, "ar_wall_s", ast.t_total);
        cJSON_AddNumberToObject(jt, "ar_new_tokens", ast.new_tokens);
        if (c->check_lossless) {
            int same = nr == n;
            for (int i = 0; same && i < n; i++) same = ref[i] == out[i];
            cJSON_AddBoolToObject(jt, "lossless", same);
            if (!same) {
                c->lossless_failures++;
                fprintf(stderr, "\n%s: NOT LOSSLESS: %s question %s turn %d differs from ar\n", prog, c->bench_name, q->id, turn + 1);
            }
        }
        free(ref);
    }
    cJSON_AddItemToArray(c->jq, jt);
    c->turns_done++;
    char extra[96];
    snprintf(extra, sizeof extra, "tau %.2f gamma %.1fk", tau_of(&c->bench), c->bench.gamma / 1000.0);
    progress_update(c->prog, c->turns_done, extra);
    return 0;
}

static cJSON *totals_json(const Totals *t) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "new_tokens", (double)t->new_tokens);
    cJSON_AddNumberToObject(o, "cycles", (double)t->cycles);
    cJSON_AddNumberToObject(o, "gamma", (double)t->gamma);
    cJSON_AddNumberToObject(o, "tau", tau_of(t));
    cJSON_AddNumberToObject(o, "v", t->wall > 0 ? t->new_tokens / t->wall : 0);
    cJSON_AddNumberToObject(o, "wall_s", t->wall);
    cJSON_AddNumberToObject(o, "prefill_s", t->t_prefill);
    cJSON_AddNumberToObject(o, "draft_s", t->t_draft);
    cJSON_AddNumberToObject(o, "distribution_s", t->t_dist);
    cJSON_AddNumberToObject(o, "features_s", t->t_features);
    cJSON_AddNumberToObject(o, "classifier_s", t->t_classifier);
    cJSON_AddNumberToObject(o, "verify_s", t->t_verify);
    if (t->ar_wall > 0) {
        double v = t->new_tokens / t->wall, var = t->ar_tokens / t->ar_wall;
        cJSON_AddNumberToObject(o, "v_ar", var);
        cJSON_AddNumberToObject(o, "speedup", v / var);
    }
    return o;
}

static cJSON *settings_json(const Session *s, const SessionConfig *cfg, const Policy *policy) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "target", cfg->target_dir);
    cJSON_AddStringToObject(o, "target_config_hash", s->target->config_hash);
    cJSON_AddStringToObject(o, "device", s->target->be->name);
    if (s->draft) {
        cJSON_AddStringToObject(o, "draft", cfg->draft_dir);
        cJSON_AddStringToObject(o, "draft_kind", draft_kind_name(s->draft));
        cJSON_AddNumberToObject(o, "draft_vocab", s->draft->Vd);
        cJSON_AddStringToObject(o, "draft_config_hash", s->draft->config_hash);
    }
    cJSON_AddStringToObject(o, "tokenizer", tokenizer_path(s->tok));
    cJSON_AddStringToObject(o, "template", chat_template_name(s->tmpl));
    cJSON_AddStringToObject(o, "policy", policy->name);
    const PolicyParams *p = &cfg->prm;
    cJSON_AddNumberToObject(o, "topk", p->topk);
    cJSON_AddNumberToObject(o, "depth", p->depth);
    cJSON_AddNumberToObject(o, "total", p->total);
    cJSON_AddNumberToObject(o, "draft_len", p->draft_len);
    cJSON_AddNumberToObject(o, "entropy_topm", p->topm);
    cJSON_AddStringToObject(o, "static_tree", p->static_tree);
    cJSON_AddStringToObject(o, "early_stop", p->early_stop);
    cJSON_AddNumberToObject(o, "threshold", p->threshold);
    cJSON_AddStringToObject(o, "classifier", p->classifier);
    cJSON_AddNumberToObject(o, "beta", p->beta);
    const char *key;
    double value;
    /* the policy's own parameters (e.g. sage_*), as its module names them */
    for (int i = 0; policy_param_get(policy, i, &key, &value) == 0; i++) cJSON_AddNumberToObject(o, key, value);
    cJSON_AddNumberToObject(o, "max_new_tokens", cfg->max_new);
    cJSON_AddNumberToObject(o, "temperature", cfg->sp.temperature);
    cJSON_AddNumberToObject(o, "top_k", cfg->sp.top_k);
    cJSON_AddNumberToObject(o, "top_p", cfg->sp.top_p);
    cJSON_AddNumberToObject(o, "seed", (double)cfg->sp.seed);
    return o;
}

int main(int argc, char **argv) {
    SessionConfig cfg = {0};
    cfg.max_new = 256;
    cfg.sp.top_p = 1.0f;
    policy_params_default(&cfg.prm);
    CliQuestions qs = {0};
    const char *json_out = NULL, *csv_out = NULL, *label = NULL;
    int check_lossless = 0, baseline = 1;
    enum { O_POLICY = CLI_OWN, O_TOTAL, O_DLEN, O_ES, O_THR, O_STATIC, O_TEMP, O_TK, O_TP, O_SEED, O_LOSSLESS,
           O_NOBASE, O_JSON, O_CLS, O_BETA, O_CSV, O_LABEL, O_PARAM };
    static const struct option opts[] = {
        CLI_SESSION_OPTIONS,
        {"policy", 1, 0, O_POLICY}, {"total", 1, 0, O_TOTAL}, {"draft-len", 1, 0, O_DLEN},
        {"early-stop", 1, 0, O_ES}, {"threshold", 1, 0, O_THR}, {"static-tree", 1, 0, O_STATIC},
        {"temperature", 1, 0, O_TEMP}, {"top-k", 1, 0, O_TK}, {"top-p", 1, 0, O_TP}, {"seed", 1, 0, O_SEED},
        {"check-lossless", 0, 0, O_LOSSLESS}, {"no-baseline", 0, 0, O_NOBASE}, {"json", 1, 0, O_JSON},
        {"classifier", 1, 0, O_CLS}, {"beta", 1, 0, O_BETA}, {"csv", 1, 0, O_CSV}, {"label", 1, 0, O_LABEL},
        {"param", 1, 0, O_PARAM}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    opterr = 0;   /* one-line errors of our own */
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (cli_session_option(prog, c, optarg, &cfg, &qs)) continue;
        switch (c) {
        case O_POLICY: snprintf(cfg.prm.name, sizeof cfg.prm.name, "%s", optarg); break;
        case O_TOTAL: if (parse_total(optarg, &cfg.prm.total)) die_err(prog); break;
        case O_DLEN: cfg.prm.draft_len = (int)cli_int(prog, "--draft-len", optarg, 1, 256); break;
        case O_ES: snprintf(cfg.prm.early_stop, sizeof cfg.prm.early_stop, "%s", optarg); break;
        case O_THR: cfg.prm.threshold = (float)cli_num(prog, "--threshold", optarg, 0, 1); break;
        case O_STATIC: snprintf(cfg.prm.static_tree, sizeof cfg.prm.static_tree, "%s", optarg); break;
        case O_TEMP: cfg.sp.temperature = (float)cli_num(prog, "--temperature", optarg, 0, 100); break;
        case O_TK: cfg.sp.top_k = (int)cli_int(prog, "--top-k", optarg, 0, 1 << 30); break;
        case O_TP: cfg.sp.top_p = (float)cli_num(prog, "--top-p", optarg, 0, 1); break;
        case O_SEED: cfg.sp.seed = cli_u64(prog, "--seed", optarg); break;
        case O_LOSSLESS: check_lossless = 1; break;
        case O_NOBASE: baseline = 0; break;
        case O_JSON: json_out = optarg; break;
        case O_CLS: snprintf(cfg.prm.classifier, sizeof cfg.prm.classifier, "%s", optarg); break;
        case O_BETA: cfg.prm.beta = (float)cli_num(prog, "--beta", optarg, 0, 1); break;
        case O_CSV: csv_out = optarg; break;
        case O_PARAM: if (policy_params_set(&cfg.prm, optarg, NULL)) die_err(prog); break;
        case O_LABEL:
            if (!strchr(optarg, '=') || strchr(optarg, ',')) die(prog, "--label: expected KEY=VALUE without commas, got '%s'", optarg);
            label = optarg;
            break;
        case 'h': usage(stdout); return 0;
        default: cli_unknown_option(prog, argv);
        }
    }
    if (optind < argc) die(prog, "unexpected argument '%s' (see --help)", argv[optind]);
    if (!cfg.target_dir) die(prog, "--target is required (see --help)");
    if (!qs.n) die(prog, "at least one --questions file is required");
    if (check_lossless && cfg.sp.temperature > 0) die(prog, "--check-lossless needs --temperature 0");
    if (check_lossless && !baseline) die(prog, "--check-lossless needs the ar baseline (drop --no-baseline)");
    if (label && !csv_out) die(prog, "--label names the columns of the --csv row: give --csv FILE too");
    if (json_out) cli_check_writable(prog, "--json", json_out);
    if (csv_out) {
        cli_check_writable(prog, "--csv", csv_out);
        char *old = file_exists(csv_out) ? read_text_file(csv_out, NULL) : NULL;
        size_t hl = strlen(CSV_HEADER);
        if (old && *old && (strncmp(old, CSV_HEADER, hl) || (old[hl] != '\n' && old[hl] != 0)))
            die(prog, "--csv %s: its header is not \"%s\" (another version's rows); choose a new file", csv_out, CSV_HEADER);
        free(old);
    }
    /* bad input first, before the models load */
    Policy *policy = policy_new(&cfg.prm);
    if (!policy) die_err(prog);
    if (policy->needs_draft && !cfg.draft_dir) die(prog, "policy %s needs --draft", policy->name);
    QuestionSet *sets[64];
    int64_t total_turns = 0;
    for (int i = 0; i < qs.n; i++) {
        sets[i] = cli_questions_load(prog, &qs, i);
        for (int j = 0; j < sets[i]->n; j++) total_turns += sets[i]->q[j].n_turns;
    }

    Session s;
    if (!policy->needs_draft) cfg.draft_dir = NULL;
    if (session_open(&s, &cfg, prog)) die_err(prog);
    Decoder *dec = session_decoder(&s, policy);
    if (!dec) die_err(prog);
    Policy *ar_policy = NULL;
    Decoder *ar = NULL;
    if (baseline) {
        PolicyParams ap = cfg.prm;
        snprintf(ap.name, sizeof ap.name, "ar");
        ap.own_params[0] = 0;   /* the --param values are the policy's, not ar's */
        ar_policy = policy_new(&ap);
        if (!ar_policy) die_err(prog);
        ar = session_decoder(&s, ar_policy);
        if (!ar) die_err(prog);
    }

    /* An untimed warm-up of both decoders, so that one-time costs (CUDA
     * module loading, cuBLAS handles, workspace growth: about 0.1 s on an
     * H100) are not charged to the first question's policy turn.  On CUDA
     * only (the CPU has no such cost, and its figures stay as they were) and
     * greedy only: a sampled warm-up would move the decoder's random stream.
     * Adaptive policies (SAGE, WETAP) see its cycles as they see every
     * earlier question's. */
    if (cfg.sp.temperature <= 0 && !strcmp(s.target->be->name, "cuda")) {
        int warm_prompt[8], warm_out[64];
        for (int i = 0; i < 8; i++) warm_prompt[i] = 1 + i % (s.target->cfg.vocab - 1);
        DecodeStats wst;
        if (decoder_run(dec, warm_prompt, 8, 8, warm_out, &wst) < 0 ||
            (ar && decoder_run(ar, warm_prompt, 8, 8, warm_out, &wst) < 0))
            die_err(prog);
    }

    cJSON *report = cJSON_CreateObject();
    cJSON_AddStringToObject(report, "tool", "spec-eval");
    cJSON_AddStringToObject(report, "version", C2T_VERSION);
    char stamp[32];
    time_t now = time(NULL);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    cJSON_AddStringToObject(report, "start_time", stamp);
    cJSON_AddItemToObject(report, "settings", settings_json(&s, &cfg, policy));
    cJSON *jbench = cJSON_AddArrayToObject(report, "benchmarks");

    Progress prog_bar;
    progress_start(&prog_bar, "spec-eval turns", total_turns);
    EvalCtx ctx = {.s = &s, .ar = ar, .check_lossless = check_lossless, .prog = &prog_bar};
    Totals all = {0};
    Totals *per = xcalloc(qs.n, sizeof(Totals));
    char names[64][64];
    for (int i = 0; i < qs.n; i++) {
        benchmark_name(qs.files[i], names[i], sizeof names[i]);
        ctx.bench = (Totals){0};
        ctx.bench_name = names[i];
        cJSON *jb = cJSON_CreateObject();
        cJSON_AddStringToObject(jb, "name", names[i]);
        cJSON_AddStringToObject(jb, "file", qs.files[i]);
        cJSON *jqs = cJSON_AddArrayToObject(jb, "questions");
        for (int j = 0; j < sets[i]->n; j++) {
            const Question *q = &sets[i]->q[j];
            cJSON *jq = cJSON_CreateObject();
            cJSON_AddStringToObject(jq, "question_id", q->id);
            cJSON_AddStringToObject(jq, "category", q->category);
            ctx.jq = cJSON_AddArrayToObject(jq, "turns");
            cJSON_AddItemToArray(jqs, jq);
            if (session_question(&s, dec, q, on_turn, &ctx)) die_err(prog);
        }
        cJSON_AddItemToObject(jb, "total", totals_json(&ctx.bench));
        cJSON_AddItemToArray(jbench, jb);
        per[i] = ctx.bench;
        all.new_tokens += ctx.bench.new_tokens; all.cycle_tokens += ctx.bench.cycle_tokens;
        all.cycles += ctx.bench.cycles; all.gamma += ctx.bench.gamma; all.wall += ctx.bench.wall;
        all.t_draft += ctx.bench.t_draft; all.t_dist += ctx.bench.t_dist; all.t_features += ctx.bench.t_features;
        all.t_classifier += ctx.bench.t_classifier; all.t_verify += ctx.bench.t_verify;
        all.t_prefill += ctx.bench.t_prefill; all.ar_tokens += ctx.bench.ar_tokens; all.ar_wall += ctx.bench.ar_wall;
    }
    progress_end(&prog_bar, ctx.turns_done, NULL);
    cJSON_AddItemToObject(report, "total", totals_json(&all));

    printf("policy %s  (target %s%s%s)\n", policy->name, cfg.target_dir, s.draft ? ", draft " : "",
           s.draft ? cfg.draft_dir : "");
    printf("%-16s %10s %8s %10s %9s\n", "benchmark", "gamma(k)", "tau", "v(tok/s)", "speedup");
    for (int i = 0; i <= qs.n; i++) {
        const Totals *t = i < qs.n ? &per[i] : &all;
        if (i == qs.n && qs.n == 1) break;
        double v = t->wall > 0 ? t->new_tokens / t->wall : 0;
        char sp[16] = "-";
        if (t->ar_wall > 0) snprintf(sp, sizeof sp, "%.2fx", v / (t->ar_tokens / t->ar_wall));
        printf("%-16s %10.2f %8.2f %10.1f %9s\n", i < qs.n ? names[i] : "all", t->gamma / 1000.0, tau_of(t), v, sp);
    }
    if (csv_out) {
        int fresh = !file_exists(csv_out);
        FILE *f = fopen(csv_out, "a");
        if (!f) die(prog, "%s: cannot open for appending: %s", csv_out, strerror(errno));
        if (fresh) fprintf(f, "%s\n", CSV_HEADER);
        const char *eq = label ? strchr(label, '=') : NULL;
        double v = all.wall > 0 ? all.new_tokens / all.wall : 0;
        char sp[32] = "";   /* empty without the ar baseline */
        if (all.ar_wall > 0 && all.ar_tokens > 0) snprintf(sp, sizeof sp, "%.4f", v / (all.ar_tokens / all.ar_wall));
        fprintf(f, "%s,%.*s,%s,%.4f,%lld,%.3f,%s\n", policy->name, eq ? (int)(eq - label) : 1, eq ? label : "-",
                eq ? eq + 1 : "-", tau_of(&all), (long long)all.gamma, v, sp);
        if (fclose(f) != 0) die(prog, "%s: write failed: %s", csv_out, strerror(errno));
    }
    if (json_out) {
        char *text = cJSON_Print(report);
        FILE *f = fopen(json_out, "w");
        if (!f) die(prog, "%s: cannot write the report: %s", json_out, strerror(errno));
        if (fputs(text, f) < 0 || fclose(f) != 0) die(prog, "%s: writing the report failed: %s", json_out, strerror(errno));
        free(text);
    }
    cJSON_Delete(report);
    int failures = ctx.lossless_failures;
    if (check_lossless && !failures) printf("lossless: %lld/%lld turns identical to ar\n", (long long)ctx.turns_done, (long long)ctx.turns_done);
    decoder_free(dec);
    decoder_free(ar);
    policy_free(policy);
    policy_free(ar_policy);
    for (int i = 0; i < qs.n; i++) questions_free(sets[i]);
    free(per);
    session_close(&s);
    if (failures) die(prog, "%d turn(s) differ from ar: not lossless", failures);
    return 0;
}
