/* spec-eval: τ, γ and speed of a tree policy on benchmark question files,
 * against plain autoregressive decoding (ar) measured in the same run
 * (the work is infer/eval.c's). */
#include "infer/cli.h"
#include "infer/eval.h"
#include "kernels/base/util.h"
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *prog = "spec-eval";

static void usage(FILE *f) {
    fprintf(f,
"usage: spec-eval --target DIR --questions FILE [--questions FILE ...] [options]\n"
"Speculative decoding with a tree policy; prints per benchmark gamma (verified\n"
"candidate tokens, thousands), tau (tokens per draft-verify cycle), v (tokens/s)\n"
"and the speedup over ar measured in the same run; --json writes everything.\n"
"\n"
"models\n"
CLI_MODELS_HELP
CLI_BACKEND_HELP
CLI_POLICY_HELP
"decoding\n"
CLI_QUESTIONS_HELP
CLI_SAMPLING_HELP
"  --batch N              decode N sequences at once (default 1): every question batched with\n"
"                         the policy, then with ar at the same batch size; a finished\n"
"                         sequence's slot takes the next question (continuous batching)\n"
"  --static-batches       with --batch: a new group of N questions only when the last is done\n"
"  --check-lossless       also decode with ar and fail on any differing token (temperature 0)\n"
"  --no-baseline          skip the ar run (no speedup column)\n"
"  --repeats N            A/B pairs per question (batched: per run) for the speedup (default 1):\n"
"                         the policy and ar decode each prompt N times each, in alternating order\n"
"  --force                use a --classifier trained for another target or draft (refused otherwise)\n"
"  --json OUT             report: settings, model identities, per-question figures; stopped by\n"
"                         Ctrl-C or SIGTERM, the turns finished so far, marked partial\n"
"  --csv FILE             append one row \"" EVAL_CSV_HEADER "\" (header if\n"
"                         new; gamma a count, speedup empty without the ar baseline)\n"
"  --label KEY=VALUE      the param,value columns of that row (default: -,-; needs --csv)\n"
CLI_QUIET_HELP
"  -h, --help\n", draft_kind_help(), CHAT_TEMPLATE_NAMES, policy_names());
}

/* What the command line asks for beyond the session. */
typedef struct {
    SessionConfig cfg;
    CliQuestions qs;
    EvalOptions eval;
    const char *json_out, *csv_out, *label;
    const char *classifier;   /* --classifier or --param classifier=: an input the reports must not replace */
    int force;   /* --force: a classifier trained for another pair is used anyway */
} EvalArgs;

static void parse_args(int argc, char **argv, EvalArgs *a) {
    enum { O_LOSSLESS = CLI_OWN, O_NO_BASELINE, O_JSON, O_CSV, O_LABEL, O_BATCH, O_STATIC, O_FORCE, O_REPEATS };
    static const struct option opts[] = {
        CLI_SESSION_OPTIONS, CLI_DECODE_OPTIONS,
        {"check-lossless", 0, 0, O_LOSSLESS}, {"no-baseline", 0, 0, O_NO_BASELINE}, {"json", 1, 0, O_JSON},
        {"csv", 1, 0, O_CSV}, {"label", 1, 0, O_LABEL}, {"batch", 1, 0, O_BATCH}, {"static-batches", 0, 0, O_STATIC},
        {"force", 0, 0, O_FORCE}, {"repeats", 1, 0, O_REPEATS}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    session_config_default(&a->cfg);
    a->eval.baseline = 1;
    a->eval.batch.slots = 1;
    int c;
    opterr = 0;   /* one-line errors of our own */
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == CLI_CLASSIFIER) a->classifier = optarg;
        if (c == CLI_PARAM && !strncmp(optarg, "classifier=", 11)) a->classifier = optarg + 11;
        if (cli_session_option(prog, c, optarg, &a->cfg, &a->qs)) continue;
        switch (c) {
        case O_LOSSLESS: a->eval.check_lossless = 1; break;
        case O_NO_BASELINE: a->eval.baseline = 0; break;
        case O_JSON: a->json_out = optarg; break;
        case O_CSV: a->csv_out = optarg; break;
        case O_BATCH: a->eval.batch.slots = (int)cli_int(prog, "--batch", optarg, 1, 4096); break;
        case O_STATIC: a->eval.batch.static_batches = 1; break;
        case O_FORCE: a->force = 1; break;
        case O_REPEATS: a->eval.repeats = (int)cli_int(prog, "--repeats", optarg, 1, 1000); break;
        case O_LABEL:
            if (!strchr(optarg, '=') || strchr(optarg, ',')) die(prog, "--label: expected KEY=VALUE without commas, got '%s'", optarg);
            a->label = optarg;
            break;
        case 'h': usage(stdout); exit(0);
        default: cli_unknown_option(prog, argv[optind - 1]);
        }
    }
    if (optind < argc) die(prog, "unexpected argument '%s' (see --help)", argv[optind]);
}

