/* spec-collect: EAGLE-2 with the full draft tree (no rerank) on benchmark
 * questions; every node of every tree goes to an HDF5 trace file with its
 * joint probability, entropy, depth and whether greedy verification
 * accepted it.  Generation itself is plain lossless decoding (the work is
 * collect/collect.c's).
 *
 *   spec-collect --target DIR --draft DIR --questions FILE ... --out F.h5
 *   spec-collect merge OUT.h5 IN.h5 ... */
#include "collect/collect.h"
#include "infer/cli.h"
#include "kernels/base/util.h"
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *prog = "spec-collect";

static void usage(FILE *f) {
    fprintf(f,
"usage: spec-collect --target DIR --draft DIR --questions FILE [...] --out FILE.h5 [options]\n"
"       spec-collect merge OUT.h5 IN.h5 [IN.h5 ...] [--compress zstd|gzip|none]\n"
"Runs EAGLE-2 with total=all (the whole 1 + k + depth*k^2 pool is verified) and\n"
"writes every tree node with (P, H, depth, accepted) to an HDF5 trace file.\n"
CLI_MODELS_HELP
CLI_BACKEND_HELP
CLI_QUESTIONS_HELP
"  --topk K               children per expanded node (default 10)\n"
"  --depth D              expansion steps; nodes reach depth D+1 (default 10: 1011 nodes/tree)\n"
"  --out FILE.h5          trace file (must not exist unless --resume)\n"
"  --compress C           zstd (default) | gzip | none\n"
"  --resume               continue an interrupted file after its last finished question;\n"
"                         refused if it was written with other settings\n"
"  --shard I/N            this process takes questions q with q %% N == I (0 <= I < N),\n"
"                         e.g. --shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT\n"
"  --batch N              decode N questions at once (default 1), a finished one's slot\n"
"                         taking the next; questions are written in file order (recorded)\n"
"  --every-position       a tree at every position of the greedy answer, not only where a\n"
"                         cycle starts: each cycle commits the target's next token alone\n"
"                         (--verify root, recorded as verify; greedy only), and each tree's\n"
"                         labels are what verifying all of it would accept, read from the\n"
"                         answer.  EAGLE-2's tau and gamma at any total and depth up to\n"
"                         this run's follow from such a trace (spec-analyze replay)\n"
CLI_QUIET_HELP
"  -h, --help\n", draft_kind_help(), CHAT_TEMPLATE_NAMES);
}

static int cmd_merge(int argc, char **argv) {
    TraceCompress comp = TRACE_ZSTD;
    const char *files[1024];
    int n = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--compress") && i + 1 < argc) {
            if (trace_compress_parse(argv[++i], &comp)) die_err(prog);
        } else if (argv[i][0] == '-') {
            die(prog, "merge: unknown option '%s'", argv[i]);
        } else if (n < 1024) {
            files[n++] = argv[i];
        }
    }
    if (n < 2) die(prog, "merge: usage: spec-collect merge OUT.h5 IN.h5 [IN.h5 ...]");
    CliFile in[1024];
    for (int i = 1; i < n; i++) in[i - 1] = (CliFile){"IN.h5", files[i]};
    cli_check_not_input(prog, "merge: OUT.h5", files[0], in, n - 1);
    if (file_exists(files[0])) die(prog, "merge: %s exists; not overwriting it", files[0]);
    cli_check_writable(prog, "merge: OUT.h5", files[0]);
    if (trace_merge(files[0], files + 1, n - 1, comp)) die_err(prog);
    return 0;
}

typedef struct {
    SessionConfig cfg;
    CliQuestions qs;
    CollectOptions run;
} CollectArgs;