/* --json and --csv: not files the run reads (a question file, the
 * classifier, the tokenizer, the cost cache), not one file, writable, and a
 * CSV to append to has the header. */
static void check_outputs(const EvalArgs *a) {
    CliFile in[CLI_MAX_FILES + 3];
    int n = 0;
    for (int i = 0; i < a->qs.n; i++) in[n++] = (CliFile){"--questions", a->qs.files[i]};
    in[n++] = (CliFile){"--classifier", a->classifier};
    in[n++] = (CliFile){"--tokenizer", a->cfg.tokenizer_path};
    in[n++] = (CliFile){"--cost-cache", a->cfg.cost_cache};
    const CliFile out[] = {{"--json", a->json_out}, {"--csv", a->csv_out}};
    for (int k = 0; k < 2; k++) cli_check_not_input(prog, out[k].opt, out[k].path, in, n);
    cli_check_distinct_outputs(prog, out, 2);
    if (a->json_out) cli_check_writable(prog, "--json", a->json_out);
    if (a->csv_out) {
        cli_check_writable(prog, "--csv", a->csv_out);
        if (eval_csv_check(a->csv_out)) die_err(prog);
    }
}

/* Everything a run could stop on that is known before the models load. */
static void check_args(const EvalArgs *a) {
    if (!a->cfg.target_dir) die(prog, "--target is required (see --help)");
    if (!a->qs.n) die(prog, "at least one --questions file is required");
    if (a->eval.check_lossless && a->cfg.sp.temperature > 0) die(prog, "--check-lossless needs --temperature 0");
    if (a->eval.check_lossless && !a->eval.baseline) die(prog, "--check-lossless needs the ar baseline (drop --no-baseline)");
    if (a->eval.repeats > 1 && a->cfg.sp.temperature > 0)
        die(prog, "--repeats needs --temperature 0 (a repeated sampled turn would draw other tokens)");
    if (a->eval.repeats > 1 && !a->eval.baseline) die(prog, "--repeats times A/B pairs: drop --no-baseline");
    if (a->label && !a->csv_out) die(prog, "--label names the columns of the --csv row: give --csv FILE too");
    if (a->eval.batch.static_batches && a->eval.batch.slots < 2) die(prog, "--static-batches needs --batch N with N >= 2");
    check_outputs(a);
}

/* Set by the first SIGINT or SIGTERM once decoding began (cli_on_interrupt_stop):
 * the run stops and reports the turns it finished. */
static volatile sig_atomic_t stop_signal;

/* The speedup's warnings on stderr. */
static void speedup_notes(const Speedup *sp) {
    if (speedup_unstable(sp))
        fprintf(stderr, "%s: speedup %.2fx [%.2f, %.2f]: unstable (the 95%% interval reaches beyond +-%.0f%%), the machine "
                "is busy or the run is short; rerun, or use --repeats or more questions\n", prog, sp->median, sp->lo,
                sp->hi, 100 * SPEEDUP_UNSTABLE);
    double most;
    if (speedup_few_blocks(sp, &most))
        fprintf(stderr, "%s: speedup %.2fx [%.2f, %.2f] from %d ABBA blocks: an interval drawn from fewer than %d covers "
                "the median with under 95%% (here at most %.1f%%); use more questions or --repeats\n", prog, sp->median,
                sp->lo, sp->hi, sp->blocks, SPEEDUP_MIN_BLOCKS, 100 * most);
}

/* After a stop: one line saying what was kept, then exit 128 + the signal
 * (130, 143).  Nothing is written when no turn finished (an earlier report
 * at --json stays). */
static void interrupted(const EvalArgs *a, const EvalResult *r) {
    const char *sig = cli_signal_name(stop_signal);
    char files[2 * 4096 + 8] = "";
    snprintf(files, sizeof files, "%s%s%s", a->json_out ? a->json_out : "", a->json_out && a->csv_out ? " and " : "",
             a->csv_out ? a->csv_out : "");
    if (!r->turns)
        fprintf(stderr, "%s: interrupted by %s before any turn finished: no report written\n", prog, sig);
    else if (!r->partial)
        fprintf(stderr, "%s: interrupted by %s as the run ended: %s all %lld turns\n", prog, sig,
                *files ? "wrote" : "the table holds", (long long)r->turns);
    else if (*files)
        fprintf(stderr, "%s: interrupted by %s: wrote the %lld turns finished so far to %s (partial: %lld of %lld turns)\n",
                prog, sig, (long long)r->turns, files, (long long)r->turns, (long long)r->turns_total);
    else
        fprintf(stderr, "%s: interrupted by %s: the table holds the %lld turns finished so far (partial: %lld of %lld "
                "turns; no --json or --csv to write)\n", prog, sig, (long long)r->turns, (long long)r->turns,
                (long long)r->turns_total);
    exit(128 + stop_signal);
}

/* The table, the CSV row and the JSON report of r (none of them without a
 * finished turn: a run stopped that early has nothing to say). */
static void write_results(const EvalArgs *a, const Policy *policy, EvalResult *r) {
    if (!r->turns) return;
    eval_print_table(r, policy, &a->cfg, stdout);
    fflush(stdout);
    speedup_notes(&r->all.speedup);
    if (stop_signal)
        cJSON_AddStringToObject(r->report, "interrupted_by", cli_signal_name(stop_signal));
    else
        cJSON_AddNullToObject(r->report, "interrupted_by");
    if (a->csv_out && eval_csv_append(a->csv_out, a->label, policy, r)) die_err(prog);
    if (a->json_out && eval_json_write(a->json_out, r)) die_err(prog);
}

int main(int argc, char **argv) {
    EvalArgs a = {0};
    parse_args(argc, argv, &a);
    check_args(&a);
    if (cli_plain_run(&a.cfg) && a.eval.batch.slots == 1 && !a.cfg.draft_vocab_given)
        a.cfg.draft_vocab = DRAFT_VOCAB_AUTO_IF_ABLE;
    cli_plain_arith(&a.cfg, a.eval.batch.slots);
    cli_on_interrupt(prog, NULL, NULL, "no report written (no turn was decoded yet); run the command again");
    Policy *policy = policy_new(&a.cfg.prm);
    if (!policy) die_err(prog);
    if (policy->needs_draft && !a.cfg.draft_dir) die(prog, "policy %s needs --draft", policy->name);
    if (!policy->needs_draft) a.cfg.draft_dir = NULL;
    QuestionSet *sets[CLI_MAX_FILES];
    for (int i = 0; i < a.qs.n; i++) sets[i] = cli_questions_load(prog, &a.qs, i);

    Session s;
    EvalResult r;
    if (session_open(&s, &a.cfg, prog)) die_err(prog);
    policy = cli_default_sizes(prog, policy, &a.cfg, &s);
    cli_check_classifier(prog, policy, &s, a.force);
    /* from here a first signal stops the run, which reports what it finished */
    a.eval.stop = &stop_signal;
    cli_on_interrupt_stop(prog, &stop_signal, "a second time: stopped at once, no report written; run the command again");
    if (eval_run(&s, policy, sets, a.qs.files, a.qs.n, &a.eval, &r)) die_err(prog);
    /* the reports are written whole: a signal now waits until the exit */
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigprocmask(SIG_BLOCK, &block, NULL);
    write_results(&a, policy, &r);
    if (a.eval.check_lossless && !r.lossless_failures && r.turns)
        printf("lossless: %lld/%lld turns identical to ar\n", (long long)r.turns, (long long)r.turns);
    int failures = r.lossless_failures;
    if (stop_signal) interrupted(&a, &r);
    eval_result_free(&r);
    policy_free(policy);
    for (int i = 0; i < a.qs.n; i++) questions_free(sets[i]);
    session_close(&s);
    if (failures) die(prog, "%d turn(s) differ from ar: not lossless", failures);
    return 0;
}