static void parse_args(int argc, char **argv, CollectArgs *a) {
    enum { O_OUT = CLI_OWN, O_COMPRESS, O_RESUME, O_SHARD, O_BATCH, O_EVERY };
    static const struct option opts[] = {
        CLI_SESSION_OPTIONS, {"out", 1, 0, O_OUT}, {"compress", 1, 0, O_COMPRESS}, {"resume", 0, 0, O_RESUME},
        {"shard", 1, 0, O_SHARD}, {"batch", 1, 0, O_BATCH}, {"every-position", 0, 0, O_EVERY},
        {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    SessionConfig *cfg = &a->cfg;
    session_config_default(cfg);
    snprintf(cfg->prm.name, sizeof cfg->prm.name, "eagle2");
    policy_params_set(&cfg->prm, "depth", "10");   /* the C2T paper's collection setting */
    policy_params_set(&cfg->prm, "total", "all");
    cfg->prm.want_entropy = 1;
    a->run.shard_n = 1;
    a->run.batch = 1;
    const char *compress = "zstd";
    opterr = 0;
    int c, every_position = 0, verify_given = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        verify_given |= c == CLI_VERIFY;
        if (cli_session_option(prog, c, optarg, cfg, &a->qs)) continue;
        switch (c) {
        case O_OUT: a->run.out = optarg; break;
        case O_COMPRESS: compress = optarg; break;
        case O_RESUME: a->run.resume = 1; break;
        case O_SHARD:
            if (sscanf(optarg, "%d/%d", &a->run.shard_i, &a->run.shard_n) != 2 || a->run.shard_n < 1 ||
                a->run.shard_i < 0 || a->run.shard_i >= a->run.shard_n)
                die(prog, "--shard %s: expected I/N with 0 <= I < N", optarg);
            break;
        case O_BATCH: a->run.batch = (int)cli_int(prog, "--batch", optarg, 1, 4096); break;
        case O_EVERY: every_position = 1; break;
        case 'h': usage(stdout); exit(0);
        default: cli_unknown_option(prog, argv[optind - 1]);
        }
    }
    if (optind < argc) die(prog, "unexpected argument '%s' (see --help)", argv[optind]);
    if (every_position) {
        if (verify_given)
            die(prog, "--every-position verifies the root alone (--verify root); leave --verify out");
        cfg->verify = VERIFY_ROOT;
    }
    if (trace_compress_parse(compress, &a->run.compress)) die_err(prog);
    a->run.max_questions = a->qs.max_questions;
    a->run.max_turns = a->qs.max_turns;
}

/* --out before anything loads: not one of the inputs, new unless
 * --resume (so a finished trace is never written over), and writable. */
static void check_out(const CollectArgs *a) {
    const char *out = a->run.out;
    CliFile in[CLI_MAX_FILES + 1];
    for (int i = 0; i < a->qs.n; i++) in[i] = (CliFile){"--questions", a->qs.files[i]};
    in[a->qs.n] = (CliFile){"--tokenizer", a->cfg.tokenizer_path};
    cli_check_not_input(prog, "--out", out, in, a->qs.n + 1);
    if (!a->run.resume && file_exists(out)) die(prog, "%s exists; use --resume to continue it or choose another --out", out);
    if (a->run.resume && !file_exists(out)) die(prog, "--resume: %s does not exist", out);
    cli_check_writable(prog, "--out", out);
}

int main(int argc, char **argv) {
    /* Past a file size limit (ulimit -f) a write fails with EFBIG instead
     * of the signal killing us: the writer stops cleanly (--resume). */
    signal(SIGXFSZ, SIG_IGN);
    if (argc > 1 && !strcmp(argv[1], "merge")) return cmd_merge(argc, argv);
    CollectArgs a = {0};
    parse_args(argc, argv, &a);
    const char *out = a.run.out;
    if (!a.cfg.target_dir || !a.cfg.draft_dir) die(prog, "--target and --draft are required (see --help)");
    if (!out) die(prog, "--out FILE.h5 is required");
    if (a.cfg.draft_vocab == DRAFT_VOCAB_AUTO)   /* a trace's features must not depend on the machine */
        die(prog, "--draft-vocab auto: a collection drafts from one vocabulary (give full or a size)");
    if (!a.qs.n) die(prog, "at least one --questions file is required");
    check_out(&a);
    char kept[768];
    snprintf(kept, sizeof kept, "%s keeps every question finished so far; the same command with --resume continues it", out);
    cli_on_interrupt(prog, out, kept, "nothing written yet; run the command again");
    QuestionSet *sets[CLI_MAX_FILES];
    for (int i = 0; i < a.qs.n; i++) sets[i] = cli_questions_load(prog, &a.qs, i);
    Policy *policy = policy_new(&a.cfg.prm);
    if (!policy) die_err(prog);
    double topk;
    policy_param_num(policy, "topk", &topk);
    /* the trace format stores a node's sibling rank in 8 bits */
    if (topk > 255) die(prog, "--topk: expected an integer in [1, 255] for a trace file, got %g", topk);

    Session s;
    if (session_open(&s, &a.cfg, prog)) die_err(prog);
    if (collect_run(&s, policy, sets, a.qs.files, a.qs.n, &a.run)) die_err(prog);
    policy_free(policy);
    for (int i = 0; i < a.qs.n; i++) questions_free(sets[i]);
    session_close(&s);
    return 0;
}
